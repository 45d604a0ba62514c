"""Interop: the broker's own OpenRPC document (rpc.discover) against what it really sends.

Tools that read OpenRPC documents (client generators, validators, the `openrpc` package used here)
trust the document. This suite loads it with ``openrpc.OpenRPC`` (pydantic models of OpenRPC 1.x)
and then runs every shared scenario through jsonrpcclient (test_jsonrpcclient.Session), checking
each exchange against the document with ``jsonschema``:

- a call that succeeded: its params name only documented params, include the required ones, and
  each matches its schema; its result matches the method's result schema;
- a call that failed: its error code is one the method lists under ``errors`` (-32601 for unknown
  methods and -32600/-32700 aside);
- every notification the broker sends is listed in ``x-notifications`` and matches its params
  schema.
"""

import sys

import jsonschema
import openrpc

import scenarios
import test_jsonrpcclient
from fixture import Check, run_tests

UNDOCUMENTED_OK = {-32601, -32600, -32700}
# Params a scenario sends on purpose outside their schema, which PROTOCOL.md says are accepted.
LENIENT_PARAMS = {("app.ack", "ids")}  # "ids ... not strings at all ... count 0; never an error"


def fetch_document(path):
    s = test_jsonrpcclient.Session(path)
    try:
        return s.call("rpc.discover")
    finally:
        s.close()


class Document:
    def __init__(self, doc):
        openrpc.OpenRPC.model_validate(doc)  # the shape of an OpenRPC document
        self.doc = doc
        self.methods = {m["name"]: m for m in doc["methods"]}
        Check.eq(len(self.methods), len(doc["methods"]), "method names are unique")
        self.notes = {n["name"]: n for n in doc.get("x-notifications", [])}
        self.problems = []

    def _validate(self, schema, value, what):
        wrapped = {"allOf": [schema], "components": self.doc.get("components", {})}
        try:
            jsonschema.Draft202012Validator(wrapped).validate(value)
        except jsonschema.ValidationError as e:
            self.problems.append(f"{what}: {e.message} (at {'/'.join(map(str, e.absolute_path))})")

    def call(self, method, params, result=None, error_code=None):
        m = self.methods.get(method)
        if m is None:
            if error_code != -32601:
                self.problems.append(f"{method}: not in the document, yet not -32601 ({error_code})")
            return
        if error_code is not None:
            codes = {e["code"] for e in m.get("errors", [])}
            if error_code not in codes | UNDOCUMENTED_OK:
                self.problems.append(f"{method}: error {error_code} is not among its documented errors {sorted(codes)}")
            return
        documented = {p["name"]: p for p in m.get("params", [])}
        given = params or {}
        for name in given:
            if name not in documented:
                self.problems.append(f"{method}: param {name!r} is accepted but not documented")
        for name, p in documented.items():
            if p.get("required") and name not in given:
                self.problems.append(f"{method}: documented-required param {name!r} was left out and the call succeeded")
            if name in given and (method, name) not in LENIENT_PARAMS:
                self._validate(p.get("schema", {}), given[name], f"{method} param {name}")
        self._validate(m["result"].get("schema", {}), result, f"{method} result")

    def notification(self, method, params):
        n = self.notes.get(method)
        if n is None:
            self.problems.append(f"notification {method} is not in x-notifications")
            return
        self._validate(n.get("params", {}), params, f"notification {method} params")


class Session(test_jsonrpcclient.Session):
    document = None  # set per test

    def call(self, method, params=None):
        try:
            result = super().call(method, params)
        except scenarios.RpcError as e:
            self.document.call(method, params, error_code=e.code)
            raise
        self.document.call(method, params, result=result)
        return result

    def next_notification(self, timeout):
        method, params = super().next_notification(timeout)
        self.document.notification(method, params)
        return method, params

    def batch(self, requests):
        out = super().batch(requests)
        answered = [(m, p) for m, p, i in requests if i is not None]
        for (method, params), r in zip(answered, out):
            if "error" in r:
                self.document.call(method, params, error_code=r["error"].code)
            else:
                self.document.call(method, params, result=r["result"])
        return out


class Adapter(test_jsonrpcclient.Adapter):
    name = "openrpc-conformance"

    @staticmethod
    def connect(path, ids="number"):
        return Session(path, ids)


def with_document(scenario):
    def test(broker):
        Session.document = Document(fetch_document(broker.socket))
        scenario(Adapter, broker)
        Check.eq(Session.document.problems, [], "exchanges that disagree with rpc.discover")
    test.__name__ = scenario.__name__
    return test


if __name__ == "__main__":
    sys.exit(run_tests("openrpc-conformance", [with_document(s) for s in scenarios.SCENARIOS]))
