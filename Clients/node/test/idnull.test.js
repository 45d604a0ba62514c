// Errors without an id (`"id": null`): the broker answers a request it cannot parse (-32700) or
// a batch over its member limit (-32600) with one, in the order it read the requests, and keeps
// the connection open. Such an error answers the oldest request still waiting (a call, a batch,
// a raw request, or an abandoned call); only when nothing waits is it a notice ('brokerError',
// and the close reason when the broker hangs up right after it). One with data.closing, the
// broker's last word before it hangs up, answers no request: it is a notice and the close reason.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, ConnectionClosed, RpcError, TimeoutError, PARSE_ERROR, INVALID_REQUEST } from '../src/index.js';
import { startBroker, fakeBroker, rejectsWith, WAIT, NOTES } from './support.js';

/** @type {import('./support.js').Broker} */
let broker;
before(async () => { broker = await startBroker(); });
after(() => broker.stop());

/** Half of a surrogate pair: JSON.stringify writes it as `\ud83d`, which the broker cannot parse. */
const LONE = '😀'.slice(0, 1);
/** Well under WAIT: a call the client fails to match would time out here, not after 15 s. */
const QUICK = 4000;

/** An array nested `depth` levels deep. */
function nested(depth) {
  /** @type {unknown} */
  let v = 0;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** @param {Client} c */
function watchNotices(c) {
  /** @type {RpcError[]} */
  const seen = [];
  c.on('brokerError', (e) => seen.push(e));
  return seen;
}

test('a call the broker cannot parse (a lone surrogate) is rejected with its -32700; the connection goes on', async () => {
  const c = await broker.tool();
  const notices = watchNotices(c);
  const e = await rejectsWith(c.call('url.canOpen', { url: `notes://${LONE}` }, { timeout: QUICK }), PARSE_ERROR);
  assert.equal(e.method, 'url.canOpen');
  assert.equal((await c.urlCanOpen('notes://x')).app, NOTES, 'the connection stays usable');
  assert.equal((await c.urlCanOpen('nothing://x', { fallback: 'notes://y' })).via, 'fallback', 'a fallback is passed on');
  assert.deepEqual(notices, [], 'a call\'s answer is not a notice');
  assert.equal(c.pendingReplies, 0, 'the answer was also queued for receive()');
  assert.equal(c.closed, false);
});

test('a call nested deeper than the broker parses (300 levels) is rejected with -32700', async () => {
  const c = await broker.tool();
  await rejectsWith(c.call('broker.status', { deep: nested(300) }, { timeout: QUICK }), PARSE_ERROR);
  assert.equal(typeof (await c.brokerStatus()).version, 'string');
});

test('calls in flight together: the id-null error goes to the one it answers, in order', async () => {
  const c = await broker.tool();
  const notices = watchNotices(c);
  const o = { timeout: QUICK };
  const [a, b, d, e] = await Promise.allSettled([
    c.urlCanOpen('notes://a', o),
    c.call('url.canOpen', { url: `notes://${LONE}` }, o),
    c.call('url.canOpen', { url: `notes://${LONE}${LONE}` }, o),
    c.urlCanOpen('deeplinkmyapp://e', o),
  ]);
  assert.equal(a.status === 'fulfilled' && a.value.app, NOTES);
  assert.ok(b.status === 'rejected' && b.reason instanceof RpcError && b.reason.code === PARSE_ERROR, String(b.status === 'rejected' ? b.reason : b.value));
  assert.ok(d.status === 'rejected' && d.reason instanceof RpcError && d.reason.code === PARSE_ERROR);
  assert.equal(e.status === 'fulfilled' && e.value.canOpen, true);
  assert.deepEqual(notices, []);
});

test('a batch over the broker\'s member limit is rejected with its -32600; the connection goes on', async () => {
  const c = await broker.tool();
  const notices = watchNotices(c);
  const calls = Array.from({ length: 10001 }, () => /** @type {[string]} */ (['broker.status']));
  const e = await rejectsWith(c.batch(calls, { timeout: QUICK }), INVALID_REQUEST);
  assert.match(e.message, /10000|10,000|max-batch/);
  assert.equal(e.method, 'batch');
  // One under the limit runs.
  const ok = await c.batch(calls.slice(1));
  assert.equal(ok.length, 10000);
  assert.ok(ok.every((r) => typeof r.version === 'string'));
  assert.deepEqual(notices, []);
});

test('a batch the broker cannot parse is rejected with -32700', async () => {
  const c = await broker.tool();
  await rejectsWith(c.batch([['broker.status'], ['url.canOpen', { url: `notes://${LONE}` }]], { timeout: QUICK }), PARSE_ERROR);
  assert.equal((await c.batch([['broker.status']]))[0].apps, 4);
});

test('a notification the broker could not parse is refused before sending (its error would answer no call)', async () => {
  const c = await broker.tool();
  const notices = watchNotices(c);
  const e = await rejectsWith(c.notify('url.open', { url: `notes://${LONE}` }), PARSE_ERROR);
  assert.match(e.message, /not sent/);
  await rejectsWith(c.notify('broker.status', { deep: nested(300) }), PARSE_ERROR);
  await rejectsWith(c.batch([{ method: 'url.open', params: { url: `notes://${LONE}` }, notification: true }]), PARSE_ERROR);
  // Nothing was sent: a call made right after is answered with its own result.
  assert.equal((await c.urlCanOpen('notes://x', { timeout: QUICK })).app, NOTES);
  await sleep(20);
  assert.deepEqual(notices, []);
  assert.equal(c.pendingReplies, 0);
});

test('raw messages take their place in the order: an id-null answer to one goes to receive()', async () => {
  const c = await broker.tool();
  const notices = watchNotices(c);
  // A raw request the broker cannot parse, then a call: the error is the raw one's answer.
  await c.sendRaw('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]');
  assert.equal((await c.brokerStatus({ timeout: QUICK })).apps, 4);
  const raw = await c.receive({ timeout: QUICK });
  assert.deepEqual([raw.id, raw.error.code], [null, PARSE_ERROR]);
  // A call the broker cannot parse, then a raw one: each gets its own.
  const call = c.call('url.canOpen', { url: `notes://${LONE}` }, { timeout: QUICK });
  await c.sendRaw('not json');
  await rejectsWith(call, PARSE_ERROR);
  assert.equal((await c.receive({ timeout: QUICK })).error.code, PARSE_ERROR);
  // A raw notification gets no answer, so it does not take the next call's.
  await c.sendRaw({ jsonrpc: '2.0', method: 'url.canOpen', params: { url: 'notes://raw-notification' } });
  await c.sendRaw(Buffer.from('{"jsonrpc":"2.0","method":"broker.status"}'));
  await rejectsWith(c.call('url.canOpen', { url: `notes://${LONE}` }, { timeout: QUICK }), PARSE_ERROR);
  assert.equal(c.pendingReplies, 0);
  assert.deepEqual(notices, []);
});

test('an abandoned call\'s late id-null answer is dropped; the next call gets its own', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    const a = await peer.next();
    const b = await peer.next();
    await sleep(150); // a has timed out by now
    assert.equal(a.method, 'a');
    peer.send({ jsonrpc: '2.0', id: null, error: { code: PARSE_ERROR, message: 'Parse error: late' } });
    peer.send({ jsonrpc: '2.0', id: b.id, result: 'b' });
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  t.after(() => c.destroy());
  const notices = watchNotices(c);
  const a = c.call('a', undefined, { timeout: 50 });
  const b = c.call('b');
  await assert.rejects(a, TimeoutError);
  assert.equal(await b, 'b');
  await sleep(20);
  assert.deepEqual(notices, []);
  assert.equal(c.pendingReplies, 0, 'the late error was queued');
});

test('an id-null error answers the oldest waiting request: a batch before a call', async (t) => {
  const { path } = await fakeBroker(t, 'header', async (peer) => {
    await peer.next(); // the batch
    const x = await peer.next();
    peer.send({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'Invalid Request: too many' } });
    peer.send({ jsonrpc: '2.0', id: x.id, result: 'x' });
  });
  const c = await new Client({ socket: path, framing: 'header', timeout: WAIT }).connect();
  t.after(() => c.destroy());
  const notices = watchNotices(c);
  const batch = c.batch([['m1'], ['m2']], { timeout: QUICK });
  const x = c.call('x', undefined, { timeout: QUICK });
  const e = await rejectsWith(batch, INVALID_REQUEST);
  assert.equal(e.message, 'Invalid Request: too many');
  assert.equal(await x, 'x');
  assert.deepEqual(notices, []);
});

test('with nothing waiting, an id-null error is a notice; the close reason only when the hang-up follows it', async (t) => {
  let step = 0;
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    step++;
    if (step === 1) {
      // A notice, then an ordinary answer, then the hang-up: no reason.
      const a = await peer.next();
      peer.send({ jsonrpc: '2.0', id: a.id, result: 'a' });
      await sleep(20);
      peer.send({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'a notice' } });
      const b = await peer.next();
      peer.socket.end(encode({ jsonrpc: '2.0', id: b.id, result: 'b' }));
    } else {
      // The notice right before the hang-up: the reason.
      const a = await peer.next();
      peer.send({ jsonrpc: '2.0', id: a.id, result: 'a' });
      await sleep(20);
      peer.socket.end(encode({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'going away' } }));
    }
  });
  const c1 = await new Client({ socket: path, timeout: WAIT }).connect();
  const n1 = watchNotices(c1);
  assert.equal(await c1.call('a'), 'a');
  while (n1.length === 0) await sleep(5);
  assert.equal(n1[0].message, 'a notice');
  assert.equal((await c1.receive()).error.message, 'a notice', 'a notice is also readable with receive()');
  const closed1 = new Promise((res) => c1.once('close', res));
  assert.equal(await c1.call('b'), 'b');
  const err1 = /** @type {ConnectionClosed} */ (await closed1);
  assert.ok(err1 instanceof ConnectionClosed);
  assert.equal(err1.reason, undefined, 'an earlier notice is not the reason');

  const c2 = await new Client({ socket: path, timeout: WAIT }).connect();
  const n2 = watchNotices(c2);
  const closed2 = new Promise((res) => c2.once('close', res));
  assert.equal(await c2.call('a'), 'a');
  const err2 = /** @type {ConnectionClosed} */ (await closed2);
  assert.equal(err2.reason?.message, 'going away');
  assert.equal(n2.length, 1);
  await assert.rejects(c2.call('later'), (e) => e instanceof ConnectionClosed && e.reason?.message === 'going away');
});

test('the close reason is never an id-null error that answered a call', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    await peer.next();
    peer.send({ jsonrpc: '2.0', id: null, error: { code: PARSE_ERROR, message: 'Parse error: recoverable' } });
    await peer.next(); // the client's next call: the broker hangs up without a word
    peer.socket.end();
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  const notices = watchNotices(c);
  await rejectsWith(c.call('bad', undefined, { timeout: 1000 }), PARSE_ERROR);
  const closed = new Promise((res) => c.once('close', res));
  await assert.rejects(c.call('next'), (e) => e instanceof ConnectionClosed && e.reason === undefined);
  const err = /** @type {ConnectionClosed} */ (await closed);
  assert.equal(err.reason, undefined, `a stale call answer became the close reason: ${err.message}`);
  assert.doesNotMatch(err.message, /recoverable/);
  assert.deepEqual(notices, []);
});

test('an id-null error with data.closing answers no request: the calls waiting fail with ConnectionClosed, it the reason', async (t) => {
  const closing = { code: INVALID_REQUEST, message: 'Invalid Request: message larger than the limit', data: { closing: true } };
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    await peer.next(); // the call
    await peer.next(); // the batch behind it
    peer.socket.end(encode({ jsonrpc: '2.0', id: null, error: closing }));
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  const notices = watchNotices(c);
  const closed = new Promise((res) => c.once('close', res));
  const got = await Promise.allSettled([c.call('a', undefined, { timeout: QUICK }), c.batch([['b']], { timeout: QUICK })]);
  for (const r of got) {
    assert.equal(r.status, 'rejected');
    const e = /** @type {PromiseRejectedResult} */ (r).reason;
    assert.ok(e instanceof ConnectionClosed, `taken as an answer: ${e}`);
    assert.ok(e.reason instanceof RpcError);
    assert.deepEqual([e.reason.code, e.reason.message, e.reason.data], [INVALID_REQUEST, closing.message, { closing: true }]);
    assert.match(e.message, /message larger than the limit \(-32600\)/);
  }
  assert.equal(await closed, c.closeError);
  await assert.rejects(c.call('later'), (e) => e instanceof ConnectionClosed && e.reason?.code === INVALID_REQUEST);
  // A notice: emitted, and readable with receive().
  assert.equal(notices.length, 1);
  assert.deepEqual((await c.receive()).error, closing);
});

/** @param {unknown} msg */
function encode(msg) {
  return Buffer.from(JSON.stringify(msg) + '\n');
}
