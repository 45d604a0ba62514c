// JSON-RPC through the client against the real broker: the generic call, notify, batches, raw
// messages, both framings (events included), many calls in flight, large multi-byte messages.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import {
  RpcError, FrameDecoder, encode,
  PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, NO_HANDLER, UNAUTHORIZED, INVALID_PARAMS,
} from '../src/index.js';
import { startBroker, rejectsWith, subscribeFresh, takeEvents, WAIT, APP, APP_GROUP, NOTES } from './support.js';

/** @type {import('./support.js').Broker} */
let broker;
before(async () => { broker = await startBroker(); });
after(() => broker.stop());

test('the generic call, and -32601 / -32602 through it', async () => {
  const c = await broker.tool();
  assert.equal((await c.call('url.canOpen', { url: 'notes://x' })).app, NOTES);
  assert.equal(typeof (await c.call('broker.status')).version, 'string', 'no params at all');
  const e = await rejectsWith(c.call('no.such.method'), METHOD_NOT_FOUND);
  assert.equal(e.method, 'no.such.method');
  assert.ok(String(e).includes('-32601'));
  await rejectsWith(c.call('url.open', { url: 42 }), INVALID_PARAMS);
  await rejectsWith(c.call('url.open', {}), INVALID_PARAMS);
});

test('batch: results and RpcErrors in order, notifications left out', async () => {
  const c = await broker.tool();
  const before = (await c.brokerStatus()).pendingEvents;
  const out = await c.batch([
    ['broker.status'],
    ['url.canOpen', { url: 'deeplinkmyapp://x' }],
    { method: 'url.open', params: { url: 'notes://from-a-batch-notification' }, notification: true },
    ['url.open', { url: 'nosuchscheme://x' }],
    { method: 'share.get', params: { shareID: 'nope' } },
    ['no.such'],
  ]);
  assert.equal(out.length, 6);
  assert.equal(typeof out[0].version, 'string');
  assert.equal(out[1].canOpen, true);
  assert.equal(out[2], undefined);
  assert.ok(out[3] instanceof RpcError);
  assert.equal(out[3].code, NO_HANDLER);
  assert.equal(out[3].method, 'url.open');
  assert.equal(out[4].code, UNAUTHORIZED, 'a tool reads no group');
  assert.equal(out[5].code, METHOD_NOT_FOUND);
  assert.equal((await c.brokerStatus()).pendingEvents, before + 1, 'the notification member ran');
  // A batch of notifications only: no reply; resolved once written, and run.
  assert.deepEqual(await c.batch([{ method: 'url.open', params: { url: 'notes://n1' }, notification: true }]), [undefined]);
  assert.equal((await c.brokerStatus()).pendingEvents, before + 2);
  assert.equal(c.pendingReplies, 0, 'a batch of notifications was answered');
  await assert.rejects(c.batch([]), TypeError);
  // hello inside a batch sets the session.
  const anon = await broker.client();
  const [hello, status] = await anon.batch([['hello', { role: 'app', bundleID: APP }], ['broker.status']]);
  assert.equal(hello.bundleID, APP);
  assert.equal(anon.session, hello.session);
  assert.equal(typeof status.connections, 'number');
});

test('notify: run, never answered, even when it fails', async () => {
  const c = await broker.tool();
  const before = (await c.brokerStatus()).pendingEvents;
  await c.notify('url.open', { url: 'notes://via-notification' });
  await c.notify('no.such.method');
  assert.equal((await c.brokerStatus()).pendingEvents, before + 1);
  assert.equal(c.pendingReplies, 0, 'an answer came for a notification');
  await assert.rejects(c.receive({ timeout: 100 }), { name: 'TimeoutError' });
  // Drain Notes' queue for the other tests.
  const notes = await broker.app(NOTES);
  await subscribeFresh(notes);
});

test('raw messages: parse error keeps the connection, invalid requests, ids echoed', async () => {
  const c = await broker.tool();
  let r = await c.callRaw('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]');
  assert.equal(r.id, null);
  assert.equal(r.error.code, PARSE_ERROR);
  assert.equal((await c.brokerStatus()).apps, 4, 'the connection stays usable');
  for (const bad of [{ jsonrpc: '2.0', id: 'a', method: 1 }, { jsonrpc: '1.0', id: 'b', method: 'broker.status' }]) {
    r = await c.callRaw(bad);
    assert.equal(r.error.code, INVALID_REQUEST);
    assert.equal(r.id, bad.id);
  }
  for (const id of ['abc', 7.5, null]) {
    r = await c.callRaw({ jsonrpc: '2.0', id, method: 'broker.status' });
    assert.equal(r.id, id);
    assert.ok('result' in r);
  }
  r = await c.callRaw([]);
  assert.deepEqual([r.id, r.error.code], [null, INVALID_REQUEST], 'an empty batch');
  r = await c.callRaw([{ jsonrpc: '2.0', id: 'x1', method: 'broker.status' }, 1, { jsonrpc: '2.0', method: 'broker.status' }]);
  assert.deepEqual(r.map((x) => x.id), ['x1', null]);
  assert.equal(r[1].error.code, INVALID_REQUEST);
});

test('many calls in flight at once are matched to their answers', async () => {
  const c = await broker.tool();
  const urls = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? `notes://n/${i}` : i % 3 === 1 ? `deeplinkmyapp://d/${i}` : `nosuchscheme://${i}`));
  const answers = await Promise.all(urls.map((u) => c.urlCanOpen(u)));
  answers.forEach((a, i) => {
    const want = i % 3 === 0 ? NOTES : i % 3 === 1 ? APP : undefined;
    assert.equal(a.app, want, urls[i]);
  });
});

for (const framing of ['line', 'header']) {
  test(`${framing} framing: session, calls, a batch, events and a large multi-byte value`, async () => {
    const c = await broker.tool({ framing });
    assert.equal(c.framing, framing);
    assert.equal(c.helloResult?.role, 'tool');
    assert.equal((await c.urlCanOpen('deeplinkmyapp://x')).canOpen, true);
    const out = await c.batch([['broker.status'], ['no.such']]);
    assert.equal(out[1].code, METHOD_NOT_FOUND);
    await rejectsWith(c.urlOpen('nosuchscheme://x'), NO_HANDLER);
    // Events arrive in the connection's framing too.
    const app = await broker.app(APP, undefined, { framing });
    await subscribeFresh(app);
    const r = await c.urlOpen(`deeplinkmyapp://framed/${framing}/€`);
    const [ev] = await takeEvents(app, 1);
    assert.equal(ev.id, r.eventID);
    await app.appAck(ev.id);
    // A value of about 700 KB of 2-, 3- and 4-byte characters: its answer spans many reads, with
    // characters split between them.
    const value = { text: 'é€😀'.repeat(80000), n: [1.5, -0, 1e21] };
    await app.defaultsSet(APP_GROUP, `big-${framing}`, value);
    const got = await app.defaultsGet(APP_GROUP, `big-${framing}`);
    assert.equal(got.value.text.length, value.text.length);
    assert.ok(got.value.text === value.text, 'the text came back changed');
    assert.deepEqual(got.value.n, [1.5, 0, 1e21]);
    await app.defaultsRemove(APP_GROUP, `big-${framing}`);
  });
}

test('the broker answers header framing in kind (raw socket)', async () => {
  const s = net.createConnection({ path: broker.socket });
  try {
    await new Promise((res, rej) => { s.once('connect', res); s.once('error', rej); });
    const body = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'broker.status' });
    s.write(`Content-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\n\r\n${body}`);
    const d = new FrameDecoder('header');
    let first = null;
    const msgs = await new Promise((res, rej) => {
      const timer = setTimeout(() => rej(new Error('no answer')), WAIT);
      s.on('data', (chunk) => {
        first ??= chunk.subarray(0, 16).toString('latin1');
        const m = d.feed(chunk);
        if (m.length) { clearTimeout(timer); res(m); }
      });
    });
    assert.match(first, /^content-length:/i);
    assert.equal(msgs[0].id, 9);
    assert.ok('result' in msgs[0]);
    assert.deepEqual(encode({ a: 1 }, 'header').toString(), 'Content-Length: 7\r\n\r\n{"a":1}');
  } finally {
    s.destroy();
  }
});
