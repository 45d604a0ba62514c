// defaults.get/set/remove/list/watch and defaults.changed notifications.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { UNAUTHORIZED, INVALID_PARAMS, VERSION_CONFLICT } from '../src/index.js';
import { startBroker, rejectsWith, barrier, WAIT, APP, APP_GROUP, APP_GROUP2, APP_PDF, APP_SHARE, NOTES, NOTES_GROUP } from './support.js';

/** @type {import('./support.js').Broker} */
let broker;
before(async () => { broker = await startBroker(); });
after(() => broker.stop());

/** The next `n` defaults.changed params on `client`. */
async function changes(client, n) {
  const out = [];
  while (out.length < n) {
    const c = await client.nextNotification({ method: 'defaults.changed', timeout: WAIT });
    assert.ok(c, `only ${out.length} of ${n} defaults.changed arrived`);
    out.push(c.params);
  }
  return out;
}

test('get, set, remove, list and the version counter', async () => {
  const app = await broker.app(NOTES);
  assert.deepEqual(await app.defaultsList(NOTES_GROUP), { values: {}, version: 0 }, 'a fresh group is at version 0');
  const absent = await app.defaultsGet(NOTES_GROUP, 'theme');
  assert.deepEqual([absent.exists, absent.value], [false, null]);
  assert.equal((await app.defaultsSet(NOTES_GROUP, 'theme', 'dark')).version, 1);
  const value = { nested: [1, 2.5, 'ü€😀', null, true], empty: {} };
  assert.equal((await app.defaultsSet(NOTES_GROUP, 'layout', value)).version, 2);
  assert.equal((await app.defaultsSet(NOTES_GROUP, 'nothing', null)).version, 3);
  const got = await app.defaultsGet(NOTES_GROUP, 'layout');
  assert.deepEqual([got.exists, got.value], [true, value]);
  const nul = await app.defaultsGet(NOTES_GROUP, 'nothing');
  assert.deepEqual([nul.exists, nul.value], [true, null], 'a stored null exists');
  assert.deepEqual(await app.defaultsList(NOTES_GROUP), { values: { theme: 'dark', layout: value, nothing: null }, version: 3 });
  assert.deepEqual(await app.defaultsRemove(NOTES_GROUP, 'theme'), { removed: true, version: 4 });
  assert.deepEqual(await app.defaultsRemove(NOTES_GROUP, 'theme'), { removed: false, version: 4 }, 'nothing removed: no new version');
  assert.equal((await app.defaultsGet(NOTES_GROUP, 'theme')).exists, false);
});

test('an app and its extension share the group; groups are separate', async () => {
  const ext = await broker.extension(APP_SHARE);
  const app = await broker.app(APP);
  const { version } = await ext.defaultsSet(APP_GROUP, 'lastShared', 'https://youtu.be/dQw4w9WgXcQ');
  assert.equal((await app.defaultsGet(APP_GROUP, 'lastShared')).value, 'https://youtu.be/dQw4w9WgXcQ');
  assert.equal((await app.defaultsList(APP_GROUP)).version, version);
  assert.equal((await app.defaultsGet(APP_GROUP2, 'lastShared')).exists, false);
});

test('access: tools, other groups, bad params', async () => {
  const tool = await broker.tool();
  await rejectsWith(tool.defaultsGet(APP_GROUP, 'k'), UNAUTHORIZED);
  await rejectsWith(tool.defaultsSet(APP_GROUP, 'k', 1), UNAUTHORIZED);
  await rejectsWith((await broker.client()).defaultsList(APP_GROUP), UNAUTHORIZED);
  const app = await broker.app(APP);
  await rejectsWith(app.defaultsGet(NOTES_GROUP, 'k'), UNAUTHORIZED);
  await rejectsWith(app.defaultsWatch(NOTES_GROUP), UNAUTHORIZED);
  await rejectsWith((await broker.extension(APP_SHARE)).defaultsList(APP_GROUP2), UNAUTHORIZED);
  assert.ok('version' in (await (await broker.extension(APP_PDF)).defaultsList(APP_GROUP2)));
  await rejectsWith(app.call('defaults.get', { group: APP_GROUP }), INVALID_PARAMS);
  await rejectsWith(app.call('defaults.set', { group: APP_GROUP, key: 'k' }), INVALID_PARAMS);
  await rejectsWith(app.defaultsGet(APP_GROUP, ''), INVALID_PARAMS);
});

test('ifVersion: compare-and-set, -32006 with data.version', async () => {
  const app = await broker.app(APP);
  const v = (await app.defaultsList(APP_GROUP2)).version;
  assert.equal((await app.defaultsSet(APP_GROUP2, 'counter', 1, { ifVersion: v })).version, v + 1);
  let e = await rejectsWith(app.defaultsSet(APP_GROUP2, 'counter', 2, { ifVersion: v }), VERSION_CONFLICT);
  assert.equal(/** @type {any} */ (e.data).version, v + 1);
  assert.equal((await app.defaultsGet(APP_GROUP2, 'counter')).value, 1, 'nothing changed');
  e = await rejectsWith(app.defaultsRemove(APP_GROUP2, 'counter', { ifVersion: v }), VERSION_CONFLICT);
  assert.equal(/** @type {any} */ (e.data).version, v + 1);
  assert.equal((await app.defaultsRemove(APP_GROUP2, 'counter', { ifVersion: v + 1 })).removed, true);
});

test('defaults.watch and defaults.changed, with and without a key filter', async () => {
  const watcher = await broker.app(APP);
  assert.equal((await watcher.defaultsWatch(APP_GROUP)).watching, true);
  const filtered = await broker.extension(APP_PDF);
  assert.equal((await filtered.defaultsWatch(APP_GROUP, { keys: ['wanted'] })).watching, true);
  const emitted = [];
  const observed = [];
  filtered.consume('defaults.changed', (p) => emitted.push(p));
  filtered.on('notification', (n) => observed.push(n.params.key)); // an observer takes nothing

  const writer = await broker.extension(APP_SHARE);
  const v1 = (await writer.defaultsSet(APP_GROUP, 'other', { a: 1 })).version;
  const v2 = (await writer.defaultsSet(APP_GROUP, 'wanted', [1, 2])).version;
  const v3 = (await writer.defaultsRemove(APP_GROUP, 'wanted')).version;
  assert.equal((await writer.defaultsRemove(APP_GROUP, 'never-there')).removed, false);

  const got = await changes(watcher, 3);
  assert.deepEqual(got.map((p) => p.version), [v1, v2, v3], 'in version order');
  assert.deepEqual(got[0], { group: APP_GROUP, key: 'other', value: { a: 1 }, version: v1 });
  assert.deepEqual([got[1].key, got[1].value], ['wanted', [1, 2]]);
  assert.equal(got[2].removed, true);
  assert.ok(!('value' in got[2]), 'a removal carries no value');
  // A removal that removed nothing notifies no one: after a later change, only that one comes.
  const v4 = (await writer.defaultsSet(APP_GROUP, 'other', 2)).version;
  assert.deepEqual((await changes(watcher, 1)).map((p) => p.version), [v4]);
  await barrier(watcher);
  assert.equal(watcher.pendingNotifications, 0);

  // The filtered watcher (through its EventEmitter listener) hears only of 'wanted'.
  await barrier(filtered);
  const deadline = Date.now() + WAIT;
  while (emitted.length < 2 && Date.now() < deadline) await barrier(filtered);
  assert.deepEqual(emitted.map((p) => [p.key, p.version]), [['wanted', v2], ['wanted', v3]]);
  assert.equal(filtered.pendingNotifications, 0, 'what a consumer took is queued');
  assert.deepEqual(observed, ['wanted', 'wanted']);
});

test('integers above 2^53: the broker keeps a value\'s lexeme, JSON.parse rounds it (README, "Integers above 2^53")', async () => {
  const app = await broker.app(APP);
  // Written as text (as another client would): the broker keeps the number exactly as sent.
  const big = '18446744073709551615';
  const set = await app.callRaw(`{"jsonrpc":"2.0","id":"big","method":"defaults.set","params":{"group":"${APP_GROUP}","key":"big","value":${big}}}`, { timeout: WAIT });
  assert.equal(typeof set.result.version, 'number');
  const raw = await app.callRaw({ jsonrpc: '2.0', id: 'get', method: 'defaults.get', params: { group: APP_GROUP, key: 'big' } }, { timeout: WAIT });
  assert.equal(raw.result.value, 18446744073709551615, 'parsed as a (rounded) number');
  assert.notEqual(String(raw.result.value), big, 'JSON.parse keeps 2^53 precision only');
  // What the broker makes itself is safe: strings for ids, small counters.
  assert.ok(Number.isSafeInteger(app.session));
  const opened = await app.urlOpen('deeplinkmyapp://big-ints');
  assert.match(opened.eventID, /^ev-[0-9]+$/);
  assert.ok(Number.isSafeInteger((await app.defaultsGet(APP_GROUP, 'big')).version));
  await app.defaultsRemove(APP_GROUP, 'big');
});
