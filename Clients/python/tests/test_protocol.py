"""JSON-RPC through the client: error codes, raw messages, batches, notifications, framings."""

import json
import os
import socket
import subprocess
import sys
import time
import unittest

import support
from support import APP
import sharebroker as sb


def nested(depth):
    """An array nested ``depth`` levels deep (the broker parses 256)."""
    v = 0
    for _ in range(depth):
        v = [v]
    return v


class ProtocolTests(support.BrokerTestCase):
    def test_parse_error_keeps_the_connection(self):
        c = self.tool()
        r = c.call_raw('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
        self.assertEqual(r["id"], None)
        self.assertEqual(r["error"]["code"], sb.PARSE_ERROR)
        self.assertEqual(c.broker_status()["apps"], 4)

    def test_invalid_requests(self):
        c = self.tool()
        for bad in ({"jsonrpc": "2.0", "id": 2, "method": 1, "params": "bar"},
                    {"jsonrpc": "1.0", "id": 3, "method": "broker.status"},
                    {"jsonrpc": "2.0", "id": 4, "method": "broker.status", "params": "x"}):
            r = c.call_raw(bad)
            self.assertEqual(r["error"]["code"], sb.INVALID_REQUEST, r)
            self.assertEqual(r["id"], bad["id"])
        r = c.call_raw({"jsonrpc": "2.0", "id": {"an": "object"}, "method": "broker.status"})
        self.assertEqual(r["error"]["code"], sb.INVALID_REQUEST)

    def test_method_not_found_and_invalid_params(self):
        c = self.tool()
        e = self.assertBrokerError(sb.METHOD_NOT_FOUND, c.call, "no.such.method")
        self.assertEqual(e.method, "no.such.method")
        self.assertBrokerError(sb.INVALID_PARAMS, c.call, "url.open", {"url": 42})
        self.assertBrokerError(sb.INVALID_PARAMS, c.call, "url.open", {})

    def test_ids_are_echoed(self):
        c = self.tool()
        for rid in ("abc", 7, None, 1.5):
            r = c.call_raw({"jsonrpc": "2.0", "id": rid, "method": "broker.status"})
            self.assertEqual(r["id"], rid)
            self.assertIn("result", r)
        self.assertEqual(c.call_raw('{"jsonrpc":"2.0","id":1.50,"method":"broker.status"}')["id"], 1.5)

    def test_raw_batch(self):
        c = self.tool()
        r = c.call_raw([
            {"jsonrpc": "2.0", "id": 1, "method": "broker.status"},
            {"jsonrpc": "2.0", "method": "broker.status"},  # notification: left out
            {"jsonrpc": "2.0", "id": 2, "method": "url.canOpen", "params": {"url": "deeplinkmyapp://x"}},
            {"jsonrpc": "2.0", "id": 3, "method": "no.such.method"},
            1,
            {"jsonrpc": "2.0", "id": 4, "method": "url.open", "params": {"url": "nosuchscheme://x"}},
        ])
        self.assertIsInstance(r, list)
        self.assertEqual([x["id"] for x in r], [1, 2, 3, None, 4])
        self.assertIn("version", r[0]["result"])
        self.assertEqual(r[1]["result"]["app"], APP)
        self.assertEqual(r[2]["error"]["code"], sb.METHOD_NOT_FOUND)
        self.assertEqual(r[3]["error"]["code"], sb.INVALID_REQUEST)
        self.assertEqual(r[4]["error"]["code"], sb.NO_HANDLER)
        # An empty batch: one -32600 with id null; [1, 2]: one -32600 each.
        r = c.call_raw([])
        self.assertEqual((r["id"], r["error"]["code"]), (None, sb.INVALID_REQUEST))
        r = c.call_raw([1, 2])
        self.assertEqual([x["error"]["code"] for x in r], [sb.INVALID_REQUEST] * 2)

    def test_batch_of_notifications_gets_no_reply(self):
        c = self.connect()
        c.send_raw([{"jsonrpc": "2.0", "method": "broker.status"},
                    {"jsonrpc": "2.0", "method": "hello", "params": {"role": "tool"}}])
        # The next answer is this call's: nothing came for the batch; the hello was executed.
        self.assertIn("version", c.broker_status())
        self.assertIn("canOpen", c.url_can_open("deeplinkmyapp://x"))
        with self.assertRaises(TimeoutError):
            c.receive(timeout=0.2)

    def test_an_error_without_an_id_answers_the_oldest_request(self):
        # (the review: the sync client took any error without an id as the answer of whichever
        # call read it, so a raw message's -32700 answered the next call)
        c = self.tool()
        c.send_raw('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
        self.assertEqual(c.broker_status()["apps"], 4)  # its own answer, not the raw one's error
        r = c.receive(timeout=5)
        self.assertEqual((r["id"], r["error"]["code"]), (None, sb.PARSE_ERROR))
        # Two raw messages the broker cannot parse, then a call it cannot parse: each its own.
        c.send_raw("not json")
        c.send_raw(b"\xff")
        self.assertBrokerError(sb.PARSE_ERROR, c.call, "broker.status", {"deep": nested(300)})
        self.assertEqual([c.receive(timeout=5)["error"]["code"] for _ in range(2)], [sb.PARSE_ERROR] * 2)
        # A raw notification gets no answer, so it takes no call's.
        c.send_raw({"jsonrpc": "2.0", "method": "url.canOpen", "params": {"url": "notes://raw-notification"}})
        c.send_raw(b'{"jsonrpc":"2.0","method":"broker.status"}')
        self.assertBrokerError(sb.PARSE_ERROR, c.call, "broker.status", {"deep": nested(300)})
        self.assertIn("canOpen", c.url_can_open("notes://x"))
        with self.assertRaises(TimeoutError):
            c.receive(timeout=0.2)  # nothing left over

    def test_a_notification_the_broker_could_not_parse_is_not_sent(self):
        # (its -32700 would carry no id and answer the next call)
        c = self.tool()
        e = self.assertBrokerError(sb.PARSE_ERROR, c.notify, "broker.status", {"deep": nested(300)})
        self.assertIn("not sent", e.message)
        self.assertIn("version", c.broker_status())
        with self.assertRaises(TimeoutError):
            c.receive(timeout=0.2)

    def test_batch_helper(self):
        c = self.tool()
        out = c.batch([("broker.status", None), ("url.canOpen", {"url": "deeplinkmyapp://x"}),
                       ("url.open", {"url": "nosuchscheme://x"}), ("share.get", {"shareID": "nope"})])
        self.assertIn("version", out[0])
        self.assertTrue(out[1]["canOpen"])
        self.assertIsInstance(out[2], sb.BrokerError)
        self.assertEqual(out[2].code, sb.NO_HANDLER)
        self.assertEqual(out[2].method, "url.open")
        self.assertEqual(out[3].code, sb.UNAUTHORIZED)  # a tool reads no group

    def test_notify(self):
        c = self.tool()
        before = c.broker_status()["pendingEvents"]
        c.notify("url.open", {"url": "notes://via-notification"})  # executed, never answered
        c.notify("no.such.method")                                  # fails silently
        self.assertEqual(c.broker_status()["pendingEvents"], before + 1)
        with self.assertRaises(TimeoutError):
            c.receive(timeout=0.2)
        n = self.connect("app", support.NOTES)
        n.app_subscribe()
        ids = [e.params["id"] for e in n.events(timeout=0.3, method="app.event")]
        self.assertTrue(ids)
        n.app_ack(ids)

    def test_content_length_framing(self):
        c = self.connect("tool", framing=sb.CONTENT_LENGTH)
        self.assertEqual(c.hello_result["role"], "tool")
        self.assertTrue(c.url_can_open("deeplinkmyapp://x")["canOpen"])
        out = c.batch([("broker.status", None), ("no.such", None)])
        self.assertEqual(out[1].code, sb.METHOD_NOT_FOUND)
        # Events arrive with header framing too.
        app = self.connect("app", APP, framing=sb.CONTENT_LENGTH)
        app.app_subscribe()
        ids = [e.params["id"] for e in app.events(timeout=0.2, method="app.event")]
        if ids:
            app.app_ack(ids)
        r = c.url_open("deeplinkmyapp://framed")
        self.assertEqual(app.next_event(5)["id"], r["eventID"])
        app.app_ack(r["eventID"])
        # Raw bytes on the wire: the broker answers in the framing the connection started with.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(self.broker.socket)
            body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "broker.status"}).encode()
            s.sendall(b"Content-Length: %d\r\nContent-Type: application/json\r\n\r\n" % len(body) + body)
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(4096)
            self.assertTrue(data.lower().startswith(b"content-length:"), data[:40])

    def test_oversized_message_closes_only_that_connection(self):
        broker = support.Broker(args=["--max-message", "4096"]).start()
        try:
            big = broker.client(role="tool")
            other = broker.client(role="tool")
            big.send_raw({"jsonrpc": "2.0", "id": 1, "method": "url.open",
                          "params": {"url": "deeplinkmyapp://" + "x" * 10000}})
            r = big.receive(timeout=5)
            self.assertEqual((r["id"], r["error"]["code"]), (None, sb.INVALID_REQUEST))
            with self.assertRaises(sb.ConnectionClosed):
                big.broker_status()
            self.assertEqual(other.broker_status()["maxMessage"], 4096)
            big.close()
            other.close()
        finally:
            broker.stop()

    def test_the_error_the_broker_closes_with_answers_no_call(self):
        # A call over --max-message: the broker's -32600 without an id carries data.closing, the
        # reason the connection ends, not the call's answer (it was a BrokerError).
        broker = support.Broker(args=["--max-message", "4096"]).start()
        try:
            c = broker.client(role="tool")
            with self.assertRaises(sb.ConnectionClosed) as cm:
                c.call("broker.status", {"pad": "x" * 10000})
            self.assertEqual((cm.exception.reason["code"], cm.exception.reason["data"]),
                             (sb.INVALID_REQUEST, {"closing": True}))
            self.assertIn("message larger than the limit of 4096 bytes", str(cm.exception))
            self.assertTrue(c.closed)
            with self.assertRaises(sb.ConnectionClosed) as cm:
                c.broker_status()  # the next call: the same reason, not a broken pipe
            self.assertEqual(cm.exception.reason["code"], sb.INVALID_REQUEST)
            c.close()
        finally:
            broker.stop()

    def test_the_reason_is_kept_when_a_write_meets_the_closed_socket(self):
        # A message over --max-message and a call right behind it, whose write may meet the
        # socket the broker has just closed (EPIPE): the call raises ConnectionClosed with the
        # broker's reason, every time (as test_async's test of the same name). (Against this
        # broker on Linux the reason is already there when the write fails; ReasonInFlightTests in
        # test_unit has a peer whose reason is still on its way.)
        broker = support.Broker(args=["--max-message", "4096"]).start()
        try:
            for i in range(50):
                c = sb.Client(broker.socket, timeout=10)
                try:
                    c.send_raw({"jsonrpc": "2.0", "id": "big", "method": "broker.status",
                                "params": {"pad": "x" * 5000}})
                    with self.assertRaises(sb.ConnectionClosed) as cm:
                        c.call("broker.status")
                    self.assertEqual((cm.exception.reason or {}).get("data"), {"closing": True},
                                     f"try {i}: {cm.exception}")
                    self.assertIn("message larger than the limit", str(cm.exception))
                finally:
                    c.close()
        finally:
            broker.stop()

    def test_a_connection_refused_at_once_raises_connection_closed_with_the_reason(self):
        # Over --max-connections-per-user: the broker says why (-32001, data.closing) and hangs
        # up; hello, sent meanwhile (or into the closed socket), raises ConnectionClosed with it.
        broker = support.Broker(args=["--max-connections-per-user", "1"]).start()
        try:
            deadline = time.monotonic() + 5
            while True:  # (the broker may still count the connection start() tried)
                try:
                    holder = broker.client(role="tool")
                    break
                except (sb.BrokerError, sb.BrokerConnectionError):
                    self.assertLess(time.monotonic(), deadline, "the one allowed connection was refused")
                    time.sleep(0.05)
            for _ in range(5):  # (the refusal may come before hello is written, or after)
                with self.assertRaises(sb.ConnectionClosed) as cm:
                    broker.client(role="tool")
                self.assertEqual((cm.exception.reason["code"], cm.exception.reason["data"]),
                                 (sb.UNAUTHORIZED, {"closing": True}))
                self.assertIn("per-user", str(cm.exception))
            self.assertIn("version", holder.broker_status())
            holder.close()
        finally:
            broker.stop()

    def test_batch_refused_whole_raises_and_does_not_answer_the_next_call(self):
        broker = support.Broker(args=["--max-batch", "2"]).start()
        try:
            with broker.client(role="tool", timeout=5) as c:
                start = time.monotonic()
                with self.assertRaises(sb.BrokerError) as cm:
                    c.batch([("broker.status", {})] * 3)
                self.assertEqual(cm.exception.code, sb.INVALID_REQUEST)
                self.assertLess(time.monotonic() - start, 4)  # answered, not timed out
                self.assertIn("version", c.broker_status())  # its own answer, not the batch's error
        finally:
            broker.stop()

    def test_command_line(self):
        def run(*args):
            env = dict(os.environ, PYTHONPATH=str(support.PYTHON_DIR), SHAREBROKER_SOCKET=self.broker.socket)
            return subprocess.run([sys.executable, "-m", "sharebroker", *args], env=env,
                                  capture_output=True, text=True, timeout=20)
        r = run("url.canOpen", '{"url": "deeplinkmyapp://x"}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["app"], APP)
        r = run("url.open", '{"url": "nosuchscheme://x"}')
        self.assertEqual(r.returncode, 1)
        self.assertIn("-32004", r.stderr)
        r = run("--as", APP, "app.subscribe", "--listen", "0.3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("pending", json.loads(r.stdout.splitlines()[0]))
        # An extension's bundle ID with --as alone: the role follows the broker's data.role.
        r = run("--as", support.APP_SHARE, "defaults.list", json.dumps({"group": support.APP_GROUP}))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("version", json.loads(r.stdout))
        r = run("--as", support.APP_SHARE, "--role", "app", "broker.status")
        self.assertEqual(r.returncode, 1, "an explicit --role is not changed")
        self.assertIn("-32001", r.stderr)
        r = run("--socket", "/nonexistent/s.sock", "broker.status")
        self.assertEqual(r.returncode, 69)
        self.assertIn("/nonexistent/s.sock", r.stderr)
        self.assertEqual(run("broker.status", "{not json").returncode, 64)


if __name__ == "__main__":
    unittest.main()
