"""Shared fixture of the interop suites: a real sharebroker on a private socket and state directory.

Standard library only; runs under any Python 3.9+ (the jsonrpc-glib suite runs under Debian's
/usr/bin/python3, the others under whatever `python3` is first on PATH).

The state directory is a copy of ``state/`` beside this file (the manifests and the association
document every suite is written against). The broker binary is ``$SHAREBROKER_BIN``, else
``<repo>/.build/debug/sharebroker``.

As a program, ``python3 fixture.py run -- CMD ARGS...`` starts a broker, runs CMD with
``SHAREBROKER_SOCKET`` set to its socket (and ``SHAREBROKER_INTEROP_STATE`` to its state
directory), stops the broker and exits with CMD's status (non-zero too when the broker did not
exit 0 on SIGTERM). The Go and C++ suites start their own brokers the same way this module does.
"""

import faulthandler
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STATE_TEMPLATE = HERE / "state"

# The names in state/apps/*.json and state/associations/*.json.
ALPHA = "org.interop.alpha"            # app: token, scheme interop-alpha, universal links
ALPHA_TOKEN = "alpha-secret"
ALPHA_SHARE = "org.interop.alpha.share"  # share extension: one web URL; no token of its own
ALPHA_WIDGET = "org.interop.alpha.widget"  # widget extension with its own token
WIDGET_TOKEN = "widget-secret"
ALPHA_GROUP = "group.org.interop.alpha"
ALPHA_SCHEME = "interop-alpha"
BETA = "org.interop.beta"              # app: no token, scheme interop-beta
BETA_ACTION = "org.interop.beta.action"  # action extension: TRUEPREDICATE
BETA_GROUP = "group.org.interop.beta"
LINK_HOST = "links.interop.test"       # applinks for ALPHA, paths /items/*
NOWHERE = "https://nowhere.interop.test/page"  # no browser is registered: -32004

# Every method CONTRACT.md names; rpc.discover must name each.
CONTRACT_METHODS = [
    "hello", "share.targets", "share.send", "share.list", "share.get", "share.complete",
    "url.open", "url.canOpen", "app.subscribe", "app.ack", "defaults.get", "defaults.set",
    "defaults.remove", "defaults.list", "defaults.watch", "apps.list", "apps.reload",
    "broker.status", "rpc.discover",
]

UNAUTHORIZED = -32001
NOT_FOUND = -32002
NOT_ACCEPTED = -32003
NO_HANDLER = -32004
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INVALID_REQUEST = -32600
PARSE_ERROR = -32700


def broker_binary() -> Path:
    env = os.environ.get("SHAREBROKER_BIN")
    return Path(env) if env else REPO / ".build" / "debug" / "sharebroker"


class Broker:
    """A sharebroker process on a private socket and a copy of state/."""

    def __init__(self, args=()):
        self.args = list(args)
        self.proc = None
        # Short base directory: AF_UNIX paths are limited to 108 bytes.
        self.dir = Path(tempfile.mkdtemp(prefix="sbinterop-", dir="/tmp" if os.path.isdir("/tmp") else None))
        self.socket = str(self.dir / "s.sock")
        self.state = self.dir / "state"
        self.log_path = self.dir / "broker.log"
        self._log = None

    def start(self, timeout=10.0):
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout):
        binary = broker_binary()
        if not binary.is_file():
            raise RuntimeError(f"sharebroker binary not found at {binary}: run `swift build` in {REPO} "
                               "or set SHAREBROKER_BIN")
        shutil.copytree(STATE_TEMPLATE, self.state)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHAREBROKER_")}
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--socket", self.socket, "--state", str(self.state), *self.args],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sharebroker exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.connect(self.socket)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"sharebroker did not listen on {self.socket}:\n{self.log()}")
                time.sleep(0.01)

    def stop(self, cleanup=True):
        """SIGTERM and wait; returns the exit status (the contract: 0 within 5 s)."""
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(6)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            rc = self.proc.returncode
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if cleanup:
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def unix_socket(path, timeout=10.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


# ---------------------------------------------------------------------------------------------
# A minimal test runner (no pytest: the jsonrpc-glib suite runs under Debian's python3, which has
# none). Each test is a function taking a freshly started Broker; it fails by raising.


class Check:
    """Assertions that say what was expected and what came."""

    @staticmethod
    def eq(got, want, what=""):
        if got != want:
            raise AssertionError(f"{what}: expected {want!r}, got {got!r}" if what else
                                 f"expected {want!r}, got {got!r}")

    @staticmethod
    def true(cond, what):
        if not cond:
            raise AssertionError(what)


def run_tests(prefix, tests, per_test_timeout=60):
    """Runs each ``test(broker)`` on its own broker; prints ``PREFIX: N passed, M failed`` last.

    A test that hangs longer than ``per_test_timeout`` seconds makes the whole process dump its
    threads' stacks and exit 1 (a client library blocked in a read cannot be interrupted)."""
    only = os.environ.get("SHAREBROKER_INTEROP_ONLY")
    passed = failed = 0
    failures = []
    for test in tests:
        name = test.__name__
        if only and only not in name:
            continue
        broker = Broker()
        faulthandler.dump_traceback_later(per_test_timeout, exit=True)
        try:
            broker.start()
            test(broker)
        except BaseException as e:  # noqa: BLE001 (a test's any failure is reported, not raised)
            if isinstance(e, KeyboardInterrupt):
                raise
            failed += 1
            failures.append(name)
            print(f"FAIL {prefix}.{name}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=6, file=sys.stdout)
            log = broker.log()
            if log:
                print("  broker log (tail):\n    " + "\n    ".join(log.splitlines()[-8:]))
        else:
            rc = broker.stop(cleanup=False)
            if rc != 0:
                failed += 1
                failures.append(name)
                print(f"FAIL {prefix}.{name}: the broker exited {rc} on SIGTERM (want 0)")
            else:
                passed += 1
                print(f"ok   {prefix}.{name}")
        finally:
            faulthandler.cancel_dump_traceback_later()
            broker.stop()
        sys.stdout.flush()
    if failures:
        print(f"{prefix} failures: {', '.join(failures)}")
    print(f"{prefix}: {passed} passed, {failed} failed")
    sys.stdout.flush()
    return 0 if failed == 0 and passed > 0 else 1


def _main(argv):
    if len(argv) >= 2 and argv[0] == "run" and argv[1] == "--":
        cmd = argv[2:]
        broker = Broker().start()
        try:
            env = dict(os.environ, SHAREBROKER_SOCKET=broker.socket,
                       SHAREBROKER_INTEROP_STATE=str(broker.state))
            status = subprocess.call(cmd, env=env)
        finally:
            rc = broker.stop(cleanup=False)
            if rc != 0:
                print(f"fixture: the broker exited {rc} on SIGTERM (want 0); log tail:\n{broker.log()}",
                      file=sys.stderr)
            broker.stop()
        return status if status != 0 else (0 if rc == 0 else 1)
    print("usage: fixture.py run -- CMD [ARGS...]", file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
