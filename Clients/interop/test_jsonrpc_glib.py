"""Interop: jsonrpc-glib (GNOME's JsonrpcClient, as GNOME Builder uses it), through PyGObject.

Runs under Debian's /usr/bin/python3 (python3-gi, gir1.2-jsonrpc-1.0, gir1.2-json-1.0). The
client connects with Gio.SocketClient to a Gio.UnixSocketAddress and hands the GIOStream to
Jsonrpc.Client, which writes ``Content-Length: N\\r\\n\\r\\n`` frames (header framing), numbers its
calls 1, 2, 3... (int64 ids), reads replies and turns the broker's notifications into its
"notification" signal. Parameters and results are GVariants; they are converted from and to JSON
text with json-glib (Json.gvariant_deserialize_data / gvariant_serialize_data), which is what
jsonrpc-glib itself uses on the wire.

Error responses come back as GLib.Error: in jsonrpc-glib 3.42 (Debian 12) as G_IO_ERROR_FAILED
whose message is the error object printed as a GVariant; in later versions as
JSONRPC_CLIENT_ERROR with the JSON-RPC code as the GError code. Both are read here.
"""

import json
import sys
import time

import gi

gi.require_version("Gio", "2.0")
gi.require_version("GLib", "2.0")
gi.require_version("Json", "1.0")
gi.require_version("Jsonrpc", "1.0")
from gi.repository import Gio, GLib, Json, Jsonrpc  # noqa: E402

import scenarios  # noqa: E402
from fixture import ALPHA, ALPHA_TOKEN, Check, run_tests  # noqa: E402
from scenarios import RpcError  # noqa: E402


def to_variant(value):
    if value is None:
        return None
    return Json.gvariant_deserialize_data(json.dumps(value), -1, None)


def from_variant(variant):
    if variant is None:
        return None
    text, _ = Json.gvariant_serialize_data(variant)
    return json.loads(text)


def convert_error(e):
    """The JSON-RPC error inside a GLib.Error from Jsonrpc.Client.call."""
    if e.domain == "jsonrpc-client-error-quark":
        # Newer jsonrpc-glib: the code is the GError code, the message "MESSAGE (CODE)".
        return RpcError(e.code, e.message, scenarios.NO_DATA, e)
    # jsonrpc-glib 3.42: G_IO_ERROR_FAILED, the message is the error object printed as a GVariant.
    Check.eq((e.domain, e.code), ("g-io-error-quark", int(Gio.IOErrorEnum.FAILED)),
             f"GLib.Error from a JSON-RPC error response: {e.domain} {e.code} {e.message}")
    obj = GLib.Variant.parse(None, e.message, None, None).unpack()
    return RpcError(obj["code"], obj["message"], obj.get("data", scenarios.NO_DATA), e)


class Session:
    def __init__(self, path, ids="number"):
        self.conn = Gio.SocketClient.new().connect(Gio.UnixSocketAddress.new(path), None)
        self.client = Jsonrpc.Client.new(self.conn)
        self.notes = []
        self.failures = []
        self.client.connect("notification", self._on_notification)
        self.client.connect("failed", lambda *a: self.failures.append(a))

    def _on_notification(self, client, method, params):
        self.notes.append((method, from_variant(params)))

    def call(self, method, params=None):
        if self.failures:
            raise AssertionError(f"the client failed earlier: {self.failures!r}")
        try:
            ok, result = self.client.call(method, to_variant(params), None)
        except GLib.Error as e:
            if self.failures:
                raise AssertionError(f"jsonrpc-glib panicked on what the broker sent ({e.message})") from e
            raise convert_error(e) from None
        Check.true(ok, f"{method}: call returned False")
        return from_variant(result)

    def last_ids(self):
        return None  # jsonrpc-glib matches ids itself (int64 only)

    def next_notification(self, timeout):
        ctx = GLib.MainContext.default()
        deadline = time.monotonic() + timeout
        while not self.notes:
            if self.failures:
                raise AssertionError(f"jsonrpc-glib failed: {self.failures!r}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no notification within {timeout} s")
            if not ctx.iteration(False):
                time.sleep(0.005)
        return self.notes.pop(0)

    def unexpected(self):
        return list(self.notes)

    def close(self):
        self.client.close(None)
        self.conn.close(None)


class Adapter:
    name = "jsonrpc-glib"
    batches = False     # no batch API
    # json-glib (1.6.6, Debian 12) writes U+001F raw inside a string (it escapes only below 0x1F),
    # which is not JSON (RFC 8259 section 7); the broker rightly answers -32700 with id null, and
    # jsonrpc-glib then drops the connection (an error it cannot tie to a call). Not sent here.
    cannot_send = "\u001f"
    # Up to 3.42 the GLib.Error message is the whole error object, data included; later versions
    # keep only the message and code.
    error_data = (Jsonrpc.MAJOR_VERSION, Jsonrpc.MINOR_VERSION) <= (3, 42)

    @staticmethod
    def connect(path, ids="number"):
        return Session(path, ids)


def notification_before_reply(broker):
    """A notification arriving while a call waits (app.event during app.ack) reaches the signal."""
    app = Session(broker.socket)
    tool = Session(broker.socket)
    try:
        scenarios.hello(app, "app", ALPHA, ALPHA_TOKEN)
        scenarios.hello(tool, "tool")
        Check.eq(app.call("app.subscribe", {}), {"pending": 0}, "subscribe")
        ids = [tool.call("url.open", {"url": f"interop-alpha://burst/{i}"})["eventID"] for i in range(20)]
        # The events are on the socket before this call's reply; the client reads them first.
        app.call("broker.status")
        got = [app.next_notification(5) for _ in range(20)]
        Check.eq([p["id"] for _, p in got], ids, "event ids in order")
        Check.eq(app.call("app.ack", {"ids": ids}), {"acked": 20}, "ack")
    finally:
        app.close()
        tool.close()


def send_notification(broker):
    """Jsonrpc.Client.send_notification: the broker runs it (hello) and answers nothing."""
    s = Session(broker.socket)
    try:
        s.call("broker.status")
        Check.true(s.client.send_notification("hello", to_variant({"role": "tool"}), None), "send_notification")
        # hello ran: a tool method now works.
        Check.eq(s.call("url.canOpen", {"url": "interop-alpha://x"})["app"], ALPHA, "after a hello notification")
        Check.eq(s.unexpected(), [], "nothing else came")
    finally:
        s.close()


if __name__ == "__main__":
    tests = scenarios.tests_for(Adapter) + [notification_before_reply, send_notification]
    sys.exit(run_tests("jsonrpc-glib", tests))
