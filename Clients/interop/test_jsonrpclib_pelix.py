"""Interop: jsonrpclib-pelix (PyPI), ServerProxy and MultiCall over newline framing.

jsonrpclib's ServerProxy speaks through a transport object (its own are HTTP ones, also over a
Unix socket, "unix+http://"); LineTransport below gives it the broker's raw stream, one JSON text
per line, on one persistent connection, so the session (hello) carries over between calls. The
library builds every request (``server.url.canOpen(url=...)``: named params; string uuid ids, or
``server._request(name, params, rpcid=N)`` for number ids), parses every reply (``loads``) and
raises its ``ProtocolError((code, message))`` for error responses with a code in -32768..-32000
(``AppError`` with data otherwise). MultiCall sends a batch and reads the answers in order;
``server._notify.X()`` sends a notification.
"""

import json
import sys

import jsonrpclib
from jsonrpclib.jsonrpc import AppError, MultiCall, ProtocolError, isnotification

import scenarios
from fixture import ALPHA, METHOD_NOT_FOUND, Check, run_tests
from linestream import LineStream, is_notification_text
from scenarios import RpcError


class LineTransport:
    """The transport interface ServerProxy uses (request, push/pop_headers, close)."""

    def __init__(self, path):
        self.stream = LineStream(path)
        self.last_ids = None

    def push_headers(self, headers):
        pass

    def pop_headers(self, headers):
        pass

    def request(self, host, handler, request_body, verbose=False):
        self.stream.send_text(request_body)
        sent = json.loads(request_body)
        msgs = sent if isinstance(sent, list) else [sent]
        if all(isnotification(m) for m in msgs):
            return ""  # ServerProxy: no response for a notification
        line = self.stream.read_reply(lambda text: not is_notification_text(text))
        got = json.loads(line)
        if isinstance(sent, dict) and isinstance(got, dict):
            self.last_ids = (sent.get("id"), got.get("id"))
        elif isinstance(sent, list) and isinstance(got, list):
            self.last_ids = ([m.get("id") for m in msgs if not isnotification(m)], [g.get("id") for g in got])
        return line

    def close(self):
        self.stream.close()


def convert(e):
    if isinstance(e, AppError):
        code, message, data = e.args[0]
        return RpcError(code, message, data, e)
    code, message = e.args[0]
    return RpcError(code, message, scenarios.NO_DATA, e)


class Session:
    def __init__(self, path, ids="number"):
        self.transport = LineTransport(path)
        self.server = jsonrpclib.ServerProxy("http://sharebroker/", transport=self.transport)
        self.ids = ids
        self.n = 0

    def call(self, method, params=None):
        try:
            if self.ids == "number":
                self.n += 1
                result = self.server._request(method, params or {}, rpcid=self.n)
            else:
                fn = self.server
                for part in method.split("."):
                    fn = getattr(fn, part)
                result = fn(**(params or {}))
        except ProtocolError as e:
            err = convert(e)
        else:
            err = None
        sent, got = self.transport.last_ids
        Check.eq(got, sent, f"reply id to {method}")
        if err is not None:
            raise err
        return result

    def last_ids(self):
        return self.transport.last_ids

    def next_notification(self, timeout):
        line = self.transport.stream.next_notification_line(timeout)
        note = jsonrpclib.loads(line)
        Check.true(isnotification(note), f"not a notification: {line}")
        return note["method"], note.get("params")

    def unexpected(self):
        return list(self.transport.stream.pending)

    def close(self):
        self.server("close")()


class Adapter:
    name = "jsonrpclib-pelix"
    batches = False     # MultiCall picks its own ids: see multicall below
    error_data = False  # ProtocolError carries (code, message) only

    @staticmethod
    def connect(path, ids="number"):
        return Session(path, ids)


def multicall(broker):
    """MultiCall: a batch whose replies jsonrpclib takes by position."""
    s = Session(broker.socket, ids="string")
    try:
        mc = MultiCall(s.server)
        mc.broker.status()
        mc.hello(role="tool")
        mc._notify.url.canOpen(url="interop-alpha://x")
        mc.url.canOpen(url="interop-alpha://x")
        getattr(mc, "no.such.method")()
        results = mc()
        sent, got = s.transport.last_ids
        Check.eq(got, sent, "batch reply ids, in request order")
        Check.eq(len(results), 4, "replies")
        Check.true("version" in results[0], "broker.status")
        Check.eq(results[1]["role"], "tool", "hello")
        Check.eq(results[2]["app"], ALPHA, "url.canOpen")
        try:
            results[3]
        except ProtocolError as e:
            Check.eq(e.args[0][0], METHOD_NOT_FOUND, "code")
        else:
            raise AssertionError("no ProtocolError for the unknown method")
        # Notifications only: no reply, and the next call reads its own.
        mc = MultiCall(s.server)
        mc._notify.broker.status()
        mc._notify.url.canOpen(url="interop-alpha://y")
        Check.eq(list(mc() or []), [], "replies to a notification batch")
        s.server._notify.broker.status()
        Check.true("version" in s.call("broker.status"), "call after notifications")
        Check.eq(s.unexpected(), [], "unexpected messages")
    finally:
        s.close()


if __name__ == "__main__":
    tests = scenarios.tests_for(Adapter) + [multicall]
    sys.exit(run_tests("jsonrpclib-pelix", tests))
