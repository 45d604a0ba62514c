// The sharebroker client: one connection (one session) to the broker's Unix socket.

import net from 'node:net';
import { EventEmitter } from 'node:events';
import { isUtf8 } from 'node:buffer';

import { BrokerConnectionError, ConnectionClosed, ErrorCode, ProtocolError, RpcError, SubscriptionEnded, TimeoutError } from './errors.js';
import { DEFAULT_MAX_FRAME, FrameDecoder, encode, normalizeFraming, parseProblem } from './framing.js';
import { defaultSocketPath } from './paths.js';

/**
 * @typedef {import('./framing.js').Framing} Framing
 * @typedef {import('./items.js').Item} Item
 *
 * @typedef {object} ConnectOptions
 * @property {string} [socket] the socket path (default: `defaultSocketPath()`)
 * @property {Framing | 'newline' | 'content-length'} [framing] `'line'` (default) or `'header'`
 * @property {number | null} [timeout] default per-call timeout in ms (default 30000; `0`, `null`,
 *   `Infinity` or more than MAX_TIMEOUT: no limit); also bounds connecting
 * @property {'app' | 'extension' | 'tool'} [role] say `hello` with this role right after connecting
 * @property {string} [bundleID] for `hello` (app / extension; default `$SHAREBROKER_BUNDLE_ID`)
 * @property {string} [token] for `hello`, when the manifest sets one
 * @property {number | null} [closeTimeout] how long `close()` waits for the broker to finish before
 *   dropping the connection, in ms (default 2000; `0`: drop it at once; `null`, `Infinity` or more
 *   than MAX_TIMEOUT: no limit)
 * @property {number | null} [maxFrame] the largest message read from the broker, in bytes (default
 *   DEFAULT_MAX_FRAME, 64 MiB; `null` or `Infinity`: no limit); a longer one drops the connection
 *   (calls fail with ConnectionClosed, its `cause` the ProtocolError)
 * @property {number | null} [maxQueuedNotifications] back-pressure (default 1000; `null`, `0` or
 *   `Infinity`: none): once the pull API has been used, while this many notifications wait in
 *   its queue and nothing waits for a message (no call, batch, `receive()` or
 *   `nextNotification()` waiting), the client stops reading the socket, until fewer than half
 *   that many wait
 *
 * @typedef {object} CallOptions
 * @property {number | null} [timeout] this call's timeout in ms (default: the client's; `0`,
 *   `null`, `Infinity` or more than MAX_TIMEOUT: no limit)
 * @property {AbortSignal} [signal] abandons the call when aborted
 *
 * @typedef {{method: string, params: any}} Notification
 *
 * @typedef {[string, (object | undefined)?] | {method: string, params?: object, notification?: boolean}} BatchEntry
 */

const DEFAULT_TIMEOUT = 30000;
/**
 * The notification the broker sends an app's subscriber when another connection of the app
 * subscribes and takes its events over: it ends what waits for an `app.event`.
 */
const SUBSCRIPTION_ENDED = 'app.subscriptionEnded';
/**
 * The error for an `app.subscriptionEnded` notification.
 * @param {Notification} n
 */
const subscriptionEndedError = (n) => {
  const p = isObject(n.params) ? n.params : {};
  return new SubscriptionEnded(typeof p.reason === 'string' ? p.reason : 'another connection of the app subscribed',
    typeof p.app === 'string' ? p.app : undefined);
};
const RESERVED_EVENTS = new Set(['error', 'close', 'notification', 'brokerError', 'listenerError', 'newListener', 'removeListener']);
/** Whether listeners of `event` get notifications (`'notification'`, or a method's name). @param {string | symbol} event */
const isNotificationEvent = (event) => typeof event === 'string' && (event === 'notification' || !RESERVED_EVENTS.has(event));
/** The longest delay `setTimeout` honours, in ms (2^31 - 1, about 24.8 days; it fires a longer one after 1 ms). */
export const MAX_TIMEOUT = 2 ** 31 - 1;
/** The broker's default limit on the members of one batch (`--max-batch`). */
const MAX_BATCH = 10000;
/** Queued notifications at which a client nothing pulls from warns (once) that its queue grows. */
const QUEUE_WARNING = 10000;
/**
 * Abandoned calls (timed out or aborted) whose late answers the client keeps watch for, at most;
 * past that the oldest is forgotten (see `_limitAbandoned`).
 */
export const MAX_ABANDONED = 1000;
/**
 * After a write failed because the broker had closed the connection (EPIPE, ECONNRESET): how
 * long (ms) and how many bytes the client still reads of what the broker sent before it closed
 * (its closing error, the answers before it) before it fails the connection.
 */
const LEFTOVER_TIME = 200;
const LEFTOVER_BYTES = 1 << 20;
/** The write errors that say the peer has closed (what it sent before may still be unread). */
const PEER_GONE = new Set(['EPIPE', 'ECONNRESET']);

/**
 * A socket whose failed writes can be held back: Node.js drops a socket as soon as a write
 * fails, unread bytes and all. When a write fails with EPIPE or ECONNRESET and `onWriteError` is
 * set, the error reaches the stream only once `onWriteError` calls `report` (the socket meanwhile
 * still reads: what the broker sent before it closed, its closing error among it, is delivered).
 */
class BrokerSocket extends net.Socket {
  constructor() {
    super();
    /** @type {((err: NodeJS.ErrnoException, report: () => void) => void) | null} */
    this.onWriteError = null;
  }

  /**
   * @param {any} data
   * @param {BufferEncoding} encoding
   * @param {(err?: Error | null) => void} cb
   */
  _write(data, encoding, cb) {
    super._write(data, encoding, this._holding(cb));
  }

  /**
   * @param {any[]} chunks
   * @param {(err?: Error | null) => void} cb
   */
  _writev(chunks, cb) {
    super._writev(chunks, this._holding(cb));
  }

  /** @param {(err?: Error | null) => void} cb */
  _holding(cb) {
    return (/** @type {any} */ err) => {
      const hook = this.onWriteError;
      if (err && hook && PEER_GONE.has(err.code) && !this.destroyed) {
        let reported = false;
        hook(err, () => {
          if (!reported) {
            reported = true;
            cb(err);
          }
        });
      } else {
        cb(err);
      }
    };
  }
}

/** The default of `maxQueuedNotifications`. */
const MAX_QUEUED_NOTIFICATIONS = 1000;

/**
 * A timeout in ms, or `null` for none: `0`, `null`, `undefined`, `Infinity`, NaN, a negative
 * number and anything over MAX_TIMEOUT mean no limit.
 * @param {number | null | undefined} t
 * @returns {number | null}
 */
function limitOf(t) {
  return typeof t === 'number' && t > 0 && t <= MAX_TIMEOUT ? t : null;
}

/**
 * @param {unknown} msg
 * @returns {msg is Record<string, any>}
 */
function isObject(msg) {
  return msg !== null && typeof msg === 'object' && !Array.isArray(msg);
}

/**
 * Why `msg` is nothing a broker sends (undefined when it may be): the broker sends responses
 * (`result` or `error`), notifications (`method`, no `id`) and batches of responses, never a
 * request (`method` with an `id`: a peer that echoes what it is sent, or another protocol).
 * @param {unknown} msg
 * @returns {string | undefined}
 */
function notFromABroker(msg) {
  /** @param {unknown} m */
  const one = (m) => {
    if (!isObject(m)) return 'a message that is not an object';
    if ('method' in m) return 'id' in m ? 'a request (a method with an id)' : undefined;
    if (!('result' in m) && !('error' in m)) return 'an object that is no response (no result or error) nor a notification';
    return undefined;
  };
  if (Array.isArray(msg)) return msg.length ? msg.map(one).find((w) => w !== undefined) : 'an empty array';
  return one(msg);
}

/**
 * The error without an id the broker says last, why it closes the connection (its `data` is
 * `{closing: true}`): it answers no request.
 * @param {Record<string, any>} msg an error without an id
 */
function isClosingError(msg) {
  return isObject(msg.error) && isObject(msg.error.data) && msg.error.data.closing === true;
}

/**
 * The `result` of a response object, or throws its `error` as an RpcError.
 * @param {unknown} response
 * @param {string} [method]
 */
export function resultOrError(response, method) {
  if (!isObject(response)) {
    throw new RpcError(ErrorCode.INTERNAL_ERROR, `not a response object: ${JSON.stringify(response)}`, undefined, method);
  }
  if ('error' in response) throw RpcError.from(response.error, method);
  return response.result;
}

/**
 * A connection to the broker. Create it with `connect()` (or `new Client(options)` and then
 * `await client.connect()`).
 *
 * Calls return promises and may be made concurrently; their answers are matched by id, and an
 * error without an id (which the broker sends for a request it cannot parse, or a batch over its
 * member limit) answers the oldest request still waiting, as the broker answers in order. The
 * one with `data.closing` the broker says last when it closes the connection answers no request:
 * calls waiting fail with ConnectionClosed, it the `reason`.
 *
 * Notifications from the broker (`app.event`, `app.subscriptionEnded`, `defaults.changed`,
 * `defaults.watchEnded`) are
 * emitted as `'notification'` (`{method, params}`) and under their method name (`'app.event'`,
 * with the params). Listeners added with `on()` / `once()` only observe: every notification is
 * also queued for the pull API (`nextNotification()`, `nextEvent()`, `notifications()`,
 * `events()`) unless a listener added with `consume()` takes it. A listener added while
 * notifications are queued first gets those (asynchronously, before anything that arrives later;
 * a consumer takes them off the queue), so a listener added after `appSubscribe()` still sees
 * the backlog that came with its answer.
 *
 * Events: `'notification'`, `'app.event'`, `'app.subscriptionEnded'` (`{app, reason}`: another
 * connection of the app subscribed and took its events over), `'defaults.changed'`,
 * `'defaults.watchEnded'`,
 * `'brokerError'` (an error without an id when no request waits, e.g. the reason the broker gives
 * before it closes the connection), `'close'` (a `ConnectionClosed` when the broker or the
 * system ended the connection, `undefined` after `close()`), `'listenerError'` (`(error, event)`:
 * a promise a listener returned rejected, e.g. an async `app.event` listener whose `appAck()`
 * failed as the connection closed; with no `'listenerError'` listener the client warns once
 * and the process goes on).
 */
export class Client extends EventEmitter {
  /** @param {ConnectOptions} [options] */
  constructor(options = {}) {
    // A promise a listener returns that rejects comes to [EventEmitter.captureRejectionSymbol]
    // (an unhandled rejection would end the process).
    super({ captureRejections: true });
    /** The socket path. @type {string} */
    this.socketPath = options.socket ?? defaultSocketPath();
    /** @type {Framing} */
    this.framing = normalizeFraming(options.framing);
    /** Default per-call timeout in ms (`null`: none). @type {number | null} */
    this.timeout = options.timeout === undefined ? DEFAULT_TIMEOUT : limitOf(options.timeout);
    /** @type {number | null} */
    this.closeTimeout = options.closeTimeout === undefined ? 2000 : options.closeTimeout;
    this._decoder = new FrameDecoder(this.framing, options.maxFrame === undefined ? DEFAULT_MAX_FRAME : options.maxFrame);
    /** The largest message read from the broker, in bytes (`Infinity`: no limit). @type {number} */
    this.maxFrame = this._decoder.maxFrame;
    const mq = options.maxQueuedNotifications === undefined ? MAX_QUEUED_NOTIFICATIONS : options.maxQueuedNotifications;
    /** Queued notifications at which the client stops reading (`Infinity`: never). @type {number} */
    this.maxQueuedNotifications = typeof mq === 'number' && mq > 0 ? mq : Infinity;
    /** Has the client stopped reading the socket (back-pressure)? */
    this._paused = false;
    /** The result of the last successful `hello`. @type {Record<string, any> | undefined} */
    this.helloResult = undefined;
    /**
     * The params (`{app, reason}`) of the `app.subscriptionEnded` that ended the last wait for an
     * `app.event`; `undefined` before, and again after a successful `appSubscribe()`.
     * @type {{app: string, reason: string} | undefined}
     */
    this.subscriptionEnded = undefined;
    /** @type {{role: string, bundleID?: string, token?: string} | undefined} */
    this._hello = options.role ? { role: options.role, bundleID: options.bundleID, token: options.token } : undefined;
    /** @type {net.Socket | null} */
    this._socket = null;
    this._nextId = 0;
    /** @type {Map<number, Pending>} */
    this._pending = new Map();
    /** Calls that timed out or were aborted, by id: their late answers are dropped. @type {Map<number, Pending>} */
    this._abandoned = new Map();
    /** The highest id of an abandoned call forgotten (MAX_ABANDONED): a late answer up to it that no call waits for is dropped. */
    this._forgottenId = 0;
    /**
     * The requests written and not yet answered, in the order they were written (the broker
     * answers in the order it reads): calls and batches (Pending, abandoned ones included), and
     * raw messages or notifications that get an answer (RawEntry).
     */
    this._order = new OrderQueue();
    /** @type {Notification[]} */
    this._notifications = [];
    /** Listeners added with `consume()`, by event. @type {Map<string, Set<Function>>} */
    this._consumers = new Map();
    /** Queued notifications still to be handed to a listener just added. @type {Replay[]} */
    this._replays = [];
    /** Has anything pulled notifications (nextNotification, events, ...)? */
    this._pulled = false;
    this._warnedQueue = false;
    this._warnedListenerError = false;
    /** @type {Waiter<Notification | null>[]} */
    this._notificationWaiters = [];
    /** Replies no call waits for (raw requests' answers, errors without an id). @type {unknown[]} */
    this._replies = [];
    /** @type {Waiter<unknown>[]} */
    this._replyWaiters = [];
    /** @type {{buf: Buffer, resolve: () => void, reject: (e: Error) => void}[]} */
    this._out = [];
    this._blocked = false;
    this._closed = false;
    this._closedByUs = false;
    /** @type {ConnectionClosed | undefined} */
    this._closeError = undefined;
    /** The broker's last message when it was an error without an id that answered no request (a notice): the reason for a hang-up right after it. @type {Record<string, any> | undefined} */
    this._closeReason = undefined;
    /** @type {unknown} */
    this._socketError = undefined;
    /** @type {Promise<void> | null} */
    this._closePromise = null;
    /** @type {Promise<this> | null} */
    this._connecting = null;
    /** Gives up a connection attempt under way (close() / destroy() before it connected). @type {(() => void) | null} */
    this._abortConnect = null;
    /** Listeners registered for notifications (`_listened`). */
    this._notificationListeners = 0;
    this.on('newListener', (event, listener) => this._listenerAdded(event, listener));
    this.on('removeListener', (event, listener) => {
      if (isNotificationEvent(event)) this._notificationListeners--;
      const consumers = this._consumers.get(event);
      if (consumers && !this.listeners(event).includes(listener)) consumers.delete(listener);
    });
  }

  // -- connection --------------------------------------------------------------------------------

  /**
   * Connects (and says `hello` when a role was given). Rejects with a BrokerConnectionError
   * naming the path when the broker cannot be reached, or with the hello's RpcError (the
   * connection is then closed). While a connect() is under way (hello included) another one
   * gives the same promise; once connected it resolves at once. A client connects once: after
   * `close()` / `destroy()` (even one made while connecting), or once the broker has closed the
   * connection, this rejects with ConnectionClosed (make a new client to connect again).
   * @returns {Promise<this>}
   */
  connect() {
    if (this._closedByUs) return Promise.reject(this._closedError());
    if (this._connecting) return this._connecting;
    if (this._socket) return this._closed ? Promise.reject(this._closedError()) : Promise.resolve(this);
    const connecting = this._connect();
    this._connecting = connecting;
    connecting.finally(() => { if (this._connecting === connecting) this._connecting = null; }).catch(() => {});
    return connecting;
  }

  /** @returns {Promise<this>} */
  async _connect() {
    const path = this.socketPath;
    const sock = await new Promise((resolve, reject) => {
      const s = new BrokerSocket();
      s.connect({ path });
      /** @type {NodeJS.Timeout | undefined} */
      let timer;
      const done = () => {
        clearTimeout(timer);
        this._abortConnect = null;
      };
      const fail = (/** @type {Error} */ err) => {
        done();
        s.destroy();
        reject(new BrokerConnectionError(`cannot connect to sharebroker at ${path}: ${err.message}`, { path, cause: err }));
      };
      s.once('error', fail);
      s.once('connect', () => {
        done();
        s.off('error', fail);
        resolve(s);
      });
      // close() or destroy() before the socket connected: give up now (a pending connection
      // attempt would keep the process alive until it ends).
      this._abortConnect = () => {
        done();
        s.off('error', fail);
        s.on('error', () => {});
        s.destroy();
        reject(this._closedError());
      };
      const limit = limitOf(this.timeout);
      if (limit !== null) timer = setTimeout(() => fail(new Error(`no connection within ${limit} ms`)), limit);
    });
    if (this._closedByUs) {
      sock.destroy();
      throw this._closedError();
    }
    this._attach(sock);
    if (this._hello) {
      const { role, bundleID, token } = this._hello;
      try {
        await this.hello(/** @type {any} */ (role), { bundleID, token });
      } catch (e) {
        this.destroy();
        throw e;
      }
    }
    if (this._closedByUs) {
      // close() or destroy() while hello was in flight: that connection is not handed out.
      this.destroy();
      throw this._closedError();
    }
    return this;
  }

  /** @param {net.Socket} sock */
  _attach(sock) {
    this._socket = sock;
    this._closed = false;
    if (sock instanceof BrokerSocket) sock.onWriteError = (err, report) => this._writeFailed(sock, report);
    sock.on('data', (chunk) => this._onData(chunk));
    sock.on('error', (err) => {
      this._socketError ??= err;
    });
    sock.on('close', () => this._onClose());
  }

  /**
   * Closes the connection cleanly: what is queued is written, then the client half-closes (the
   * broker answers what it has read and closes its end) and waits for the broker's end, at most
   * `closeTimeout` ms before dropping the connection. Calls still waiting then fail with
   * ConnectionClosed. Queued notifications stay readable. Idempotent. While `connect()` is under
   * way, it gives up the connection (`connect()` rejects with ConnectionClosed).
   * @returns {Promise<void>}
   */
  close() {
    if (this._closePromise) return this._closePromise;
    const sock = this._socket;
    this._closedByUs = true;
    if (!sock || this._closed) {
      this._closed = true;
      this._abortConnect?.();
      return (this._closePromise = Promise.resolve());
    }
    this._closePromise = new Promise((resolve) => {
      sock.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      // What waits for 'drain' goes to the socket now: nothing more comes after it.
      const queued = this._out.splice(0);
      this._blocked = false;
      for (const w of queued) sock.write(w.buf, (err) => (err ? w.reject(this._closedError(err)) : w.resolve()));
      sock.end();
      if (this._paused) {
        this._paused = false;
        sock.resume(); // read to the broker's end
      }
      const ct = this.closeTimeout;
      const limit = typeof ct === 'number' && ct <= 0 ? 0 : limitOf(ct);
      /** @type {NodeJS.Timeout | undefined} */
      const timer = limit === null ? undefined : setTimeout(() => sock.destroy(), limit);
    });
    return this._closePromise;
  }

  /** Drops the connection at once (calls waiting fail with ConnectionClosed). */
  destroy() {
    this._closedByUs = true;
    this._abortConnect?.();
    if (this._socket && !this._closed) this._socket.destroy();
    this._closed = true;
  }

  /** True when not connected, or once the connection has closed. */
  get closed() {
    return this._socket === null || this._closed;
  }

  /** Why the broker's end closed: a ConnectionClosed (`undefined` while open or after `close()`). */
  get closeError() {
    return this._closeError;
  }

  /** The session number from `hello` (`undefined` before). @returns {number | undefined} */
  get session() {
    return this.helloResult?.session;
  }

  /** The role from `hello`. @returns {string | undefined} */
  get role() {
    return this.helloResult?.role;
  }

  /** The bundle ID from `hello` (app and extension sessions). @returns {string | undefined} */
  get bundleID() {
    return this.helloResult?.bundleID;
  }

  /** The largest message the broker reads (from `hello`), in bytes. @returns {number | undefined} */
  get maxMessage() {
    const m = this.helloResult?.maxMessage;
    return typeof m === 'number' ? m : undefined;
  }

  /** How many messages no call waits for are queued (read them with `receive()`). */
  get pendingReplies() {
    return this._replies.length;
  }

  /** How many notifications are queued. */
  get pendingNotifications() {
    return this._notifications.length;
  }

  // -- output --------------------------------------------------------------------------------------

  /**
   * Queues a frame for the socket, respecting `socket.write()`'s return value: while the socket
   * reports its buffer full, frames wait here, in order, until `'drain'`. Resolves once the frame
   * has been handed to the kernel.
   * @param {Buffer} buf
   * @returns {Promise<void>}
   */
  _write(buf) {
    return new Promise((resolve, reject) => {
      if (this.closed || this._closedByUs) {
        reject(this._closedError());
        return;
      }
      this._out.push({ buf, resolve, reject });
      this._flush();
    });
  }

  _flush() {
    const sock = this._socket;
    if (!sock) return;
    while (!this._blocked && this._out.length) {
      const w = /** @type {typeof this._out[0]} */ (this._out.shift());
      const ok = sock.write(w.buf, (err) => (err ? w.reject(this._closedError(err)) : w.resolve()));
      if (!ok) {
        this._blocked = true;
        sock.once('drain', () => {
          this._blocked = false;
          this._flush();
        });
      }
    }
  }

  /**
   * A write failed because the broker had closed the connection (EPIPE, ECONNRESET): before the
   * error ends the connection (`report`), the client reads what the broker sent before it closed
   * and is still unread, at most LEFTOVER_TIME ms and LEFTOVER_BYTES bytes, and dispatches it
   * (answers included), so that its reason for closing (an error with data.closing, e.g. a
   * connection refused at once) is not lost to the broken pipe. The read ends at the end of the
   * stream (normally at once), or when the closing error ends the connection.
   * @param {net.Socket} sock
   * @param {() => void} report
   */
  _writeFailed(sock, report) {
    if (this._socket !== sock || this._closed || sock.destroyed) {
      report();
      return;
    }
    let read = 0;
    const done = () => {
      clearTimeout(timer);
      sock.off('data', counted);
      sock.off('end', done);
      sock.off('close', done);
      report();
    };
    const counted = (/** @type {Buffer} */ chunk) => {
      read += chunk.length;
      if (read >= LEFTOVER_BYTES) done();
    };
    const timer = setTimeout(done, LEFTOVER_TIME);
    sock.on('data', counted);
    sock.once('end', done);
    sock.once('close', done);
    if (this._paused) {
      this._paused = false;
      sock.resume(); // (back-pressure: the closing error comes after what is unread)
    }
  }

  /** Bytes waiting to be written: in the client's queue and in the socket's buffer. */
  get pendingWriteBytes() {
    let n = this._socket ? this._socket.writableLength : 0;
    for (const w of this._out) n += w.buf.length;
    return n;
  }

  // -- input ---------------------------------------------------------------------------------------

  /** @param {Buffer} chunk */
  _onData(chunk) {
    /** @type {unknown[]} */
    const thrown = [];
    try {
      for (const body of this._decoder.feedFrames(chunk)) {
        const msg = this._decoder.parse(body);
        const why = notFromABroker(msg);
        if (why) throw new ProtocolError(`what answers does not speak sharebroker's protocol: ${why}`);
        try {
          this._dispatch(msg);
        } catch (e) {
          thrown.push(e); // a listener threw: the rest of the chunk is still dispatched
        }
      }
      // The broker said why it closes the connection: it has ended, with that reason.
      if (this._closeReason && isClosingError(this._closeReason)) this._socket?.destroy();
    } catch (e) {
      // The frames completed before a frame over maxFrame still count (their answers, events).
      for (const body of /** @type {any} */ (e)?.frames ?? []) {
        try {
          this._dispatch(this._decoder.parse(body));
        } catch (e2) {
          thrown.push(e2);
        }
      }
      // The broker sent something that is not the protocol: nothing after it can be trusted.
      this._closeReason = undefined;
      this._socketError ??= e;
      this._socket?.destroy();
    }
    this._flowControl();
    for (const e of thrown) process.nextTick(() => { throw e; });
  }

  /**
   * Back-pressure on notifications: once something has pulled (`nextNotification()`, `events()`,
   * ...), the client stops reading the socket while `maxQueuedNotifications` or more wait in the
   * queue and nothing waits for a message, and reads on once fewer than half wait, or as soon as
   * something waits for a message: a call, a batch or a raw request waiting for its answer,
   * `receive()`, or `nextNotification()` waiting for one not queued (so awaiting a call while
   * notifications wait unconsumed never deadlocks; the queue may then pass the mark). While it
   * does not read, the broker holds what it has for the client (and drops a subscriber that does
   * not read for long, as it drops any slow client).
   */
  _flowControl() {
    const sock = this._socket;
    if (!sock || this._closed) return;
    const queued = this._notifications.length;
    const mustRead = !this._order.empty || this._replyWaiters.length > 0 || this._notificationWaiters.length > 0;
    if (this._paused) {
      if (mustRead || this._closedByUs || queued < Math.max(1, Math.floor(this.maxQueuedNotifications / 2))) {
        this._paused = false;
        sock.resume();
      }
    } else if (this._pulled && !mustRead && !this._closedByUs && queued >= this.maxQueuedNotifications && !this._listened()) {
      this._paused = true;
      sock.pause();
    }
  }

  /**
   * Whether a listener for notifications is registered (`on('notification')`, `on(METHOD)`,
   * `consume()`): such a client is never paused, its listeners would starve (what they observe
   * stays queued for the pull API, so the queue alone cannot say whether they keep up).
   */
  _listened() {
    return this._notificationListeners > 0;
  }

  /**
   * Drops the late answer of an abandoned call or batch (one that timed out or was cancelled,
   * also one forgotten past the bound on them): true when `id` is such a one's.
   * @param {number} id
   */
  _dropLate(id) {
    const a = this._abandoned.get(id);
    if (a) {
      this._dropAbandoned(a);
      return true;
    }
    return id <= this._forgottenId;
  }

  /** @param {unknown} msg */
  _dispatch(msg) {
    // Only an error without an id that answers no request, right before the hang-up, is its reason.
    this._closeReason = undefined;
    if (Array.isArray(msg)) {
      for (const r of msg) {
        if (isObject(r) && typeof r.id === 'number') {
          const p = this._pending.get(r.id);
          if (p && p.batch) {
            this._order.answered(p);
            p.batch.settle(msg);
            return;
          }
          if (this._dropLate(r.id)) return;
        }
      }
      this._rawAnswer(msg);
      return;
    }
    if (isObject(msg) && typeof msg.method === 'string' && !('id' in msg)) {
      this._notification({ method: msg.method, params: msg.params });
      return;
    }
    if (isObject(msg) && typeof msg.id === 'number' && !('method' in msg)) {
      const p = this._pending.get(msg.id);
      if (p && !p.batch) {
        this._order.answered(p);
        if ('error' in msg) p.reject(RpcError.from(msg.error, p.method));
        else {
          if (p.method === 'hello' && isObject(msg.result)) this.helloResult = msg.result;
          if (p.method === 'app.subscribe') this._subscribed();
          p.resolve(msg.result);
        }
        return;
      }
      if (this._dropLate(msg.id)) return;
    }
    if (isObject(msg) && msg.id === null && 'error' in msg) {
      this._idNullError(msg);
      return;
    }
    this._rawAnswer(msg);
  }

  /**
   * An error without an id: the broker's answer to a request it could not read an id from (one
   * it cannot parse, a batch over its member limit). The broker answers in the order it read,
   * so it answers the oldest request still waiting; with none waiting it is a notice. One with
   * `data.closing` (a connection refused at once, a message over its size limit, a malformed
   * header section, a session a manifest reload ended) answers no request: it is a notice, and
   * the reason the connection ends (the calls waiting fail with ConnectionClosed).
   * @param {Record<string, any>} msg
   */
  _idNullError(msg) {
    if (isClosingError(msg)) {
      this._pushReply(msg);
      this._closeReason = msg;
      if (this.listenerCount('brokerError')) this.emit('brokerError', RpcError.from(msg.error));
      return;
    }
    const oldest = this._order.shift();
    if (oldest instanceof Pending) {
      if (oldest.abandoned || oldest.done) {
        this._dropAbandoned(oldest);
        return;
      }
      const err = RpcError.from(msg.error, oldest.method);
      if (oldest.batch) oldest.batch.reject(err);
      else oldest.reject(err);
      return;
    }
    this._pushReply(msg);
    if (oldest && !oldest.notice) return; // a raw request's answer, for receive()
    if (!oldest) this._closeReason = msg;
    if (this.listenerCount('brokerError')) this.emit('brokerError', RpcError.from(msg.error));
  }

  /**
   * Bounds what abandoned calls hold: past MAX_ABANDONED ids of calls that timed out or were
   * aborted and still wait for their late answers (a peer that never answers), the oldest are
   * forgotten: out of the order of answers, their late answers dropped by id (ids count up).
   */
  _limitAbandoned() {
    while (this._abandoned.size > MAX_ABANDONED) {
      const p = /** @type {Pending} */ (this._abandoned.values().next().value);
      for (const id of p.ids) {
        if (this._abandoned.get(id) === p) this._abandoned.delete(id);
        if (id > this._forgottenId) this._forgottenId = id;
      }
      this._order.remove(p);
    }
  }

  /**
   * The late answer of an abandoned call or batch: dropped.
   * @param {Pending} p
   */
  _dropAbandoned(p) {
    for (const id of p.ids) if (this._abandoned.get(id) === p) this._abandoned.delete(id);
    this._order.answered(p);
  }

  /**
   * A message no call waits for: a raw request's answer (queued for receive()).
   * @param {unknown} msg
   */
  _rawAnswer(msg) {
    this._order.answeredRaw();
    this._pushReply(msg);
  }

  /**
   * `app.subscribe` succeeded: the `app.subscriptionEnded` notifications queued before its answer
   * ended the subscription it replaces (the broker answers in order), not this one: they are
   * dropped, so that they do not end the next wait for an `app.event`.
   */
  _subscribed() {
    this.subscriptionEnded = undefined;
    if (this._notifications.some((n) => n.method === SUBSCRIPTION_ENDED)) {
      this._notifications = this._notifications.filter((n) => n.method !== SUBSCRIPTION_ENDED);
      this._flowControl();
    }
  }

  /** @param {unknown} msg */
  _pushReply(msg) {
    const w = this._replyWaiters.shift();
    if (w) w.settle(msg);
    else this._replies.push(msg);
  }

  /**
   * Does a listener added with `consume()` listen for `event`?
   * @param {string} event
   */
  _consumes(event) {
    const consumers = this._consumers.get(event);
    return !!consumers?.size && this.listeners(event).some((l) => consumers.has(l));
  }

  /** @param {Notification} n */
  _notification(n) {
    this._runReplays(); // what was queued before goes to new listeners before this
    const named = !RESERVED_EVENTS.has(n.method);
    if (!(this._consumes('notification') || (named && this._consumes(n.method)))) {
      const i = this._notificationWaiters.findIndex((w) => w.accepts(n));
      if (i >= 0) this._notificationWaiters.splice(i, 1)[0].settle(n);
      else this._queueNotification(n);
    }
    /** @type {unknown} */
    let thrown;
    try {
      this.emit('notification', n);
    } catch (e) {
      thrown = e;
    }
    if (named) this.emit(n.method, n.params);
    if (thrown !== undefined) throw thrown;
  }

  /** @param {Notification} n */
  _queueNotification(n) {
    this._notifications.push(n);
    if (this._notifications.length >= QUEUE_WARNING && !this._pulled && !this._warnedQueue) {
      this._warnedQueue = true;
      process.emitWarning(`${this._notifications.length} notifications from sharebroker are queued and nothing pulls them: ` +
        'read them with nextNotification() / events(), or add the listener that handles them with consume()',
      { code: 'SHAREBROKER_NOTIFICATION_QUEUE' });
    }
  }

  /**
   * A listener was added (`newListener`): one for notifications first gets those queued, in a
   * microtask (before anything that arrives later). An observer gets the ones queued now (they
   * stay queued); a consumer takes the ones still queued when it runs.
   * @param {string | symbol} event
   * @param {Function} listener
   */
  _listenerAdded(event, listener) {
    if (!isNotificationEvent(event)) return;
    this._notificationListeners++;
    const consuming = !!this._consumers.get(event)?.has(listener);
    /** @type {Notification[] | null} */
    let items = null;
    if (!consuming) {
      items = event === 'notification' ? [...this._notifications] : this._notifications.filter((n) => n.method === event);
      if (!items.length) return;
    } else if (!this._notifications.length) {
      return;
    }
    if (!this._replays.length) queueMicrotask(() => this._runReplays());
    this._replays.push({ event, listener, items });
  }

  /** Hands queued notifications to the listeners just added (see `_listenerAdded`). */
  _runReplays() {
    /** @type {unknown[]} */
    const thrown = [];
    while (this._replays.length) {
      const r = /** @type {Replay} */ (this._replays.shift());
      const accepts = (/** @type {Notification} */ n) => r.event === 'notification' || n.method === r.event;
      let items = r.items;
      if (items === null) {
        // A consumer: it takes what is still queued (a pull may have taken some meanwhile).
        if (!this._rawListener(r.event, r.listener)) continue;
        items = this._notifications.filter(accepts);
        this._notifications = this._notifications.filter((n) => !accepts(n));
        this._flowControl();
      }
      for (const n of items) {
        const l = this._rawListener(r.event, r.listener); // gone (or a once() listener called): stop
        if (!l) {
          if (r.items === null) this._notifications.unshift(...items.slice(items.indexOf(n)));
          break;
        }
        try {
          const result = l.call(this, r.event === 'notification' ? n : n.params);
          if (result && typeof result.then === 'function') result.then(undefined, (/** @type {unknown} */ e) => this._listenerError(e, r.event));
        } catch (e) {
          thrown.push(e);
        }
      }
    }
    for (const e of thrown) process.nextTick(() => { throw e; });
  }

  /**
   * A promise a listener of `event` returned rejected (EventEmitter's captureRejections): emitted
   * as `'listenerError'` `(error, event)`; with no listener for that (or when a `'listenerError'`
   * listener's own promise rejected), a warning, once: it does not end the process.
   * @param {unknown} error
   * @param {string | symbol} event
   */
  [EventEmitter.captureRejectionSymbol](error, event) {
    this._listenerError(error, event);
  }

  /**
   * @param {unknown} error
   * @param {string | symbol} event
   */
  _listenerError(error, event) {
    if (event !== 'listenerError' && this.listenerCount('listenerError')) {
      this.emit('listenerError', error, event);
      return;
    }
    if (this._warnedListenerError) return;
    this._warnedListenerError = true;
    process.emitWarning(`a promise a sharebroker client's ${String(event)} listener returned rejected: ${error instanceof Error ? error.message : String(error)} ` +
      "(handle it in the listener, or listen for 'listenerError'; further ones are not reported)",
    { code: 'SHAREBROKER_LISTENER_ERROR' });
  }

  /**
   * The function registered for `listener` on `event` (the once() wrapper for a once listener),
   * or undefined when it is no longer registered.
   * @param {string} event
   * @param {Function} listener
   */
  _rawListener(event, listener) {
    return /** @type {Function | undefined} */ (this.rawListeners(event).find((l) => l === listener || /** @type {any} */ (l).listener === listener));
  }

  /**
   * Adds `listener` for `event` (`'notification'`, or a notification's method such as
   * `'app.event'`) as a consumer: the notifications it gets are not queued for the pull API
   * (`nextNotification()`, `events()`, ...), and those already queued are handed to it first
   * (taken off the queue, oldest first, in a microtask). Remove it with `off()`.
   * @param {string} event
   * @param {(...args: any[]) => void} listener
   * @returns {this}
   */
  consume(event, listener) {
    if (typeof event !== 'string' || (event !== 'notification' && RESERVED_EVENTS.has(event))) {
      throw new TypeError(`consume(): ${String(event)} is not a notification event ('notification' or a method such as 'app.event')`);
    }
    if (typeof listener !== 'function') throw new TypeError('consume(): the listener must be a function');
    let consumers = this._consumers.get(event);
    if (!consumers) this._consumers.set(event, (consumers = new Set()));
    consumers.add(listener);
    return this.on(event, listener);
  }

  _onClose() {
    if (this._closed && this._closeError) return;
    this._closed = true;
    let err;
    if (this._closedByUs) {
      err = new ConnectionClosed(`the connection to sharebroker at ${this.socketPath} was closed by the client`, { path: this.socketPath });
    } else {
      err = this._closedError(this._socketError);
      this._closeError = err;
    }
    for (const p of [...this._pending.values()]) p.reject(err);
    this._pending.clear();
    this._abandoned.clear();
    this._order.clear();
    for (const w of this._out.splice(0)) w.reject(err);
    for (const w of this._replyWaiters.splice(0)) w.fail(err);
    for (const w of this._notificationWaiters.splice(0)) w.fail(err);
    this.emit('close', this._closedByUs ? undefined : err);
  }

  /**
   * The error for a closed connection, with the broker's reason when the last thing it sent was
   * an error without an id that answered no request.
   * @param {unknown} [cause]
   * @returns {ConnectionClosed}
   */
  _closedError(cause) {
    if (this._closeError) return this._closeError;
    const path = this.socketPath;
    const last = this._closeReason;
    if (isObject(last) && isObject(last.error)) {
      const reason = RpcError.from(last.error);
      return new ConnectionClosed(`sharebroker at ${path} closed the connection: ${reason.message} (${reason.code})`,
        { path, reason, cause });
    }
    if (cause instanceof ProtocolError) {
      return new ConnectionClosed(`dropped the connection to sharebroker at ${path}: ${cause.message}`, { path, cause });
    }
    if (this._closedByUs) return new ConnectionClosed(`the connection to sharebroker at ${path} was closed by the client`, { path, cause });
    if (!this._socket) return new ConnectionClosed(`not connected to sharebroker at ${path}`, { path });
    const why = cause instanceof Error ? `: ${cause.message}` : '';
    return new ConnectionClosed(`sharebroker at ${path} closed the connection${why}`, { path, cause });
  }

  // -- JSON-RPC ----------------------------------------------------------------------------------

  /**
   * Calls any method and resolves with its `result`; rejects with an RpcError for an error
   * answer (the broker's -32700 / -32600 without an id included, for a request it cannot parse,
   * e.g. a string holding half a surrogate pair or values nested over 256 levels), a TimeoutError
   * when no answer comes within the timeout (a late answer is dropped), ConnectionClosed when
   * the connection ends first. `params` `undefined` sends no params.
   *
   * Once `hello` has told the broker's `maxMessage`, a request larger than that is refused here
   * with RpcError -32600 (nothing is sent): the broker would close the connection for it.
   * @param {string} method
   * @param {object} [params]
   * @param {CallOptions} [options]
   * @returns {Promise<any>}
   */
  call(method, params, options = {}) {
    const id = ++this._nextId;
    /** @type {Record<string, unknown>} */
    const request = { jsonrpc: '2.0', id, method };
    if (params !== undefined) request.params = params;
    let body;
    try {
      body = this._body(request, method);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      const p = new Pending(this, method, [id], resolve, reject, options);
      if (p.done) return;
      this._pending.set(id, p);
      this._send(encode(body, this.framing), p).catch((e) => p.reject(e));
    });
  }

  /**
   * Writes a frame whose request gets an answer, keeping its place in the order of answers
   * (`entry`: its Pending, or a RawEntry); without an entry, a frame that gets none.
   * @param {Buffer} frame
   * @param {Pending | RawEntry | null} entry
   * @returns {Promise<void>}
   */
  _send(frame, entry) {
    if (!entry) return this._write(frame);
    this._order.push(entry);
    this._flowControl(); // its answer may be behind notifications nothing has taken yet
    return this._write(frame).catch((e) => {
      this._order.remove(entry); // never sent
      throw e;
    });
  }

  /**
   * Sends a notification (no id): the broker runs it and never answers, even when it fails.
   * Resolves once the message is written to the socket. One the broker could not parse (half a
   * surrogate pair, values nested over 256 levels) is refused here with RpcError -32700 and not
   * sent: the broker's error for it would carry no id and could not be told from a call's.
   * @param {string} method
   * @param {object} [params]
   * @returns {Promise<void>}
   */
  notify(method, params) {
    /** @type {Record<string, unknown>} */
    const message = { jsonrpc: '2.0', method };
    if (params !== undefined) message.params = params;
    try {
      return this._write(encode(this._body(message, method, true), this.framing));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Sends several calls as one JSON-RPC batch. Entries are `[method, params]` or
   * `{method, params, notification}` (a notification member gets no answer). Resolves with one
   * entry per call, in order: its result, its RpcError (returned, not thrown), or `undefined`
   * for a notification. A batch of only notifications resolves once written. The whole batch
   * rejects with an RpcError when the broker answers it with one error without an id (over its
   * member limit, 10,000 by default: -32600; one it cannot parse: -32700).
   * @param {BatchEntry[]} calls
   * @param {CallOptions} [options]
   * @returns {Promise<any[]>}
   */
  batch(calls, options = {}) {
    if (!Array.isArray(calls) || calls.length === 0) {
      return Promise.reject(new TypeError('a batch needs at least one call (an empty batch is an invalid request)'));
    }
    /** @type {Record<string, unknown>[]} */
    const requests = [];
    /** @type {(number | null)[]} */
    const ids = [];
    /** @type {string[]} */
    const methods = [];
    for (const c of calls) {
      const { method, params, notification } = Array.isArray(c)
        ? { method: c[0], params: c[1], notification: false }
        : { method: c.method, params: c.params, notification: !!c.notification };
      if (typeof method !== 'string') return Promise.reject(new TypeError('each batch entry needs a method name'));
      /** @type {Record<string, unknown>} */
      const req = { jsonrpc: '2.0', method };
      if (params !== undefined) req.params = params;
      if (notification) ids.push(null);
      else {
        const id = ++this._nextId;
        req.id = id;
        ids.push(id);
      }
      methods.push(method);
      requests.push(req);
    }
    const answered = /** @type {number[]} */ (ids.filter((x) => x !== null));
    let frame;
    try {
      frame = encode(this._body(requests, 'batch', answered.length === 0), this.framing);
    } catch (e) {
      return Promise.reject(e);
    }
    if (answered.length === 0) {
      // No answer, unless it is over the broker's member limit: then one error without an id.
      const entry = requests.length > MAX_BATCH ? new RawEntry(true) : null;
      return this._send(frame, entry).then(() => calls.map(() => undefined));
    }
    return new Promise((resolve, reject) => {
      const p = new Pending(this, 'batch', answered, (reply) => {
        /** @type {Map<number, unknown>} */
        const byId = new Map();
        for (const r of /** @type {unknown[]} */ (reply)) if (isObject(r) && typeof r.id === 'number') byId.set(r.id, r);
        resolve(ids.map((id, i) => {
          if (id === null) return undefined;
          const r = byId.get(id);
          if (r === undefined) return new RpcError(ErrorCode.INTERNAL_ERROR, `the batch's reply has no answer for id ${id}`, undefined, methods[i]);
          try {
            const result = resultOrError(r, methods[i]);
            if (methods[i] === 'hello' && isObject(result)) this.helloResult = result;
            return result;
          } catch (e) {
            return e;
          }
        }));
      }, reject, options);
      if (p.done) return;
      p.batch = { settle: (/** @type {unknown[]} */ reply) => p.resolve(reply), reject: (/** @type {Error} */ e) => p.reject(e) };
      for (const id of answered) this._pending.set(id, p);
      this._send(frame, p).catch((e) => p.reject(e));
    });
  }

  /**
   * Serializes a request, refusing one over the broker's `maxMessage` (known after `hello`), and
   * with `unanswered` (a notification) one the broker could not parse.
   * @param {unknown} value
   * @param {string} method
   * @param {boolean} [unanswered]
   */
  _body(value, method, unanswered = false) {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`cannot send ${typeof value} as JSON`);
    if (unanswered) {
      const why = parseProblem(text);
      if (why !== null) {
        throw new RpcError(ErrorCode.PARSE_ERROR,
          `not sent: the broker could not parse this notification (${why}), and its error would answer no call`, undefined, method);
      }
    }
    const body = Buffer.from(text, 'utf8');
    const max = this.maxMessage;
    if (max !== undefined && body.length > max) {
      throw new RpcError(ErrorCode.INVALID_REQUEST,
        `the request is ${body.length} bytes, over the broker's limit of ${max} bytes (not sent)`, { size: body.length, maxMessage: max }, method);
    }
    return body;
  }

  /**
   * Sends one message as is: a JSON value (object, array for a batch, ...) or a JSON text
   * (`string` / `Buffer`, sent unchanged even when it is not valid JSON), framed with the
   * connection's framing. Its answer is read with `receive()`. Resolves once written.
   *
   * The client works out whether the broker will answer it (everything but a valid
   * notification, a batch of only those, or a blank line gets an answer), so that an error
   * without an id answering it is not taken for a call's. Use ids that are not numbers (the
   * client's calls use numbers counting up from 1).
   * @param {unknown} message
   * @returns {Promise<void>}
   */
  sendRaw(message) {
    let frame;
    try {
      frame = encode(message, this.framing);
    } catch (e) {
      return Promise.reject(e);
    }
    return this._send(frame, answerExpected(message, this.framing) ? new RawEntry(false) : null);
  }

  /**
   * The next message that no call waits for (the answer to a raw request, a batch's array, an
   * error without an id), oldest first.
   * @param {CallOptions} [options]
   * @returns {Promise<any>}
   */
  receive(options = {}) {
    const r = this._replies.shift();
    if (r !== undefined) return Promise.resolve(r);
    if (this.closed) return Promise.reject(this._closedError());
    return new Promise((resolve, reject) => {
      const w = new Waiter(resolve, reject, () => true, limitOrDefault(options.timeout, this.timeout),
        () => removeFrom(this._replyWaiters, w), options.signal,
        () => new TimeoutError(`no message from sharebroker at ${this.socketPath} in time`));
      this._replyWaiters.push(w);
      this._flowControl();
    });
  }

  /**
   * `sendRaw` then `receive`: the broker's raw answer (an object, or an array for a batch).
   * @param {unknown} message
   * @param {CallOptions} [options]
   */
  async callRaw(message, options = {}) {
    const answer = this.receive(options);
    try {
      await this.sendRaw(message);
    } catch (e) {
      answer.catch(() => {});
      throw e;
    }
    return answer;
  }

  // -- notifications -----------------------------------------------------------------------------

  /**
   * The next queued notification (of `method` when given; others stay queued), waiting up to
   * `timeout` ms. Unlike a call's timeout, `0` here means "do not wait": only what is already
   * queued; `undefined`, `null`, `Infinity` or more than MAX_TIMEOUT: as long as it takes.
   * Resolves `null` on timeout; rejects with ConnectionClosed once the connection has closed and
   * none is queued. Notifications a `consume()` listener takes never come here.
   *
   * Waiting for `method: 'app.event'`, an `app.subscriptionEnded` (another connection of the app
   * subscribed and took its events over; the events that came before it are given first)
   * rejects with SubscriptionEnded, the broker's reason, and its params go to
   * `subscriptionEnded`: no more events would come. The connection stays open.
   * @param {{method?: string, timeout?: number | null, signal?: AbortSignal}} [options]
   * @returns {Promise<Notification | null>}
   */
  nextNotification(options = {}) {
    this._pulled = true;
    const { method } = options;
    const events = method === 'app.event';
    const accepts = (/** @type {Notification} */ n) => method === undefined || n.method === method ||
      (events && n.method === SUBSCRIPTION_ENDED);
    /** @param {Notification} n */
    const ended = (n) => {
      this.subscriptionEnded = /** @type {any} */ (isObject(n.params) ? n.params : {});
      return subscriptionEndedError(n);
    };
    const i = this._notifications.findIndex(accepts);
    if (i >= 0) {
      const n = this._notifications.splice(i, 1)[0];
      this._flowControl();
      return events && n.method === SUBSCRIPTION_ENDED ? Promise.reject(ended(n)) : Promise.resolve(n);
    }
    if (this.closed) return Promise.reject(this._closedError());
    if (options.timeout === 0) return Promise.resolve(null);
    return new Promise((resolveWait, reject) => {
      const resolve = (/** @type {Notification | null} */ n) => {
        if (events && n !== null && n.method === SUBSCRIPTION_ENDED) reject(ended(n));
        else resolveWait(n);
      };
      const w = new Waiter(resolve, reject, accepts, limitOf(options.timeout),
        () => removeFrom(this._notificationWaiters, w), options.signal, () => null);
      this._notificationWaiters.push(w);
      this._flowControl();
    });
  }

  /**
   * The params of the next `app.event` (`{id, kind, url | webpageURL, via, ...}`), or `null`
   * when none comes within `timeout` ms. Rejects with SubscriptionEnded once another connection
   * of the app took its events over (see `nextNotification()`).
   * @param {{timeout?: number | null, signal?: AbortSignal}} [options]
   * @returns {Promise<Record<string, any> | null>}
   */
  async nextEvent(options = {}) {
    const n = await this.nextNotification({ ...options, method: 'app.event' });
    return n === null ? null : n.params;
  }

  /**
   * Iterates over notifications (of `method` when given) as they arrive. Ends when the
   * connection closes (see `closeError` for why), when `timeout` ms pass without one (`0`: once
   * what is queued has been read; `undefined` / `null` / `Infinity`: never), or when `signal`
   * aborts; with `method: 'app.event'`, also when another connection of the app took its events
   * over (see `subscriptionEnded` for why; the connection stays open).
   * @param {{method?: string, timeout?: number | null, signal?: AbortSignal}} [options]
   * @returns {AsyncGenerator<Notification, void, undefined>}
   */
  async *notifications(options = {}) {
    for (;;) {
      if (options.signal?.aborted) return;
      let n;
      try {
        n = await this.nextNotification(options);
      } catch (e) {
        if (e instanceof ConnectionClosed || e instanceof SubscriptionEnded ||
          (options.signal?.aborted && e === options.signal.reason)) return;
        throw e;
      }
      if (n === null) return;
      yield n;
    }
  }

  /**
   * Iterates over `app.event` notifications' params: `for await (const ev of app.events()) {...}`.
   * Ends as `notifications()` does: when the connection closes, after `timeout` ms without an
   * event, when `signal` aborts, and when another connection of the app takes the events over
   * (`subscriptionEnded` says why).
   *
   * With `unsubscribe: true` the loop owns the subscription: when it ends otherwise than by the
   * connection closing or a takeover — `break`, `return` or a throw in its body, the idle
   * `timeout`, `signal` — the client sends `app.unsubscribe` (and the loop's end waits for its
   * answer; a failure, e.g. the connection closing meanwhile, is ignored), so that new events
   * wait for the app's next subscriber instead of coming to a connection nothing reads. Without
   * it (the default) ending the loop leaves the subscription as it is.
   * @param {{timeout?: number | null, signal?: AbortSignal, unsubscribe?: boolean}} [options]
   * @returns {AsyncGenerator<Record<string, any>, void, undefined>}
   */
  async *events(options = {}) {
    const { unsubscribe, ...wait } = options;
    let over = false; // the connection closed, or another subscriber took over: nothing to unsubscribe
    try {
      for (;;) {
        if (wait.signal?.aborted) return;
        let n;
        try {
          n = await this.nextNotification({ ...wait, method: 'app.event' });
        } catch (e) {
          if (e instanceof ConnectionClosed || e instanceof SubscriptionEnded) {
            over = true;
            return;
          }
          if (wait.signal?.aborted && e === wait.signal.reason) return;
          throw e;
        }
        if (n === null) return;
        yield n.params;
      }
    } finally {
      if (unsubscribe && !over && !this.closed && !this._closedByUs) {
        try {
          await this.appUnsubscribe();
        } catch {
          // (the connection went meanwhile: the subscription went with it)
        }
      }
    }
  }

  /** `for await (const n of client)`: every notification, as `notifications()`. */
  [Symbol.asyncIterator]() {
    return this.notifications();
  }

  // -- the broker's methods ------------------------------------------------------------------------

  /**
   * Starts the session. `role` is `'app'`, `'extension'` or `'tool'`; `app` and `extension` name
   * a registered `bundleID` (default `$SHAREBROKER_BUNDLE_ID`, which the broker sets for apps it
   * launches) and give its `token` when the manifest sets one.
   * Resolves `{protocol, broker: {name, version}, session, role, maxMessage, bundleID?}`.
   * @param {'app' | 'extension' | 'tool'} role
   * @param {{bundleID?: string, token?: string} & CallOptions | string} [options] (or the bundle ID)
   */
  hello(role, options = {}) {
    const o = typeof options === 'string' ? { bundleID: options } : options;
    /** @type {Record<string, unknown>} */
    const params = { role };
    let bundleID = o.bundleID;
    if (bundleID === undefined && (role === 'app' || role === 'extension')) bundleID = process.env.SHAREBROKER_BUNDLE_ID || undefined;
    if (bundleID !== undefined) params.bundleID = bundleID;
    if (o.token !== undefined) params.token = o.token;
    return this.call('hello', params, o);
  }

  /** The broker's OpenRPC document (allowed before `hello`). @param {CallOptions} [options] */
  discover(options) {
    return this.call('rpc.discover', {}, options);
  }

  /**
   * `{version, protocol, connections, apps, subscribers, pendingEvents, pendingShares,
   * uptimeSeconds, ...}` (allowed before `hello`); `verbose: true` adds `clients`.
   * @param {{verbose?: boolean} & CallOptions} [options]
   */
  brokerStatus(options = {}) {
    return this.call('broker.status', options.verbose ? { verbose: true } : {}, options);
  }

  /** `{apps, errors, warnings, conflicts, ...}`: the registered apps (tokens never shown). @param {CallOptions} [options] */
  appsList(options) {
    return this.call('apps.list', {}, options);
  }

  /** Re-reads `STATE/apps/*.json` (as SIGHUP does) and answers as `appsList`. @param {CallOptions} [options] */
  appsReload(options) {
    return this.call('apps.reload', {}, options);
  }

  /**
   * Opens a URL: a durable event is queued for the app that handles it. Resolves
   * `{app, via, eventID, delivered, queued, kind}`; rejects -32004 when nothing opens it and no
   * `fallback` was given, -32602 for an invalid URL.
   * @param {string | URL} url
   * @param {{fallback?: string | URL} & CallOptions} [options]
   */
  urlOpen(url, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { url: String(url) };
    if (options.fallback !== undefined) params.fallback = String(options.fallback);
    return this.call('url.open', params, options);
  }

  /**
   * `{canOpen, app?, via?}`: the routing decision without queuing anything; with `fallback`,
   * whether `urlOpen` would open the URL or its fallback (`via: "fallback"`).
   * @param {string | URL} url
   * @param {{fallback?: string | URL} & CallOptions} [options]
   */
  urlCanOpen(url, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { url: String(url) };
    if (options.fallback !== undefined) params.fallback = String(options.fallback);
    return this.call('url.canOpen', params, options);
  }

  /**
   * `{url, fallback?, steps, decision, text}`: the routing decision, step by step.
   * @param {string | URL} url
   * @param {{fallback?: string | URL} & CallOptions} [options]
   */
  urlExplain(url, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { url: String(url) };
    if (options.fallback !== undefined) params.fallback = String(options.fallback);
    return this.call('url.explain', params, options);
  }

  /**
   * Subscribes as the app (role `app`): resolves `{pending}`; then `app.event` notifications
   * arrive, the pending ones first, oldest first. A new subscription (from any connection of the
   * app) takes over: the old connection is sent `app.subscriptionEnded {app, reason}` (this
   * client asks for it: `takeoverNotice: true`; emitted as
   * `'app.subscriptionEnded'`; its waits for an `app.event` reject with SubscriptionEnded, its
   * event iterators end). A successful subscribe drops the `app.subscriptionEnded` notifications
   * still queued from before its answer (they ended the subscription it replaces).
   * @param {CallOptions} [options]
   */
  appSubscribe(options) {
    return this.call('app.subscribe', { takeoverNotice: true }, options);
  }

  /**
   * Stops the app's events on this connection, which stays open (role `app`): resolves
   * `{unsubscribed}`, false when this connection was not the app's subscriber (never subscribed,
   * already unsubscribed, or taken over). The app's events, unacked ones included, wait for its
   * next subscriber (`urlOpen()` answers `delivered: false, queued: true`; an app with a `launch`
   * command is launched for them). Events the broker wrote before it read the request may still
   * arrive (they stay queued); unacked, they come again to the next subscriber.
   * @param {CallOptions} [options]
   */
  appUnsubscribe(options) {
    return this.call('app.unsubscribe', {}, options);
  }

  /**
   * Acknowledges events by id (one or several): `{acked: N}`, durable before the answer. Ids the
   * caller does not hold count 0; never an error.
   * @param {string | string[]} ids
   * @param {CallOptions} [options]
   */
  appAck(ids, options) {
    return this.call('app.ack', { ids: typeof ids === 'string' ? [ids] : [...ids] }, options);
  }

  /**
   * `{targets: [{extension, app, name}]}`: the share and action extensions whose activation rule
   * accepts the items as a whole.
   * @param {Item | Item[]} items
   * @param {CallOptions} [options]
   */
  shareTargets(items, options) {
    return this.call('share.targets', { items: itemList(items) }, options);
  }

  /**
   * Shares items: role `extension` sends as itself, role `tool` as the share sheet (the broker
   * picks the one extension that accepts, or the named `extension`; several and none named is
   * -32003 with `data.candidates`). `group`: one of the extension's app groups (default its
   * first). `open: true` also opens `SCHEME://open-from-share?share=SHAREID` on the containing
   * app; `open: 'URL'` opens that URL. Durable before the answer:
   * `{shareID, extension, app, group, eventID?}`.
   * @param {Item | Item[]} items
   * @param {{extension?: string, group?: string, open?: boolean | string} & CallOptions} [options]
   */
  shareSend(items, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { items: itemList(items) };
    if (options.extension !== undefined) params.extension = options.extension;
    if (options.group !== undefined) params.group = options.group;
    if (options.open !== undefined && options.open !== false) params.open = options.open;
    return this.call('share.send', params, options);
  }

  /**
   * `{shares: [{shareID, extension, app, group, created, items}]}`: the pending shares of the
   * caller's groups (or of `group`), oldest first.
   * @param {string | ({group?: string} & CallOptions)} [options] the group, or options
   */
  shareList(options = {}) {
    const o = typeof options === 'string' ? { group: options } : options;
    return this.call('share.list', o.group !== undefined ? { group: o.group } : {}, o);
  }

  /**
   * One share; its file items carry the absolute `path` of the copy inside the group directory
   * (plus `name`, `type`, `size`). -32002 for an unknown id.
   * @param {string} shareID
   * @param {CallOptions} [options]
   */
  shareGet(shareID, options) {
    return this.call('share.get', { shareID }, options);
  }

  /**
   * Bytes of a share's file item, for an app that cannot open its `path` (a broker of another
   * user keeps its group directory to itself): `{data, offset, size, eof}`, `data` base64 (at
   * most `length` bytes from `offset`; the broker's default 1 MiB, at most 4 MiB). Read on until `eof`.
   * @param {string} shareID
   * @param {number} item the item's index
   * @param {{offset?: number, length?: number} & CallOptions} [options]
   */
  shareRead(shareID, item, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { shareID, item, offset: options.offset ?? 0 };
    if (options.length !== undefined) params.length = options.length;
    return this.call('share.read', params, options);
  }

  /** Deletes the share's record and files: `{completed: true}`. @param {string} shareID @param {CallOptions} [options] */
  shareComplete(shareID, options) {
    return this.call('share.complete', { shareID }, options);
  }

  /** `{exists, value, version}` (`value` `null` when absent). @param {string} group @param {string} key @param {CallOptions} [options] */
  defaultsGet(group, key, options) {
    return this.call('defaults.get', { group, key }, options);
  }

  /**
   * Sets a key to any JSON value: `{version}`, the group's new version. With `ifVersion` it is a
   * compare-and-set (-32006 with `data.version` when the group moved on).
   * @param {string} group
   * @param {string} key
   * @param {unknown} value
   * @param {{ifVersion?: number} & CallOptions} [options]
   */
  defaultsSet(group, key, value, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { group, key, value: value === undefined ? null : value };
    if (options.ifVersion !== undefined) params.ifVersion = options.ifVersion;
    return this.call('defaults.set', params, options);
  }

  /**
   * Removes a key: `{removed, version}` (`removed: false`: there was no such key; nothing changed).
   * @param {string} group
   * @param {string} key
   * @param {{ifVersion?: number} & CallOptions} [options]
   */
  defaultsRemove(group, key, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { group, key };
    if (options.ifVersion !== undefined) params.ifVersion = options.ifVersion;
    return this.call('defaults.remove', params, options);
  }

  /** `{values: {key: value}, version}`: the group's whole suite. @param {string} group @param {CallOptions} [options] */
  defaultsList(group, options) {
    return this.call('defaults.list', { group }, options);
  }

  /**
   * Watches a group (only `keys`, when given): `{watching: true, version, keys?}`; then
   * `defaults.changed {group, key, value?, removed?, version}` notifications arrive, until
   * `defaults.watchEnded {group, reason}`. Watching again replaces the key filter.
   * @param {string} group
   * @param {{keys?: string | string[]} & CallOptions} [options]
   */
  defaultsWatch(group, options = {}) {
    /** @type {Record<string, unknown>} */
    const params = { group };
    if (options.keys !== undefined) params.keys = typeof options.keys === 'string' ? [options.keys] : [...options.keys];
    return this.call('defaults.watch', params, options);
  }
}

if (Symbol.asyncDispose) {
  /** `await using client = await connect(...)` closes it at the end of the block. */
  Object.defineProperty(Client.prototype, Symbol.asyncDispose, {
    value: function () { return this.close(); },
    writable: true,
    configurable: true,
  });
}

/**
 * @template T
 * @param {T[]} list
 * @param {T} x
 */
function removeFrom(list, x) {
  const i = list.indexOf(x);
  if (i >= 0) list.splice(i, 1);
}

/** @param {Item | Item[]} items */
function itemList(items) {
  return Array.isArray(items) ? items : [items];
}

/**
 * @param {number | null | undefined} t
 * @param {number | null} dflt
 */
function limitOrDefault(t, dflt) {
  return limitOf(t === undefined ? dflt : t);
}

/**
 * Is `value` a notification the broker runs without answering (a valid request object without
 * an id)?
 * @param {unknown} value
 */
function isNotificationRequest(value) {
  if (!isObject(value) || 'id' in value) return false;
  if (value.jsonrpc !== '2.0' || typeof value.method !== 'string') return false;
  const p = value.params;
  return p === undefined || p === null || typeof p === 'object';
}

/**
 * Will the broker answer this raw message? Everything gets an answer but a valid notification,
 * a batch of only those (within the broker's default member limit) and, with line framing, a
 * blank line; a text the broker cannot parse gets -32700.
 * @param {unknown} message what `sendRaw()` was given
 * @param {string} framing
 */
function answerExpected(message, framing) {
  let text;
  if (typeof message === 'string') {
    text = message;
  } else if (message instanceof Uint8Array) {
    const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
    if (!isUtf8(bytes)) return true;
    text = bytes.toString('utf8');
  } else {
    text = JSON.stringify(message);
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // the broker skips a byte order mark
  if (!/[^ \t\r\n]/.test(text)) return framing === 'header'; // a blank line is skipped; an empty body is not JSON
  if (parseProblem(text) !== null) return true;
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return true;
  }
  if (Array.isArray(value)) return value.length === 0 || value.length > MAX_BATCH || !value.every(isNotificationRequest);
  return !isNotificationRequest(value);
}

/** A request in the order of answers that is not a call: a raw message, or a notification-only batch the broker will refuse. */
class RawEntry {
  /** @param {boolean} notice its answer is a notice ('brokerError'), not a reply for receive() */
  constructor(notice) {
    this.notice = notice;
  }
}

/**
 * The requests written and not yet answered, oldest first: a queue with cheap removal at the
 * front (where answers take them off).
 */
class OrderQueue {
  constructor() {
    /** @type {(Pending | RawEntry | null)[]} */
    this._items = [];
    this._head = 0;
  }

  /** @param {Pending | RawEntry} entry */
  push(entry) {
    this._items.push(entry);
  }

  /** Takes the oldest off. @returns {Pending | RawEntry | undefined} */
  shift() {
    while (this._head < this._items.length) {
      const e = this._items[this._head];
      this._items[this._head++] = null;
      if (e) {
        this._compact();
        return e;
      }
    }
    this._compact();
    return undefined;
  }

  /**
   * `entry` has its answer: it, and whatever is older (answered before it, as the broker
   * answers in order), leaves the queue.
   * @param {Pending | RawEntry} entry
   */
  answered(entry) {
    const i = this._items.indexOf(entry, this._head);
    if (i < 0) return;
    for (let j = this._head; j <= i; j++) this._items[j] = null;
    this._head = i + 1;
    this._compact();
  }

  /** An answer no call takes arrived: the oldest raw request's. */
  answeredRaw() {
    for (let j = this._head; j < this._items.length; j++) {
      if (this._items[j] instanceof RawEntry) {
        this.answered(/** @type {RawEntry} */ (this._items[j]));
        return;
      }
    }
  }

  /** Takes `entry` out (it was never sent). @param {Pending | RawEntry} entry */
  remove(entry) {
    const i = this._items.indexOf(entry, this._head);
    if (i >= 0) this._items[i] = null;
    this._compact();
  }

  clear() {
    this._items = [];
    this._head = 0;
  }

  /** Does no request wait for its answer? */
  get empty() {
    return this._head >= this._items.length;
  }

  _compact() {
    while (this._head < this._items.length && this._items[this._head] === null) this._head++;
    if (this._head === this._items.length) this.clear();
    else if (this._head > 1024 && this._head * 2 > this._items.length) {
      this._items = this._items.slice(this._head);
      this._head = 0;
    }
  }
}

/**
 * A listener just added, and the queued notifications it is still to get (`null` for a consumer:
 * those still queued when it runs).
 * @typedef {{event: string, listener: Function, items: Notification[] | null}} Replay
 */

/** A call (or a batch) waiting for its answer. */
class Pending {
  /**
   * @param {Client} client
   * @param {string} method
   * @param {number[]} ids
   * @param {(v: any) => void} resolve
   * @param {(e: Error) => void} reject
   * @param {CallOptions} options
   */
  constructor(client, method, ids, resolve, reject, options) {
    this.method = method;
    this.ids = ids;
    this.done = false;
    /** Timed out or aborted: its answer, when it comes, is dropped. */
    this.abandoned = false;
    /** @type {{settle: (reply: unknown[]) => void, reject: (e: Error) => void} | undefined} */
    this.batch = undefined;
    const limit = limitOrDefault(options.timeout, client.timeout);
    const signal = options.signal;
    const finish = () => {
      this.done = true;
      clearTimeout(this.timer);
      signal?.removeEventListener('abort', onAbort);
      for (const id of ids) if (client._pending.get(id) === this) client._pending.delete(id);
    };
    const abandon = () => {
      this.abandoned = true;
      for (const id of ids) client._abandoned.set(id, this);
      client._limitAbandoned();
    };
    this.resolve = (/** @type {any} */ v) => {
      if (this.done) return;
      finish();
      resolve(v);
    };
    this.reject = (/** @type {Error} */ e) => {
      if (this.done) return;
      finish();
      reject(e);
    };
    const onAbort = () => {
      if (this.done) return;
      abandon();
      this.reject(signal?.reason ?? new Error('aborted'));
    };
    /** @type {NodeJS.Timeout | undefined} */
    this.timer = undefined;
    if (signal?.aborted) {
      this.done = true;
      reject(signal.reason);
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    if (client.closed || client._closedByUs) {
      this.reject(client._closedError());
      return;
    }
    if (limit !== null) {
      this.timer = setTimeout(() => {
        if (this.done) return;
        abandon();
        this.reject(new TimeoutError(`${method}: no answer from sharebroker at ${client.socketPath} within ${limit} ms`));
      }, limit);
    }
  }
}

/**
 * Someone waiting for a message (a notification, a raw reply).
 * @template T
 */
class Waiter {
  /**
   * @param {(v: T) => void} resolve
   * @param {(e: unknown) => void} reject
   * @param {(n: any) => boolean} accepts
   * @param {number | null} limit
   * @param {() => void} remove takes the waiter off its list
   * @param {AbortSignal | undefined} signal
   * @param {() => T | Error} onTimeout resolves with the value, or rejects with the error
   */
  constructor(resolve, reject, accepts, limit, remove, signal, onTimeout) {
    this.accepts = accepts;
    let done = false;
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const onAbort = () => {
      if (done) return;
      this.fail(signal?.reason);
      remove();
    };
    const finish = () => {
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    this.settle = (/** @type {T} */ v) => {
      if (done) return;
      finish();
      resolve(v);
    };
    this.fail = (/** @type {unknown} */ e) => {
      if (done) return;
      finish();
      reject(e);
    };
    if (signal?.aborted) {
      queueMicrotask(onAbort);
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    if (limit !== null) {
      timer = setTimeout(() => {
        if (done) return;
        remove();
        const v = onTimeout();
        if (v instanceof Error) this.fail(v);
        else this.settle(v);
      }, limit);
    }
  }
}

/**
 * Connects to the broker: `await connect({socket, framing, timeout, role, bundleID, token})`.
 * Says `hello` when `role` is given.
 * @param {ConnectOptions} [options]
 * @returns {Promise<Client>}
 */
export function connect(options = {}) {
  return new Client(options).connect();
}
