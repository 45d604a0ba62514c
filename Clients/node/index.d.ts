// Type declarations of the sharebroker Node.js client (hand-written; the code is src/*.js).

/// <reference types="node" />

import { EventEmitter } from 'node:events';

// -- errors ------------------------------------------------------------------------------------------

/** The JSON-RPC 2.0 and sharebroker error codes, by name. */
export declare const ErrorCode: Readonly<{
  PARSE_ERROR: -32700;
  INVALID_REQUEST: -32600;
  METHOD_NOT_FOUND: -32601;
  INVALID_PARAMS: -32602;
  INTERNAL_ERROR: -32603;
  UNAUTHORIZED: -32001;
  NOT_FOUND: -32002;
  NOT_ACCEPTED: -32003;
  NO_HANDLER: -32004;
  STORAGE_FAILURE: -32005;
  VERSION_CONFLICT: -32006;
  TOO_MANY_REQUESTS: -32007;
}>;

/** The frame was not valid JSON (or not valid UTF-8). */
export declare const PARSE_ERROR: -32700;
/** Not a valid request object; also a message over the broker's size limit. */
export declare const INVALID_REQUEST: -32600;
/** Unknown method (always, even before `hello`). */
export declare const METHOD_NOT_FOUND: -32601;
/** Bad params; the message names the field. */
export declare const INVALID_PARAMS: -32602;
/** Internal broker error. */
export declare const INTERNAL_ERROR: -32603;
/** No `hello` yet, unknown bundle ID, wrong role, not entitled to the group, bad token. */
export declare const UNAUTHORIZED: -32001;
/** Not found: share, app, extension, event, key. */
export declare const NOT_FOUND: -32002;
/** No extension's activation rule accepts the items (`data.candidates` when ambiguous). */
export declare const NOT_ACCEPTED: -32003;
/** Nothing can open the URL and no fallback was given. */
export declare const NO_HANDLER: -32004;
/** Storage failure (disk full, permission): nothing was stored. */
export declare const STORAGE_FAILURE: -32005;
/** `ifVersion` is not the group's current version (`data.version`). */
export declare const VERSION_CONFLICT: -32006;
/** Too many of the connection's replies wait unread; the request was not run. */
export declare const TOO_MANY_REQUESTS: -32007;

/** Short names of the codes (`-32002` → `"not found"`). */
export declare const ERROR_NAMES: Readonly<Record<number, string>>;

/** A JSON-RPC error object answered by the broker (a few are refused by the client before sending). */
export declare class RpcError extends Error {
  constructor(code: number, message: string, data?: unknown, method?: string);
  readonly name: 'RpcError';
  /** The error code; compare with `ErrorCode` or the constants. */
  code: number;
  /** The broker's message, exactly as sent; it names the cause (field, URL, bundle ID, ...). */
  message: string;
  /** The error's `data` member (`undefined` when absent), e.g. `{candidates}` or `{version}`. */
  data: any;
  /** The method of the request that failed, when known. */
  method: string | undefined;
  /** The code's short name, e.g. `"not found"`. */
  readonly codeName: string | undefined;
  /** `RpcError: METHOD: MESSAGE (CODE, NAME)`. */
  toString(): string;
  toJSON(): { code: number; message: string; data?: unknown };
  /** Builds an RpcError from a JSON-RPC `error` member (tolerating malformed ones). */
  static from(err: unknown, method?: string): RpcError;
  static readonly PARSE_ERROR: -32700;
  static readonly INVALID_REQUEST: -32600;
  static readonly METHOD_NOT_FOUND: -32601;
  static readonly INVALID_PARAMS: -32602;
  static readonly INTERNAL_ERROR: -32603;
  static readonly UNAUTHORIZED: -32001;
  static readonly NOT_FOUND: -32002;
  static readonly NOT_ACCEPTED: -32003;
  static readonly NO_HANDLER: -32004;
  static readonly STORAGE_FAILURE: -32005;
  static readonly VERSION_CONFLICT: -32006;
  static readonly TOO_MANY_REQUESTS: -32007;
}

/** The broker could not be reached, or the connection to it was lost. */
export declare class BrokerConnectionError extends Error {
  constructor(message: string, options?: { path?: string; cause?: unknown });
  /** The socket path. */
  path: string | undefined;
  /** The system error code (`ENOENT`, `ECONNREFUSED`, ...) when there was one. */
  code: string | undefined;
}

/**
 * The connection closed while a call waited, or a call was made on a closed client. `reason` is
 * the broker's error without an id when that was the last thing it sent before it hung up and it
 * answered no request (a session a manifest reload ended, a connection quota). An error without
 * an id that answered a request (e.g. -32600 for a message over the size limit) rejected that
 * request instead, and is never a `reason`.
 */
export declare class ConnectionClosed extends BrokerConnectionError {
  constructor(message: string, options?: { path?: string; cause?: unknown; reason?: RpcError });
  reason: RpcError | undefined;
}

/** No answer within the call's timeout (the call is abandoned; a late answer is dropped). */
export declare class TimeoutError extends Error {
  constructor(message: string);
  code: 'ETIMEDOUT';
}

/** The broker sent something that is not valid framing or JSON. */
export declare class ProtocolError extends Error {
  constructor(message: string);
}

/**
 * Another connection of the app subscribed and took its events over (`app.subscriptionEnded`):
 * `nextEvent()` / `nextNotification({method: 'app.event'})` reject with it. Not a connection
 * failure: the client stays connected, and `appSubscribe()` takes the events back.
 */
export declare class SubscriptionEnded extends Error {
  constructor(reason: string, app?: string);
  /** The broker's reason (it names the connection that took over). */
  readonly reason: string;
  /** The app's bundle ID. */
  readonly app: string | undefined;
}

/** The params of `app.subscriptionEnded`. */
export interface SubscriptionEndedParams {
  app: string;
  reason: string;
}

// -- framing -----------------------------------------------------------------------------------------

export type Framing = 'line' | 'header';
/** The framings; `'newline'` and `'content-length'` are accepted as aliases. */
export type FramingName = Framing | 'newline' | 'content-length';

export declare const FRAMINGS: readonly Framing[];

/** The canonical name of a framing; throws a TypeError for an unknown one. */
export declare function normalizeFraming(framing: string | undefined): Framing;

/**
 * Frames one message: a JSON value, or an already serialized JSON text (string / bytes, sent
 * unchanged). Line framing refuses a text holding a raw newline.
 */
export declare function encode(message: unknown, framing?: FramingName): Buffer;

/** The default largest message the client reads from the broker: 64 MiB. */
export declare const DEFAULT_MAX_FRAME: number;

/**
 * Incremental decoder: frames may be split across chunks and several may share one. A frame body
 * over `maxFrame` bytes (default DEFAULT_MAX_FRAME; `null` or `Infinity`: no limit) throws a
 * ProtocolError as soon as it is known (a line: once buffered past it; a header: at once).
 */
export declare class FrameDecoder {
  constructor(framing?: FramingName, maxFrame?: number | null);
  readonly framing: Framing;
  readonly maxFrame: number;
  /** Bytes received that do not form a complete frame yet. */
  readonly pendingBytes: number;
  /** The bodies of the frames completed by this chunk. Throws ProtocolError for bad headers. */
  feedFrames(chunk: Uint8Array): Buffer[];
  /** The messages completed by this chunk, parsed. Throws ProtocolError for bad input. */
  feed(chunk: Uint8Array): unknown[];
  /** Parses one frame's body (UTF-8 JSON). */
  parse(body: Buffer): unknown;
}

// -- items and paths ---------------------------------------------------------------------------------

export interface UrlItem { url: string; type?: string }
export interface TextItem { text: string; type?: string }
export interface DataItem { data: string; name?: string; type?: string }
export interface PathItem { path: string; type?: string }
export type Item = UrlItem | TextItem | DataItem | PathItem;

/** A URL item (type inferred: `public.url`). */
export declare function urlItem(url: string | URL, type?: string): UrlItem;
/** A text item (type inferred: `public.plain-text`). */
export declare function textItem(text: string, type?: string): TextItem;
/** A file given inline: the bytes are base64-encoded. A string is sent as its UTF-8 bytes. */
export declare function dataItem(bytes: Uint8Array | ArrayBuffer | string, name?: string, type?: string): DataItem;
/** A file the broker copies from the file system (the path is made absolute). */
export declare function pathItem(path: string | URL, type?: string): PathItem;
/** The bytes of an item carrying inline `data`. */
export declare function decodeData(item: { data: string }): Buffer;
/** The item builders under one name. */
export declare const item: Readonly<{
  url: typeof urlItem;
  text: typeof textItem;
  data: typeof dataItem;
  path: typeof pathItem;
  decode: typeof decodeData;
}>;

/**
 * The socket a client connects to when none is given, as the broker computes it:
 * `$SHAREBROKER_SOCKET`, else `$XDG_RUNTIME_DIR/sharebroker.sock` (absolute only), else
 * `$TMPDIR/sharebroker-UID/sharebroker.sock` (`/tmp` without `TMPDIR`).
 */
export declare function defaultSocketPath(env?: Record<string, string | undefined>, uid?: number): string;
/** `$TMPDIR/sharebroker-UID` (`/tmp` without `TMPDIR`, trailing slashes dropped). */
export declare function privateTempDirectory(env?: Record<string, string | undefined>, uid?: number): string;

// -- results -------------------------------------------------------------------------------------------

export type Role = 'app' | 'extension' | 'tool';
export declare const ROLES: readonly Role[];
export declare const VERSION: string;

export interface HelloResult {
  protocol: number;
  broker: { name: string; version: string };
  session: number;
  role: Role;
  bundleID?: string;
  maxMessage?: number;
  [key: string]: unknown;
}

export interface BrokerStatus {
  version: string;
  protocol?: number;
  connections: number;
  apps: number;
  subscribers: number;
  pendingEvents: number;
  pendingShares: number;
  uptimeSeconds: number;
  [key: string]: any;
}

export interface AppsList {
  apps: Array<Record<string, any> & { bundleID: string }>;
  errors: Array<Record<string, any>>;
  warnings: Array<Record<string, any>>;
  conflicts: Array<Record<string, any>>;
  [key: string]: any;
}

export type Via = 'scheme' | 'universalLink' | 'browser' | 'fallback';

export interface UrlOpenResult {
  app: string;
  via: Via;
  eventID: string;
  delivered: boolean;
  queued: boolean;
  kind?: 'openURL' | 'continueUserActivity';
  [key: string]: unknown;
}

export interface UrlCanOpenResult {
  canOpen: boolean;
  app?: string;
  via?: Via;
}

export interface UrlExplainResult {
  url: string;
  fallback?: string;
  steps: any[];
  decision: { app: string; via: Via; kind: string; url: string } | { error: { code: number; message: string } };
  text: string;
}

/** What every `app.event` carries. */
interface AppEventBase {
  id: string;
  via?: Via;
  /** The share an event queued by `share.send {open}` announces. */
  shareID?: string;
  [key: string]: unknown;
}

/** An opened URL: a scheme, the browser or a fallback. */
export interface OpenURLEvent extends AppEventBase {
  kind: 'openURL';
  url: string;
  /** The bundle ID of the session that opened it (absent for tools). */
  sourceApp?: string;
}

/** A universal link. */
export interface ContinueUserActivityEvent extends AppEventBase {
  kind: 'continueUserActivity';
  /** `"NSUserActivityTypeBrowsingWeb"`. */
  activityType: string;
  webpageURL: string;
}

/** An `app.event` notification's params (`kind` tells which). */
export type AppEvent = OpenURLEvent | ContinueUserActivityEvent;

/** A `defaults.changed` notification's params. */
export interface DefaultsChanged {
  group: string;
  key: string;
  value?: unknown;
  removed?: true;
  version: number;
}

export interface ShareTarget { extension: string; app: string; name: string }

export interface ShareSendResult {
  shareID: string;
  extension: string;
  app: string;
  group: string;
  eventID?: string;
}

/** A stored item: file items carry the copy's absolute `path`, plus `name`, `type`, `size`. */
export interface StoredItem {
  url?: string;
  text?: string;
  path?: string;
  name?: string;
  type?: string;
  size?: number;
  [key: string]: unknown;
}

export interface Share {
  shareID: string;
  extension: string;
  app: string;
  group: string;
  created: string;
  items: StoredItem[];
  [key: string]: unknown;
}

export interface Notification<P = any> {
  method: string;
  params: P;
}

// -- the client ----------------------------------------------------------------------------------------

/**
 * The longest timeout honoured, in ms: 2^31 - 1 (about 24.8 days), the most `setTimeout` can
 * wait. A longer timeout (or `Infinity`, or `null`) means no limit.
 */
export declare const MAX_TIMEOUT: 2147483647;

export interface ConnectOptions {
  /** The socket path (default: `defaultSocketPath()`). */
  socket?: string;
  /** `'line'` (default) or `'header'` (Content-Length headers, as LSP). */
  framing?: FramingName;
  /**
   * Default per-call timeout in ms (default 30000; `0`, `null`, `Infinity` or more than
   * MAX_TIMEOUT: none). Also bounds connecting.
   */
  timeout?: number | null;
  /** Say `hello` with this role right after connecting. */
  role?: Role;
  /** For `hello` (app / extension; default `$SHAREBROKER_BUNDLE_ID`). */
  bundleID?: string;
  /** For `hello`, when the manifest sets one. */
  token?: string;
  /**
   * How long `close()` waits for the broker's end before dropping the connection, in ms
   * (default 2000; `0`: drop it at once; `null`, `Infinity` or more than MAX_TIMEOUT: no limit).
   */
  closeTimeout?: number | null;
  /**
   * The largest message read from the broker, in bytes (default DEFAULT_MAX_FRAME, 64 MiB;
   * `null` or `Infinity`: no limit). A longer one drops the connection: calls fail with
   * ConnectionClosed, its `cause` the ProtocolError.
   */
  maxFrame?: number | null;
  /**
   * Back-pressure (default 1000; `null`, `0` or `Infinity`: none): once the pull API has been
   * used, while this many notifications wait in its queue and nothing waits for a message (no
   * call, batch, `receive()` or `nextNotification()` waiting), the client stops reading the
   * socket, until fewer than half that many wait.
   */
  maxQueuedNotifications?: number | null;
}

export interface CallOptions {
  /** This call's timeout in ms (default: the client's; `0`, `null`, `Infinity` or more than MAX_TIMEOUT: none). */
  timeout?: number | null;
  /** Abandons the call when aborted (rejects with the signal's reason). */
  signal?: AbortSignal;
}

export interface WaitOptions {
  /**
   * How long to wait, in ms. Unlike a call's timeout, `0` here means "do not wait": only what is
   * already queued. `undefined`, `null`, `Infinity` or more than MAX_TIMEOUT: as long as it takes.
   */
  timeout?: number | null;
  signal?: AbortSignal;
}

export type BatchEntry =
  | [method: string, params?: object]
  | { method: string; params?: object; notification?: boolean };

export interface ClientEvents {
  notification: [Notification];
  'app.event': [AppEvent];
  /** Another connection of the app subscribed and took its events over (this one gets no more). */
  'app.subscriptionEnded': [SubscriptionEndedParams];
  'defaults.changed': [DefaultsChanged];
  'defaults.watchEnded': [{ group: string; reason: string }];
  brokerError: [RpcError];
  /**
   * A promise a listener returned rejected (`event`: the listener's event). Without a listener
   * for it the client warns once; the process goes on.
   */
  listenerError: [error: unknown, event: string | symbol];
  close: [ConnectionClosed | undefined];
}

/**
 * One connection (one session) to the broker. Calls return promises and may run concurrently;
 * answers are matched by id, and an error without an id answers the oldest request still waiting
 * (the broker answers in order); with none waiting it is a notice (`'brokerError'`), and so is
 * the one with `data.closing` the broker says last when it closes the connection: it answers no
 * request, and calls waiting fail with `ConnectionClosed`, it the `reason`.
 *
 * Notifications are emitted (`'notification'`, and under their method name) and queued for
 * `nextNotification()` / `nextEvent()` / `notifications()` / `events()`. Listeners added with
 * `on()` / `once()` only observe; one added with `consume()` takes what it gets off the queue.
 * A listener added while notifications are queued first gets those, in a microtask (a consumer
 * takes them), so listeners added after `appSubscribe()` still see its backlog.
 */
export declare class Client extends EventEmitter {
  constructor(options?: ConnectOptions);
  readonly socketPath: string;
  readonly framing: Framing;
  timeout: number | null;
  closeTimeout: number | null;
  /** The largest message read from the broker, in bytes (`Infinity`: no limit). */
  readonly maxFrame: number;
  /** Queued notifications at which the client stops reading (`Infinity`: never). */
  readonly maxQueuedNotifications: number;
  /** The result of the last successful `hello`. */
  helloResult: HelloResult | undefined;
  /**
   * The params of the `app.subscriptionEnded` that ended the last wait for an `app.event`
   * (another connection of the app took the events over); `undefined` before, and again after a
   * successful `appSubscribe()`.
   */
  subscriptionEnded: SubscriptionEndedParams | undefined;
  readonly session: number | undefined;
  readonly role: Role | undefined;
  readonly bundleID: string | undefined;
  /** The largest message the broker reads (from `hello`). */
  readonly maxMessage: number | undefined;
  /** True when not connected, or once the connection has closed. */
  readonly closed: boolean;
  /** Why the broker's end closed (`undefined` while open, or after `close()`). */
  readonly closeError: ConnectionClosed | undefined;
  /** Notifications queued. */
  readonly pendingNotifications: number;
  /** Messages no call waits for, queued for `receive()`. */
  readonly pendingReplies: number;
  /** Bytes waiting to be written (client queue and socket buffer). */
  readonly pendingWriteBytes: number;

  /**
   * Connects (and says `hello` when a role was given). While a connect() is under way (hello
   * included) another gives the same promise. Rejects with ConnectionClosed after `close()` /
   * `destroy()` (even one made while connecting) or once the broker has closed the connection.
   */
  connect(): Promise<this>;
  /**
   * Half-closes, waits for the broker's end (at most `closeTimeout`), resolves. Idempotent.
   * While `connect()` is under way it gives the connection up (`connect()` rejects).
   */
  close(): Promise<void>;
  /** Drops the connection at once (while connecting: gives it up, `connect()` rejects). */
  destroy(): void;
  // Also defines [Symbol.asyncDispose]() (= close()), left out here so that older TypeScript
  // libs without Symbol.asyncDispose still accept this file.

  /**
   * Rejects with RpcError for an error answer, including the broker's -32700 without an id for a
   * request it cannot parse (half a surrogate pair, nesting over 256 levels).
   */
  call<T = any>(method: string, params?: object, options?: CallOptions): Promise<T>;
  /**
   * Resolves once written. A notification the broker could not parse is refused with RpcError
   * -32700 and not sent (its error would carry no id).
   */
  notify(method: string, params?: object): Promise<void>;
  /**
   * One result, RpcError or `undefined` (notification) per entry, in order. Rejects with the
   * RpcError the broker answers a whole batch with (-32600 over its member limit, -32700).
   */
  batch(calls: BatchEntry[], options?: CallOptions): Promise<any[]>;
  /** Sends a message as is; its answer (if the broker gives one) is read with `receive()`. Use non-numeric ids. */
  sendRaw(message: unknown): Promise<void>;
  receive(options?: CallOptions): Promise<any>;
  callRaw(message: unknown, options?: CallOptions): Promise<any>;

  /**
   * Adds a listener that consumes notifications: what it gets is not queued for the pull API,
   * and what is queued is handed to it first (taken off the queue, oldest first). `event` is
   * `'notification'` or a notification's method. Remove it with `off()`.
   */
  consume(event: 'notification', listener: (n: Notification) => void): this;
  consume(event: 'app.event', listener: (ev: AppEvent) => void): this;
  consume(event: 'app.subscriptionEnded', listener: (e: SubscriptionEndedParams) => void): this;
  consume(event: 'defaults.changed', listener: (c: DefaultsChanged) => void): this;
  consume(event: 'defaults.watchEnded', listener: (e: { group: string; reason: string }) => void): this;
  consume(event: string, listener: (params: any) => void): this;

  nextNotification(options?: WaitOptions & { method?: string }): Promise<Notification | null>;
  nextEvent(options?: WaitOptions): Promise<AppEvent | null>;
  notifications(options?: WaitOptions & { method?: string }): AsyncGenerator<Notification, void, undefined>;
  /**
   * `app.event`s' params. Ends when the connection closes, after `timeout` idle ms, when `signal`
   * aborts, and when another connection of the app takes the events over. `unsubscribe: true`:
   * a loop ended otherwise (break, return, throw, timeout, signal) sends `app.unsubscribe`.
   */
  events(options?: WaitOptions & { unsubscribe?: boolean }): AsyncGenerator<AppEvent, void, undefined>;
  [Symbol.asyncIterator](): AsyncGenerator<Notification, void, undefined>;

  hello(role: Role, options?: ({ bundleID?: string; token?: string } & CallOptions) | string): Promise<HelloResult>;
  discover(options?: CallOptions): Promise<{ openrpc: string; methods: Array<{ name: string; [key: string]: any }>; [key: string]: any }>;
  brokerStatus(options?: { verbose?: boolean } & CallOptions): Promise<BrokerStatus>;
  appsList(options?: CallOptions): Promise<AppsList>;
  appsReload(options?: CallOptions): Promise<AppsList>;
  urlOpen(url: string | URL, options?: { fallback?: string | URL } & CallOptions): Promise<UrlOpenResult>;
  urlCanOpen(url: string | URL, options?: { fallback?: string | URL } & CallOptions): Promise<UrlCanOpenResult>;
  urlExplain(url: string | URL, options?: { fallback?: string | URL } & CallOptions): Promise<UrlExplainResult>;
  appSubscribe(options?: CallOptions): Promise<{ pending: number }>;
  appAck(ids: string | string[], options?: CallOptions): Promise<{ acked: number }>;
  /** Stops the app's events on this connection (it stays open); `unsubscribed` false when it was not the subscriber. */
  appUnsubscribe(options?: CallOptions): Promise<{ unsubscribed: boolean }>;
  shareTargets(items: Item | Item[], options?: CallOptions): Promise<{ targets: ShareTarget[] }>;
  shareSend(items: Item | Item[], options?: { extension?: string; group?: string; open?: boolean | string } & CallOptions): Promise<ShareSendResult>;
  shareList(options?: string | ({ group?: string } & CallOptions)): Promise<{ shares: Share[] }>;
  shareGet(shareID: string, options?: CallOptions): Promise<Share>;
  shareRead(shareID: string, item: number, options?: { offset?: number; length?: number } & CallOptions): Promise<{ data: string; offset: number; size: number; eof: boolean }>;
  shareComplete(shareID: string, options?: CallOptions): Promise<{ completed: true }>;
  defaultsGet(group: string, key: string, options?: CallOptions): Promise<{ exists: boolean; value: any; version?: number }>;
  defaultsSet(group: string, key: string, value: unknown, options?: { ifVersion?: number } & CallOptions): Promise<{ version: number }>;
  defaultsRemove(group: string, key: string, options?: { ifVersion?: number } & CallOptions): Promise<{ removed: boolean; version: number }>;
  defaultsList(group: string, options?: CallOptions): Promise<{ values: Record<string, any>; version: number }>;
  defaultsWatch(group: string, options?: { keys?: string | string[] } & CallOptions): Promise<{ watching: true; version?: number; keys?: string[] }>;

  on<K extends keyof ClientEvents>(event: K, listener: (...args: ClientEvents[K]) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
  once<K extends keyof ClientEvents>(event: K, listener: (...args: ClientEvents[K]) => void): this;
  once(event: string | symbol, listener: (...args: any[]) => void): this;
  off<K extends keyof ClientEvents>(event: K, listener: (...args: ClientEvents[K]) => void): this;
  off(event: string | symbol, listener: (...args: any[]) => void): this;
}

/** Connects: `await connect({socket, framing, timeout, role, bundleID, token})`. */
export declare function connect(options?: ConnectOptions): Promise<Client>;

/** The `result` of a response object, or throws its `error` as an RpcError. */
export declare function resultOrError(response: unknown, method?: string): any;
