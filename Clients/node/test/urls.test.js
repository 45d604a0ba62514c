// url.open / url.canOpen / url.explain: schemes, universal links, the browser, fallbacks, errors.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { NO_HANDLER, INVALID_PARAMS } from '../src/index.js';
import { startBroker, rejectsWith, APP, BROWSER, NOTES } from './support.js';

/** @type {import('./support.js').Broker} */
let broker;
before(async () => { broker = await startBroker(); });
after(() => broker.stop());

test('url.canOpen', async () => {
  const c = await broker.tool();
  const cases = [
    ['deeplinkmyapp://customerdetail?id=42', APP, 'scheme'],
    ['DeepLinkMyApp://customerdetail?id=42', APP, 'scheme'],
    ['notes://new', NOTES, 'scheme'],
    ['https://example.com/computers/raspberry-pi', APP, 'universalLink'],
    ['https://example.com/about', BROWSER, 'browser'],
    ['http://example.com/computers/pi', BROWSER, 'browser'],
    ['https://www.example.org/', BROWSER, 'browser'],
  ];
  for (const [url, app, via] of cases) {
    assert.deepEqual(await c.urlCanOpen(url), { canOpen: true, app, via }, url);
  }
  assert.equal((await c.urlCanOpen(new URL('notes://from-a-url-object'))).app, NOTES);
  const no = await c.urlCanOpen('nosuchscheme://x');
  assert.equal(no.canOpen, false);
  assert.equal(no.app, undefined);
  await rejectsWith(c.urlCanOpen('not a url'), INVALID_PARAMS);
  await rejectsWith(c.call('url.canOpen', {}), INVALID_PARAMS);
});

test('url.open by scheme queues an event', async () => {
  const c = await broker.tool();
  const r = await c.urlOpen('notes://new?title=hi');
  assert.equal(r.app, NOTES);
  assert.equal(r.via, 'scheme');
  assert.match(r.eventID, /^ev-/);
  assert.equal(r.queued, true); // nobody subscribed to Notes
  assert.equal(r.delivered, false);
  const r2 = await c.urlOpen('notes://second');
  assert.notEqual(r2.eventID, r.eventID);
});

test('url.open with no handler is -32004 naming the URL', async () => {
  const c = await broker.tool();
  const e = await rejectsWith(c.urlOpen('nosuchscheme://thing?id=1'), NO_HANDLER);
  assert.ok(e.message.includes('nosuchscheme://thing?id=1'), e.message);
  assert.equal(e.method, 'url.open');
  await rejectsWith(c.urlOpen('::::'), INVALID_PARAMS);
  await rejectsWith(c.urlOpen('nosuchscheme://x', { fallback: 'not a url' }), INVALID_PARAMS);
});

test('url.open with a fallback', async () => {
  const c = await broker.tool();
  let r = await c.urlOpen('nosuchscheme://customerdetail?id=42', { fallback: 'notes://customers/42' });
  assert.deepEqual([r.app, r.via], [NOTES, 'fallback']);
  r = await c.urlOpen('nosuchscheme://x', { fallback: 'https://example.com/customers/42' });
  assert.deepEqual([r.app, r.via, r.kind], [APP, 'fallback', 'continueUserActivity']);
  r = await c.urlOpen('deeplinkmyapp://x', { fallback: 'notes://y' });
  assert.deepEqual([r.app, r.via], [APP, 'scheme'], 'the URL itself wins when it can be opened');
});

test('url.explain', async () => {
  const c = await broker.tool();
  let r = await c.urlExplain('https://example.com/computers/pi');
  assert.equal(r.url, 'https://example.com/computers/pi');
  assert.deepEqual([r.decision.app, r.decision.via], [APP, 'universalLink']);
  assert.ok(Array.isArray(r.steps));
  assert.ok(r.text.includes('example.com'));
  r = await c.urlExplain('nosuchscheme://x');
  assert.equal(r.decision.error.code, NO_HANDLER);
  r = await c.urlExplain('nosuchscheme://x', { fallback: 'notes://y' });
  assert.equal(r.decision.via, 'fallback');
  assert.equal(r.fallback, 'notes://y');
});
