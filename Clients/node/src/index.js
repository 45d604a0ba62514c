// sharebroker: a Node.js client for the local share-and-deep-link broker (JSON-RPC 2.0 over a
// Unix domain socket). Zero dependencies. See README.md and Protocol/PROTOCOL.md.

export { Client, connect, resultOrError, MAX_TIMEOUT } from './client.js';
export {
  ErrorCode, ERROR_NAMES, RpcError, BrokerConnectionError, ConnectionClosed, TimeoutError, ProtocolError,
  SubscriptionEnded,
  PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR,
  UNAUTHORIZED, NOT_FOUND, NOT_ACCEPTED, NO_HANDLER, STORAGE_FAILURE, VERSION_CONFLICT, TOO_MANY_REQUESTS,
} from './errors.js';
export { FrameDecoder, encode, normalizeFraming, FRAMINGS, DEFAULT_MAX_FRAME } from './framing.js';
export { item, urlItem, textItem, dataItem, pathItem, decodeData } from './items.js';
export { defaultSocketPath, privateTempDirectory } from './paths.js';

/** Roles a session can take with `hello`. */
export const ROLES = Object.freeze(['app', 'extension', 'tool']);

/** This client's version. */
export const VERSION = '0.1.0';
