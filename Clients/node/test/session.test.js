// hello, roles and tokens; what is allowed before hello; rpc.discover; broker.status; apps.*;
// closing: by the client, by a manifest reload (with the broker's reason), by SIGTERM.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { unlinkSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

import {
  Client, connect, ConnectionClosed, RpcError, ErrorCode, urlItem,
  UNAUTHORIZED, METHOD_NOT_FOUND, INVALID_PARAMS, INVALID_REQUEST,
} from '../src/index.js';
import {
  startBroker, rejectsWith, eventually, WAIT, APP, APP_GROUP, APP_SHARE, APP_WIDGET, BROWSER, NOTES,
  SECURE, SECURE_EXT, SECURE_EXT_OWN, SECURE_EXT_TOKEN, SECURE_TOKEN,
} from './support.js';

/** The contract's methods (CONTRACT.md), all of which rpc.discover must name. */
const CONTRACT_METHODS = [
  'hello', 'rpc.discover', 'broker.status', 'apps.list', 'apps.reload', 'url.open', 'url.canOpen',
  'app.subscribe', 'app.ack', 'share.targets', 'share.send', 'share.list', 'share.get', 'share.complete',
  'defaults.get', 'defaults.set', 'defaults.remove', 'defaults.list', 'defaults.watch',
];

/** @type {import('./support.js').Broker} */
let broker;
before(async () => { broker = await startBroker(); });
after(() => broker.stop());

test('before hello: broker.status and rpc.discover are served', async () => {
  const c = await broker.client();
  assert.equal(c.session, undefined);
  const status = await c.brokerStatus();
  for (const key of ['version', 'connections', 'apps', 'subscribers', 'pendingEvents', 'pendingShares', 'uptimeSeconds']) {
    assert.ok(key in status, `broker.status lacks ${key}`);
  }
  assert.equal(status.apps, 4);
  const doc = await c.discover();
  assert.ok(doc.methods.some((m) => m.name === 'hello'));
});

test('before hello: every other known method is -32001; an unknown one -32601', async () => {
  const c = await broker.client();
  const served = (await c.discover()).methods.map((m) => m.name);
  const answers = await c.batch(served.map((m) => [m, {}]));
  served.forEach((m, i) => {
    if (m === 'rpc.discover' || m === 'broker.status') assert.ok(!(answers[i] instanceof RpcError), `${m}: ${answers[i]}`);
    else if (m === 'hello') assert.equal(answers[i].code, INVALID_PARAMS, 'hello without a role');
    else assert.equal(answers[i]?.code, UNAUTHORIZED, `${m} before hello: ${answers[i]}`);
  });
  await rejectsWith(c.urlOpen('deeplinkmyapp://x'), UNAUTHORIZED);
  await rejectsWith(c.urlCanOpen('deeplinkmyapp://x'), UNAUTHORIZED);
  await rejectsWith(c.appsList(), UNAUTHORIZED);
  await rejectsWith(c.appSubscribe(), UNAUTHORIZED);
  await rejectsWith(c.shareList(), UNAUTHORIZED);
  await rejectsWith(c.shareTargets([urlItem('https://a.example/')]), UNAUTHORIZED);
  await rejectsWith(c.defaultsList(APP_GROUP), UNAUTHORIZED);
  const e = await rejectsWith(c.call('no.such.method', {}), METHOD_NOT_FOUND);
  assert.equal(e.method, 'no.such.method');
  assert.ok(e.message.includes('no.such.method'), e.message);
  // The connection stays usable.
  assert.equal((await c.hello('tool')).role, 'tool');
  assert.equal((await c.urlCanOpen('deeplinkmyapp://x')).canOpen, true);
});

test('hello as a tool', async () => {
  const c = await broker.client();
  const r = await c.hello('tool');
  assert.equal(r.protocol, 1);
  assert.equal(r.broker.name, 'sharebroker');
  assert.equal(typeof r.broker.version, 'string');
  assert.equal(r.role, 'tool');
  assert.equal(typeof r.session, 'number');
  assert.equal(c.session, r.session);
  assert.equal(c.role, 'tool');
  assert.equal(c.maxMessage, r.maxMessage);
  const other = await broker.tool();
  assert.notEqual(other.session, c.session);
});

test('hello as an app and as extensions', async () => {
  const a = await broker.client();
  const r = await a.hello('app', { bundleID: APP });
  assert.deepEqual([r.role, r.bundleID], ['app', APP]);
  assert.equal(a.bundleID, APP);
  const e = await broker.client();
  assert.equal((await e.hello('extension', { bundleID: APP_SHARE })).bundleID, APP_SHARE);
  assert.equal((await (await broker.client()).hello('extension', APP_WIDGET)).bundleID, APP_WIDGET);
});

test('hello takes the bundle ID from $SHAREBROKER_BUNDLE_ID when none is given', async () => {
  const saved = process.env.SHAREBROKER_BUNDLE_ID;
  try {
    delete process.env.SHAREBROKER_BUNDLE_ID;
    await rejectsWith((await broker.client()).hello('app'), INVALID_PARAMS);
    process.env.SHAREBROKER_BUNDLE_ID = NOTES;
    assert.equal((await (await broker.client()).hello('app')).bundleID, NOTES);
    assert.equal((await (await broker.client()).hello('tool')).bundleID, undefined, 'a tool names no bundle');
  } finally {
    if (saved === undefined) delete process.env.SHAREBROKER_BUNDLE_ID;
    else process.env.SHAREBROKER_BUNDLE_ID = saved;
  }
});

test('hello errors', async () => {
  const c = await broker.client();
  await rejectsWith(c.hello(/** @type {any} */ ('wizard')), INVALID_PARAMS);
  await rejectsWith(c.hello('extension', { bundleID: undefined }), INVALID_PARAMS);
  await rejectsWith(c.hello('app', { bundleID: 'com.nobody.here' }), UNAUTHORIZED);
  // The wrong role for the bundle: -32001 with data.role, the bundle's role.
  let e = await rejectsWith(c.hello('app', { bundleID: APP_SHARE }), UNAUTHORIZED);
  assert.deepEqual(e.data, { role: 'extension' });
  e = await rejectsWith(c.hello('extension', { bundleID: APP }), UNAUTHORIZED);
  assert.deepEqual(e.data, { role: 'app' });
  assert.equal((await c.hello('app', { bundleID: APP })).bundleID, APP);
  // A second hello: the same identity is answered again; another is refused.
  const again = await c.hello('app', { bundleID: APP });
  assert.equal(again.session, c.session);
  await rejectsWith(c.hello('app', { bundleID: BROWSER }), UNAUTHORIZED);
  await rejectsWith(c.hello('tool'), UNAUTHORIZED);
});

test('tokens', async () => {
  await rejectsWith((await broker.client()).hello('app', { bundleID: SECURE }), UNAUTHORIZED);
  await rejectsWith((await broker.client()).hello('app', { bundleID: SECURE, token: 'wrong' }), UNAUTHORIZED);
  assert.equal((await (await broker.client()).hello('app', { bundleID: SECURE, token: SECURE_TOKEN })).bundleID, SECURE);
  // An extension without its own token uses its app's; one with its own must give that one.
  await rejectsWith((await broker.client()).hello('extension', { bundleID: SECURE_EXT }), UNAUTHORIZED);
  assert.equal((await (await broker.client()).hello('extension', { bundleID: SECURE_EXT, token: SECURE_TOKEN })).bundleID, SECURE_EXT);
  await rejectsWith((await broker.client()).hello('extension', { bundleID: SECURE_EXT_OWN, token: SECURE_TOKEN }), UNAUTHORIZED);
  assert.equal((await broker.extension(SECURE_EXT_OWN, SECURE_EXT_TOKEN)).bundleID, SECURE_EXT_OWN);
  // connect({role, bundleID, token}) says hello; a refused hello rejects and closes the client.
  const ok = await broker.app(SECURE, SECURE_TOKEN);
  assert.equal(ok.helloResult?.bundleID, SECURE);
  const refused = new Client({ socket: broker.socket, timeout: WAIT, role: 'app', bundleID: SECURE, token: 'nope' });
  await rejectsWith(refused.connect(), UNAUTHORIZED);
  assert.equal(refused.closed, true);
});

test('rpc.discover names every contract method, and every method it names is served', async () => {
  const c = await broker.tool();
  const doc = await c.discover();
  assert.ok('openrpc' in doc);
  const names = new Set(doc.methods.map((m) => m.name));
  for (const m of CONTRACT_METHODS) assert.ok(names.has(m), `rpc.discover does not name ${m}`);
  const all = [...new Set([...CONTRACT_METHODS, ...names])].filter((m) => m !== 'hello');
  const results = await c.batch(all.map((m) => [m, {}]));
  results.forEach((r, i) => {
    if (r instanceof RpcError) assert.notEqual(r.code, METHOD_NOT_FOUND, `${all[i]} is not served: ${r}`);
  });
});

test('broker.status counts connections and subscribers', async () => {
  const c = await broker.tool();
  const before = await c.brokerStatus();
  assert.equal(typeof before.version, 'string');
  assert.equal(typeof before.uptimeSeconds, 'number');
  const extra = await Promise.all([broker.tool(), broker.tool(), broker.tool()]);
  assert.equal((await c.brokerStatus()).connections, before.connections + 3);
  await Promise.all(extra.map((x) => x.close()));
  await eventually(async () => (await c.brokerStatus()).connections === before.connections, 'the closed connections to go');
  const sub = await broker.app(APP);
  await sub.appSubscribe();
  assert.ok((await c.brokerStatus()).subscribers >= 1);
  const verbose = await c.brokerStatus({ verbose: true });
  assert.ok(Array.isArray(verbose.clients), 'verbose: true lists the clients');
  assert.ok(verbose.clients.some((x) => x.session === sub.session && x.bundleID === APP));
});

test('apps.list and apps.reload', async () => {
  const c = await broker.tool();
  const apps = await c.appsList();
  for (const key of ['apps', 'errors', 'warnings', 'conflicts']) assert.ok(key in apps, key);
  const byId = new Map(apps.apps.map((a) => [a.bundleID, a]));
  assert.deepEqual([...byId.keys()].sort(), [APP, BROWSER, SECURE, NOTES].sort());
  assert.ok(byId.get(APP).appGroups.includes(APP_GROUP));
  assert.equal(byId.get(SECURE).hasToken, true);
  assert.ok(!JSON.stringify(apps).includes(SECURE_TOKEN), 'a token is shown');
  const later = join(broker.state, 'apps', '90-later.json');
  const broken = join(broker.state, 'apps', '91-broken.json');
  writeFileSync(later, JSON.stringify({ bundleID: 'com.example.later', urlSchemes: ['laterapp'] }));
  writeFileSync(broken, '{ not json');
  try {
    assert.equal((await c.urlCanOpen('laterapp://x')).canOpen, false, 'not before the reload');
    const reloaded = await c.appsReload();
    assert.ok(reloaded.apps.some((a) => a.bundleID === 'com.example.later'));
    assert.ok(reloaded.errors.some((e) => e.file === '91-broken.json'), JSON.stringify(reloaded.errors));
    assert.equal((await c.urlCanOpen('laterapp://x')).canOpen, true);
  } finally {
    unlinkSync(later);
    unlinkSync(broken);
    await c.appsReload();
  }
  assert.equal((await c.urlCanOpen('laterapp://x')).canOpen, false);
});

test('a session a manifest reload ends: ConnectionClosed carries the broker\'s reason', async () => {
  const path = join(broker.state, 'apps', '92-gone.json');
  writeFileSync(path, JSON.stringify({ bundleID: 'com.example.gone', urlSchemes: ['goneapp'] }));
  const c = await broker.tool();
  try {
    await c.appsReload();
    const app = await broker.app('com.example.gone');
    await app.appSubscribe();
    const closed = new Promise((res) => app.once('close', res));
    const waiting = app.nextNotification();
    waiting.catch(() => {}); // looked at below, after the close
    unlinkSync(path);
    await c.appsReload();
    const err = await closed;
    assert.ok(err instanceof ConnectionClosed, `'close' gave ${err}`);
    await assert.rejects(waiting, (e) => {
      assert.ok(e instanceof ConnectionClosed);
      assert.ok(e.reason instanceof RpcError);
      assert.equal(e.reason.code, UNAUTHORIZED);
      assert.match(e.reason.message, /session ended by a manifest reload: its bundle com\.example\.gone is no longer registered/);
      assert.ok(e.message.includes('com.example.gone'), e.message);
      return true;
    });
    assert.equal(app.closed, true);
    assert.equal(app.closeError?.reason?.code, UNAUTHORIZED);
    await assert.rejects(app.brokerStatus(), (e) => e instanceof ConnectionClosed && e.reason?.code === UNAUTHORIZED);
  } finally {
    if (existsSync(path)) unlinkSync(path);
    await c.appsReload();
  }
});

test('close(): answers in flight arrive, later calls fail, the broker sees the connection go', async () => {
  const watcher = await broker.tool();
  const before = (await watcher.brokerStatus()).connections;
  const c = await broker.tool();
  const inFlight = c.urlCanOpen('notes://x');
  const closing = c.close();
  assert.equal(c.close(), closing, 'close() is idempotent');
  assert.equal((await inFlight).app, NOTES, 'a call made before close() is still answered');
  await closing;
  assert.equal(c.closed, true);
  assert.equal(c.closeError, undefined);
  await assert.rejects(c.brokerStatus(), ConnectionClosed);
  await assert.rejects(c.notify('broker.status'), ConnectionClosed);
  await eventually(async () => (await watcher.brokerStatus()).connections === before, 'the broker to drop the connection');
});

test('a message over the size limit: the broker\'s -32600 (data.closing) ends the connection, answering no call; the client refuses it once it knows the limit', async (t) => {
  const small = await startBroker({ args: ['--max-message', '4096'] });
  t.after(() => small.stop());
  const other = await small.tool();
  // Before hello the client does not know the limit: the broker says why it closes (-32600, id
  // null, data.closing) and closes. That error is not the call's answer: the call fails with
  // ConnectionClosed, with it as the reason, and so do later ones.
  const anon = await small.client();
  const closed = new Promise((res) => anon.once('close', res));
  await assert.rejects(anon.call('url.open', { url: 'deeplinkmyapp://' + 'x'.repeat(10000) }), (e) => {
    assert.ok(e instanceof ConnectionClosed, `taken as an answer: ${e}`);
    assert.ok(e.reason instanceof RpcError);
    assert.equal(e.reason.code, INVALID_REQUEST);
    assert.deepEqual(e.reason.data, { closing: true });
    assert.match(e.message, /4096/);
    return true;
  });
  assert.equal(await closed, anon.closeError);
  assert.equal(anon.closed, true);
  await assert.rejects(anon.brokerStatus(), (e) => e instanceof ConnectionClosed && e.reason?.code === INVALID_REQUEST);
  // After hello it refuses the request itself, and the connection stays usable.
  const c = await small.tool();
  assert.equal(c.maxMessage, 4096);
  const e = await rejectsWith(c.urlOpen('deeplinkmyapp://' + 'x'.repeat(10000)), ErrorCode.INVALID_REQUEST);
  assert.match(e.message, /4096/);
  assert.equal((await c.urlCanOpen('deeplinkmyapp://x')).canOpen, true);
  assert.equal((await other.brokerStatus()).maxMessage, 4096, 'other connections are unaffected');
});

/**
 * Asserts that `e` is ConnectionClosed with the broker's closing error of `code` as its reason.
 * @param {unknown} e
 * @param {number} code
 * @param {string} what
 */
function closedWithReason(e, code, what) {
  assert.ok(e instanceof ConnectionClosed, `${what}: ${e}`);
  assert.ok(e.reason instanceof RpcError, `${what}: no reason: ${e.message}`);
  assert.equal(e.reason.code, code, what);
  assert.deepEqual(e.reason.data, { closing: true }, what);
}

test('a write that meets the socket the broker has just closed keeps the reason: a call right behind one over the size limit', async (t) => {
  // The broker reads the first call, sends its closing error and closes while the second is
  // written: that write fails (EPIPE) with the closing error still unread in the socket. The
  // client reads it before failing the connection: both calls fail with ConnectionClosed and
  // the reason, every time (without that, most tries lost it to the broken pipe).
  const small = await startBroker({ args: ['--max-message', '4096'] });
  t.after(() => small.stop());
  for (let i = 0; i < 50; i++) {
    const c = await small.client(); // (no hello: the client does not know the limit)
    const results = await Promise.allSettled([c.call('broker.status', { pad: 'x'.repeat(5000) }), c.call('broker.status')]);
    for (const r of results) {
      assert.equal(r.status, 'rejected', `try ${i}`);
      closedWithReason(/** @type {PromiseRejectedResult} */ (r).reason, INVALID_REQUEST, `try ${i}`);
    }
    closedWithReason(c.closeError, INVALID_REQUEST, `try ${i}: closeError`);
    c.destroy();
  }
});

test('a write that meets the socket the broker has just closed keeps the reason: hello on a connection over the per-user limit', async (t) => {
  // The broker refuses the connection at once (-32001, data.closing) and closes, often before
  // hello is written: hello's write fails, and connect() must still reject with the reason.
  const limited = await startBroker({ args: ['--max-connections-per-user', '1'] });
  t.after(() => limited.stop());
  await eventually(async () => {
    try {
      await limited.tool();
      return true;
    } catch {
      return false; // (the broker may still count the connection start() tried)
    }
  }, 'the one allowed connection');
  for (let i = 0; i < 50; i++) {
    const c = new Client({ socket: limited.socket, role: 'tool', timeout: WAIT });
    await assert.rejects(c.connect(), (e) => {
      closedWithReason(e, UNAUTHORIZED, `try ${i}`);
      assert.match(/** @type {Error} */ (e).message, /per-user/);
      return true;
    });
    c.destroy();
  }
});

test('SIGTERM: the broker exits 0 and clients see ConnectionClosed', async () => {
  const b = await startBroker();
  let stopped = false;
  try {
    const c = await connect({ socket: b.socket, role: 'tool', timeout: WAIT }); // not closed by stop()
    const closed = new Promise((res) => c.once('close', res));
    await c.brokerStatus();
    assert.equal(await b.stop(), 0);
    stopped = true;
    const err = await closed;
    assert.ok(err instanceof ConnectionClosed, String(err));
    assert.equal(c.closeError, err);
    assert.equal(c.closed, true);
    await assert.rejects(c.brokerStatus(), ConnectionClosed);
  } finally {
    if (!stopped) await b.stop();
  }
});
