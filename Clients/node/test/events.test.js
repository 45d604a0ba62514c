// app.subscribe / app.event / app.ack: delivery (pull, async iterator, EventEmitter), queueing,
// re-delivery after a reconnect, takeover by a second subscriber.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { UNAUTHORIZED, INVALID_PARAMS, SubscriptionEnded } from '../src/index.js';
import { startBroker, rejectsWith, takeEvents, subscribeFresh, barrier, eventually, NODE_DIR, WAIT, APP, APP_SHARE, NOTES } from './support.js';

/** @type {import('./support.js').Broker} */
let broker;
before(async () => { broker = await startBroker(); });
after(() => broker.stop());

test('live delivery and ack', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const tool = await broker.tool();
  const r = await tool.urlOpen('deeplinkmyapp://customerdetail?id=42');
  assert.equal(r.delivered, true);
  assert.equal(r.queued, false);
  const ev = await app.nextEvent({ timeout: WAIT });
  assert.ok(ev, 'no app.event arrived');
  assert.equal(ev.id, r.eventID);
  assert.equal(ev.kind, 'openURL');
  assert.equal(ev.url, 'deeplinkmyapp://customerdetail?id=42');
  assert.equal(ev.via, 'scheme');
  assert.equal(ev.sourceApp, undefined, 'opened by a tool: no sourceApp');
  assert.deepEqual(await app.appAck([ev.id]), { acked: 1 });
  assert.deepEqual(await app.appAck(ev.id), { acked: 0 }, 'already acked: 0, not an error');
  assert.deepEqual(await app.appAck(['ev-999999', 'nope']), { acked: 0 });
  assert.deepEqual(await app.appAck([]), { acked: 0 });
  assert.equal((await tool.brokerStatus()).pendingEvents, 0);
});

test('a universal link arrives as continueUserActivity; an extension is the sourceApp', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const ext = await broker.extension(APP_SHARE);
  const r1 = await ext.urlOpen('https://example.com/computers/raspberry-pi');
  assert.equal(r1.via, 'universalLink');
  const r2 = await ext.urlOpen('deeplinkmyapp://from-extension');
  const [e1, e2] = await takeEvents(app, 2);
  assert.equal(e1.id, r1.eventID);
  assert.equal(e1.kind, 'continueUserActivity');
  assert.equal(e1.activityType, 'NSUserActivityTypeBrowsingWeb');
  assert.equal(e1.webpageURL, 'https://example.com/computers/raspberry-pi');
  assert.equal(e2.id, r2.eventID);
  assert.equal(e2.sourceApp, APP_SHARE);
  assert.equal((await app.appAck([e1.id, e2.id])).acked, 2);
});

test('events as an async iterator', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const tool = await broker.tool();
  const opened = [];
  for (let i = 0; i < 3; i++) opened.push((await tool.urlOpen(`deeplinkmyapp://iter/${i}`)).eventID);
  const got = [];
  for await (const ev of app.events({ timeout: WAIT })) {
    got.push(ev);
    await app.appAck(ev.id);
    if (got.length === 3) break;
  }
  assert.deepEqual(got.map((e) => e.id), opened);
  assert.deepEqual(got.map((e) => e.url), [0, 1, 2].map((i) => `deeplinkmyapp://iter/${i}`));
  // The iterator ends on an idle timeout, and when the connection closes.
  const none = [];
  for await (const ev of app.events({ timeout: 50 })) none.push(ev);
  assert.deepEqual(none, []);
  const ending = (async () => {
    const seen = [];
    for await (const n of app.notifications()) seen.push(n);
    return seen;
  })();
  await app.close();
  assert.deepEqual(await ending, []);
});

test('events through the EventEmitter: a consumer takes them, so nothing is queued', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const tool = await broker.tool();
  const seen = [];
  const all = [];
  const got = new Promise((resolve) => {
    app.consume('app.event', (ev) => {
      seen.push(ev);
      if (seen.length === 2) resolve(undefined);
    });
  });
  app.on('notification', (n) => all.push(n.method));
  const r1 = await tool.urlOpen('deeplinkmyapp://emitter/1');
  const r2 = await tool.urlOpen('deeplinkmyapp://emitter/2');
  await got;
  assert.deepEqual(seen.map((e) => e.id), [r1.eventID, r2.eventID]);
  assert.deepEqual(all, ['app.event', 'app.event']);
  await barrier(app);
  assert.equal(app.pendingNotifications, 0);
  assert.equal((await app.appAck(seen.map((e) => e.id))).acked, 2);
});

test('a listener added with on() only observes: the pull API still gets every event', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const tool = await broker.tool();
  const logged = [];
  const methods = [];
  app.on('app.event', (ev) => logged.push(ev.id));
  app.on('notification', (n) => methods.push(n.method));
  const opened = [];
  for (let i = 0; i < 3; i++) opened.push((await tool.urlOpen(`deeplinkmyapp://observed/${i}`)).eventID);
  await barrier(app); // every event has been read (and emitted) while nothing pulled
  assert.deepEqual(logged, opened);
  assert.deepEqual(methods, ['app.event', 'app.event', 'app.event']);
  assert.equal(app.pendingNotifications, 3, 'an observer took events from the pull API');
  const got = [];
  for await (const ev of app.events({ timeout: WAIT })) {
    got.push(ev.id);
    if (got.length === 3) break;
  }
  assert.deepEqual(got, opened);
  assert.equal((await app.appAck(got)).acked, 3);
});

test('the backlog reaches listeners added after appSubscribe(): observers see it, a consumer takes it', async () => {
  const tool = await broker.tool();
  // Events for Notes while it is not subscribed: they wait at the broker.
  const opened = [];
  for (let i = 0; i < 2; i++) opened.push((await tool.urlOpen(`notes://backlog/${i}`)).eventID);
  const notes = await broker.app(NOTES);
  const { pending } = await notes.appSubscribe();
  assert.ok(pending >= 2);
  await barrier(notes); // the backlog has arrived (with the subscribe's answer), nobody listening
  assert.equal(notes.pendingNotifications, pending);
  const observed = [];
  const observedAll = [];
  notes.on('app.event', (ev) => observed.push(ev.id));
  notes.on('notification', (n) => observedAll.push(n.params.id));
  await new Promise((res) => setImmediate(res));
  assert.equal(observed.length, pending, 'an observer added after the subscribe did not get the backlog');
  assert.deepEqual(observed.slice(-2), opened);
  assert.deepEqual(observedAll, observed);
  assert.equal(notes.pendingNotifications, pending, 'observing took events off the queue');
  const taken = [];
  notes.consume('app.event', (ev) => taken.push(ev.id));
  await new Promise((res) => setImmediate(res));
  assert.deepEqual(taken, observed, 'a consumer gets the queued events first, oldest first');
  assert.equal(notes.pendingNotifications, 0, 'a consumer takes what it gets');
  // A live event: everyone gets it once; nothing is queued.
  const live = (await tool.urlOpen('notes://backlog/live')).eventID;
  await barrier(notes);
  assert.equal(taken.at(-1), live);
  assert.equal(observed.at(-1), live);
  assert.equal(observed.length, pending + 1, 'an observer saw an event twice');
  assert.equal(notes.pendingNotifications, 0);
  assert.equal((await notes.appAck(taken)).acked, pending + 1);
  await notes.close();
});

test('timeout semantics of the pull API: 0 polls, null / Infinity / undefined wait', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  assert.equal(await app.nextNotification({ timeout: 0 }), null);
  assert.equal(await app.nextEvent({ timeout: 0 }), null);
  const none = [];
  for await (const ev of app.events({ timeout: 0 })) none.push(ev);
  assert.deepEqual(none, []);
  for (const timeout of [null, Infinity, undefined]) {
    const ac = new AbortController();
    const waiting = app.nextNotification({ timeout, signal: ac.signal });
    waiting.catch(() => {});
    const first = await Promise.race([waiting, new Promise((res) => setTimeout(() => res('waiting'), 50))]);
    assert.equal(first, 'waiting', `timeout ${timeout} did not wait`);
    ac.abort();
  }
});

test('queued while nobody listens, delivered oldest first, re-delivered after a reconnect until acked', async () => {
  const tool = await broker.tool();
  const opened = [];
  for (let i = 0; i < 3; i++) opened.push(await tool.urlOpen(`notes://note/${i}`));
  assert.ok(opened.every((o) => o.queued && !o.delivered));
  const pendingBefore = (await tool.brokerStatus()).pendingEvents;
  assert.ok(pendingBefore >= 3);

  const first = await broker.app(NOTES);
  const { pending } = await first.appSubscribe();
  assert.ok(pending >= 3, `pending ${pending}`);
  const got = await takeEvents(first, pending);
  const ids = got.map((e) => e.id);
  const mine = got.filter((e) => opened.some((o) => o.eventID === e.id));
  assert.deepEqual(mine.map((e) => e.url), ['notes://note/0', 'notes://note/1', 'notes://note/2'], 'oldest first');
  assert.deepEqual([...ids].sort((a, b) => Number(a.slice(3)) - Number(b.slice(3))), ids, 'ids increase');
  assert.equal((await first.appAck(ids[0])).acked, 1);
  await first.close(); // gone before acking the rest

  const again = await broker.app(NOTES);
  const sub = await again.appSubscribe();
  assert.equal(sub.pending, ids.length - 1);
  const redelivered = await takeEvents(again, sub.pending);
  assert.deepEqual(redelivered.map((e) => e.id), ids.slice(1), 'the same ids, in the same order');
  assert.deepEqual(redelivered.map((e) => e.url), got.slice(1).map((e) => e.url));
  assert.equal((await again.appAck(redelivered.map((e) => e.id))).acked, ids.length - 1);
  assert.equal((await tool.brokerStatus()).pendingEvents, pendingBefore - ids.length);
});

test('a second subscriber takes over; the old one is told, gets nothing more, its acks still count', async () => {
  const old = await broker.app();
  await subscribeFresh(old);
  const told = [];
  old.on('app.subscriptionEnded', (e) => told.push(e));
  const tool = await broker.tool();
  const r1 = await tool.urlOpen('deeplinkmyapp://takeover/1');
  const e1 = await old.nextEvent({ timeout: WAIT });
  assert.equal(e1?.id, r1.eventID);

  const fresh = await broker.app();
  const sub = await fresh.appSubscribe();
  assert.equal(sub.pending, 1, 'the unacked event is pending for the new subscriber');
  const [again] = await takeEvents(fresh, 1);
  assert.equal(again.id, e1.id);
  const r2 = await tool.urlOpen('deeplinkmyapp://takeover/2');
  assert.equal(r2.delivered, true);
  assert.equal((await fresh.nextEvent({ timeout: WAIT }))?.id, r2.eventID);
  // The broker writes an event before the opener's answer; a round trip on the old connection
  // after that answer would have read it.
  await barrier(old);
  // It was told (app.subscriptionEnded), which ends its wait for an event, with the reason.
  assert.equal(told.length, 1);
  assert.equal(told[0].app, APP);
  assert.match(told[0].reason, /subscribed/);
  const err = await old.nextEvent({ timeout: WAIT }).then(() => null, (e) => e);
  assert.ok(err instanceof SubscriptionEnded, `expected SubscriptionEnded, got ${err}`);
  assert.equal(err.reason, told[0].reason);
  assert.equal(err.app, APP);
  assert.ok(err.message.includes(err.reason));
  assert.deepEqual(old.subscriptionEnded, told[0]);
  assert.equal(old.pendingNotifications, 0, 'the old subscriber still receives events');
  assert.equal(old.closed, false);
  assert.equal((await old.appAck(e1.id)).acked, 1, 'the old connection\'s ack counts');
  assert.equal((await fresh.appAck([e1.id, r2.eventID])).acked, 1);
});

test('a takeover ends the old connection\'s events() loop; subscribing again takes the events back', async () => {
  const old = await broker.app();
  await subscribeFresh(old);
  const tool = await broker.tool();
  const r1 = await tool.urlOpen('deeplinkmyapp://takeover-iter/1');
  assert.equal(r1.delivered, true);
  const got = [];
  const loop = (async () => {
    for await (const ev of old.events()) got.push(ev.id); // no idle timeout: it waits for events
  })();
  const fresh = await broker.app();
  await fresh.appSubscribe();
  // Without the end, the loop would wait for ever.
  const ended = await Promise.race([loop.then(() => true), new Promise((r) => setTimeout(r, 5000, false))]);
  assert.equal(ended, true, 'the events() loop did not end at the takeover');
  assert.deepEqual(got, [r1.eventID], 'the events sent before the takeover come first');
  assert.equal(old.subscriptionEnded?.app, APP);
  assert.match(old.subscriptionEnded?.reason ?? '', /subscribed/);
  // The connection stays usable; subscribing again takes the events back, and the notice queued
  // before its answer is dropped (it does not end the next wait).
  await barrier(old);
  await old.appSubscribe();
  assert.equal(old.subscriptionEnded, undefined);
  assert.equal((await fresh.nextEvent({ timeout: WAIT }))?.id, r1.eventID); // it had it, unacked
  await rejectsWithSubscriptionEnded(fresh.nextEvent({ timeout: WAIT }));
  const r2 = await tool.urlOpen('deeplinkmyapp://takeover-iter/2');
  assert.equal(r2.delivered, true);
  const ids = (await takeEvents(old, 2)).map((e) => e.id);
  assert.deepEqual(ids, [r1.eventID, r2.eventID]);
  await old.appAck(ids);
});

test('a notice queued before subscribing again does not end the new subscription', async () => {
  const old = await broker.app();
  await subscribeFresh(old);
  const fresh = await broker.app();
  await fresh.appSubscribe(); // old is told; it has not read the notice yet
  await eventually(async () => (await barrier(old)) && old.pendingNotifications === 1, 'the notice');
  await old.appSubscribe();
  assert.equal(old.pendingNotifications, 0);
  const r = await (await broker.tool()).urlOpen('deeplinkmyapp://stale-notice');
  assert.equal((await old.nextEvent({ timeout: WAIT }))?.id, r.eventID);
  await old.appAck(r.eventID);
});

test('appUnsubscribe(): new events wait for the next subscriber; the connection stays open', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const tool = await broker.tool();
  assert.equal((await tool.urlOpen('deeplinkmyapp://unsub/live')).delivered, true);
  const live = await app.nextEvent({ timeout: WAIT });
  assert.deepEqual(await app.appUnsubscribe(), { unsubscribed: true });
  const r = await tool.urlOpen('deeplinkmyapp://unsub/queued');
  assert.equal(r.delivered, false);
  assert.equal(r.queued, true);
  assert.equal(await app.nextEvent({ timeout: 300 }), null, 'an unsubscribed connection still receives events');
  assert.deepEqual(await app.appUnsubscribe(), { unsubscribed: false }, 'no longer the subscriber');
  assert.deepEqual(await (await broker.app()).appUnsubscribe(), { unsubscribed: false }, 'never subscribed');
  await rejectsWith((await broker.tool()).appUnsubscribe(), UNAUTHORIZED);
  const { pending } = await app.appSubscribe();
  assert.equal(pending, 2);
  const ids = (await takeEvents(app, 2)).map((e) => e.id);
  assert.deepEqual(ids, [live?.id, r.eventID]);
  assert.equal((await app.appAck(ids)).acked, 2);
});

test('events({unsubscribe: true}): breaking out of the loop unsubscribes; by default it does not', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const tool = await broker.tool();
  const r1 = await tool.urlOpen('deeplinkmyapp://loop/1');
  for await (const ev of app.events({ timeout: WAIT })) {
    assert.equal(ev.id, r1.eventID);
    break;
  }
  const r2 = await tool.urlOpen('deeplinkmyapp://loop/2');
  assert.equal(r2.delivered, true, 'a plain events() loop keeps the subscription');
  for await (const ev of app.events({ timeout: WAIT, unsubscribe: true })) {
    assert.equal(ev.id, r2.eventID);
    break; // the loop's end waits for app.unsubscribe's answer
  }
  const r3 = await tool.urlOpen('deeplinkmyapp://loop/3');
  assert.equal(r3.delivered, false);
  assert.equal(r3.queued, true);
  await app.appSubscribe();
  const ids = (await takeEvents(app, 3)).map((e) => e.id);
  assert.deepEqual(ids, [r1.eventID, r2.eventID, r3.eventID]);
  await app.appAck(ids);
});

/** @param {Promise<unknown>} promise */
async function rejectsWithSubscriptionEnded(promise) {
  const err = await promise.then(() => null, (e) => e);
  assert.ok(err instanceof SubscriptionEnded, `expected SubscriptionEnded, got ${err}`);
  return err;
}

test('notifications that arrive while a call waits are queued in order', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const tool = await broker.tool();
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await tool.urlOpen(`deeplinkmyapp://queued/${i}`)).eventID);
  await barrier(app);
  assert.equal(app.pendingNotifications, 3);
  const n = await app.nextNotification({ method: 'app.event', timeout: 0 });
  assert.equal(n?.method, 'app.event');
  assert.equal(n?.params.id, ids[0]);
  assert.deepEqual((await takeEvents(app, 2)).map((e) => e.id), ids.slice(1));
  assert.equal(await app.nextNotification({ timeout: 0 }), null, 'timeout 0: only what is queued');
  await app.appAck(ids);
});

test('role checks', async () => {
  await rejectsWith((await broker.tool()).appSubscribe(), UNAUTHORIZED);
  await rejectsWith((await broker.extension()).appSubscribe(), UNAUTHORIZED);
  await rejectsWith((await broker.tool()).appAck(['ev-1']), UNAUTHORIZED);
  await rejectsWith((await broker.app()).call('app.ack', { ids: 'ev-1' }), INVALID_PARAMS);
});

test('an app launched on demand finds the broker and its bundle ID in its environment', async () => {
  const out = join(broker.dir, 'launched.json');
  const manifest = join(broker.state, 'apps', '50-launched.json');
  writeFileSync(manifest, JSON.stringify({
    bundleID: 'com.example.launched',
    urlSchemes: ['launchedapp'],
    launch: [process.execPath, join(NODE_DIR, 'test', 'fixtures', 'launched-app.js'), out],
  }));
  const tool = await broker.tool();
  try {
    await tool.appsReload();
    const r = await tool.urlOpen('launchedapp://hello?from=node');
    assert.equal(r.queued, true);
    await eventually(() => existsSync(out), `the launched app to write ${out} (log: ${join(broker.state, 'logs')})`);
    const seen = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(seen.bundleID, 'com.example.launched');
    assert.equal(seen.socket, broker.socket);
    assert.deepEqual(seen.events.map((e) => [e.id, e.url]), [[r.eventID, 'launchedapp://hello?from=node']]);
    await eventually(async () => (await tool.brokerStatus()).pendingEvents === 0, 'the launched app\'s ack');
  } finally {
    unlinkSync(manifest);
    await tool.appsReload();
  }
});
