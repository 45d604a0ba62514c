// Connecting and closing at awkward moments, and timeouts past what setTimeout can hold (against a
// scripted fake broker): close()/destroy() while connect() is under way, connect() again while
// hello is in flight or after the broker hung up, 30-day and infinite timeouts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, ConnectionClosed, TimeoutError } from '../src/index.js';
import { fakeBroker, NODE_DIR, WAIT } from './support.js';

const HELLO_RESULT = { protocol: 1, broker: { name: 'fake', version: '0' }, session: 7, role: 'tool', maxMessage: 4194304 };
const DAYS_30 = 30 * 24 * 3600 * 1000;

/**
 * A fake broker that counts its connections and answers every request after `delay` ms
 * (`hello` with HELLO_RESULT), or when `gate` (if given) resolves.
 */
async function answering(t, { delay = 0, gate = /** @type {Promise<void> | null} */ (null) } = {}) {
  const state = { connections: 0, open: 0, seen: /** @type {any[]} */ ([]) };
  const { path } = await fakeBroker(t, 'line', async (peer) => {
    state.connections++;
    state.open++;
    peer.socket.once('close', () => state.open--);
    for (;;) {
      const m = await peer.next();
      state.seen.push(m);
      if (gate) await gate;
      if (delay) await sleep(delay);
      if ('id' in m) peer.send({ jsonrpc: '2.0', id: m.id, result: m.method === 'hello' ? HELLO_RESULT : m.method });
    }
  });
  return { path, state };
}

/** Waits until `fn()` is true (polling), failing after WAIT. */
async function until(fn, what) {
  const deadline = Date.now() + WAIT;
  while (!fn()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

for (const how of /** @type {const} */ (['close', 'destroy'])) {
  test(`${how}() while connect() is connecting: connect rejects ConnectionClosed, no socket is left`, async (t) => {
    const { path, state } = await answering(t);
    const c = new Client({ socket: path, timeout: WAIT });
    const connecting = c.connect();
    const closing = how === 'close' ? c.close() : (c.destroy(), undefined);
    await assert.rejects(connecting, (e) => e instanceof ConnectionClosed);
    await closing;
    assert.equal(c.closed, true);
    await sleep(50);
    assert.equal(state.open, 0, 'a connection is still open');
    await assert.rejects(c.call('x'), ConnectionClosed);
    await assert.rejects(c.connect(), ConnectionClosed);
  });

  test(`${how}() while hello is in flight: connect rejects ConnectionClosed once hello is done, no socket is left`, async (t) => {
    /** @type {() => void} */
    let release = () => {};
    const gate = new Promise((res) => { release = () => res(undefined); });
    const { path, state } = await answering(t, { gate });
    const c = new Client({ socket: path, timeout: WAIT, role: 'tool' });
    const connecting = c.connect();
    await until(() => state.seen.some((m) => m.method === 'hello'), 'the hello');
    const closing = how === 'close' ? c.close() : (c.destroy(), undefined);
    release();
    await assert.rejects(connecting, (e) => e instanceof ConnectionClosed);
    await closing;
    assert.equal(c.closed, true);
    await until(() => state.open === 0, 'the connection to close');
  });
}

test('close() while connecting does not keep the process alive', async (t) => {
  const { path } = await answering(t);
  const script = `
    import { Client } from ${JSON.stringify(join(NODE_DIR, 'src', 'index.js'))};
    const c = new Client({ socket: ${JSON.stringify(path)}, timeout: 600000 });
    c.connect().then(() => console.log('connected'), (e) => console.log('rejected', e.name));
    c.close();
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  const [code, signal] = await new Promise((res) => child.once('exit', (c, s) => res([c, s])));
  clearTimeout(timer);
  assert.equal(signal, null, `the process did not exit by itself (output: ${out})`);
  assert.equal(code, 0);
  assert.equal(out.trim(), 'rejected ConnectionClosed');
});

test('connect() while hello is in flight resolves only after hello', async (t) => {
  const { path } = await answering(t, { delay: 100 });
  const c = new Client({ socket: path, timeout: WAIT, role: 'tool' });
  t.after(() => c.destroy());
  const first = c.connect();
  await sleep(30); // connected, hello sent, not answered
  const second = await c.connect();
  assert.equal(second, c);
  assert.equal(c.session, 7, 'the second connect() resolved before hello was answered');
  assert.equal(await first, c);
});

test('connect() on a client whose connection the broker closed rejects with ConnectionClosed', async (t) => {
  const { path } = await fakeBroker(t, 'line', (peer) => { setTimeout(() => peer.socket.end(), 20); });
  const c = await new Client({ socket: path, timeout: WAIT }).connect();
  await new Promise((res) => c.once('close', res));
  await assert.rejects(c.connect(), (e) => e instanceof ConnectionClosed && e === c.closeError);
});

test('timeouts past setTimeout\'s limit mean no limit (connecting, calls, waits)', async (t) => {
  const { path } = await answering(t, { delay: 50 });
  const c = await new Client({ socket: path, timeout: DAYS_30 }).connect();
  t.after(() => c.destroy());
  assert.equal(await c.call('a'), 'a', 'a 30-day default timeout fired');
  assert.equal(await c.call('b', undefined, { timeout: 2 ** 31 }), 'b');
  assert.equal(await c.call('c', undefined, { timeout: Infinity }), 'c');
  const waiting = c.nextNotification({ timeout: 2 ** 32 });
  const first = await Promise.race([waiting, sleep(100).then(() => 'still waiting')]);
  assert.equal(first, 'still waiting', 'a 2^32 ms wait ended at once');
  const r = c.receive({ timeout: DAYS_30 });
  r.catch(() => {});
  assert.equal(await Promise.race([r, sleep(50).then(() => 'still waiting')]), 'still waiting');
  // A small timeout still applies.
  await assert.rejects(c.call('slow', undefined, { timeout: 10 }), TimeoutError);
});

test('closeTimeout: Infinity waits for the broker to finish (no drop after 1 ms)', async (t) => {
  const { path } = await fakeBroker(t, 'line', (peer) => {
    peer.socket.allowHalfOpen = true;
    peer.socket.on('end', () => {
      peer.next().then(async (m) => {
        await sleep(100);
        peer.socket.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: 'answered' }) + '\n');
      });
    });
  });
  for (const closeTimeout of [Infinity, DAYS_30, null]) {
    const c = await new Client({ socket: path, timeout: WAIT, closeTimeout: /** @type {any} */ (closeTimeout) }).connect();
    const inFlight = c.call('x');
    await c.close();
    assert.equal(await inFlight, 'answered', `closeTimeout ${closeTimeout}`);
  }
});
