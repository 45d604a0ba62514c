// Errors raised by the sharebroker client, and the contract's error codes.

/**
 * The JSON-RPC 2.0 and sharebroker error codes, by name.
 * @type {Readonly<Record<string, number>>}
 */
export const ErrorCode = Object.freeze({
  /** The frame was not valid JSON (or not valid UTF-8). */
  PARSE_ERROR: -32700,
  /** Not a valid request object; also a message over the broker's size limit. */
  INVALID_REQUEST: -32600,
  /** Unknown method (always, even before `hello`). */
  METHOD_NOT_FOUND: -32601,
  /** Bad params; the message names the field. */
  INVALID_PARAMS: -32602,
  /** Internal broker error. */
  INTERNAL_ERROR: -32603,
  /** No `hello` yet, unknown bundle ID, wrong role, not entitled to the group, bad token. */
  UNAUTHORIZED: -32001,
  /** Not found: share, app, extension, event, key. */
  NOT_FOUND: -32002,
  /** No extension's activation rule accepts the items (`data.candidates` when ambiguous). */
  NOT_ACCEPTED: -32003,
  /** Nothing can open the URL and no fallback was given. */
  NO_HANDLER: -32004,
  /** Storage failure (disk full, permission): nothing was stored. */
  STORAGE_FAILURE: -32005,
  /** `defaults.set`/`defaults.remove` with an `ifVersion` that is not current (`data.version`). */
  VERSION_CONFLICT: -32006,
  /** Too many of the connection's replies wait unread (over `--max-output`); not run. */
  TOO_MANY_REQUESTS: -32007,
});

export const PARSE_ERROR = ErrorCode.PARSE_ERROR;
export const INVALID_REQUEST = ErrorCode.INVALID_REQUEST;
export const METHOD_NOT_FOUND = ErrorCode.METHOD_NOT_FOUND;
export const INVALID_PARAMS = ErrorCode.INVALID_PARAMS;
export const INTERNAL_ERROR = ErrorCode.INTERNAL_ERROR;
export const UNAUTHORIZED = ErrorCode.UNAUTHORIZED;
export const NOT_FOUND = ErrorCode.NOT_FOUND;
export const NOT_ACCEPTED = ErrorCode.NOT_ACCEPTED;
export const NO_HANDLER = ErrorCode.NO_HANDLER;
export const STORAGE_FAILURE = ErrorCode.STORAGE_FAILURE;
export const VERSION_CONFLICT = ErrorCode.VERSION_CONFLICT;
export const TOO_MANY_REQUESTS = ErrorCode.TOO_MANY_REQUESTS;

/** Short names of the codes, for messages. @type {Readonly<Record<number, string>>} */
export const ERROR_NAMES = Object.freeze({
  [PARSE_ERROR]: 'parse error',
  [INVALID_REQUEST]: 'invalid request',
  [METHOD_NOT_FOUND]: 'method not found',
  [INVALID_PARAMS]: 'invalid params',
  [INTERNAL_ERROR]: 'internal error',
  [UNAUTHORIZED]: 'unauthorized',
  [NOT_FOUND]: 'not found',
  [NOT_ACCEPTED]: 'not accepted',
  [NO_HANDLER]: 'no handler',
  [STORAGE_FAILURE]: 'storage failure',
  [VERSION_CONFLICT]: 'version conflict',
  [TOO_MANY_REQUESTS]: 'too many unread replies',
});

/**
 * A JSON-RPC error object answered by the broker (or, for a few, refused by the client before
 * sending: see `Client.call`).
 */
export class RpcError extends Error {
  /**
   * @param {number} code the JSON-RPC error code (compare with `ErrorCode` / the constants)
   * @param {string} message the broker's message, which names the cause
   * @param {unknown} [data] the error's optional `data` member (`undefined` when absent)
   * @param {string} [method] the method of the request that failed, when known
   */
  constructor(code, message, data, method) {
    const name = ERROR_NAMES[code];
    super(`${method ? method + ': ' : ''}${message} (${code}${name ? ', ' + name : ''})`);
    // The stack's first line says method, message and code (formatted now, while `message` says
    // all that); `message` itself is then the broker's message exactly as it sent it.
    this.name = 'RpcError';
    void this.stack;
    /** The broker's message, which names the cause (field, URL, bundle ID, ...). @type {string} */
    this.message = message;
    /** @type {number} */
    this.code = code;
    /** @type {unknown} */
    this.data = data;
    /** @type {string | undefined} */
    this.method = method;
  }

  /** `RpcError: METHOD: MESSAGE (CODE, NAME)`. */
  toString() {
    const name = ERROR_NAMES[this.code];
    return `${this.name}: ${this.method ? this.method + ': ' : ''}${this.message} (${this.code}${name ? ', ' + name : ''})`;
  }

  /** The code's short name (`"not found"`), or `undefined` for a code outside the table. */
  get codeName() {
    return ERROR_NAMES[this.code];
  }

  /**
   * Builds an RpcError from a JSON-RPC `error` member, tolerating malformed ones.
   * @param {unknown} err
   * @param {string} [method]
   * @returns {RpcError}
   */
  static from(err, method) {
    if (err === null || typeof err !== 'object' || Array.isArray(err)) {
      return new RpcError(INTERNAL_ERROR, `malformed error object: ${JSON.stringify(err)}`, undefined, method);
    }
    const e = /** @type {Record<string, unknown>} */ (err);
    const code = Number.isInteger(e.code) ? /** @type {number} */ (e.code) : INTERNAL_ERROR;
    const message = typeof e.message === 'string' ? e.message : String(e.message ?? '');
    return new RpcError(code, message, 'data' in e ? e.data : undefined, method);
  }

  /** The error as a JSON-RPC error object. */
  toJSON() {
    /** @type {{code: number, message: string, data?: unknown}} */
    const o = { code: this.code, message: this.message };
    if (this.data !== undefined) o.data = this.data;
    return o;
  }
}
for (const [k, v] of Object.entries(ErrorCode)) {
  Object.defineProperty(RpcError, k, { value: v, enumerable: true });
}

/** The broker could not be reached, or the connection to it was lost. */
export class BrokerConnectionError extends Error {
  /**
   * @param {string} message
   * @param {{path?: string, cause?: unknown}} [options]
   */
  constructor(message, options = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'BrokerConnectionError';
    /** The socket path. @type {string | undefined} */
    this.path = options.path;
    const c = /** @type {any} */ (options.cause);
    /** The system error code (`ENOENT`, `ECONNREFUSED`, ...) when there was one. @type {string | undefined} */
    this.code = c && typeof c.code === 'string' ? c.code : undefined;
  }
}

/**
 * The connection closed while a call waited, or a call was made on a closed client. When the
 * broker's last message before it hung up was an error without an id (a message over its
 * size limit, a session a manifest reload ended, a connection quota), `reason` is that error and
 * its text is part of `message`.
 */
export class ConnectionClosed extends BrokerConnectionError {
  /**
   * @param {string} message
   * @param {{path?: string, cause?: unknown, reason?: RpcError}} [options]
   */
  constructor(message, options = {}) {
    super(message, options);
    this.name = 'ConnectionClosed';
    /** The broker's id-null error before it closed. @type {RpcError | undefined} */
    this.reason = options.reason;
  }
}

/**
 * The app's events went to another subscriber: another connection of the app subscribed
 * (`app.subscribe`, a second instance of the app) and took them over, and the broker said so with
 * `app.subscriptionEnded {app, reason}`. `nextEvent()` and `nextNotification({method: 'app.event'})`
 * reject with it; the event iterators end instead. Not a connection failure: the client stays
 * connected (its acks still count), and `appSubscribe()` takes the events back.
 */
export class SubscriptionEnded extends Error {
  /**
   * @param {string} reason the broker's (it names the connection that took over)
   * @param {string | undefined} app the app's bundle ID
   */
  constructor(reason, app) {
    super(`the app's events went to another subscriber: ${reason}`);
    this.name = 'SubscriptionEnded';
    /** The broker's reason. */
    this.reason = reason;
    /** The app's bundle ID. @type {string | undefined} */
    this.app = app;
  }
}

/** No answer came within the call's timeout (the call is abandoned: a late answer is dropped). */
export class TimeoutError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'TimeoutError';
    this.code = 'ETIMEDOUT';
  }
}

/** The broker sent something that is not valid framing or JSON. */
export class ProtocolError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'ProtocolError';
  }
}
