// Test support: start a real sharebroker from a built binary on a temporary state directory.
//
// The binary is $SHAREBROKER_BIN, else <repo>/.build/debug/sharebroker when it exists, else
// /tmp/node-client-bin/sharebroker. The manifests are the Python client's (tests/support.py).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, FrameDecoder, RpcError, encode } from '../src/index.js';

export const NODE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const REPO = resolve(NODE_DIR, '..', '..');

export const APP = 'com.mycompany.myapp';
export const APP_SHARE = 'com.mycompany.myapp.share';
export const APP_PDF = 'com.mycompany.myapp.pdf';
export const APP_WIDGET = 'com.mycompany.myapp.widget';
export const APP_GROUP = 'group.com.mycompany.myapp';
export const APP_GROUP2 = 'group.com.mycompany.shared';
export const SECURE = 'com.example.secure';
export const SECURE_EXT = 'com.example.secure.share';
export const SECURE_EXT_OWN = 'com.example.secure.action';
export const SECURE_TOKEN = 's3cret';
export const SECURE_EXT_TOKEN = 'ext-token';
export const SECURE_GROUP = 'group.com.example.secure';
export const NOTES = 'com.example.notes';
export const NOTES_SHARE = 'com.example.notes.share';
export const NOTES_GROUP = 'group.com.example.notes';
export const BROWSER = 'com.example.browser';

/** Generous limit for anything that waits on the broker (a slow, loaded 2-core machine). */
export const WAIT = 15000;

export const MANIFESTS = {
  '10-myapp.json': {
    bundleID: APP,
    teamID: 'ABCDE12345',
    name: 'My App',
    urlSchemes: ['deeplinkmyapp'],
    associatedDomains: ['applinks:example.com'],
    appGroups: [APP_GROUP, APP_GROUP2],
    extensions: [
      { bundleID: APP_SHARE, point: 'com.apple.share-services', name: 'Send to My App', appGroups: [APP_GROUP],
        activationRule: { NSExtensionActivationSupportsWebURLWithMaxCount: 1 } },
      { bundleID: APP_PDF, point: 'com.apple.ui-services', name: 'Import anything',
        appGroups: [APP_GROUP, APP_GROUP2], activationRule: 'TRUEPREDICATE' },
      { bundleID: APP_WIDGET, point: 'com.apple.widgetkit-extension', name: 'Widget', appGroups: [APP_GROUP] },
    ],
  },
  '20-secure.json': {
    bundleID: SECURE,
    teamID: 'ZZZZZ99999',
    name: 'Secure',
    urlSchemes: ['secureapp'],
    appGroups: [SECURE_GROUP],
    token: SECURE_TOKEN,
    extensions: [
      { bundleID: SECURE_EXT, point: 'com.apple.share-services', name: 'Secure share', appGroups: [SECURE_GROUP],
        activationRule: { NSExtensionActivationSupportsWebURLWithMaxCount: 1 } },
      { bundleID: SECURE_EXT_OWN, point: 'com.apple.ui-services', name: 'Secure action', appGroups: [SECURE_GROUP],
        token: SECURE_EXT_TOKEN },
    ],
  },
  '30-notes.json': {
    bundleID: NOTES,
    name: 'Notes',
    urlSchemes: ['notes'],
    appGroups: [NOTES_GROUP],
    extensions: [
      { bundleID: NOTES_SHARE, point: 'com.apple.share-services', name: 'Add to Notes', appGroups: [NOTES_GROUP],
        activationRule: { NSExtensionActivationSupportsWebURLWithMaxCount: 1 } },
    ],
  },
  '40-browser.json': {
    bundleID: BROWSER,
    name: 'Browser',
    urlSchemes: ['https', 'http'],
  },
};

export const ASSOCIATIONS = {
  'example.com': {
    applinks: {
      details: [{ appIDs: ['ABCDE12345.' + APP], components: [{ '/': '/computers/*' }, { '/': '/customers/*' }] }],
    },
  },
};

export const MINIMAL_PDF = Buffer.from(
  '%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n',
  'latin1');

/** The broker binary these tests run. */
export function brokerBinary() {
  if (process.env.SHAREBROKER_BIN) return process.env.SHAREBROKER_BIN;
  const built = join(REPO, '.build', 'debug', 'sharebroker');
  return existsSync(built) ? built : '/tmp/node-client-bin/sharebroker';
}

/** A private directory with a short path (AF_UNIX paths are limited to ~108 bytes). */
export function tempDir(prefix = 'sbnode-') {
  return mkdtempSync(join(existsSync('/tmp') ? '/tmp' : process.env.TMPDIR || '.', prefix));
}

/** The environment without SHAREBROKER_* variables (the broker gets its paths as options). */
export function cleanEnv(extra = {}) {
  /** @type {Record<string, string>} */
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SHAREBROKER_') && v !== undefined) env[k] = v;
  return { ...env, ...extra };
}

/** Can something be connected to at `path`? */
export function canConnect(path) {
  return new Promise((res) => {
    const s = net.createConnection({ path });
    s.once('connect', () => { s.destroy(); res(true); });
    s.once('error', () => res(false));
  });
}

/** A sharebroker process on a private socket and state directory. */
export class Broker {
  /**
   * @param {{manifests?: object, associations?: object, args?: string[], socket?: string | null,
   *   env?: Record<string, string | undefined>, dir?: string}} [options]
   *   `socket: null` starts the broker without --socket (it then uses its default); `env`
   *   replaces the broker's environment.
   */
  constructor(options = {}) {
    this.manifests = options.manifests ?? MANIFESTS;
    this.associations = options.associations ?? ASSOCIATIONS;
    this.args = options.args ?? [];
    this.dir = options.dir ?? tempDir();
    this.socket = options.socket === undefined ? join(this.dir, 's.sock') : options.socket;
    this.env = options.env ?? cleanEnv();
    this.state = join(this.dir, 'state');
    this.logPath = join(this.dir, 'broker.log');
    /** @type {import('node:child_process').ChildProcess | null} */
    this.proc = null;
    /** @type {Set<Client>} */
    this.clients = new Set();
  }

  writeState() {
    mkdirSync(join(this.state, 'apps'), { recursive: true });
    mkdirSync(join(this.state, 'associations'), { recursive: true });
    for (const [name, m] of Object.entries(this.manifests)) writeFileSync(join(this.state, 'apps', name), JSON.stringify(m, null, 2));
    for (const [host, doc] of Object.entries(this.associations)) {
      writeFileSync(join(this.state, 'associations', `${host}.json`), JSON.stringify(doc, null, 2));
    }
  }

  /**
   * Writes the state directory, starts the broker and waits until it answers on `waitFor`
   * (default: its socket).
   * @param {{waitFor?: string, timeout?: number}} [options]
   */
  async start(options = {}) {
    const binary = brokerBinary();
    if (!existsSync(binary)) {
      throw new Error(`sharebroker binary not found at ${binary}: build it (swift build) or set SHAREBROKER_BIN`);
    }
    this.writeState();
    const args = ['serve', '--state', this.state, '--log-level', 'debug', ...this.args];
    if (this.socket !== null) args.splice(1, 0, '--socket', this.socket);
    const log = openSync(this.logPath, 'a');
    this.proc = spawn(binary, args, { stdio: ['ignore', log, log], env: /** @type {any} */ (this.env) });
    closeSync(log);
    /** @type {number | null} */
    let exited = null;
    this.exit = new Promise((res) => this.proc?.once('exit', (code, signal) => { exited = code ?? -1; res(code ?? signal); }));
    const path = options.waitFor ?? this.socket;
    if (!path) throw new Error('start: nothing to wait for');
    const deadline = Date.now() + (options.timeout ?? WAIT);
    for (;;) {
      if (exited !== null) throw new Error(`sharebroker exited with ${exited}:\n${this.log()}`);
      if (await canConnect(path)) return this;
      if (Date.now() > deadline) {
        await this.stop();
        throw new Error(`sharebroker did not listen on ${path}:\n${this.log()}`);
      }
      await sleep(20);
    }
  }

  /**
   * Closes the clients made with `client()`, then SIGTERM and wait (the contract: exit 0 within
   * 5 s; SIGKILL after 10 s). Resolves the exit code.
   * @param {{cleanup?: boolean}} [options]
   */
  async stop(options = {}) {
    for (const c of this.clients) c.destroy();
    this.clients.clear();
    let code = null;
    if (this.proc) {
      const proc = this.proc;
      this.proc = null;
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        const killer = setTimeout(() => proc.kill('SIGKILL'), 10000);
        code = await this.exit;
        clearTimeout(killer);
      } else {
        code = proc.exitCode;
      }
    }
    if (options.cleanup !== false) rmSync(this.dir, { recursive: true, force: true });
    return code;
  }

  log() {
    try {
      return readFileSync(this.logPath, 'utf8').slice(-4000);
    } catch {
      return '';
    }
  }

  /**
   * A connected client (closed by `stop()`, or earlier by the test).
   * @param {import('../src/client.js').ConnectOptions} [options]
   */
  async client(options = {}) {
    const c = new Client({ socket: this.socket ?? undefined, timeout: WAIT, ...options });
    this.clients.add(c);
    c.once('close', () => this.clients.delete(c));
    return c.connect();
  }

  tool(options = {}) {
    return this.client({ role: 'tool', ...options });
  }

  app(bundleID = APP, token = undefined, options = {}) {
    return this.client({ role: 'app', bundleID, token, ...options });
  }

  extension(bundleID = APP_SHARE, token = undefined, options = {}) {
    return this.client({ role: 'extension', bundleID, token, ...options });
  }
}

/**
 * Starts a broker for a test file.
 * @param {ConstructorParameters<typeof Broker>[0]} [options]
 */
export function startBroker(options) {
  return new Broker(options).start();
}

/**
 * Awaits `promise`, asserts that it rejects with an RpcError of `code` whose message is not
 * empty, and returns the error.
 * @param {Promise<unknown>} promise
 * @param {number} code
 * @returns {Promise<RpcError>}
 */
export async function rejectsWith(promise, code) {
  let value;
  try {
    value = await promise;
  } catch (e) {
    assert.ok(e instanceof RpcError, `expected an RpcError ${code}, got ${e}`);
    assert.equal(e.code, code, `expected ${code}, got ${e}`);
    assert.ok(e.message.length > 0, 'the error message is empty');
    return e;
  }
  assert.fail(`expected an RpcError ${code}, got the result ${JSON.stringify(value)}`);
}

/**
 * The next `n` app.event params, in arrival order (fails when they do not come in time).
 * @param {Client} client
 * @param {number} n
 */
export async function takeEvents(client, n, timeout = WAIT) {
  const out = [];
  while (out.length < n) {
    const ev = await client.nextEvent({ timeout });
    assert.ok(ev, `only ${out.length} of ${n} app.event notifications arrived`);
    out.push(ev);
  }
  return out;
}

/**
 * Subscribes `app` and takes (and acks) what was pending, so a test starts from an empty queue.
 * @param {Client} app
 */
export async function subscribeFresh(app) {
  const { pending } = await app.appSubscribe();
  const old = await takeEvents(app, pending);
  if (old.length) await app.appAck(old.map((e) => e.id));
  return old;
}

/**
 * A round trip on `client`: once it is answered, whatever the broker wrote to this connection
 * before the answer has been read (and notifications queued).
 * @param {Client} client
 */
export function barrier(client) {
  return client.brokerStatus();
}

/**
 * Polls `fn` until it returns something truthy (or fails after `timeout`).
 * @template T
 * @param {() => Promise<T> | T} fn
 * @param {string} what
 * @returns {Promise<T>}
 */
export async function eventually(fn, what, timeout = WAIT) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * Starts a scripted fake broker (a net.Server on a private socket) for test `t`;
 * `onConnection(peer)` gets each connection: `peer.next()` (the next message the client sent,
 * parsed; `{unparsable: text}` for a frame that is not JSON), `peer.send(msg)`, `peer.socket`.
 * @param {import('node:test').TestContext} t
 * @param {'line' | 'header'} framing
 * @param {(peer: {socket: net.Socket, next: () => Promise<any>, send: (msg: unknown) => boolean}) => void} onConnection
 */
export async function fakeBroker(t, framing, onConnection) {
  const dir = tempDir('sbfake-');
  const path = join(dir, 'fake.sock');
  /** @type {Set<net.Socket>} */
  const sockets = new Set();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    const decoder = new FrameDecoder(framing);
    /** @type {unknown[]} */
    const queue = [];
    /** @type {((m: unknown) => void)[]} */
    const waiters = [];
    socket.on('data', (chunk) => {
      for (const body of decoder.feedFrames(chunk)) {
        let m;
        try {
          m = decoder.parse(body);
        } catch {
          m = { unparsable: body.toString('utf8') };
        }
        const w = waiters.shift();
        if (w) w(m);
        else queue.push(m);
      }
    });
    socket.on('error', () => {});
    const peer = {
      socket,
      next: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((res) => waiters.push(res))),
      send: (/** @type {unknown} */ msg) => socket.write(encode(msg, framing)),
    };
    onConnection(peer);
  });
  await new Promise((res) => server.listen(path, () => res(undefined)));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { path, server };
}

/**
 * Writes `bytes` one byte per event-loop turn.
 * @param {net.Socket} socket
 * @param {Uint8Array} bytes
 */
export async function trickle(socket, bytes) {
  for (const b of bytes) {
    socket.write(Buffer.from([b]));
    await sleep(0);
  }
}
