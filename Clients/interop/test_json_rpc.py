"""Interop: json-rpc (PyPI ``json-rpc``, module ``jsonrpc``), over newline framing.

json-rpc is mostly a server library; a client uses its message classes. Here:

- requests, notifications and batches are built with ``JSONRPC20Request`` /
  ``JSONRPC20BatchRequest`` and serialized with their ``.json``;
- every response is checked by building a ``JSONRPC20Response`` from it (which validates the id's
  type and, through ``JSONRPCError(**error)``, that the error object has exactly code, message and
  optional data, a string message and an integer code);
- every notification the broker sends is read with the server-side ``JSONRPC20Request.from_json``
  (which refuses members other than jsonrpc/method/params/id, a missing "jsonrpc" and params that
  are not structured) and dispatched to handlers with ``JSONRPCResponseManager.handle`` and a
  ``Dispatcher``, which must answer nothing for a notification.
"""

import json
import sys

from jsonrpc import Dispatcher, JSONRPCResponseManager
from jsonrpc.exceptions import JSONRPCError
from jsonrpc.jsonrpc2 import JSONRPC20BatchRequest, JSONRPC20Request, JSONRPC20Response

import scenarios
from fixture import Check, run_tests
from linestream import LineStream, is_notification_text
from scenarios import RpcError


def response_from(data):
    """A JSONRPC20Response built from a parsed response, or an AssertionError saying why not."""
    Check.eq(data.get("jsonrpc"), "2.0", "response jsonrpc member")
    extra = set(data) - {"jsonrpc", "id", "result", "error"}
    Check.eq(extra, set(), "response members beyond jsonrpc/id/result/error")
    Check.true(("result" in data) != ("error" in data), f"exactly one of result/error: {data!r}")
    kwargs = {"_id": data["id"]}
    if "result" in data:
        kwargs["result"] = data["result"]
    else:
        kwargs["error"] = data["error"]
    return JSONRPC20Response(**kwargs)  # raises ValueError/TypeError on a malformed response


def make_request(method, params, rid, is_notification=False):
    """JSONRPC20Request refuses method names starting with "rpc." (JSON-RPC 2.0 reserves them for
    rpc-internal methods and extensions); OpenRPC's rpc.discover is such an extension, so for it
    the name is set after construction, the rest still built and serialized by the library."""
    if method.startswith("rpc."):
        req = JSONRPC20Request(method="placeholder", params=params, _id=rid, is_notification=is_notification)
        req._data["method"] = method
        return req
    return JSONRPC20Request(method=method, params=params, _id=rid, is_notification=is_notification)


class Session:
    def __init__(self, path, ids="number"):
        self.stream = LineStream(path)
        self.ids = ids
        self.n = 0
        self._last = None
        self.dispatcher = Dispatcher()
        self.handled = []
        self.dispatcher.add_method(lambda **p: self.handled.append(("app.event", p)), name="app.event")
        self.dispatcher.add_method(lambda **p: self.handled.append(("defaults.changed", p)),
                                   name="defaults.changed")

    def _next_id(self):
        self.n += 1
        return f"json-rpc-{self.n}" if self.ids == "string" else self.n

    def _convert(self, resp):
        if resp.error:
            err = JSONRPCError(**resp.error)
            return RpcError(err.code, err.message, err.data, err)
        return resp.result

    def call(self, method, params=None):
        req = make_request(method, params, self._next_id())
        self.stream.send_text(req.json)
        line = self.stream.read_reply(lambda text: not is_notification_text(text))
        resp = response_from(json.loads(line))
        self._last = (req._id, resp._id)
        Check.eq(resp._id, req._id, f"reply id to {method}")
        out = self._convert(resp)
        if isinstance(out, RpcError):
            raise out
        return out

    def last_ids(self):
        return self._last

    def next_notification(self, timeout):
        line = self.stream.next_notification_line(timeout)
        note = JSONRPC20Request.from_json(line)  # the server-side, strict parse
        Check.true(note.is_notification, f"not a notification: {line}")
        before = len(self.handled)
        answer = JSONRPCResponseManager.handle(line, self.dispatcher)
        Check.eq(answer, None, "JSONRPCResponseManager's answer to a notification")
        Check.eq(len(self.handled), before + 1, f"the dispatcher did not run a handler for {line}")
        method, params = self.handled[-1]
        Check.eq(method, note.method, "dispatched method")
        Check.eq(params, note.params, "dispatched params")
        return method, params

    def batch(self, requests):
        reqs = [make_request(m, p, i, is_notification=i is None) for m, p, i in requests]
        self.stream.send_text(JSONRPC20BatchRequest(*reqs).json)
        if all(i is None for _, _, i in requests):
            return []
        line = self.stream.read_reply(lambda text: text.startswith("["))
        out = []
        for data in json.loads(line):
            r = self._convert(response_from(data))
            out.append({"id": data["id"], "error" if isinstance(r, RpcError) else "result": r})
        return out

    def unexpected(self):
        return list(self.stream.pending)

    def close(self):
        self.stream.close()


class Adapter:
    name = "json-rpc"
    batches = True
    error_data = True

    @staticmethod
    def connect(path, ids="number"):
        return Session(path, ids)


def invalid_requests(broker):
    """What json-rpc's own server answers with -32600 / -32700, the broker answers alike; the
    JSON-RPC 2.0 specification's own examples of invalid requests get the answers it shows."""
    s = Session(broker.socket)
    try:
        # (text, code, the id the broker may answer with; compare with json-rpc's own server?)
        cases = [
            ('{"jsonrpc":"2.0","method":"broker.status","id":1', -32700, (None,), True),
            ('{"jsonrpc":"1.0","method":"broker.status","id":1}', -32600, (None, 1), False),  # json-rpc: a 1.0 call
            ('{"method":"broker.status","id":1}', -32600, (None, 1), True),
            ('{"jsonrpc":"2.0","method":1,"id":1}', -32600, (None, 1), True),
            ('{"jsonrpc":"2.0","method":"broker.status","params":"x","id":1}', -32600, (None, 1), True),
            ('[]', -32600, (None,), True),
            # jsonrpc.org/specification, section 7 (examples)
            ('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]', -32700, (None,), True),
            ('{"jsonrpc": "2.0", "method": 1, "params": "bar"}', -32600, (None,), True),
            ('[ {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"}, {"jsonrpc": "2.0", "method" ]',
             -32700, (None,), True),
        ]
        for text, code, ids, compare in cases:
            if compare:
                own = json.loads(JSONRPCResponseManager.handle(text, Dispatcher({"broker.status": lambda: {}})).json)
                Check.eq(own["error"]["code"], code, f"json-rpc's own answer to {text}")
            s.stream.send_text(text)
            data = json.loads(s.stream.read_reply(lambda t: True))
            Check.true(isinstance(data, dict), f"one response object for {text}: {data!r}")
            resp = response_from(data)
            Check.true(resp.error is not None, f"no error for {text}: {data!r}")
            Check.eq(resp.error["code"], code, f"broker's answer to {text}")
            Check.true(resp._id in ids, f"id {resp._id!r} in the answer to {text}")
        # Still usable.
        Check.true("version" in s.call("broker.status"), "call after invalid requests")
        # Batches with invalid members: each gets its own -32600, the valid one its result.
        for text, want in [
            ('[1, {"jsonrpc":"2.0","method":"broker.status","id":"ok"}, {"foo":1}]',
             [(None, -32600), ("ok", None), (None, -32600)]),
            ("[1,2,3]", [(None, -32600)] * 3),  # the specification's example
            ('[{"jsonrpc":"2.0","method":"no.such"},{"jsonrpc":"2.0","method":1}]', [(None, -32600)]),
        ]:
            s.stream.send_text(text)
            data = json.loads(s.stream.read_reply(lambda t: True))
            Check.true(isinstance(data, list), f"an array for {text}: {data!r}")
            resps = [response_from(d) for d in data]
            Check.eq([(r._id, (r.error or {}).get("code")) for r in resps], want, f"replies to {text}")
        # A notification that fails (unknown method, bad params) is not answered either.
        s.stream.send_text('{"jsonrpc":"2.0","method":"no.such","params":[1]}')
        s.stream.send_text('{"jsonrpc":"2.0","method":"hello","params":{"role":7}}')
        s.stream.send_text(make_request("broker.status", None, "after").json)
        resp = response_from(json.loads(s.stream.read_reply(lambda t: True)))
        Check.eq(resp._id, "after", "the reply after two failing notifications")
    finally:
        s.close()


if __name__ == "__main__":
    tests = scenarios.tests_for(Adapter) + [invalid_requests]
    sys.exit(run_tests("json-rpc", tests))
