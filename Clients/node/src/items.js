// Builders for share items (what share.send and share.targets take).
//
// An item is one object: {url}, {text}, {data: BASE64, name?} or {path: "/abs/file"}, each with an
// optional `type` (a UTI such as "public.url" or "com.adobe.pdf"); the broker infers the type
// when it is left out.

import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * @typedef {{url: string, type?: string}} UrlItem
 * @typedef {{text: string, type?: string}} TextItem
 * @typedef {{data: string, name?: string, type?: string}} DataItem
 * @typedef {{path: string, type?: string}} PathItem
 * @typedef {UrlItem | TextItem | DataItem | PathItem | Record<string, unknown>} Item
 */

/**
 * @template {Record<string, unknown>} T
 * @param {T} item
 * @param {string | undefined} type
 * @returns {T}
 */
function typed(item, type) {
  if (type !== undefined && type !== null) /** @type {any} */ (item).type = String(type);
  return item;
}

/**
 * A URL item, e.g. `urlItem('https://youtu.be/dQw4w9WgXcQ')` (type inferred: `public.url`).
 * @param {string | URL} url
 * @param {string} [type]
 * @returns {UrlItem}
 */
export function urlItem(url, type) {
  return typed({ url: String(url) }, type);
}

/**
 * A plain-text item (type inferred: `public.plain-text`; also `public.url` when the text is
 * exactly a URL).
 * @param {string} text
 * @param {string} [type]
 * @returns {TextItem}
 */
export function textItem(text, type) {
  return typed({ text: String(text) }, type);
}

/**
 * A file given inline: the bytes are base64-encoded for the wire. `name` (e.g. `"report.pdf"`) is
 * optional: without it the broker names the file from its type, which it infers from the name's
 * extension, then from the content. A string is sent as its UTF-8 bytes.
 * @param {Uint8Array | ArrayBuffer | string} bytes
 * @param {string} [name]
 * @param {string} [type]
 * @returns {DataItem}
 */
export function dataItem(bytes, name, type) {
  let buf;
  if (typeof bytes === 'string') buf = Buffer.from(bytes, 'utf8');
  else if (bytes instanceof ArrayBuffer) buf = Buffer.from(bytes);
  else if (ArrayBuffer.isView(bytes)) buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  else throw new TypeError('dataItem takes a Buffer, a Uint8Array, an ArrayBuffer or a string');
  /** @type {DataItem} */
  const item = { data: buf.toString('base64') };
  if (name !== undefined && name !== null) item.name = String(name);
  return typed(item, type);
}

/**
 * A file the broker copies from the local file system (the path is made absolute here, against
 * the current directory). The broker reads it only when it is a regular file the caller can
 * read; a missing or unreadable file, or a directory, is -32602 naming the path.
 * @param {string | URL} path
 * @param {string} [type]
 * @returns {PathItem}
 */
export function pathItem(path, type) {
  const p = path instanceof URL ? fileURLToPath(path) : String(path);
  return typed({ path: resolvePath(p) }, type);
}

/**
 * The bytes of an item that carries inline `data` (base64).
 * @param {{data: string}} item
 * @returns {Buffer}
 */
export function decodeData(item) {
  if (!item || typeof item.data !== 'string') throw new TypeError('the item carries no data');
  return Buffer.from(item.data, 'base64');
}

/** The item builders under one name: `item.url(...)`, `item.text(...)`, `item.data(...)`, `item.path(...)`. */
export const item = Object.freeze({
  url: urlItem,
  text: textItem,
  data: dataItem,
  path: pathItem,
  decode: decodeData,
});
