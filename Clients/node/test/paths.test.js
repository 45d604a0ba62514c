// The default socket path: the rules (unit), and the broker started without --socket listening
// exactly where the client looks (live, for each rule).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { Client, connect, defaultSocketPath } from '../src/index.js';
import { Broker, cleanEnv, tempDir, WAIT } from './support.js';

const UID = process.getuid();

test('$SHAREBROKER_SOCKET wins', () => {
  assert.equal(defaultSocketPath({ SHAREBROKER_SOCKET: '/x/s.sock', XDG_RUNTIME_DIR: '/run/user/1', TMPDIR: '/t' }), '/x/s.sock');
});

test('then $XDG_RUNTIME_DIR/sharebroker.sock', () => {
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/1', TMPDIR: '/t' }), '/run/user/1/sharebroker.sock');
  assert.equal(defaultSocketPath({ SHAREBROKER_SOCKET: '', XDG_RUNTIME_DIR: '/run/user/1' }), '/run/user/1/sharebroker.sock',
    'an empty SHAREBROKER_SOCKET counts as unset');
});

test('then the private directory under the system temporary directory', () => {
  assert.equal(defaultSocketPath({}, 1000), '/tmp/sharebroker-1000/sharebroker.sock');
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '' }, 1000), '/tmp/sharebroker-1000/sharebroker.sock');
  assert.equal(defaultSocketPath({ TMPDIR: '/var/tmp//' }, 1000), '/var/tmp/sharebroker-1000/sharebroker.sock');
  assert.equal(defaultSocketPath({ TMPDIR: '' }, 7), '/tmp/sharebroker-7/sharebroker.sock');
  // A relative XDG_RUNTIME_DIR is invalid (XDG Base Directory Specification) and ignored, as the broker ignores it.
  assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: 'run/user', TMPDIR: '/t' }, 5), '/t/sharebroker-5/sharebroker.sock');
  assert.equal(defaultSocketPath({}), `/tmp/sharebroker-${UID}/sharebroker.sock`, 'the current uid by default');
});

test('the client reads process.env when it is created', () => {
  const saved = process.env.SHAREBROKER_SOCKET;
  try {
    process.env.SHAREBROKER_SOCKET = '/somewhere/else.sock';
    assert.equal(new Client().socketPath, '/somewhere/else.sock');
    assert.equal(new Client({ socket: '/given.sock' }).socketPath, '/given.sock');
  } finally {
    if (saved === undefined) delete process.env.SHAREBROKER_SOCKET;
    else process.env.SHAREBROKER_SOCKET = saved;
  }
});

/**
 * Starts a broker without --socket in `env`, and checks that a client given no socket, in the
 * same environment, reaches it (and that the broker says it listens there).
 */
async function agree(t, dir, env) {
  const expected = defaultSocketPath(env);
  const broker = new Broker({ dir, socket: null, env: cleanEnv(env) });
  // Without these the broker would take the test runner's own settings.
  for (const k of ['SHAREBROKER_SOCKET', 'XDG_RUNTIME_DIR', 'TMPDIR']) if (!(k in env)) delete broker.env[k];
  await broker.start({ waitFor: expected });
  t.after(() => broker.stop());
  const saved = { ...process.env };
  let client;
  try {
    for (const k of ['SHAREBROKER_SOCKET', 'XDG_RUNTIME_DIR', 'TMPDIR']) delete process.env[k];
    Object.assign(process.env, env);
    client = new Client({ timeout: WAIT });
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
  assert.equal(client.socketPath, expected);
  await client.connect();
  try {
    const status = await client.brokerStatus();
    assert.equal(status.socket, expected, 'the broker listens where the client looked');
  } finally {
    await client.close();
  }
}

test('live: a broker given $SHAREBROKER_SOCKET', async (t) => {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  await agree(t, dir, { SHAREBROKER_SOCKET: join(dir, 'env.sock'), XDG_RUNTIME_DIR: join(dir, 'nope') });
});

test('live: a broker given $XDG_RUNTIME_DIR', async (t) => {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const runtime = join(dir, 'run');
  mkdirSync(runtime, { mode: 0o700 });
  await agree(t, dir, { XDG_RUNTIME_DIR: runtime, TMPDIR: join(dir, 'unused') });
});

test('live: a broker with only $TMPDIR (trailing slash, relative XDG_RUNTIME_DIR ignored)', async (t) => {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tmp = join(dir, 'tmp');
  mkdirSync(tmp, { mode: 0o700 });
  await agree(t, dir, { TMPDIR: tmp + '/', XDG_RUNTIME_DIR: 'relative/run' });
  const sock = `${tmp}/sharebroker-${UID}/sharebroker.sock`;
  assert.equal(defaultSocketPath({ TMPDIR: tmp + '/' }), sock);
  // The contract: a private 0700 directory, a 0600 socket.
  assert.equal(statSync(dirname(sock)).mode & 0o777, 0o700);
  assert.equal(statSync(sock).mode & 0o777, 0o600);
});

test('connect() to a socket where nothing listens names the path', async () => {
  const dir = tempDir();
  try {
    const path = join(dir, 'missing.sock');
    await assert.rejects(connect({ socket: path, timeout: WAIT }), (e) => {
      assert.equal(e.name, 'BrokerConnectionError');
      assert.equal(e.path, path);
      assert.equal(e.code, 'ENOENT');
      assert.ok(e.message.includes(path), e.message);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
