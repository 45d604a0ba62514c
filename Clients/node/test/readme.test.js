// Every ```js snippet of README.md runs as written (as its own ES module importing 'sharebroker')
// against a real broker whose registered apps are the README's: the default socket comes from
// $SHAREBROKER_SOCKET, 'sharebroker' resolves to this package. A snippet that runs until its
// connection closes (an app's event loop) is given events, and stopped once it has acked them.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { startBroker, tempDir, eventually, cleanEnv, NODE_DIR, MINIMAL_PDF, WAIT } from './support.js';

/** The README's ```js blocks, in order. */
function snippets() {
  const text = readFileSync(join(NODE_DIR, 'README.md'), 'utf8');
  return [...text.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

/** @type {import('./support.js').Broker} */
let broker;
/** A directory holding report.pdf and node_modules/sharebroker (this package). */
let dir = '';
before(async () => {
  broker = await startBroker();
  dir = tempDir('sbreadme-');
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(NODE_DIR, join(dir, 'node_modules', 'sharebroker'), 'dir');
  writeFileSync(join(dir, 'report.pdf'), MINIMAL_PDF);
});
after(async () => {
  await broker.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * Starts snippet `i` as a module in `dir`.
 * @param {number} i
 * @param {string} code
 */
function run(i, code) {
  const file = join(dir, `snippet-${i}.mjs`);
  writeFileSync(file, code);
  const child = spawn(process.execPath, [file], {
    cwd: dir,
    env: cleanEnv({ SHAREBROKER_SOCKET: /** @type {string} */ (broker.socket) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => { out.stdout += d; });
  child.stderr.on('data', (d) => { out.stderr += d; });
  /** @type {Promise<[number | null, string | null]>} */
  const exited = new Promise((res) => child.once('exit', (code, signal) => res([code, signal])));
  return { child, out, exited };
}

test('README.md has snippets to run', () => {
  assert.ok(snippets().length >= 6, `only ${snippets().length} snippets found`);
});

snippets().forEach((code, i) => {
  const title = code.split('\n').find((l) => l.trim() && !l.startsWith('import'))?.trim() ?? code.split('\n')[0];
  test(`README snippet ${i + 1} runs as written: ${title.slice(0, 60)}`, async () => {
    const tool = await broker.tool();
    const { child, out, exited } = run(i, code);
    try {
      if (/appSubscribe\(\)/.test(code)) {
        // An app: it runs until its connection closes. Give it an event, wait for its ack.
        await eventually(async () => (await tool.brokerStatus()).subscribers > 0, `snippet ${i + 1} to subscribe (${out.stderr})`);
        await tool.urlOpen(`deeplinkmyapp://customerdetail?id=${i}`);
        await eventually(async () => (await tool.brokerStatus()).pendingEvents === 0, `snippet ${i + 1} to ack every event (${out.stderr})`);
        assert.equal(child.exitCode, null, `the app snippet ended early: ${out.stderr}`);
        child.kill('SIGTERM');
        await exited;
        assert.equal(out.stderr, '');
        await eventually(async () => (await tool.brokerStatus()).subscribers === 0, `snippet ${i + 1}'s subscription to end`);
        return;
      }
      const timer = setTimeout(() => child.kill('SIGKILL'), WAIT);
      const [status, signal] = await exited;
      clearTimeout(timer);
      assert.equal(signal, null, `snippet ${i + 1} did not finish by itself:\n${out.stdout}${out.stderr}`);
      assert.equal(status, 0, `snippet ${i + 1} failed:\n${out.stderr}`);
      assert.doesNotMatch(out.stderr, /Error|Warning/, `snippet ${i + 1} wrote an error`); // (snippet 2 prints an RpcError's message)
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
