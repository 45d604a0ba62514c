// Framing of JSON-RPC messages on the broker's socket (pure, no I/O).
//
// Two framings exist; the broker picks one per connection from the connection's first bytes:
//   'line'   (default): one UTF-8 JSON text per line, ended by "\n".
//   'header': LSP-style "Content-Length: N\r\n\r\n" then N bytes of JSON, in both directions.

import { ProtocolError } from './errors.js';

/** @typedef {'line' | 'header'} Framing */

/** The framings, by their canonical names. */
export const FRAMINGS = Object.freeze(['line', 'header']);

const ALIASES = new Map([
  ['line', 'line'], ['newline', 'line'], ['lines', 'line'], ['ndjson', 'line'],
  ['header', 'header'], ['headers', 'header'], ['content-length', 'header'], ['lsp', 'header'],
]);

/** Largest header section accepted from the broker (as the broker itself accepts). */
export const MAX_HEADER_BYTES = 8192;

/**
 * The default largest message the client reads from the broker (64 MiB): 16 times the broker's
 * default `--max-message` (4 MiB), room for its largest replies (a 4-MiB `share.read` as base64,
 * a 16-MiB defaults suite, a long `share.list`).
 */
export const DEFAULT_MAX_FRAME = 64 * 1024 * 1024;

/**
 * The canonical name of a framing (`'line'` or `'header'`); `'newline'` and `'content-length'`
 * (the Python client's names) are accepted too. Throws a TypeError for anything else.
 * @param {string | undefined} framing
 * @returns {Framing}
 */
export function normalizeFraming(framing) {
  if (framing === undefined || framing === null) return 'line';
  const f = ALIASES.get(String(framing).toLowerCase());
  if (!f) throw new TypeError(`unknown framing ${JSON.stringify(framing)}: use 'line' or 'header'`);
  return /** @type {Framing} */ (f);
}

/**
 * Serializes one JSON value as compact UTF-8 JSON. `JSON.stringify` escapes newlines inside
 * strings, so the text never holds a raw newline.
 * @param {unknown} value
 * @returns {Buffer}
 */
export function serialize(value) {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`cannot send ${typeof value} as JSON`);
  return Buffer.from(text, 'utf8');
}

/**
 * Frames one message for the wire: a JSON value, or an already serialized JSON text (`string`,
 * `Buffer`, `Uint8Array`), sent unchanged even when it is not valid JSON.
 * @param {unknown} message
 * @param {Framing | string} [framing]
 * @returns {Buffer}
 */
export function encode(message, framing = 'line') {
  const f = normalizeFraming(framing);
  let body;
  if (typeof message === 'string') body = Buffer.from(message, 'utf8');
  else if (message instanceof Uint8Array) body = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  else body = serialize(message);
  if (f === 'header') {
    return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, 'latin1'), body]);
  }
  if (body.includes(0x0a)) throw new TypeError('a line-framed message must not contain a raw newline');
  return Buffer.concat([body, NL]);
}

const NL = Buffer.from('\n');

/** The deepest nesting of arrays and objects the broker parses (its JSONParser.maxDepth). */
export const MAX_DEPTH = 256;

/**
 * Why the broker could not parse this JSON text, for the two things a valid JSON text can hold
 * that its strict parser refuses (-32700): a `\u` escape of half a surrogate pair (what
 * `JSON.stringify` writes for a lone surrogate, e.g. `'😀'.slice(0, 1)`), and arrays / objects
 * nested deeper than MAX_DEPTH levels. `null` when neither occurs. (Not a JSON validator: text
 * that is not JSON at all is for `JSON.parse` to refuse.)
 * @param {string} text
 * @returns {string | null}
 */
export function parseProblem(text) {
  const surrogates = /\\u[dD][89a-fA-F]/.test(text);
  if (!surrogates && text.length <= MAX_DEPTH) return null;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x22) inString = false;
      else if (c === 0x5c) {
        if (text.charCodeAt(i + 1) !== 0x75) { i++; continue; } // \", \\, \n, ...
        const u = hex4(text, i + 2);
        if (u >= 0xd800 && u <= 0xdbff) {
          const lo = text.charCodeAt(i + 6) === 0x5c && text.charCodeAt(i + 7) === 0x75 ? hex4(text, i + 8) : -1;
          if (!(lo >= 0xdc00 && lo <= 0xdfff)) return `an unpaired surrogate (\\u${text.slice(i + 2, i + 6)}) in a string`;
          i += 11;
        } else if (u >= 0xdc00 && u <= 0xdfff) {
          return `an unpaired surrogate (\\u${text.slice(i + 2, i + 6)}) in a string`;
        } else {
          i += 5;
        }
      }
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_DEPTH) return `arrays and objects nested deeper than ${MAX_DEPTH} levels`;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return null;
}

/**
 * The value of four hex digits at `i`, or -1.
 * @param {string} text
 * @param {number} i
 */
function hex4(text, i) {
  const h = text.slice(i, i + 4);
  return /^[0-9a-fA-F]{4}$/.test(h) ? parseInt(h, 16) : -1;
}

/**
 * Incremental decoder. `feedFrames(chunk)` returns the bodies of the frames completed so far
 * (as Buffers); `feed(chunk)` returns them parsed. A frame may arrive split across any number of
 * chunks (a multi-byte UTF-8 character included: bytes are decoded only once a frame is whole),
 * and one chunk may hold many frames.
 *
 * `maxFrame`: the largest frame body accepted, in bytes (default DEFAULT_MAX_FRAME; `null` or
 * `Infinity`: no limit). A longer one throws a ProtocolError as soon as it is known: a line once
 * that many bytes are buffered without its newline, a header-framed one as soon as its
 * `Content-Length` is read (its body is never buffered).
 */
export class FrameDecoder {
  /**
   * @param {Framing | string} [framing]
   * @param {number | null} [maxFrame]
   */
  constructor(framing = 'line', maxFrame = DEFAULT_MAX_FRAME) {
    /** @type {Framing} */
    this.framing = normalizeFraming(framing);
    /** @type {number} */
    this.maxFrame = typeof maxFrame === 'number' && maxFrame >= 0 ? maxFrame : Infinity;
    /** @type {Buffer[]} */
    this._chunks = [];
    this._buffered = 0;
    /** Body length of the header-framed message being read; -1 while reading its headers. */
    this._need = -1;
    /** Header bytes of the header-framed message whose body is being read. */
    this._headerBytes = 0;
    this._utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  }

  /** Bytes received that do not form a complete frame yet. */
  get pendingBytes() {
    return this._buffered + (this._need >= 0 ? this._headerBytes : 0);
  }

  /**
   * @param {Uint8Array} chunk
   * @returns {Buffer[]} the complete frames' bodies (blank lines of the line framing left out)
   */
  feedFrames(chunk) {
    let data = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    /** @type {Buffer[]} */
    const out = [];
    if (this.framing === 'line') {
      for (;;) {
        const i = data.indexOf(0x0a);
        if (i < 0) break;
        // (a line's size leaves out the '\r' of a CRLF ending)
        const cr = (i > 0 ? data[i - 1] : this._lastByte()) === 0x0d ? 1 : 0;
        if (this._buffered + i - cr > this.maxFrame) throw this._tooLong(this._buffered + i - cr, undefined, out);
        let line = this._take(data.subarray(0, i));
        data = data.subarray(i + 1);
        if (cr) line = line.subarray(0, line.length - 1);
        if (!isBlank(line)) out.push(line);
      }
      const waiting = this._buffered + data.length - (data.length && data[data.length - 1] === 0x0d ? 1 : 0);
      if (waiting > this.maxFrame) throw this._tooLong(waiting, ' (no newline yet)', out);
      if (data.length) this._keep(data);
      return out;
    }
    this._keep(data);
    for (;;) {
      if (this._need < 0) {
        const all = this._whole();
        const end = headerEnd(all);
        if (end === null) {
          if (all.length > MAX_HEADER_BYTES) throw new ProtocolError(`header section over ${MAX_HEADER_BYTES} bytes`);
          return out;
        }
        const need = contentLength(all.subarray(0, end.headers));
        if (need > this.maxFrame) throw this._tooLong(need, ` (Content-Length: ${need})`, out);
        this._need = need;
        this._headerBytes = end.body;
        this._reset(all.subarray(end.body));
        if (this._need === -2) { this._need = -1; continue; } // an empty header section: skipped
      }
      if (this._buffered < this._need) return out;
      const all = this._whole();
      out.push(Buffer.from(all.subarray(0, this._need)));
      this._reset(all.subarray(this._need));
      this._need = -1;
    }
  }

  /**
   * @param {Uint8Array} chunk
   * @returns {unknown[]} the complete messages, parsed
   */
  feed(chunk) {
    return this.feedFrames(chunk).map((body) => this.parse(body));
  }

  /**
   * Parses one frame's body (UTF-8 JSON; a leading byte order mark is skipped).
   * @param {Buffer} body
   * @returns {unknown}
   */
  parse(body) {
    let text;
    try {
      text = this._utf8.decode(body);
    } catch {
      throw new ProtocolError(`broker sent invalid UTF-8: ${preview(body)}`);
    }
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new ProtocolError(`broker sent invalid JSON: ${/** @type {Error} */ (e).message}: ${preview(body)}`);
    }
  }

  /**
   * The error for a frame over `maxFrame`; `frames`: those completed before it in the same chunk
   * (the client still hands them over: a call answered just before it gets its answer).
   * @param {number} size
   * @param {string} [how]
   * @param {Buffer[]} [frames]
   */
  _tooLong(size, how = ` (${size} bytes)`, frames = []) {
    const e = new ProtocolError(`a message from the broker is over ${this.maxFrame} bytes${how}`);
    return Object.assign(e, { frames });
  }

  /** The last byte kept from earlier chunks (-1 when none). */
  _lastByte() {
    const c = this._chunks[this._chunks.length - 1];
    return c && c.length ? c[c.length - 1] : -1;
  }

  /** @param {Buffer} data */
  _keep(data) {
    if (!data.length) return;
    this._chunks.push(data);
    this._buffered += data.length;
  }

  /** The buffered bytes plus `tail`, and the buffer emptied. @param {Buffer} tail */
  _take(tail) {
    if (!this._chunks.length) return tail;
    const all = Buffer.concat([...this._chunks, tail]);
    this._chunks = [];
    this._buffered = 0;
    return all;
  }

  _whole() {
    if (this._chunks.length > 1) this._chunks = [Buffer.concat(this._chunks)];
    return this._chunks[0] ?? Buffer.alloc(0);
  }

  /** @param {Buffer} rest */
  _reset(rest) {
    this._chunks = rest.length ? [rest] : [];
    this._buffered = rest.length;
  }
}

/** @param {Buffer} b */
function isBlank(b) {
  for (const c of b) if (c !== 0x20 && c !== 0x09 && c !== 0x0d) return false;
  return true;
}

/**
 * Where the header section ends: an empty line, "\r\n\r\n" or (bare newlines accepted) "\n\n".
 * @param {Buffer} b
 * @returns {{headers: number, body: number} | null}
 */
function headerEnd(b) {
  for (let i = b.indexOf(0x0a); i >= 0; i = b.indexOf(0x0a, i + 1)) {
    // i ends a line; the next line is empty when it is "\n" or "\r\n".
    if (b[i + 1] === 0x0a) return { headers: i + 1, body: i + 2 };
    if (b[i + 1] === 0x0d && b[i + 2] === 0x0a) return { headers: i + 1, body: i + 3 };
    if (i + 2 >= b.length) break;
  }
  // A section that is nothing but an empty line (a stray "\r\n" between frames).
  if (b[0] === 0x0a) return { headers: 0, body: 1 };
  if (b[0] === 0x0d && b[1] === 0x0a) return { headers: 0, body: 2 };
  return null;
}

/**
 * The Content-Length of a header section (-2 for an empty one). Other headers are ignored.
 * @param {Buffer} section
 */
function contentLength(section) {
  let text = section.toString('latin1');
  if (text.startsWith('\xef\xbb\xbf')) text = text.slice(3);
  if (!text.trim()) return -2;
  let length = -1;
  for (const line of text.split(/\r?\n/)) {
    if (!line) continue;
    const colon = line.indexOf(':');
    if (colon < 0) throw new ProtocolError(`malformed header line: ${JSON.stringify(line)}`);
    if (line.slice(0, colon).trim().toLowerCase() !== 'content-length') continue;
    const value = line.slice(colon + 1).trim();
    if (!/^[0-9]{1,15}$/.test(value)) throw new ProtocolError(`bad Content-Length header: ${JSON.stringify(line)}`);
    length = Number(value);
  }
  if (length < 0) throw new ProtocolError('header section without Content-Length');
  return length;
}

/** @param {Buffer} b */
function preview(b) {
  const s = b.subarray(0, 200).toString('utf8');
  return JSON.stringify(b.length > 200 ? s + '…' : s);
}
