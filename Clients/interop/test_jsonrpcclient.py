"""Interop: jsonrpcclient (PyPI), over newline framing.

jsonrpcclient builds request dicts (``request`` with incrementing decimal ids, ``request_uuid`` /
``request_hex`` with string ids, ``notification``) and parses response dicts into its ``Ok`` /
``Error`` types (``parse``: a list for a batch). The transport is linestream.LineStream.
"""

import json
import sys

from jsonrpcclient import Error, Ok, notification, parse, parse_json, request, request_uuid

import scenarios
from fixture import ALPHA, ALPHA_TOKEN, METHOD_NOT_FOUND, Check, run_tests
from linestream import LineStream, is_notification_text
from scenarios import RpcError


class Session:
    def __init__(self, path, ids="number"):
        self.stream = LineStream(path)
        self.make_request = request_uuid if ids == "string" else request
        self._last = None

    def _to_result(self, response):
        if isinstance(response, Ok):
            return response.result
        if isinstance(response, Error):
            return RpcError(response.code, response.message, response.data, response)
        raise AssertionError(f"jsonrpcclient.parse gave {response!r}")

    def call(self, method, params=None):
        req = self.make_request(method, params)
        self.stream.send_text(json.dumps(req))
        line = self.stream.read_reply(lambda text: not is_notification_text(text))
        response = parse_json(line)
        self._last = (req["id"], response.id)
        Check.eq(response.id, req["id"], f"reply id to {method}")
        out = self._to_result(response)
        if isinstance(out, RpcError):
            raise out
        return out

    def last_ids(self):
        return self._last

    def next_notification(self, timeout):
        msg = json.loads(self.stream.next_notification_line(timeout))
        Check.true("id" not in msg, f"expected a notification, got {msg!r}")
        return msg["method"], msg.get("params")

    def batch(self, requests):
        msgs = []
        for method, params, rid in requests:
            if rid is None:
                msgs.append(notification(method, params))
            else:
                msgs.append(request(method, params, id=rid))
        self.stream.send_text(json.dumps(msgs))
        if all(rid is None for _, _, rid in requests):
            return []
        line = self.stream.read_reply(lambda text: text.startswith("["))
        out = []
        for response in parse(json.loads(line)):
            r = self._to_result(response)
            out.append({"id": response.id, "error" if isinstance(r, RpcError) else "result": r})
        return out

    def unexpected(self):
        return list(self.stream.pending)

    def close(self):
        self.stream.close()


class Adapter:
    name = "jsonrpcclient"
    batches = True
    error_data = True

    @staticmethod
    def connect(path, ids="number"):
        return Session(path, ids)


def fractional_and_big_ids(broker):
    """Ids jsonrpcclient will send if told to: a negative number, a float, a long string."""
    s = Session(broker.socket)
    try:
        for rid in (-7, 2.5, 10**15, "x" * 300, "ünï"):
            req = request("broker.status", id=rid)
            s.stream.send_text(json.dumps(req))
            r = parse_json(s.stream.read_reply(lambda t: True))
            Check.true(isinstance(r, Ok), f"broker.status with id {rid!r}: {r!r}")
            Check.eq((type(r.id), r.id), (type(rid), rid), "id echoed")
        req = request("no.such.method", id=0)
        s.stream.send_text(json.dumps(req))
        r = parse_json(s.stream.read_reply(lambda t: True))
        Check.true(isinstance(r, Error) and r.code == METHOD_NOT_FOUND and r.id == 0, f"{r!r}")
    finally:
        s.close()


def null_id(broker):
    """A request whose id is null is answered with id null (JSON-RPC 2.0 allows a null id)."""
    s = Session(broker.socket)
    try:
        req = request("url.canOpen", {"url": "interop-alpha://x"}, id=None)
        Check.eq(req["id"], None, "jsonrpcclient request with id None")
        s.stream.send_text(json.dumps(req))
        r = parse_json(s.stream.read_reply(lambda t: True))
        Check.true(isinstance(r, Error) and r.id is None, f"{r!r}")
        Check.eq(r.code, -32001, "before hello")
        req = request("hello", {"role": "tool"}, id="s")
        s.stream.send_text(json.dumps(req))
        Check.true(isinstance(parse_json(s.stream.read_reply(lambda t: True)), Ok), "hello")
        s.stream.send_text(json.dumps(request("url.canOpen", {"url": "interop-alpha://x"}, id=None)))
        r = parse_json(s.stream.read_reply(lambda t: True))
        Check.true(isinstance(r, Ok) and r.id is None and r.result.get("app") == ALPHA, f"{r!r}")
    finally:
        s.close()


def subscribe_order(broker):
    """On the wire, app.subscribe's reply comes before the queued events it announces (PROTOCOL:
    "first every pending event ... after this reply"); in a batch, they follow the batch's reply."""
    tool = Session(broker.socket)
    ids = []
    try:
        scenarios.hello(tool, "tool")
        for i in range(4):
            ids.append(tool.call("url.open", {"url": f"interop-alpha://order/{i}"})["eventID"])
    finally:
        tool.close()
    s = Session(broker.socket)
    try:
        scenarios.hello(s, "app", ALPHA, ALPHA_TOKEN)
        req = request("app.subscribe", {})
        s.stream.send_text(json.dumps(req))
        first = parse_json(s.stream.read_line())
        Check.true(isinstance(first, Ok) and first.id == req["id"], f"first line after app.subscribe: {first!r}")
        Check.eq(first.result, {"pending": 4}, "app.subscribe")
        got = [json.loads(s.stream.read_line()) for _ in ids]
        Check.eq([g["params"]["id"] for g in got], ids, "events after the reply, oldest first")
    finally:
        s.close()  # nothing acked: the next session gets them again
    b = Session(broker.socket)
    try:
        msgs = [request("hello", {"role": "app", "bundleID": ALPHA, "token": ALPHA_TOKEN}, id="h"),
                request("app.subscribe", {}, id="s"), request("broker.status", id="st")]
        b.stream.send_text(json.dumps(msgs))
        first = json.loads(b.stream.read_line())
        Check.true(isinstance(first, list), f"the batch reply comes first: {first!r}")
        replies = list(parse(first))
        Check.eq([r.id for r in replies], ["h", "s", "st"], "batch reply ids")
        Check.eq(replies[1].result, {"pending": 4}, "app.subscribe in a batch")
        got = [json.loads(b.stream.read_line()) for _ in ids]
        Check.eq([g["params"]["id"] for g in got], ids, "redelivered events after the batch reply")
        b.call("app.ack", {"ids": ids})
    finally:
        b.close()


if __name__ == "__main__":
    tests = scenarios.tests_for(Adapter) + [fractional_and_big_ids, null_id, subscribe_order]
    sys.exit(run_tests("jsonrpcclient", tests))
