// share.targets / share.send / share.list / share.get / share.complete, the seed flow, the item
// helpers, and the share errors (-32003 with data.candidates, -32002, -32001, -32602).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';

import {
  item, urlItem, textItem, dataItem, pathItem, decodeData,
  NOT_ACCEPTED, NOT_FOUND, UNAUTHORIZED, INVALID_PARAMS,
} from '../src/index.js';
import {
  startBroker, rejectsWith, subscribeFresh, tempDir, WAIT, MINIMAL_PDF,
  APP, APP_GROUP, APP_GROUP2, APP_PDF, APP_SHARE, APP_WIDGET, NOTES, NOTES_GROUP, NOTES_SHARE, SECURE, SECURE_EXT, SECURE_TOKEN,
} from './support.js';

const YOUTUBE = 'https://youtu.be/dQw4w9WgXcQ';

/** @type {import('./support.js').Broker} */
let broker;
before(async () => { broker = await startBroker(); });
after(() => broker.stop());

test('item helpers', () => {
  assert.deepEqual(urlItem('https://a.example/'), { url: 'https://a.example/' });
  assert.deepEqual(item.url(new URL('https://a.example/x'), 'public.url'), { url: 'https://a.example/x', type: 'public.url' });
  assert.deepEqual(textItem('hi', 'public.plain-text'), { text: 'hi', type: 'public.plain-text' });
  assert.deepEqual(dataItem(Buffer.from('hello'), 'h.txt'), { data: 'aGVsbG8=', name: 'h.txt' });
  assert.deepEqual(item.data(new Uint8Array([0, 255, 1]).subarray(1)), { data: '/wE=' });
  assert.deepEqual(item.data('€'), { data: Buffer.from('€').toString('base64') });
  assert.deepEqual(decodeData(dataItem(MINIMAL_PDF, 'x.pdf', 'com.adobe.pdf')), MINIMAL_PDF);
  assert.equal(dataItem(MINIMAL_PDF, undefined, 'com.adobe.pdf').type, 'com.adobe.pdf');
  assert.deepEqual(pathItem('/abs/file.pdf'), { path: '/abs/file.pdf' });
  assert.equal(pathItem('rel/file.pdf').path, join(process.cwd(), 'rel/file.pdf'));
  assert.equal(item.path(new URL('file:///tmp/a%20b.pdf')).path, '/tmp/a b.pdf');
  assert.throws(() => dataItem(/** @type {any} */ (42)), TypeError);
});

test('the seed flow: an extension shares a YouTube link and opens the app, which completes it', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const ext = await broker.extension(APP_SHARE);
  const sent = await ext.shareSend([urlItem(YOUTUBE)], { open: true });
  assert.equal(sent.extension, APP_SHARE);
  assert.equal(sent.app, APP);
  assert.equal(sent.group, APP_GROUP);
  assert.ok(sent.shareID);
  assert.ok(sent.eventID);

  const ev = await app.nextEvent({ timeout: WAIT });
  assert.ok(ev, 'the app got no app.event');
  assert.equal(ev.id, sent.eventID);
  assert.equal(ev.kind, 'openURL');
  assert.equal(ev.url, `deeplinkmyapp://open-from-share?share=${sent.shareID}`);
  assert.equal(ev.sourceApp, APP_SHARE);
  assert.equal(ev.shareID, sent.shareID);

  assert.ok((await app.shareList()).shares.some((s) => s.shareID === sent.shareID));
  const share = await app.shareGet(sent.shareID);
  assert.equal(share.shareID, sent.shareID);
  assert.equal(share.extension, APP_SHARE);
  assert.equal(share.group, APP_GROUP);
  assert.ok('created' in share);
  assert.equal(share.items.length, 1);
  assert.equal(share.items[0].url, YOUTUBE);
  assert.equal(share.items[0].type, 'public.url');

  assert.deepEqual(await app.shareComplete(sent.shareID), { completed: true });
  assert.deepEqual(await app.appAck(ev.id), { acked: 1 });
  await rejectsWith(app.shareGet(sent.shareID), NOT_FOUND);
  await rejectsWith(app.shareComplete(sent.shareID), NOT_FOUND);
  assert.ok(!(await app.shareList()).shares.some((s) => s.shareID === sent.shareID));
});

test('open with a URL of its own', async () => {
  const app = await broker.app();
  await subscribeFresh(app);
  const sent = await (await broker.extension(APP_SHARE)).shareSend(urlItem(YOUTUBE), { open: 'deeplinkmyapp://watch?v=dQw4w9WgXcQ' });
  const ev = await app.nextEvent({ timeout: WAIT });
  assert.equal(ev?.id, sent.eventID);
  assert.equal(ev?.url, 'deeplinkmyapp://watch?v=dQw4w9WgXcQ');
  await app.appAck(sent.eventID);
  await app.shareComplete(sent.shareID);
});

test('share.targets', async () => {
  const c = await broker.tool();
  const { targets } = await c.shareTargets([urlItem(YOUTUBE)]);
  assert.deepEqual(targets.map((t) => t.extension).sort(), [APP_PDF, APP_SHARE, NOTES_SHARE, SECURE_EXT].sort());
  for (const t of targets) {
    assert.equal(typeof t.app, 'string');
    assert.equal(typeof t.name, 'string');
  }
  assert.equal(targets.find((t) => t.extension === APP_SHARE).app, APP);
  assert.ok(!targets.some((t) => t.extension === APP_WIDGET), 'a widget is never a share target');
  // Only the catch-all takes a PDF, a text, two URLs, or a URL with a PDF.
  for (const items of [[dataItem(MINIMAL_PDF, 'doc.pdf')], [textItem('a note')],
    [urlItem(YOUTUBE), urlItem(YOUTUBE + '&t=1')], [urlItem(YOUTUBE), dataItem(MINIMAL_PDF, 'doc.pdf')]]) {
    assert.deepEqual((await c.shareTargets(items)).targets.map((t) => t.extension), [APP_PDF], JSON.stringify(Object.keys(items[0])));
  }
  await rejectsWith(c.call('share.targets', {}), INVALID_PARAMS);
});

test('a tool shares a PDF given as a Buffer; the app reads the copy and completes it', async () => {
  const c = await broker.tool();
  const sent = await c.shareSend([dataItem(MINIMAL_PDF, 'report.pdf')], { group: APP_GROUP2 });
  assert.deepEqual([sent.extension, sent.app, sent.group], [APP_PDF, APP, APP_GROUP2], 'the broker picks the one that accepts');
  assert.equal(sent.eventID, undefined);
  const app = await broker.app();
  assert.ok(!(await app.shareList(APP_GROUP)).shares.some((s) => s.shareID === sent.shareID));
  assert.ok((await app.shareList({ group: APP_GROUP2 })).shares.some((s) => s.shareID === sent.shareID));
  const share = await app.shareGet(sent.shareID);
  const it = share.items[0];
  assert.equal(it.type, 'com.adobe.pdf');
  assert.equal(it.size, MINIMAL_PDF.length);
  assert.equal(it.name, 'report.pdf');
  assert.ok(isAbsolute(it.path));
  assert.deepEqual(readFileSync(it.path), MINIMAL_PDF);
  // The same bytes through the socket (share.read), whole and in pieces.
  const whole = await app.shareRead(sent.shareID, 0);
  assert.deepEqual(Buffer.from(whole.data, 'base64'), MINIMAL_PDF);
  assert.deepEqual([whole.offset, whole.size, whole.eof], [0, MINIMAL_PDF.length, true]);
  const piece = await app.shareRead(sent.shareID, 0, { offset: 3, length: 4 });
  assert.deepEqual(Buffer.from(piece.data, 'base64'), MINIMAL_PDF.subarray(3, 7));
  assert.equal(piece.eof, false);
  await rejectsWith(app.shareRead(sent.shareID, 5), INVALID_PARAMS);
  assert.deepEqual(await app.shareComplete(sent.shareID), { completed: true });
  assert.equal(existsSync(it.path), false, 'share.complete left the file behind');
});

test('a data item without a name is named from its type; two files of one name do not collide', async () => {
  const ext = await broker.extension(APP_PDF);
  const sent = await ext.shareSend([dataItem(MINIMAL_PDF), dataItem(Buffer.from('one'), 'a.txt'), dataItem(Buffer.from('two'), 'a.txt')]);
  const { items } = await ext.shareGet(sent.shareID);
  assert.equal(items[0].type, 'com.adobe.pdf');
  assert.match(items[0].name, /\.pdf$/);
  assert.notEqual(items[1].path, items[2].path);
  assert.deepEqual([readFileSync(items[1].path, 'utf8'), readFileSync(items[2].path, 'utf8')], ['one', 'two']);
  await ext.shareComplete(sent.shareID);
});

test('a path item is copied; a missing path is -32602 naming it', async () => {
  const dir = tempDir();
  try {
    const file = join(dir, 'paper.pdf');
    writeFileSync(file, MINIMAL_PDF);
    const ext = await broker.extension(APP_PDF);
    const sent = await ext.shareSend(pathItem(file));
    const share = await ext.shareGet(sent.shareID);
    assert.notEqual(share.items[0].path, file, 'the share holds a copy');
    assert.deepEqual(readFileSync(share.items[0].path), MINIMAL_PDF);
    assert.equal(share.items[0].type, 'com.adobe.pdf');
    await ext.shareComplete(sent.shareID);
    const e = await rejectsWith(ext.shareSend([pathItem('/nonexistent/dir/missing.pdf')]), INVALID_PARAMS);
    assert.ok(e.message.includes('/nonexistent/dir/missing.pdf'), e.message);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('-32003: nothing accepts the items, or several do and none was named (data.candidates)', async () => {
  const tool = await broker.tool();
  const pendingBefore = (await tool.brokerStatus()).pendingShares;
  // An extension whose rule refuses the items.
  await rejectsWith((await broker.extension(APP_SHARE)).shareSend([textItem('not a link')]), NOT_ACCEPTED);
  // A tool sharing a URL: four extensions accept it.
  const e = await rejectsWith(tool.shareSend([urlItem(YOUTUBE)]), NOT_ACCEPTED);
  const candidates = /** @type {any} */ (e.data).candidates;
  assert.ok(Array.isArray(candidates), `no data.candidates: ${JSON.stringify(e.data)}`);
  assert.deepEqual(candidates.map((t) => t.extension).sort(), [APP_PDF, APP_SHARE, NOTES_SHARE, SECURE_EXT].sort());
  const { targets } = await tool.shareTargets([urlItem(YOUTUBE)]);
  const byExt = (/** @type {any[]} */ l) => [...l].sort((a, b) => a.extension.localeCompare(b.extension));
  assert.deepEqual(byExt(candidates), byExt(targets), 'candidates are shaped like share.targets');
  // A widget is never a share target, even when named.
  await rejectsWith(tool.shareSend([urlItem(YOUTUBE)], { extension: APP_WIDGET }), NOT_ACCEPTED);
  assert.equal((await tool.brokerStatus()).pendingShares, pendingBefore, 'nothing was stored');
  // Naming one resolves it.
  const sent = await tool.shareSend([urlItem(YOUTUBE)], { extension: NOTES_SHARE });
  assert.equal(sent.extension, NOTES_SHARE);
  assert.deepEqual(await (await broker.app(NOTES)).shareComplete(sent.shareID), { completed: true });
});

test('-32002 and -32001 around shares', async () => {
  const tool = await broker.tool();
  await rejectsWith(tool.shareSend([urlItem(YOUTUBE)], { extension: 'com.nobody.share' }), NOT_FOUND);
  // An extension sends as itself only.
  await rejectsWith((await broker.extension(APP_SHARE)).shareSend([urlItem(YOUTUBE)], { extension: NOTES_SHARE }), UNAUTHORIZED);
  // A group the extension does not list.
  await rejectsWith((await broker.extension(APP_SHARE)).shareSend([urlItem(YOUTUBE)], { group: APP_GROUP2 }), UNAUTHORIZED);
  // Tools read no group; an app reads only its own groups.
  await rejectsWith(tool.shareList(), UNAUTHORIZED);
  await rejectsWith(tool.shareGet('sh-x'), UNAUTHORIZED);
  await rejectsWith(tool.shareComplete('sh-x'), UNAUTHORIZED);
  const app = await broker.app();
  await rejectsWith(app.shareList(NOTES_GROUP), UNAUTHORIZED);
  await rejectsWith(app.shareGet('sh-does-not-exist'), NOT_FOUND);
  await rejectsWith(app.shareComplete('sh-does-not-exist'), NOT_FOUND);
  const notes = await tool.shareSend([urlItem('https://example.net/n')], { extension: NOTES_SHARE });
  await rejectsWith(app.shareGet(notes.shareID), UNAUTHORIZED);
  await (await broker.app(NOTES)).shareComplete(notes.shareID);
  // open: true from an extension whose app needs a token: the event goes to that app.
  const sec = await broker.extension(SECURE_EXT, SECURE_TOKEN);
  const sent = await sec.shareSend([urlItem(YOUTUBE)], { open: true });
  assert.ok(sent.eventID);
  const sapp = await broker.app(SECURE, SECURE_TOKEN);
  const { pending } = await sapp.appSubscribe();
  assert.equal(pending, 1);
  assert.equal((await sapp.nextEvent({ timeout: WAIT }))?.shareID, sent.shareID);
  await sapp.shareComplete(sent.shareID);
  await sapp.appAck(sent.eventID);
});

test('pendingShares in broker.status follows send and complete', async () => {
  const tool = await broker.tool();
  const before = (await tool.brokerStatus()).pendingShares;
  const sent = await (await broker.extension(APP_SHARE)).shareSend([urlItem('https://example.net/p')]);
  assert.equal((await tool.brokerStatus()).pendingShares, before + 1);
  await (await broker.app()).shareComplete(sent.shareID);
  assert.equal((await tool.brokerStatus()).pendingShares, before);
});
