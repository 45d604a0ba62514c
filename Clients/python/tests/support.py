"""Test support: start a real sharebroker from the built binary on a temporary state directory.

The binary is ``$SHAREBROKER_BIN``, else ``<repo>/.build/debug/sharebroker`` (build it with
``swift build``).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTHON_DIR = HERE.parent
REPO = HERE.parents[2]
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

import sharebroker  # noqa: E402

APP = "com.mycompany.myapp"
APP_SHARE = "com.mycompany.myapp.share"
APP_PDF = "com.mycompany.myapp.pdf"
APP_WIDGET = "com.mycompany.myapp.widget"
APP_GROUP = "group.com.mycompany.myapp"
APP_GROUP2 = "group.com.mycompany.shared"
SECURE = "com.example.secure"
SECURE_EXT = "com.example.secure.share"
SECURE_EXT_OWN = "com.example.secure.action"
SECURE_TOKEN = "s3cret"
SECURE_EXT_TOKEN = "ext-token"
SECURE_GROUP = "group.com.example.secure"
NOTES = "com.example.notes"
NOTES_SHARE = "com.example.notes.share"
NOTES_GROUP = "group.com.example.notes"
BROWSER = "com.example.browser"

# Activation rules used here are ones every broker version evaluates alike: a web-URL count and
# TRUEPREDICATE (the clients' tests test the clients, not the rule engine).
MANIFESTS = {
    "10-myapp.json": {
        "bundleID": APP,
        "teamID": "ABCDE12345",
        "name": "My App",
        "urlSchemes": ["deeplinkmyapp"],
        "associatedDomains": ["applinks:example.com"],
        "appGroups": [APP_GROUP, APP_GROUP2],
        "extensions": [
            {"bundleID": APP_SHARE, "point": "com.apple.share-services", "name": "Send to My App",
             "appGroups": [APP_GROUP],
             "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}},
            {"bundleID": APP_PDF, "point": "com.apple.ui-services", "name": "Import anything",
             "appGroups": [APP_GROUP, APP_GROUP2], "activationRule": "TRUEPREDICATE"},
            {"bundleID": APP_WIDGET, "point": "com.apple.widgetkit-extension", "name": "Widget",
             "appGroups": [APP_GROUP]},
        ],
    },
    "20-secure.json": {
        "bundleID": SECURE,
        "teamID": "ZZZZZ99999",
        "name": "Secure",
        "urlSchemes": ["secureapp"],
        "appGroups": [SECURE_GROUP],
        "token": SECURE_TOKEN,
        "extensions": [
            {"bundleID": SECURE_EXT, "point": "com.apple.share-services", "name": "Secure share",
             "appGroups": [SECURE_GROUP],
             "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}},
            {"bundleID": SECURE_EXT_OWN, "point": "com.apple.ui-services", "name": "Secure action",
             "appGroups": [SECURE_GROUP], "token": SECURE_EXT_TOKEN},
        ],
    },
    "30-notes.json": {
        "bundleID": NOTES,
        "name": "Notes",
        "urlSchemes": ["notes"],
        "appGroups": [NOTES_GROUP],
        "extensions": [
            {"bundleID": NOTES_SHARE, "point": "com.apple.share-services", "name": "Add to Notes",
             "appGroups": [NOTES_GROUP],
             "activationRule": {"NSExtensionActivationSupportsWebURLWithMaxCount": 1}},
        ],
    },
    "40-browser.json": {
        "bundleID": BROWSER,
        "name": "Browser",
        "urlSchemes": ["https", "http"],
    },
}

ASSOCIATIONS = {
    "example.com": {
        "applinks": {
            "details": [
                {"appIDs": ["ABCDE12345." + APP],
                 "components": [{"/": "/computers/*"}, {"/": "/customers/*"}]}
            ]
        }
    }
}

MINIMAL_PDF = (b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
               b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")


def broker_binary() -> Path:
    env = os.environ.get("SHAREBROKER_BIN")
    return Path(env) if env else REPO / ".build" / "debug" / "sharebroker"


class Broker:
    """A sharebroker process on a private socket and state directory."""

    def __init__(self, manifests=None, associations=None, args=()):
        self.manifests = MANIFESTS if manifests is None else manifests
        self.associations = ASSOCIATIONS if associations is None else associations
        self.args = list(args)
        self.proc = None
        # Short base directory: AF_UNIX paths are limited to ~108 bytes.
        base = "/tmp" if os.path.isdir("/tmp") else None
        self.dir = Path(tempfile.mkdtemp(prefix="sbpy-", dir=base))
        self.socket = str(self.dir / "s.sock")
        self.state = self.dir / "state"
        self.log_path = self.dir / "broker.log"

    def write_state(self):
        (self.state / "apps").mkdir(parents=True, exist_ok=True)
        (self.state / "associations").mkdir(parents=True, exist_ok=True)
        for name, m in self.manifests.items():
            (self.state / "apps" / name).write_text(json.dumps(m, indent=2))
        for host, doc in self.associations.items():
            (self.state / "associations" / f"{host}.json").write_text(json.dumps(doc, indent=2))

    def start(self, timeout=10.0):
        """Write the state directory, start the broker and wait until it listens."""
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout):
        binary = broker_binary()
        if not binary.is_file():
            raise RuntimeError(
                f"sharebroker binary not found at {binary}: build it with `swift build` in {REPO} "
                "or set SHAREBROKER_BIN")
        self.write_state()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHAREBROKER_")}
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(binary), "serve", "--socket", self.socket, "--state", str(self.state),
             "--log-level", "debug", *self.args],
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
                time.sleep(0.02)

    def stop(self, cleanup=True):
        """SIGTERM and wait (the contract: exit 0 within 5 s); returns the exit status."""
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
            self._log.close()
        if cleanup:
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def client(self, **kwargs):
        kwargs.setdefault("timeout", 10.0)
        return sharebroker.Client(self.socket, **kwargs)


class BrokerTestCase(unittest.TestCase):
    """One broker per test class; ``self.connect(...)`` gives clients closed after each test."""

    broker: Broker
    manifests = None

    @classmethod
    def setUpClass(cls):
        cls.broker = Broker(cls.manifests).start()

    @classmethod
    def tearDownClass(cls):
        cls.broker.stop()

    def connect(self, role=None, bundle_id=None, token=None, **kwargs):
        c = self.broker.client(role=role, bundle_id=bundle_id, token=token, **kwargs)
        self.addCleanup(c.close)
        return c

    def tool(self):
        return self.connect("tool")

    def app(self, bundle_id=APP, token=None):
        return self.connect("app", bundle_id, token)

    def extension(self, bundle_id=APP_SHARE, token=None):
        return self.connect("extension", bundle_id, token)

    def assertBrokerError(self, code, fn, *args, **kwargs):
        with self.assertRaises(sharebroker.BrokerError) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.code, code, f"expected {code}, got {cm.exception!r}")
        self.assertTrue(cm.exception.message, "error message is empty")
        return cm.exception
