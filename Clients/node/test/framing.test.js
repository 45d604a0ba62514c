// Unit tests of the framing (no broker): encode, and a decoder fed split and merged chunks.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { DEFAULT_MAX_FRAME, FrameDecoder, ProtocolError, encode, normalizeFraming } from '../src/index.js';
import { parseProblem } from '../src/framing.js';

const MESSAGES = [
  { jsonrpc: '2.0', id: 1, result: { text: 'line\nbreak', n: 1 } },
  [1, 2, { x: null }],
  { jsonrpc: '2.0', method: 'app.event', params: { url: 'notes://ünï/€/😀', id: 'ev-1' } },
  { jsonrpc: '2.0', id: 2, result: 'é'.repeat(50) + '𝄞'.repeat(20) },
];

/** Feeds `wire` in pieces of `step` bytes (or at the given cut points) and collects the messages. */
function decodeInPieces(framing, wire, step) {
  const d = new FrameDecoder(framing);
  const out = [];
  for (let i = 0; i < wire.length; i += step) out.push(...d.feed(wire.subarray(i, i + step)));
  assert.equal(d.pendingBytes, 0, 'bytes left over');
  return out;
}

for (const framing of ['line', 'header']) {
  test(`${framing}: every split of the stream decodes to the same messages`, () => {
    const wire = Buffer.concat(MESSAGES.map((m) => encode(m, framing)));
    // Step 1 splits every multi-byte character (2-, 3- and 4-byte UTF-8) across chunks.
    for (const step of [1, 2, 3, 5, 7, 64, wire.length]) {
      assert.deepEqual(decodeInPieces(framing, wire, step), MESSAGES, `step ${step}`);
    }
  });

  test(`${framing}: a frame split inside a multi-byte character waits for the rest`, () => {
    const one = encode({ s: '€😀' }, framing);
    const euro = one.indexOf(0xe2); // first byte of "€" (E2 82 AC)
    assert.ok(euro > 0);
    const d = new FrameDecoder(framing);
    assert.deepEqual(d.feed(one.subarray(0, euro + 1)), []);
    assert.deepEqual(d.feed(one.subarray(euro + 1, euro + 2)), []);
    assert.ok(d.pendingBytes > 0);
    assert.deepEqual(d.feed(one.subarray(euro + 2)), [{ s: '€😀' }]);
    assert.equal(d.pendingBytes, 0);
  });

  test(`${framing}: several frames in one chunk, and a partial one after them`, () => {
    const wire = Buffer.concat([...MESSAGES.map((m) => encode(m, framing)), encode({ tail: true }, framing)]);
    const cut = wire.length - 3;
    const d = new FrameDecoder(framing);
    assert.deepEqual(d.feed(wire.subarray(0, cut)), MESSAGES);
    assert.equal(d.pendingBytes, encode({ tail: true }, framing).length - 3);
    assert.deepEqual(d.feed(wire.subarray(cut)), [{ tail: true }]);
  });

  test(`${framing}: a large frame in many chunks`, () => {
    const big = { id: 9, result: 'x€'.repeat(300000) };
    const wire = encode(big, framing);
    assert.deepEqual(decodeInPieces(framing, wire, 4093), [big]);
  });
}

test('line framing: CRLF endings, blank lines and a byte order mark are tolerated', () => {
  const d = new FrameDecoder('line');
  const wire = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}\r\n\n  \r\n{"b":2}\n')]);
  assert.deepEqual(d.feed(wire), [{ a: 1 }, { b: 2 }]);
});

test('line framing: encode refuses a raw text with a newline; JSON values never hold one', () => {
  assert.throws(() => encode('{\n}', 'line'), TypeError);
  const wire = encode({ s: 'a\nb\r\nc\u2028' }, 'line');
  assert.equal(wire.indexOf(0x0a), wire.length - 1, 'only the terminating newline');
  assert.equal(wire.toString('utf8'), '{"s":"a\\nb\\r\\nc\u2028"}\n');
});

test('header framing: encode writes Content-Length in bytes, not characters', () => {
  const wire = encode({ s: '€' }, 'header');
  const body = '{"s":"€"}';
  assert.equal(wire.toString('utf8'), `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  assert.equal(Buffer.byteLength(body), body.length + 2);
});

test('header framing: other headers, any case, bare newlines and stray empty lines are accepted', () => {
  const d = new FrameDecoder('header');
  const wire = Buffer.from(
    'content-length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}' +
    '\r\n' + // a stray empty line between frames
    'Content-Type: x\nCONTENT-LENGTH:  7 \n\n[1,2,3]');
  assert.deepEqual(d.feed(wire), [{}, [1, 2, 3]]);
});

test('header framing: a header section split anywhere', () => {
  const wire = Buffer.from('Content-Length: 10\r\nContent-Type: a\r\n\r\n{"k":"v"}\n');
  for (let cut = 1; cut < wire.length; cut++) {
    const d = new FrameDecoder('header');
    const out = [...d.feed(wire.subarray(0, cut)), ...d.feed(wire.subarray(cut))];
    assert.deepEqual(out, [{ k: 'v' }], `cut at ${cut}`);
  }
});

test('malformed input is a ProtocolError', () => {
  assert.throws(() => new FrameDecoder('line').feed(Buffer.from('{nope\n')), ProtocolError);
  assert.throws(() => new FrameDecoder('line').feed(Buffer.from([0x22, 0xff, 0x22, 0x0a])), ProtocolError); // invalid UTF-8
  assert.throws(() => new FrameDecoder('header').feed(Buffer.from('Content-Type: x\r\n\r\n{}')), ProtocolError);
  assert.throws(() => new FrameDecoder('header').feed(Buffer.from('Content-Length: ten\r\n\r\n')), ProtocolError);
  assert.throws(() => new FrameDecoder('header').feed(Buffer.alloc(9000, 0x41)), ProtocolError); // headers over 8 KiB
});

test('framing names', () => {
  assert.equal(normalizeFraming(undefined), 'line');
  assert.equal(normalizeFraming('newline'), 'line');
  assert.equal(normalizeFraming('content-length'), 'header');
  assert.equal(normalizeFraming('Header'), 'header');
  assert.throws(() => normalizeFraming('xml'), TypeError);
});

test('parseProblem: what the broker\'s strict parser refuses in valid JSON', () => {
  const lone = '😀'.slice(0, 1);
  const nest = (/** @type {number} */ d) => { let v = /** @type {unknown} */ (0); for (let i = 0; i < d; i++) v = [v]; return v; };
  assert.match(String(parseProblem(JSON.stringify({ a: lone }))), /unpaired surrogate \(\\ud83d\)/);
  assert.match(String(parseProblem(JSON.stringify({ a: `x${'😀'.slice(1)}` }))), /unpaired surrogate \(\\ude00\)/);
  assert.match(String(parseProblem('["\\uD83Dx"]')), /unpaired/, 'upper case, not followed by a low half');
  assert.equal(parseProblem(JSON.stringify({ a: '😀', b: '\\ud83d', c: '\\\\ud83d' })), null, 'a pair, and escaped backslashes');
  assert.equal(parseProblem('["\\ud83d\\ude00"]'), null, 'an escaped pair');
  assert.equal(parseProblem(JSON.stringify(nest(256))), null);
  assert.match(String(parseProblem(JSON.stringify(nest(257)))), /deeper than 256/);
  assert.equal(parseProblem(JSON.stringify({ s: '['.repeat(1000) })), null, 'brackets inside a string');
  assert.match(String(parseProblem(JSON.stringify({ jsonrpc: '2.0', method: 'm', params: { p: nest(255) } }))), /deeper/);
  assert.equal(parseProblem(JSON.stringify({ jsonrpc: '2.0', method: 'm', params: { p: nest(254) } })), null);
});

test('maxFrame: a line over it fails once the buffer passes it, a Content-Length over it at once', () => {
  assert.equal(new FrameDecoder().maxFrame, DEFAULT_MAX_FRAME);
  assert.equal(DEFAULT_MAX_FRAME, 64 * 1024 * 1024);
  const line = new FrameDecoder('line', 1000);
  assert.deepEqual(line.feed(Buffer.from(`{"a":"${'x'.repeat(990)}"}\n`)), [{ a: 'x'.repeat(990) }]); // 1000 bytes: fine
  assert.deepEqual(line.feed(Buffer.from('"' + 'y'.repeat(900))), []);
  assert.throws(() => line.feed(Buffer.from('y'.repeat(200))), ProtocolError); // 1101 bytes, no newline yet
  assert.throws(() => new FrameDecoder('line', 10).feed(Buffer.from(`"${'z'.repeat(20)}"\n`)), ProtocolError);
  const header = new FrameDecoder('header', 1000);
  assert.deepEqual(header.feed(Buffer.from(`Content-Length: 1000\r\n\r\n${' '.repeat(998)}{}`)), [{}]);
  assert.throws(() => header.feed(Buffer.from('Content-Length: 999999999999\r\n\r\n')), (e) => {
    assert.ok(e instanceof ProtocolError);
    assert.match(e.message, /999999999999/);
    return true;
  });
  assert.equal(new FrameDecoder('line', null).maxFrame, Infinity);
});

test('maxFrame: a line exactly at it is taken with either ending; frames before one over it are kept (the review)', () => {
  const L = 64;
  const body = Buffer.from('"' + 'x'.repeat(L - 2) + '"');
  for (const chunks of [[body, '\n'], [Buffer.concat([body, Buffer.from('\r\n')])], [body, '\r\n'],
    [Buffer.concat([body, Buffer.from('\r')]), '\n']]) {
    const d = new FrameDecoder('line', L);
    const out = chunks.flatMap((c) => d.feed(Buffer.from(c)));
    assert.equal(out.length, 1, JSON.stringify(chunks.map(String)));
  }
  const d = new FrameDecoder('line', L);
  const wire = Buffer.from('{"id":1,"result":"early"}\n' + 'y'.repeat(L + 10));
  assert.throws(() => d.feed(wire), (e) => e instanceof ProtocolError && e.frames.length === 1 &&
    d.parse(e.frames[0]).result === 'early');
});
