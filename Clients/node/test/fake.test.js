// The client against a scripted fake broker (a net.Server on a private socket): what a real broker
// does not do on demand — answers that never come or come late, replies written a byte at a
// time, several messages in one write, a hang-up after an id-null error, garbage, a peer that
// stops reading (backpressure).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, ConnectionClosed, FrameDecoder, ProtocolError, RpcError, TimeoutError, encode, NOT_FOUND, INVALID_REQUEST } from '../src/index.js';
import { fakeBroker, trickle, WAIT } from './support.js';

test('requests: numeric ids counting up, jsonrpc 2.0, params only when given', async (t) => {
  const seen = [];
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    for (;;) {
      const m = await peer.next();
      seen.push(m);
      if ('id' in m) peer.send({ jsonrpc: '2.0', id: m.id, result: { echo: m.method } });
    }
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  t.after(() => c.destroy());
  assert.deepEqual(await c.call('a.b'), { echo: 'a.b' });
  assert.deepEqual(await c.call('c.d', { x: 1 }), { echo: 'c.d' });
  await c.notify('e.f', { y: 2 });
  await c.urlOpen('notes://x', { fallback: undefined });
  assert.deepEqual(seen[0], { jsonrpc: '2.0', id: 1, method: 'a.b' });
  assert.deepEqual(seen[1], { jsonrpc: '2.0', id: 2, method: 'c.d', params: { x: 1 } });
  assert.deepEqual(seen[2], { jsonrpc: '2.0', method: 'e.f', params: { y: 2 } });
  assert.deepEqual(seen[3], { jsonrpc: '2.0', id: 3, method: 'url.open', params: { url: 'notes://x' } });
});

test('per-call timeout: TimeoutError, the late answer is dropped, the connection goes on', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    const slow = await peer.next();       // never answered in time
    const fast = await peer.next();
    await sleep(50);
    peer.send({ jsonrpc: '2.0', id: slow.id, result: 'late' });
    peer.send({ jsonrpc: '2.0', id: fast.id, result: 'fast' });
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  t.after(() => c.destroy());
  await assert.rejects(c.call('slow', undefined, { timeout: 30 }), (e) => {
    assert.ok(e instanceof TimeoutError);
    assert.match(e.message, /slow/);
    return true;
  });
  assert.equal(await c.call('fast'), 'fast');
  await sleep(10);
  assert.equal(c.pendingReplies, 0, 'the late answer was kept');
  // An aborted call is abandoned the same way.
  const ac = new AbortController();
  const p = c.call('never', undefined, { signal: ac.signal });
  ac.abort();
  await assert.rejects(p, { name: 'AbortError' });
});

for (const framing of ['line', 'header']) {
  test(`${framing}: answers written a byte at a time, and several in one write`, async (t) => {
    const { path } = await fakeBroker(t, framing, async (peer) => {
      const a = await peer.next();
      const b = await peer.next();
      // b's answer, a notification and a's answer in one write; then one more, byte by byte.
      peer.socket.write(Buffer.concat([
        encode({ jsonrpc: '2.0', id: b.id, result: 'b: ü' }, framing),
        encode({ jsonrpc: '2.0', method: 'app.event', params: { id: 'ev-1', url: 'x://€' } }, framing),
        encode({ jsonrpc: '2.0', id: a.id, error: { code: NOT_FOUND, message: 'nö €', data: { k: '😀' } } }, framing),
      ]));
      const c2 = await peer.next();
      await trickle(peer.socket, encode({ jsonrpc: '2.0', id: c2.id, result: '𝄞€é'.repeat(5) }, framing));
    });
    const c = await new Client({ socket: path, framing, timeout: WAIT }).connect();
    t.after(() => c.destroy());
    const a = c.call('a');
    const b = c.call('b');
    assert.equal(await b, 'b: ü');
    await assert.rejects(a, (e) => {
      assert.ok(e instanceof RpcError);
      assert.deepEqual([e.code, e.message, e.data, e.method], [NOT_FOUND, 'nö €', { k: '😀' }, 'a']);
      return true;
    });
    assert.deepEqual(await c.nextEvent({ timeout: 0 }), { id: 'ev-1', url: 'x://€' });
    assert.equal(await c.call('c'), '𝄞€é'.repeat(5));
  });
}

test('a hang-up after an id-null error that answered no request: ConnectionClosed carries it', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    const m = await peer.next();
    peer.send({ jsonrpc: '2.0', id: m.id, result: 'x' });
    await sleep(20);
    peer.socket.end(encode({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'Message over 4096 bytes' } }, 'line'));
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  const brokerErrors = [];
  c.on('brokerError', (e) => brokerErrors.push(e));
  const closed = new Promise((res) => c.once('close', res));
  assert.equal(await c.call('x'), 'x');
  const err = await closed;
  assert.ok(err instanceof ConnectionClosed);
  assert.ok(err.reason instanceof RpcError);
  assert.equal(err.reason.code, INVALID_REQUEST);
  assert.equal(err.reason.message, 'Message over 4096 bytes');
  assert.match(err.message, /Message over 4096 bytes \(-32600\)/);
  assert.equal(err, c.closeError);
  assert.equal(brokerErrors.length, 1);
  assert.equal(brokerErrors[0].code, INVALID_REQUEST);
  // The raw error is also readable, and so is nothing more.
  assert.equal((await c.receive()).error.code, INVALID_REQUEST);
  await assert.rejects(c.receive(), ConnectionClosed);
  await assert.rejects(c.call('y'), (e) => e instanceof ConnectionClosed && e.reason?.code === INVALID_REQUEST);
});

test('an id-null error before a hang-up while a call waits: the call\'s answer, not the close reason', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    await peer.next();
    peer.socket.end(encode({ jsonrpc: '2.0', id: null, error: { code: INVALID_REQUEST, message: 'Message over 4096 bytes' } }, 'line'));
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  const brokerErrors = [];
  c.on('brokerError', (e) => brokerErrors.push(e));
  const closed = new Promise((res) => c.once('close', res));
  await assert.rejects(c.call('x'), (e) => {
    assert.ok(e instanceof RpcError, String(e));
    assert.equal(e.code, INVALID_REQUEST);
    assert.equal(e.message, 'Message over 4096 bytes');
    assert.equal(e.method, 'x');
    return true;
  });
  const err = await closed;
  assert.ok(err instanceof ConnectionClosed);
  assert.equal(err.reason, undefined);
  assert.deepEqual(brokerErrors, []);
  assert.equal(c.pendingReplies, 0);
  await assert.rejects(c.call('y'), ConnectionClosed);
});

test('a hang-up without a reason, and garbage from the peer', async (t) => {
  let n = 0;
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    n++;
    await peer.next();
    if (n === 1) peer.socket.end();
    else peer.socket.write('{"jsonrpc":"2.0","id":1,"result":\n');
  });
  const c1 = await new Client({ socket: path, timeout: WAIT }).connect();
  await assert.rejects(c1.call('x'), (e) => e instanceof ConnectionClosed && e.reason === undefined);
  const c2 = await new Client({ socket: path, timeout: WAIT }).connect();
  await assert.rejects(c2.call('x'), (e) => e instanceof ConnectionClosed && e.cause instanceof ProtocolError);
  assert.equal(c2.closed, true);
});

test('a peer that echoes what it is sent speaks no sharebroker protocol: its echo is no answer', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    peer.send(await peer.next()); // the request itself, back
  });
  const c = await new Client({ socket: path, timeout: 5000 }).connect();
  const started = Date.now();
  await assert.rejects(c.call('broker.status'),
    (e) => e instanceof ConnectionClosed && e.cause instanceof ProtocolError && /a request \(a method with an id\)/.test(e.cause.message));
  assert.ok(Date.now() - started < 4000, 'at once, not after the timeout');
  assert.equal(c.closed, true);
});

test('backpressure: while the peer does not read, messages wait in the client, in order', async (t) => {
  /** @type {net.Socket | undefined} */
  let server;
  const received = [];
  const decoder = new FrameDecoder('line');
  const { path } = await fakeBroker(t, 'line', (peer) => {
    server = peer.socket;
    server.removeAllListeners('data');
    server.pause();
    server.on('data', (chunk) => received.push(...decoder.feed(chunk)));
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  t.after(() => c.destroy());
  const big = 'x'.repeat(1 << 20);
  const writes = [];
  for (let i = 0; i < 24; i++) writes.push(c.notify('bulk', { i, big }));
  let settled = 0;
  for (const w of writes) w.then(() => settled++);
  await sleep(100);
  // Without backpressure all 24 MiB would sit in the socket's buffer and every write would be
  // settled by now; with it, the socket holds about one message and the rest wait in order.
  assert.ok(c._socket.writableLength <= 2 * (1 << 20) + 65536, `the socket buffers ${c._socket.writableLength} bytes`);
  assert.ok(c._out.length >= 10, `only ${c._out.length} messages wait in the client`);
  assert.ok(settled < 24, 'every write was settled while the peer read nothing');
  assert.ok(c.pendingWriteBytes > 10 * (1 << 20));
  assert.ok(server, 'the fake broker saw no connection');
  server.resume();
  await Promise.all(writes);
  while (received.length < 24) await sleep(10);
  assert.deepEqual(received.map((m) => m.params.i), Array.from({ length: 24 }, (_, i) => i));
  assert.ok(received.every((m) => m.params.big.length === big.length));
});

test('close(): half-closes, waits for the peer, then resolves', async (t) => {
  let ended = false;
  const { path } = await fakeBroker(t, 'line', (peer) => {
    peer.socket.allowHalfOpen = true; // it answers after the client's end, as the broker does
    peer.socket.on('end', () => {
      ended = true;
      // The peer answers what it read, then closes its end.
      peer.next().then((m) => peer.socket.end(encode({ jsonrpc: '2.0', id: m.id, result: 'answered' }, 'line')));
    });
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  const inFlight = c.call('x');
  await c.close();
  assert.equal(ended, true);
  assert.equal(await inFlight, 'answered');
  assert.equal(c.closed, true);
  await assert.rejects(c.call('y'), ConnectionClosed);
});

test('close(): a peer that never closes is dropped after closeTimeout', async (t) => {
  const { path } = await fakeBroker(t, 'line', () => {});
  const c = await new Client({ socket: path, timeout: WAIT, closeTimeout: 100 }).connect();
  const waiting = c.call('x');
  await c.close();
  await assert.rejects(waiting, ConnectionClosed);
});

for (const framing of ['line', 'header']) {
  test(`${framing}: a message over maxFrame drops the connection (an endless line, a huge Content-Length)`, async (t) => {
    let peerError;
    const { path } = await fakeBroker(t, framing, async (peer) => {
      await peer.next();
      peer.socket.on('error', (e) => { peerError = e; });
      const filler = Buffer.alloc(1 << 16, framing === 'line' ? 0x41 : 0x20);
      peer.socket.write(framing === 'line' ? '{"jsonrpc":"2.0","method":"x","params":"' : 'Content-Length: 999999999999\r\n\r\n');
      // Writes on while the client reads (a peer that streams without end).
      while (!peer.socket.destroyed && !peerError) {
        if (!peer.socket.write(filler)) await new Promise((res) => { peer.socket.once('drain', res); peer.socket.once('close', res); });
      }
    });
    const c = await new Client({ socket: path, framing, timeout: WAIT, maxFrame: 1 << 20 }).connect();
    t.after(() => c.destroy());
    assert.equal(c.maxFrame, 1 << 20);
    const closed = new Promise((res) => c.once('close', res));
    await assert.rejects(c.call('x', undefined, { timeout: 2000 }), (e) => {
      assert.ok(e instanceof ConnectionClosed, String(e));
      assert.ok(e.cause instanceof ProtocolError, String(e.cause));
      assert.match(e.message, /over 1048576 bytes/);
      return true;
    });
    await closed;
    assert.equal(c.closed, true);
    assert.ok(c._decoder.pendingBytes <= (1 << 20) + (1 << 16), `${c._decoder.pendingBytes} bytes buffered`);
  });
}

/**
 * Writes `count` app.event notifications (from `from`) as fast as the client takes them; resolves
 * with how many were written. `progress.written` counts them as they go.
 */
async function flood(peer, count, progress = { written: 0 }, from = 0, method = 'app.event') {
  for (let i = from; i < from + count; i++) {
    if (peer.socket.destroyed) break;
    const ok = peer.send({ jsonrpc: '2.0', method, params: { id: `ev-${i}`, pad: 'p'.repeat(40) } });
    progress.written++;
    if (!ok) await new Promise((res) => { peer.socket.once('drain', res); peer.socket.once('close', res); });
  }
  return progress.written;
}

test('back-pressure: a flood nobody takes stays with the peer; taken, it all arrives in order', async (t) => {
  const total = 50000;
  const progress = { written: 0 };
  const { path } = await fakeBroker(t, 'line', (peer) => { flood(peer, total, progress); });
  const c = await new Client({ socket: path, timeout: WAIT, maxQueuedNotifications: 100 }).connect();
  t.after(() => c.destroy());
  assert.equal(c.maxQueuedNotifications, 100);
  assert.equal((await c.nextNotification()).params.id, 'ev-0'); // the pull API is in use
  await sleep(500);
  assert.ok(c.pendingNotifications < 1000, `${c.pendingNotifications} notifications queued`);
  assert.ok(progress.written < total, 'the peer could write all it had');
  for (let i = 1; i < total; i++) {
    const n = await c.nextNotification({ timeout: 5000 });
    assert.equal(n?.params.id, `ev-${i}`);
  }
});

test('back-pressure: whatever waits for a message keeps the client reading (no deadlock)', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    await flood(peer, 5000); // far past the mark, and past the sockets' buffers
    await flood(peer, 1, undefined, 0, 'defaults.changed');
    const req = await peer.next();
    peer.send({ jsonrpc: '2.0', id: req.id, result: { acked: 1 } });
    await flood(peer, 3000, undefined, 5000);
    peer.send({ jsonrpc: '2.0', id: 'raw', result: 'for receive()' });
  });
  const c = await new Client({ socket: path, timeout: 5000, maxQueuedNotifications: 10 }).connect();
  t.after(() => c.destroy());
  // An app that acks each event before it takes the next one: its call gets its answer although
  // thousands of notifications wait unconsumed before it.
  for await (const ev of c.events()) {
    assert.equal(ev.id, 'ev-0');
    assert.deepEqual(await c.appAck(ev.id), { acked: 1 });
    break;
  }
  // A notification of another method behind them, and a raw reply behind more.
  assert.equal((await c.nextNotification({ method: 'defaults.changed', timeout: 5000 }))?.method, 'defaults.changed');
  assert.deepEqual(await c.receive({ timeout: 5000 }), { jsonrpc: '2.0', id: 'raw', result: 'for receive()' });
  assert.equal((await c.nextEvent({ timeout: 5000 }))?.id, 'ev-1');
});

test('back-pressure: a client that only observes (never pulls) is not paused', async (t) => {
  const total = 5000;
  const { path } = await fakeBroker(t, 'line', (peer) => { flood(peer, total); });
  const c = await new Client({ socket: path, timeout: WAIT, maxQueuedNotifications: 10 }).connect();
  t.after(() => c.destroy());
  let seen = 0;
  c.on('app.event', () => seen++);
  for (let i = 0; seen < total && i < 1000; i++) await sleep(10);
  assert.equal(seen, total);
  assert.equal(c.pendingNotifications, total);
});

test('back-pressure: a client with a listener is not paused even once it has pulled (the review)', async (t) => {
  const total = 5000;
  const { path } = await fakeBroker(t, 'line', (peer) => { flood(peer, total); });
  const c = await new Client({ socket: path, timeout: WAIT, maxQueuedNotifications: 10 }).connect();
  t.after(() => c.destroy());
  let seen = 0;
  c.on('app.event', () => seen++);
  await c.nextNotification({ timeout: 0 }); // one pull (e.g. a backlog drained at start)
  for (let i = 0; seen < total && i < 1000; i++) await sleep(10);
  assert.equal(seen, total, 'the listener starved');
});

test('an async listener whose promise rejects: \'listenerError\', not an unhandled rejection', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    // An event, then the broker goes away before the app acks it.
    peer.socket.end(encode({ jsonrpc: '2.0', method: 'app.event', params: { id: 'ev-1' } }, 'line'));
  });
  // A listener added before the event (emitted as it arrives) ...
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  t.after(() => c.destroy());
  const failed = new Promise((res) => c.on('listenerError', (e, event) => res([e, event])));
  c.consume('app.event', async (ev) => { await c.appAck(ev.id); });
  const [e, event] = await failed;
  assert.ok(e instanceof ConnectionClosed, String(e));
  assert.equal(event, 'app.event');
  // ... and one added after it was queued (handed the queue in a microtask).
  const c2 = await new Client({ socket: path, timeout: WAIT }).connect();
  t.after(() => c2.destroy());
  await new Promise((res) => c2.once('close', res));
  assert.equal(c2.pendingNotifications, 1);
  const failed2 = new Promise((res) => c2.on('listenerError', (e2, event2) => res([e2, event2])));
  c2.consume('app.event', async (ev) => { await c2.appAck(ev.id); });
  const [e2, event2] = await failed2;
  assert.ok(e2 instanceof ConnectionClosed, String(e2));
  assert.equal(event2, 'app.event');
});

test('the README\'s async consume() listener does not crash the process when the broker goes away', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    peer.socket.end(encode({ jsonrpc: '2.0', method: 'app.event', params: { id: 'ev-1' } }, 'line'));
  });
  const { spawn } = await import('node:child_process');
  const script = `
    import { Client } from ${JSON.stringify(new URL('../src/index.js', import.meta.url).href)};
    const app = await new Client({ socket: ${JSON.stringify(path)} }).connect();
    app.consume('app.event', async (ev) => { await app.appAck(ev.id); });
    app.on('close', () => setTimeout(() => console.log('still running'), 100));
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => { stderr += d; });
  const [status] = await new Promise((res) => child.once('exit', (code, signal) => res([code, signal])));
  assert.equal(status, 0, stderr);
  assert.match(stdout, /still running/);
  assert.match(stderr, /SHAREBROKER_LISTENER_ERROR/);
});

test('calls abandoned against a peer that never answers are bounded; late answers are still dropped', async (t) => {
  const { MAX_ABANDONED } = await import('../src/client.js');
  const requests = [];
  let answerLate;
  const answered = new Promise((res) => { answerLate = res; });
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    for (;;) {
      const m = await peer.next();
      if (m.method === 'fast') {
        await answered;
        for (const id of requests) peer.send({ jsonrpc: '2.0', id, result: 'late' });
        peer.send({ jsonrpc: '2.0', id: m.id, result: 'fast' });
      } else {
        requests.push(m.id);
      }
    }
  });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  t.after(() => c.destroy());
  const n = MAX_ABANDONED + 500;
  const calls = [];
  for (let i = 0; i < n; i++) calls.push(c.call('never', undefined, { timeout: 20 }).catch((e) => e));
  for (const e of await Promise.all(calls)) assert.ok(e instanceof TimeoutError);
  assert.ok(c._abandoned.size <= MAX_ABANDONED, `${c._abandoned.size} abandoned calls kept`);
  assert.ok(c._order._items.length - c._order._head <= MAX_ABANDONED, 'the order of answers keeps them all');
  while (requests.length < n) await sleep(10);
  const fast = c.call('fast');
  answerLate();
  assert.equal(await fast, 'fast');
  assert.equal(c.pendingReplies, 0, 'late answers were kept for receive()');
  assert.equal(c._abandoned.size, 0);
});

test('maxFrame: an answer in the same chunk before a frame over it still answers its call (the review)', async (t) => {
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    const req = await peer.next();
    peer.socket.write(JSON.stringify({ jsonrpc: '2.0', id: req.id, result: 'early' }) + '\n' + 'y'.repeat(300));
  });
  const c = await new Client({ socket: path, timeout: WAIT, maxFrame: 200 }).connect();
  t.after(() => c.destroy());
  assert.equal(await c.call('broker.status'), 'early');
});
