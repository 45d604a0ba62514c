// The broker's default socket path, computed as the broker computes it
// (Sources/ShareSystem/UnixSocket.swift, DefaultPaths.socket()).

/**
 * An environment variable, `undefined` when unset or empty (as the broker reads them).
 * @param {Record<string, string | undefined>} env
 * @param {string} name
 */
function envValue(env, name) {
  const v = env[name];
  return v === undefined || v === null || v === '' ? undefined : String(v);
}

/**
 * The private directory the broker uses under the system temporary directory when there is no
 * `XDG_RUNTIME_DIR`: `$TMPDIR/sharebroker-UID` (`/tmp` without `TMPDIR`; trailing slashes of
 * `TMPDIR` dropped).
 * @param {Record<string, string | undefined>} [env]
 * @param {number} [uid]
 */
export function privateTempDirectory(env = process.env, uid = currentUid()) {
  let tmp = envValue(env, 'TMPDIR') ?? '/tmp';
  while (tmp.length > 1 && tmp.endsWith('/')) tmp = tmp.slice(0, -1);
  return `${tmp}/sharebroker-${uid}`;
}

/**
 * The socket a client connects to when none is given, exactly as the broker and `shareclient`
 * compute it:
 *
 * 1. `$SHAREBROKER_SOCKET` (when set and not empty);
 * 2. `$XDG_RUNTIME_DIR/sharebroker.sock` (when set, not empty and absolute: the XDG Base
 *    Directory Specification says a relative path there is invalid and to be ignored);
 * 3. `$TMPDIR/sharebroker-UID/sharebroker.sock` (`/tmp` without `TMPDIR`).
 *
 * @param {Record<string, string | undefined>} [env] the environment (default `process.env`)
 * @param {number} [uid] the user id (default `process.getuid()`)
 * @returns {string}
 */
export function defaultSocketPath(env = process.env, uid = currentUid()) {
  const sock = envValue(env, 'SHAREBROKER_SOCKET');
  if (sock !== undefined) return sock;
  const runtime = envValue(env, 'XDG_RUNTIME_DIR');
  if (runtime !== undefined && runtime.startsWith('/')) return `${runtime}/sharebroker.sock`;
  return `${privateTempDirectory(env, uid)}/sharebroker.sock`;
}

function currentUid() {
  return typeof process.getuid === 'function' ? process.getuid() : 0;
}
