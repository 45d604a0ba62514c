"""Interop: python-lsp-jsonrpc (pylsp_jsonrpc), the JSON-RPC layer of the Python LSP server.

Header framing: JsonRpcStreamWriter writes ``Content-Length: N\\r\\nContent-Type:
application/vscode-jsonrpc; charset=utf8\\r\\n\\r\\n`` and JsonRpcStreamReader reads the same, so the
broker must pick header framing from the first bytes, ignore the Content-Type header and answer in
header framing. Endpoint does the request/response matching (uuid string ids by default, numbers
with an id generator), raises JsonRpcException subclasses for error responses and dispatches the
broker's notifications (app.event, defaults.changed) to a handler table.
"""

import itertools
import queue
import socket
import sys
import threading
import uuid

from pylsp_jsonrpc import exceptions as lsp_exceptions
from pylsp_jsonrpc.endpoint import Endpoint
from pylsp_jsonrpc.streams import JsonRpcStreamReader, JsonRpcStreamWriter

import scenarios
from fixture import ALPHA, ALPHA_TOKEN, Check, run_tests, unix_socket
from scenarios import RpcError


class Session:
    def __init__(self, path, ids="number"):
        self.sock = unix_socket(path, timeout=None)
        self.rfile = self.sock.makefile("rb")
        self.wfile = self.sock.makefile("wb")
        self.writer = JsonRpcStreamWriter(self.wfile)
        self.reader = JsonRpcStreamReader(self.rfile)
        self.notes = queue.Queue()
        self.batches = queue.Queue()
        self._unexpected = []
        self._last = None
        sent_ids = []
        if ids == "string":
            gen = lambda: str(uuid.uuid4())  # noqa: E731 (Endpoint's own default)
        else:
            counter = itertools.count(1)
            gen = lambda: next(counter)  # noqa: E731

        def id_generator():
            i = gen()
            sent_ids.append(i)
            return i

        self._sent_ids = sent_ids
        dispatcher = {
            "app.event": lambda params: self.notes.put(("app.event", params)),
            "defaults.changed": lambda params: self.notes.put(("defaults.changed", params)),
        }
        self.endpoint = Endpoint(dispatcher, self.writer.write, id_generator=id_generator)
        self.received_ids = []
        self.thread = threading.Thread(target=self.reader.listen, args=(self._consume,), daemon=True)
        self.thread.start()

    def _consume(self, message):
        # Batch replies are lists, which Endpoint does not take; everything else goes to it.
        if isinstance(message, list):
            self.batches.put(message)
            return
        if "id" in message and "method" not in message:
            self.received_ids.append(message["id"])
        elif "id" not in message and message.get("method") not in ("app.event", "defaults.changed"):
            self._unexpected.append(message)
        self.endpoint.consume(message)

    def call(self, method, params=None, timeout=10.0):
        n = len(self.received_ids)
        future = self.endpoint.request(method, params)
        try:
            result = future.result(timeout)
        except lsp_exceptions.JsonRpcException as e:
            result = None
            err = e
        else:
            err = None
        self._last = (self._sent_ids[-1], self.received_ids[n] if len(self.received_ids) > n else None)
        if err is not None:
            raise RpcError(err.code, err.message, err.data, err)
        return result

    def last_ids(self):
        return self._last

    def next_notification(self, timeout):
        try:
            return self.notes.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no notification within {timeout} s") from None

    def batch(self, requests, timeout=10.0):
        msgs = []
        for method, params, rid in requests:
            m = {"jsonrpc": "2.0", "method": method}
            if params is not None:
                m["params"] = params
            if rid is not None:
                m["id"] = rid
            msgs.append(m)
        self.writer.write(msgs)
        if all(rid is None for _, _, rid in requests):
            return []
        try:
            reply = self.batches.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError("no batch reply") from None
        out = []
        for r in reply:
            if "error" in r:
                # The library's own conversion of an error object.
                e = lsp_exceptions.JsonRpcException.from_dict(r["error"])
                out.append({"id": r.get("id"), "error": RpcError(e.code, e.message, e.data, e)})
            else:
                out.append({"id": r.get("id"), "result": r.get("result")})
        return out

    def unexpected(self):
        out = list(self._unexpected)
        while not self.batches.empty():
            out.append(self.batches.get())
        return out

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(5)
        self.endpoint.shutdown()
        self.writer.close()
        self.reader.close()
        self.sock.close()


class Adapter:
    name = "pylsp_jsonrpc"
    batches = True
    error_data = True

    @staticmethod
    def connect(path, ids="number"):
        return Session(path, ids)


def error_classes(broker):
    """-32601 arrives as the library's JsonRpcMethodNotFound, -32602 as JsonRpcInvalidParams."""
    s = Session(broker.socket)
    try:
        try:
            s.endpoint.request("no.such.method", {}).result(10)
        except lsp_exceptions.JsonRpcMethodNotFound as e:
            Check.eq(e.code, -32601, "code")
        else:
            raise AssertionError("no error")
        try:
            s.endpoint.request("hello", {"role": "app"}).result(10)
        except lsp_exceptions.JsonRpcInvalidParams as e:
            Check.eq(e.code, -32602, "code")
        else:
            raise AssertionError("no error")
        scenarios.hello(s, "app", ALPHA, ALPHA_TOKEN)
    finally:
        s.close()


def many_in_flight(broker):
    """50 requests written back to back before any reply is read; each future gets its reply."""
    s = Session(broker.socket, ids="string")
    try:
        scenarios.hello(s, "tool")
        futures = [s.endpoint.request("url.canOpen", {"url": f"interop-alpha://n/{i}"}) for i in range(50)]
        results = [f.result(10) for f in futures]
        Check.eq({(r["canOpen"], r["app"]) for r in results}, {(True, ALPHA)}, "results")
    finally:
        s.close()


if __name__ == "__main__":
    tests = scenarios.tests_for(Adapter) + [error_classes, many_in_flight]
    sys.exit(run_tests("pylsp_jsonrpc", tests))
