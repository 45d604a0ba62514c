"""Interop: tinyrpc (PyPI), RPCClient + JSONRPCProtocol over newline framing.

tinyrpc keeps protocol and transport apart: JSONRPCProtocol builds requests (integer ids from its
counter, or any ids from an ``id_generator``) and parses replies strictly (``parse_reply``: only
the members jsonrpc/id/result/error, "jsonrpc" exactly "2.0", and an id it is waiting for, else
InvalidReplyError / UnexpectedIDError); RPCClient raises the error responses as
``tinyrpc.protocols.jsonrpc.JSONRPCError`` (message, data and the code in
``_jsonrpc_error_code``). The transport is a tinyrpc ClientTransport over linestream.LineStream.
The broker's notifications are read with the server-side ``parse_request`` (only
jsonrpc/id/method/params allowed).
"""

import itertools
import sys

from tinyrpc.client import RPCClient
from tinyrpc.protocols.jsonrpc import (JSONRPCError, JSONRPCErrorResponse, JSONRPCProtocol,
                                       JSONRPCSuccessResponse)
from tinyrpc.transports import ClientTransport

import scenarios
from fixture import ALPHA, Check, run_tests
from linestream import LineStream, is_notification_text
from scenarios import RpcError


class LineClientTransport(ClientTransport):
    def __init__(self, path):
        self.stream = LineStream(path)

    def send_message(self, message, expect_reply=True):
        self.stream.send_text(message)
        if not expect_reply:
            return None
        return self.stream.read_reply(lambda text: not is_notification_text(text)).encode("utf-8")


def convert(e):
    return RpcError(e._jsonrpc_error_code, e.message, getattr(e, "data", scenarios.NO_DATA), e)


class Session:
    def __init__(self, path, ids="number"):
        self.transport = LineClientTransport(path)
        gen = (f"tiny-{i}" for i in itertools.count(1)) if ids == "string" else None
        self.protocol = JSONRPCProtocol(id_generator=gen)
        self.client = RPCClient(self.protocol, self.transport)
        self.server_side = JSONRPCProtocol()  # to read the broker's notifications as requests

    def call(self, method, params=None):
        try:
            return self.client.call(method, [], params or {})
        except JSONRPCError as e:
            raise convert(e) from None

    def last_ids(self):
        return None  # parse_reply itself refuses a reply whose id was not sent

    def next_notification(self, timeout):
        line = self.transport.stream.next_notification_line(timeout)
        req = self.server_side.parse_request(line.encode("utf-8"))
        Check.true(req.one_way, f"not a notification: {line}")
        Check.eq(req.args, [], f"positional params in {line}")
        return req.method, req.kwargs

    def batch(self, requests):
        b = self.protocol.create_batch_request()
        forced_ids = {}
        for method, params, rid in requests:
            req = self.protocol.create_request(method, [], params or {}, one_way=rid is None)
            if rid is not None:
                # The scenario's ids; tinyrpc must then expect these.
                self.protocol._pending_replies.remove(req.unique_id)
                req.unique_id = rid
                self.protocol._pending_replies.append(rid)
                forced_ids[rid] = method
            b.append(req)
        text = b.serialize()
        self.transport.stream.send_text(text)
        if not forced_ids:
            return []
        line = self.transport.stream.read_reply(lambda t: t.startswith("["))
        out = []
        for r in self.protocol.parse_reply(line.encode("utf-8")):
            if isinstance(r, JSONRPCErrorResponse):
                out.append({"id": r.unique_id, "error": convert(JSONRPCError(r))})
            elif isinstance(r, JSONRPCSuccessResponse):
                out.append({"id": r.unique_id, "result": r.result})
            else:
                raise AssertionError(f"tinyrpc could not parse a batch member: {r!r}")
        return out

    def unexpected(self):
        return list(self.transport.stream.pending)

    def close(self):
        self.transport.stream.close()


class Adapter:
    name = "tinyrpc"
    batches = True
    error_data = True

    @staticmethod
    def connect(path, ids="number"):
        return Session(path, ids)


def proxy(broker):
    """RPCProxy: attribute calls with a prefix ("url.") and keyword params."""
    s = Session(broker.socket)
    try:
        root = s.client.get_proxy()
        Check.eq(root.hello(role="tool")["role"], "tool", "hello through the proxy")
        url = s.client.get_proxy(prefix="url.")
        Check.eq(url.canOpen(url="interop-alpha://p")["app"], ALPHA, "url.canOpen through the proxy")
        try:
            url.open(url="https://nowhere.interop.test/x")
        except JSONRPCError as e:
            Check.eq(e._jsonrpc_error_code, -32004, "code")
        else:
            raise AssertionError("no JSONRPCError")
        # one_way: a notification; nothing comes back.
        s.client.get_proxy(one_way=True).hello(role="tool")
        Check.true("version" in s.call("broker.status"), "a call after a one_way call")
        Check.eq(s.unexpected(), [], "unexpected messages")
    finally:
        s.close()


if __name__ == "__main__":
    tests = scenarios.tests_for(Adapter) + [proxy]
    sys.exit(run_tests("tinyrpc", tests))
