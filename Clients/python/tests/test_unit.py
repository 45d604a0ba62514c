"""Unit tests of the client's pure parts (no broker needed)."""

import base64
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import unittest
from unittest import mock

import support  # noqa: F401  (puts the package on sys.path)
import sharebroker
from sharebroker import framing


class DefaultSocketPathTests(unittest.TestCase):
    def env(self, **values):
        clean = {k: v for k, v in os.environ.items()
                 if k not in ("SHAREBROKER_SOCKET", "XDG_RUNTIME_DIR", "TMPDIR")}
        clean.update(values)
        return mock.patch.dict(os.environ, clean, clear=True)

    def test_sharebroker_socket_wins(self):
        with self.env(SHAREBROKER_SOCKET="/x/s.sock", XDG_RUNTIME_DIR="/run/user/1"):
            self.assertEqual(sharebroker.default_socket_path(), "/x/s.sock")

    def test_xdg_runtime_dir(self):
        with self.env(XDG_RUNTIME_DIR="/run/user/1"):
            self.assertEqual(sharebroker.default_socket_path(), "/run/user/1/sharebroker.sock")
        # A relative value is ignored, as by the broker (the XDG Base Directory spec).
        with self.env(XDG_RUNTIME_DIR="run/user/1", TMPDIR="/var/tmp"):
            self.assertEqual(sharebroker.default_socket_path(),
                             f"/var/tmp/sharebroker-{os.getuid()}/sharebroker.sock")

    def test_private_tmp_directory(self):
        with self.env():
            self.assertEqual(sharebroker.default_socket_path(),
                             f"/tmp/sharebroker-{os.getuid()}/sharebroker.sock")
        with self.env(TMPDIR="/var/tmp//", XDG_RUNTIME_DIR=""):
            self.assertEqual(sharebroker.default_socket_path(),
                             f"/var/tmp/sharebroker-{os.getuid()}/sharebroker.sock")


class FramingTests(unittest.TestCase):
    def test_a_line_exactly_at_max_frame_is_taken_with_either_ending(self):
        # (the review: the '\r' of a CRLF ending was counted)
        limit = 64
        body = b'"' + b"x" * (limit - 2) + b'"'
        for chunks in ([body, b"\n"], [body + b"\r\n"], [body, b"\r\n"], [body + b"\r", b"\n"]):
            d = framing.FrameDecoder(framing.NEWLINE, limit)
            self.assertEqual(len([m for c in chunks for m in d.feed(c)]), 1, chunks)
        with self.assertRaises(sharebroker.ProtocolError):
            framing.FrameDecoder(framing.NEWLINE, limit).feed(b'"' + b"x" * (limit - 1) + b'"\r\n')

    def test_newline_round_trip_split_anywhere(self):
        msgs = [{"a": "line\nbreak", "n": 1}, [1, 2], {"u": "ünï"}]
        wire = b"".join(framing.encode(m) for m in msgs) + b"\r\n"
        self.assertEqual(wire.count(b"\n"), 4)
        for step in (1, 3, 7, len(wire)):
            d = framing.FrameDecoder()
            out = []
            for i in range(0, len(wire), step):
                out += d.feed(wire[i:i + step])
            self.assertEqual(out, msgs)
            self.assertEqual(d.pending_bytes, 0)

    def test_content_length_round_trip(self):
        msgs = [{"x": "é" * 10}, {"y": []}]
        wire = b"".join(framing.encode(m, framing.CONTENT_LENGTH) for m in msgs)
        self.assertTrue(wire.startswith(b"Content-Length: "))
        d = framing.FrameDecoder(framing.CONTENT_LENGTH)
        out = []
        for b in wire:
            out += d.feed(bytes([b]))
        self.assertEqual(out, msgs)
        d = framing.FrameDecoder(framing.CONTENT_LENGTH)
        self.assertEqual(d.feed(b"content-length: 2\r\nContent-Type: x\r\n\r\n{}"), [{}])

    def test_invalid_json_is_a_protocol_error(self):
        with self.assertRaises(sharebroker.ProtocolError):
            framing.FrameDecoder().feed(b"{nope\n")

    def test_raw_text_with_newline_is_refused(self):
        with self.assertRaises(ValueError):
            framing.encode("{\n}")

    def test_a_line_over_max_frame_fails_once_the_buffer_passes_it(self):
        self.assertEqual(framing.FrameDecoder().max_frame, 64 << 20)
        d = framing.FrameDecoder(max_frame=1000)
        self.assertEqual(d.feed(b'{"a":"' + b"x" * 990 + b'"}\n'), [{"a": "x" * 990}])  # 1000 bytes: fine
        self.assertEqual(d.feed(b'"' + b"y" * 900), [])
        with self.assertRaises(sharebroker.ProtocolError):
            d.feed(b"y" * 200)  # 1101 bytes and no newline yet
        with self.assertRaises(sharebroker.ProtocolError):  # a whole line over it, in one read
            framing.FrameDecoder(max_frame=10).feed(b'"' + b"z" * 20 + b'"\n')

    def test_a_content_length_over_max_frame_fails_after_the_header(self):
        d = framing.FrameDecoder(framing.CONTENT_LENGTH, max_frame=1000)
        self.assertEqual(d.feed(b"Content-Length: 1000\r\n\r\n" + b" " * 998 + b"{}"), [{}])
        with self.assertRaises(sharebroker.ProtocolError) as cm:
            d.feed(b"Content-Length: 999999999999\r\n\r\n")  # no body byte needed to know
        self.assertIn("999999999999", str(cm.exception))
        # A header split anywhere, and a body split anywhere, still parse.
        d = framing.FrameDecoder(framing.CONTENT_LENGTH, max_frame=1000)
        wire = framing.encode({"k": "v" * 50}, framing.CONTENT_LENGTH) * 2
        out = []
        for b in wire:
            out += d.feed(bytes([b]))
        self.assertEqual(out, [{"k": "v" * 50}] * 2)
        self.assertEqual(d.pending_bytes, 0)

    def test_which_raw_messages_the_broker_answers(self):
        self.assertIsNone(framing.parse_problem('{"a":"\\ud83d\\ude00","b":[[1]]}'))
        self.assertIn("surrogate", framing.parse_problem('{"a":"\\ud83d"}'))
        self.assertIn("256", framing.parse_problem("[" * 257 + "]" * 257))
        self.assertIsNone(framing.parse_problem('"' + "[" * 300 + '"'))  # (in a string)
        note = {"jsonrpc": "2.0", "method": "m"}
        for message in (note, [note, dict(note, params=[1])], b'{"jsonrpc":"2.0","method":"m"}', " "):
            self.assertFalse(framing.answer_expected(message), message)
        for message in ({"jsonrpc": "2.0", "id": "r", "method": "m"}, [note, 1], [], [note] * 10001, "not json",
                        b"\xff", '{"jsonrpc":"2.0","method":"m","params":NaN}', dict(note, params="x"),
                        '{"jsonrpc":"2.0","method":"m","params":' + "[" * 300 + "]" * 300 + "}"):
            self.assertTrue(framing.answer_expected(message), message)
        self.assertTrue(framing.answer_expected(" ", framing.CONTENT_LENGTH))  # an empty body is not JSON

    def test_a_long_line_is_searched_once_not_per_read(self):
        d = framing.FrameDecoder()
        chunk = b"x" * 1024
        start = time.monotonic()
        d.feed(b'"')
        for _ in range((32 << 20) // len(chunk)):  # 32 MiB in 1-KiB reads: rescanning is 512 GiB
            d.feed(chunk)
        self.assertEqual(d.feed(b'"\n'), ["x" * (32 << 20)])
        self.assertLess(time.monotonic() - start, 4)  # about 0.3 s; 20 s when every read rescans


class ItemTests(unittest.TestCase):
    def test_items(self):
        self.assertEqual(sharebroker.url_item("https://a.example/"), {"url": "https://a.example/"})
        self.assertEqual(sharebroker.text_item("hi", type="public.plain-text"),
                         {"text": "hi", "type": "public.plain-text"})
        item = sharebroker.data_item(b"\x00\x01pdf", "a.pdf")
        self.assertEqual(item, {"data": base64.b64encode(b"\x00\x01pdf").decode(), "name": "a.pdf"})
        self.assertEqual(sharebroker.decode_data(item), b"\x00\x01pdf")
        self.assertNotIn("name", sharebroker.data_item(b"x"))
        p = sharebroker.path_item("rel/file.pdf")
        self.assertTrue(os.path.isabs(p["path"]))


class ErrorTests(unittest.TestCase):
    def test_codes(self):
        self.assertEqual(
            (sharebroker.UNAUTHORIZED, sharebroker.NOT_FOUND, sharebroker.NOT_ACCEPTED,
             sharebroker.NO_HANDLER, sharebroker.STORAGE_FAILURE, sharebroker.VERSION_CONFLICT,
             sharebroker.TOO_MANY_REQUESTS),
            (-32001, -32002, -32003, -32004, -32005, -32006, -32007))
        self.assertEqual(
            (sharebroker.PARSE_ERROR, sharebroker.INVALID_REQUEST, sharebroker.METHOD_NOT_FOUND,
             sharebroker.INVALID_PARAMS, sharebroker.INTERNAL_ERROR),
            (-32700, -32600, -32601, -32602, -32603))

    def test_broker_error(self):
        e = sharebroker.BrokerError.from_error_object(
            {"code": -32003, "message": "Not accepted", "data": {"candidates": []}}, "share.send")
        self.assertEqual((e.code, e.message, e.data, e.method), (-32003, "Not accepted", {"candidates": []}, "share.send"))
        self.assertIn("share.send", str(e))
        self.assertIn("-32003", str(e))
        self.assertIsNone(sharebroker.BrokerError.from_error_object({"code": 1, "message": "m"}).data)

    def test_unreachable_broker(self):
        with self.assertRaises(sharebroker.BrokerConnectionError) as cm:
            sharebroker.Client("/nonexistent/dir/s.sock")
        self.assertIn("/nonexistent/dir/s.sock", str(cm.exception))
        self.assertIsInstance(cm.exception, ConnectionError)


class FakeBroker:
    """A one-connection server that answers with a script: handler(request) -> list of (delay, message)."""

    def __init__(self, handler):
        self.dir = tempfile.mkdtemp(prefix="sbpy-fake-", dir="/tmp" if os.path.isdir("/tmp") else None)
        self.path = os.path.join(self.dir, "s.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.handler = handler
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        conn, _ = self.server.accept()
        with conn:
            f = conn.makefile("rb")
            try:
                for line in f:
                    for delay, msg in self.handler(json.loads(line)):
                        time.sleep(delay)
                        conn.sendall(framing.encode(msg))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (the timeout tests)

    def close(self):
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class RawPeer:
    """A one-connection server that runs ``script(conn)`` (in a thread) on the connection it
    accepts; ``result`` is what the script returned, or the OSError that ended it."""

    def __init__(self, script):
        self.dir = tempfile.mkdtemp(prefix="sbpy-raw-", dir="/tmp" if os.path.isdir("/tmp") else None)
        self.path = os.path.join(self.dir, "s.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.result = None
        self.done = threading.Event()

        def run():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                try:
                    self.result = script(conn)
                except OSError as e:
                    self.result = e
                finally:
                    self.done.set()
        threading.Thread(target=run, daemon=True).start()

    def close(self):
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def endless_line(conn):
    """Sends the start of a message and then never its end (until the client hangs up)."""
    conn.sendall(b'{"jsonrpc":"2.0","method":"x","params":"')
    while True:
        conn.sendall(b"A" * (1 << 16))


def huge_content_length(conn):
    conn.sendall(b"Content-Length: 999999999999\r\n\r\n")
    while True:
        conn.sendall(b" " * (1 << 16))


class MaxFrameTests(unittest.TestCase):
    def test_sync_client_an_endless_line_raises_and_drops_the_connection(self):
        for script, framing_ in ((endless_line, framing.NEWLINE), (huge_content_length, framing.CONTENT_LENGTH)):
            with self.subTest(framing_):
                peer = RawPeer(script)
                self.addCleanup(peer.close)
                c = sharebroker.Client(peer.path, timeout=2, framing=framing_, max_frame=1 << 20)
                self.addCleanup(c.close)
                with self.assertRaises(sharebroker.ProtocolError):
                    c.call("broker.status")
                self.assertTrue(c.closed)
                self.assertTrue(peer.done.wait(5), "the peer can still write: the connection was not closed")
                self.assertIsInstance(peer.result, OSError)
                with self.assertRaises(sharebroker.ConnectionClosed):
                    c.call("broker.status")

    def test_async_client_an_endless_line_fails_the_call_and_closes(self):
        import asyncio
        from sharebroker.aio import AsyncClient
        for script, framing_ in ((endless_line, framing.NEWLINE), (huge_content_length, framing.CONTENT_LENGTH)):
            with self.subTest(framing_):
                peer = RawPeer(script)
                self.addCleanup(peer.close)

                async def flow():
                    async with AsyncClient(peer.path, timeout=2, framing=framing_, max_frame=1 << 20) as c:
                        with self.assertRaises(sharebroker.ProtocolError):
                            await c.call("broker.status")
                        self.assertTrue(peer.done.wait(5), "the peer can still write: the connection was not closed")
                        with self.assertRaises(sharebroker.ConnectionClosed):
                            await c.call("broker.status")
                asyncio.run(flow())
                self.assertIsInstance(peer.result, OSError)


class ClientWithFakeBrokerTests(unittest.TestCase):
    def test_timeout_then_the_late_answer_is_dropped(self):
        def handler(req):
            if req["method"] == "slow":
                return [(0.3, {"jsonrpc": "2.0", "id": req["id"], "result": "late"})]
            return [(0, {"jsonrpc": "2.0", "id": req["id"], "result": req["method"]})]
        fake = FakeBroker(handler)
        self.addCleanup(fake.close)
        with sharebroker.Client(fake.path) as c:
            with self.assertRaises(TimeoutError):
                c.call("slow", timeout=0.1)
            time.sleep(0.3)
            self.assertEqual(c.call("fast"), "fast")
            with self.assertRaises(TimeoutError):
                c.receive(timeout=0.1)  # the late answer was dropped, not kept

    def test_notifications_before_the_answer_are_queued(self):
        def handler(req):
            return [(0, {"jsonrpc": "2.0", "method": "app.event", "params": {"id": "ev-1"}}),
                    (0, {"jsonrpc": "2.0", "method": "defaults.changed", "params": {"version": 1}}),
                    (0.05, {"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32002, "message": "gone", "data": {"x": 1}}})]
        fake = FakeBroker(handler)
        self.addCleanup(fake.close)
        with sharebroker.Client(fake.path) as c:
            with self.assertRaises(sharebroker.BrokerError) as cm:
                c.share_get("sh-1")
            self.assertEqual((cm.exception.code, cm.exception.data), (sharebroker.NOT_FOUND, {"x": 1}))
            self.assertEqual(c.pending_notifications, 2)
            n = c.next_notification(0, method="defaults.changed")
            self.assertEqual(n, sharebroker.Notification("defaults.changed", {"version": 1}))
            self.assertEqual(c.next_event(0), {"id": "ev-1"})
            self.assertIsNone(c.next_notification(0.05))



def notification(i, method="app.event"):
    return framing.encode({"jsonrpc": "2.0", "method": method, "params": {"id": "ev-%d" % i, "pad": "p" * 40}})


def read_request(conn, buf=b""):
    while b"\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None, buf
        buf += data
    line, _, rest = buf.partition(b"\n")
    return json.loads(line), rest


class AsyncBackpressureTests(unittest.TestCase):
    def test_a_flood_nobody_consumes_stays_with_the_peer(self):
        import asyncio
        from sharebroker.aio import AsyncClient
        total = 50000

        def flood(conn):
            for i in range(total):
                conn.sendall(notification(i))
            return "sent all"
        peer = RawPeer(flood)
        self.addCleanup(peer.close)

        async def flow():
            async with AsyncClient(peer.path, timeout=10, max_queued_notifications=100) as c:
                await asyncio.sleep(0.5)
                self.assertLess(len(c._notifications), 1000, "the client read on although nobody consumed")
                self.assertFalse(peer.done.is_set(), "the peer could write all it had")
                got = []
                while len(got) < total:
                    n = await c.next_notification(timeout=5)
                    self.assertIsNotNone(n)
                    got.append(n.params["id"])
                self.assertEqual(got, ["ev-%d" % i for i in range(total)])
        asyncio.run(flow())
        self.assertEqual(peer.result, "sent all")

    def test_what_waits_for_a_message_keeps_the_client_reading(self):
        import asyncio
        from sharebroker.aio import AsyncClient

        def script(conn):
            for i in range(5000):  # far past the mark, and past the socket's buffers
                conn.sendall(notification(i))
            conn.sendall(notification(0, "defaults.changed"))
            req, buf = read_request(conn)
            conn.sendall(framing.encode({"jsonrpc": "2.0", "id": req["id"], "result": {"acked": 1}}))
            conn.sendall(notification(5000))
            for i in range(5001, 8000):
                conn.sendall(notification(i))
            conn.sendall(framing.encode({"jsonrpc": "2.0", "id": "raw", "result": "for receive()"}))
            req, buf = read_request(conn, buf)
            return "done"
        peer = RawPeer(script)
        self.addCleanup(peer.close)

        async def flow():
            async with AsyncClient(peer.path, timeout=5, max_queued_notifications=10) as c:
                # An app that acks each event before it takes the next one: its call gets its
                # answer although thousands of notifications wait unconsumed before it.
                async for n in c.events(method="app.event"):
                    self.assertEqual(n.params["id"], "ev-0")
                    self.assertEqual(await c.app_ack([n.params["id"]]), {"acked": 1})
                    break
                # A notification of another method behind them, and a raw reply behind more.
                n = await c.next_notification(timeout=5, method="defaults.changed")
                self.assertEqual(n.method, "defaults.changed")
                self.assertEqual(await c.receive(timeout=5), {"jsonrpc": "2.0", "id": "raw", "result": "for receive()"})
                await c.notify("bye")
                self.assertEqual((await c.next_notification(timeout=5)).params["id"], "ev-1")
        asyncio.run(flow())


class OrderOfAnswersTests(unittest.TestCase):
    """The broker answers a connection's messages in order; an error without an id answers the
    oldest request still waiting (the sync client)."""

    def test_the_late_refusal_of_an_abandoned_request_does_not_answer_the_next_call(self):
        # (the review: the refusal of a batch that timed out answered the next call)
        for first in ("batch", "call"):
            with self.subTest(first):
                def script(conn):
                    _, buf = read_request(conn)  # the batch (or call), left unanswered until...
                    req, buf = read_request(conn, buf)  # ...the next call: it has timed out
                    conn.sendall(framing.encode({"jsonrpc": "2.0", "id": None,
                                                 "error": {"code": -32600, "message": "Invalid Request: too many"}}))
                    conn.sendall(framing.encode({"jsonrpc": "2.0", "id": req["id"], "result": "mine"}))
                    read_request(conn, buf)
                peer = RawPeer(script)
                self.addCleanup(peer.close)
                c = sharebroker.Client(peer.path, timeout=5)
                self.addCleanup(c.close)
                with self.assertRaises(TimeoutError):
                    if first == "batch":
                        c.batch([("a", None), ("b", None)], timeout=0.2)
                    else:
                        c.call("a", timeout=0.2)
                self.assertEqual(c.call("x"), "mine")
                with self.assertRaises(TimeoutError):
                    c.receive(timeout=0.1)  # the refusal was dropped, not queued

    def test_an_error_without_an_id_answers_a_raw_message_before_a_call(self):
        def script(conn):
            _, buf = read_request(conn)  # the raw message
            req, buf = read_request(conn, buf)
            conn.sendall(framing.encode({"jsonrpc": "2.0", "id": None,
                                         "error": {"code": -32700, "message": "Parse error: raw"}})
                         + framing.encode({"jsonrpc": "2.0", "id": req["id"], "result": "mine"}))
            read_request(conn, buf)
        peer = RawPeer(script)
        self.addCleanup(peer.close)
        c = sharebroker.Client(peer.path, timeout=5)
        self.addCleanup(c.close)
        c.send_raw({"jsonrpc": "2.0", "id": "r", "method": 1})
        self.assertEqual(c.call("x"), "mine")
        self.assertEqual(c.receive(timeout=1)["error"]["message"], "Parse error: raw")

    def test_the_error_the_broker_closes_with_answers_no_call(self):
        # An error without an id with data.closing is why the broker hangs up: the call waiting
        # raises ConnectionClosed with it as the reason (it took it as its answer). One without
        # data.closing right before a hang-up still answers the oldest request.
        for closing in (True, False):
            with self.subTest(closing=closing):
                error = {"code": -32001, "message": "session ended by a manifest reload"}
                if closing:
                    error["data"] = {"closing": True}

                def script(conn):
                    read_request(conn)
                    conn.sendall(framing.encode({"jsonrpc": "2.0", "id": None, "error": error}))
                peer = RawPeer(script)
                self.addCleanup(peer.close)
                c = sharebroker.Client(peer.path, timeout=5)
                self.addCleanup(c.close)
                if closing:
                    with self.assertRaises(sharebroker.ConnectionClosed) as cm:
                        c.call("app.subscribe")
                    self.assertEqual(cm.exception.reason, error)
                    self.assertIn("session ended by a manifest reload (-32001)", str(cm.exception))
                    with self.assertRaises(sharebroker.ConnectionClosed) as cm:
                        c.call("next")
                    self.assertEqual(cm.exception.reason, error)
                    # (still readable with receive(), as a message no call waits for)
                    self.assertEqual(c.receive(timeout=1)["error"], error)
                else:
                    with self.assertRaises(sharebroker.BrokerError) as cm:
                        c.call("app.subscribe")
                    self.assertEqual(cm.exception.code, -32001)


class ReasonInFlightTests(unittest.TestCase):
    """A write that fails because the peer has stopped reading (it shut its socket for reading:
    the write gets EPIPE) while its closing error is still on its way: the synchronous client
    waits for it, at most LEFTOVER_TIME and LEFTOVER_BYTES, as the asyncio and Node.js clients
    do. (It used to read only what was there already, and lost the reason.)"""

    error = {"code": -32600, "message": "Invalid Request: message larger than the limit of 4096 bytes; "
                                        "closing the connection", "data": {"closing": True}}

    def call_behind(self, delay, before=b""):
        """A peer that reads the first message, stops reading, sends ``before`` and ``delay``
        seconds later its closing error, then hangs up; a call sent right behind that first
        message (its write fails). Returns the call's ConnectionClosed, how long it took, and the
        client."""
        stopped = threading.Event()

        def script(conn):
            read_request(conn)
            conn.shutdown(socket.SHUT_RD)
            stopped.set()
            conn.sendall(before)
            time.sleep(delay)
            conn.sendall(framing.encode({"jsonrpc": "2.0", "id": None, "error": self.error}))
        peer = RawPeer(script)
        self.addCleanup(peer.close)
        c = sharebroker.Client(peer.path, timeout=5)
        self.addCleanup(c.close)
        c.send_raw({"jsonrpc": "2.0", "id": "big", "method": "broker.status", "params": {"pad": "x" * 5000}})
        self.assertTrue(stopped.wait(5))
        start = time.monotonic()
        with self.assertRaises(sharebroker.ConnectionClosed) as cm:
            c.call("broker.status")
        return cm.exception, time.monotonic() - start, c

    def test_the_reason_still_on_its_way_is_kept(self):
        lost = []
        for i in range(50):
            e, _, _ = self.call_behind(0.02)
            if e.reason != self.error:
                lost.append(f"try {i}: {e}")
            else:
                self.assertIn("message larger than the limit of 4096 bytes", str(e))
        self.assertFalse(lost, f"the reason was lost {len(lost)} times of 50, e.g. {lost[:1]}")

    def test_the_wait_is_bounded_in_time(self):
        e, took, _ = self.call_behind(1.0)
        self.assertIsNone(e.reason)  # (it came too late)
        self.assertGreaterEqual(took, sharebroker.client.LEFTOVER_TIME * 0.9)
        self.assertLess(took, 0.8)

    def test_the_wait_is_bounded_in_bytes(self):
        # The reason behind 3 MiB of notifications, sent at once: the client reads 1 MiB of them
        # (queued, as any notification) and stops there.
        one = len(notification(0))
        notes = b"".join(notification(i) for i in range((3 << 20) // one + 1))
        e, _, c = self.call_behind(0, before=notes)
        self.assertIsNone(e.reason)
        self.assertLessEqual(c.pending_notifications, sharebroker.client.LEFTOVER_BYTES // one)


def never_then_late(conn):
    """Answers no request until one for "fast"; then every earlier one (late), then that one."""
    def late(req):
        if isinstance(req, list):
            return [late(r) for r in req]
        return {"jsonrpc": "2.0", "id": req["id"], "result": "late"}
    waiting, buf = [], b""
    while True:
        req, buf = read_request(conn, buf)
        if req is None:
            return
        if isinstance(req, list) or req["method"] != "fast":
            waiting.append(req)
            continue
        conn.sendall(b"".join(framing.encode(late(r)) for r in waiting)
                     + framing.encode({"jsonrpc": "2.0", "id": req["id"], "result": "fast"}))


class AbandonedCallsTests(unittest.TestCase):
    """Calls abandoned against a peer that never answers are bounded (MAX_ABANDONED, as Node's);
    their late answers are still dropped."""

    def test_sync_client(self):
        peer = RawPeer(never_then_late)
        self.addCleanup(peer.close)
        c = sharebroker.Client(peer.path, timeout=5)
        self.addCleanup(c.close)
        limit = sharebroker.client.MAX_ABANDONED
        self.assertEqual(limit, 1000)
        for _ in range(limit + 200):
            with self.assertRaises(TimeoutError):
                c.call("never", timeout=0.001)
        with self.assertRaises(TimeoutError):
            c.batch([("never", None), ("never", None)], timeout=0.001)
        self.assertLessEqual(len(c._abandoned), limit)
        self.assertLessEqual(len(c._order), limit)
        self.assertEqual(c.call("fast"), "fast")
        with self.assertRaises(TimeoutError):
            c.receive(timeout=0.1)  # the late answers were dropped, not queued
        self.assertEqual((len(c._order), len(c._abandoned)), (0, 0))

    def test_async_client(self):
        import asyncio
        from sharebroker.aio import AsyncClient
        peer = RawPeer(never_then_late)
        self.addCleanup(peer.close)
        limit = sharebroker.client.MAX_ABANDONED

        async def flow():
            async with AsyncClient(peer.path, timeout=5) as c:
                calls = [c.call("never", timeout=0.05) for _ in range(limit + 200)]
                calls.append(c.batch([("never", None), ("never", None)], timeout=0.05))
                for r in await asyncio.gather(*calls, return_exceptions=True):
                    self.assertIsInstance(r, TimeoutError)
                self.assertLessEqual(len(c._abandoned), limit)
                self.assertLessEqual(len(c._order), limit)
                self.assertEqual(await c.call("fast"), "fast")
                with self.assertRaises(TimeoutError):
                    await c.receive(timeout=0.1)  # the late answers were dropped, not queued
                self.assertEqual((len(c._order), len(c._abandoned)), (0, 0))
        asyncio.run(flow())


class ProtocolErrorTests(unittest.TestCase):
    def test_decoder_gives_the_messages_before_the_bad_frame(self):
        with self.assertRaises(sharebroker.ProtocolError) as cm:
            framing.FrameDecoder().feed(b'{"a":1}\n[2]\n{nope\n{"b":3}\n')
        self.assertEqual(cm.exception.messages, [{"a": 1}, [2]])

    def test_sync_client_hands_over_what_came_before_a_bad_line_then_raises(self):
        def script(conn):
            req, _ = read_request(conn)
            # The answer, a notification and garbage in one write: one read gets them all.
            conn.sendall(framing.encode({"jsonrpc": "2.0", "id": req["id"], "result": "mine"})
                         + notification(1) + b"{this is not json\n" + notification(2))
            time.sleep(2)
        peer = RawPeer(script)
        self.addCleanup(peer.close)
        c = sharebroker.Client(peer.path, timeout=5)
        self.addCleanup(c.close)
        self.assertEqual(c.call("x"), "mine")
        self.assertEqual(c.next_event(0)["id"], "ev-1")
        with self.assertRaises(sharebroker.ProtocolError):
            c.next_notification(1)
        self.assertTrue(c.closed)
        with self.assertRaises(sharebroker.ConnectionClosed):
            c.call("y")


class EchoPeerTests(unittest.TestCase):
    """A peer that echoes what it is sent speaks no sharebroker protocol: its echo of a request
    (a method with an id) is no answer (it was taken for one, a result of None)."""

    @staticmethod
    def echo(conn):
        conn.settimeout(5)
        while True:
            data = conn.recv(1 << 16)
            if not data:
                return
            conn.sendall(data)

    def test_the_sync_client_raises_protocol_error(self):
        peer = RawPeer(self.echo)
        self.addCleanup(peer.close)
        with self.assertRaises(sharebroker.ProtocolError) as cm:
            sharebroker.Client(peer.path, role="tool", timeout=3)
        self.assertIn("a request (a method with an id)", str(cm.exception))

    def test_the_async_client_raises_protocol_error(self):
        import asyncio
        from sharebroker.aio import AsyncClient
        peer = RawPeer(self.echo)
        self.addCleanup(peer.close)

        async def main():
            async with AsyncClient(peer.path, role="tool", timeout=3):
                pass
        with self.assertRaises(sharebroker.ProtocolError):
            asyncio.run(main())

    def test_the_command_exits_69(self):
        import subprocess
        import sys
        peer = RawPeer(self.echo)
        self.addCleanup(peer.close)
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        r = subprocess.run([sys.executable, "-m", "sharebroker", "--socket", peer.path, "broker.status"],
                           cwd=here, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 69, r.stdout + r.stderr)
        self.assertIn("does not speak sharebroker's protocol", r.stderr)
        self.assertEqual(r.stdout, "")


class HangUpThenAnswer:
    """A server that hangs up its first connection at once, and answers on the next ones."""

    def __init__(self, reason=None):
        # reason: the first connection answers one request, then sends this error without an id
        # (why it closes, as the broker does when a reload ends a session) and hangs up
        self.reason = reason
        self.dir = tempfile.mkdtemp(prefix="sbpy-re-", dir="/tmp" if os.path.isdir("/tmp") else None)
        self.path = os.path.join(self.dir, "s.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(4)
        self.connections = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            if self.connections == 1:
                if self.reason is not None:
                    req, _ = read_request(conn, b"")
                    conn.sendall(framing.encode({"jsonrpc": "2.0", "id": req["id"], "result": {"session": 1}}))
                    conn.sendall(framing.encode({"jsonrpc": "2.0", "id": None,
                                                 "error": {"code": -32001, "message": self.reason}}))
                conn.close()
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn):
        with conn:
            buf = b""
            while True:
                try:
                    req, buf = read_request(conn, buf)
                except OSError:
                    return
                if req is None:
                    return
                conn.sendall(framing.encode({"jsonrpc": "2.0", "id": req["id"], "result": req["method"]}))

    def close(self):
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class AsyncClosingErrorTests(unittest.TestCase):
    def test_the_error_the_broker_closes_with_answers_no_call(self):
        # An error without an id with data.closing: every call waiting raises ConnectionClosed
        # with it as the reason (the oldest took it as its answer), and so do later ones.
        import asyncio
        from sharebroker.aio import AsyncClient
        error = {"code": -32600, "message": "Invalid Request: message larger than the limit",
                 "data": {"closing": True}}

        def script(conn):
            _, buf = read_request(conn)
            read_request(conn, buf)
            conn.sendall(framing.encode({"jsonrpc": "2.0", "id": None, "error": error}))
        peer = RawPeer(script)
        self.addCleanup(peer.close)

        async def flow():
            async with AsyncClient(peer.path, timeout=5) as c:
                got = await asyncio.gather(c.call("a"), c.batch([("b", None)]), return_exceptions=True)
                for e in got:
                    self.assertIsInstance(e, sharebroker.ConnectionClosed)
                    self.assertEqual(e.reason, error)
                    self.assertIn("message larger than the limit (-32600)", str(e))
                with self.assertRaises(sharebroker.ConnectionClosed) as cm:
                    await c.call("next")
                self.assertEqual(cm.exception.reason, error)
                self.assertEqual((await c.receive(timeout=1))["error"], error)
                # Everything before the end read, receive() says the connection ended (it
                # waited out its timeout, or for ever without one).
                for _ in range(2):
                    with self.assertRaises(sharebroker.ConnectionClosed) as cm:
                        await c.receive(timeout=None)
                    self.assertEqual(cm.exception.reason, error)
        asyncio.run(flow())


class ReconnectTests(unittest.TestCase):
    def test_sync_connect_after_the_broker_closed_the_connection_reconnects(self):
        server = HangUpThenAnswer()
        self.addCleanup(server.close)
        c = sharebroker.Client(server.path, timeout=5)
        self.addCleanup(c.close)
        with self.assertRaises(ConnectionError):  # ConnectionClosed, or the reset itself
            c.call("x")
        self.assertTrue(c.closed)
        self.assertIs(c.connect(), c)
        self.assertFalse(c.closed)
        self.assertEqual(c.call("again"), "again")
        self.assertIs(c.connect(), c)  # connected: nothing to do
        self.assertEqual(server.connections, 2)

    def test_connect_after_the_broker_closed_with_a_reason_reconnects(self):
        # (the review: the reason stayed queued, and hello took it as its answer)
        server = HangUpThenAnswer(reason="a manifest reload ended the session")
        self.addCleanup(server.close)
        c = sharebroker.Client(server.path, role="app", bundle_id="com.example.app", timeout=5)
        self.addCleanup(c.close)
        with self.assertRaises(ConnectionError):
            c.next_notification(timeout=2)
        self.assertTrue(c.closed)
        self.assertIs(c.connect(), c)
        self.assertEqual(c.call("again"), "again")

    def test_async_connect_after_the_broker_closed_the_connection_reconnects(self):
        import asyncio
        from sharebroker.aio import AsyncClient
        server = HangUpThenAnswer()
        self.addCleanup(server.close)

        async def flow():
            async with AsyncClient(server.path, timeout=5) as c:
                with self.assertRaises(ConnectionError):  # ConnectionClosed, or the reset itself
                    await c.call("x")
                self.assertIs(await c.connect(), c)
                self.assertEqual(await c.call("again"), "again")
                self.assertIs(await c.connect(), c)
        asyncio.run(flow())
        self.assertEqual(server.connections, 2)


class SendTimeoutTests(unittest.TestCase):
    def test_a_send_that_times_out_drops_the_connection(self):
        def slow_reader(conn):
            time.sleep(1.5)  # takes nothing while the client sends, then reads all until the end
            data = b""
            while True:
                chunk = conn.recv(1 << 20)
                if not chunk:
                    return data
                data += chunk
        peer = RawPeer(slow_reader)
        self.addCleanup(peer.close)
        c = sharebroker.Client(peer.path, timeout=0.5)
        self.addCleanup(c.close)
        with self.assertRaises(TimeoutError):
            c.share_send([sharebroker.data_item(b"x" * (8 << 20))])
        self.assertTrue(c.closed)
        with self.assertRaises(sharebroker.ConnectionClosed) as cm:
            c.call("broker.status")
        self.assertIn("half written", str(cm.exception))
        self.assertTrue(peer.done.wait(10), "the peer never saw the connection end")
        data = peer.result
        self.assertIsInstance(data, bytes)
        self.assertLess(len(data), (8 << 20) * 4 // 3)  # only part of the message went out
        self.assertNotIn(b"broker.status", data)  # and nothing was glued to it


class CloseFromAnotherThreadTests(unittest.TestCase):
    def test_close_wakes_a_thread_waiting_for_notifications(self):
        fake = FakeBroker(lambda req: [])
        self.addCleanup(fake.close)
        c = sharebroker.Client(fake.path, timeout=None)
        done = []
        t = threading.Thread(target=lambda: done.append(list(c.events())), daemon=True)
        t.start()
        time.sleep(0.2)
        c.close()
        t.join(5)
        self.assertFalse(t.is_alive(), "events() still blocked after close()")
        self.assertEqual(done, [[]])


class CommandLineTests(unittest.TestCase):
    """``python3 -m sharebroker``: exit codes and ``--listen``."""

    def run_main(self, argv):
        import contextlib
        import io
        from sharebroker.__main__ import main
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        return code, out.getvalue(), err.getvalue()

    def test_something_else_at_the_socket_exits_69(self):
        d = tempfile.mkdtemp(prefix="sbpy-raw-", dir="/tmp" if os.path.isdir("/tmp") else None)
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "s.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(1)
        self.addCleanup(server.close)

        def answer_garbage():
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"this is not json\n")
                time.sleep(0.5)
        threading.Thread(target=answer_garbage, daemon=True).start()
        code, _, err = self.run_main(["--socket", path, "broker.status"])
        self.assertEqual(code, 69, err)
        self.assertIn(path, err)

    def test_listen_is_a_total_time(self):
        def handler(req):
            if req["method"] != "go":
                return [(0, {"jsonrpc": "2.0", "id": req["id"], "result": {}})]
            events = [(0.15, {"jsonrpc": "2.0", "method": "app.event", "params": {"id": "ev-%d" % i}}) for i in range(12)]
            return [(0, {"jsonrpc": "2.0", "id": req["id"], "result": {}})] + events
        fake = FakeBroker(handler)
        self.addCleanup(fake.close)
        t0 = time.monotonic()
        code, out, err = self.run_main(["--socket", fake.path, "--listen", "0.5", "go"])
        elapsed = time.monotonic() - t0
        self.assertEqual(code, 0, err)
        self.assertLess(elapsed, 1.2, "--listen stops after its time although events keep coming")
        lines = out.strip().splitlines()
        self.assertGreaterEqual(len(lines), 2)  # the result, then some events
        self.assertLess(len(lines), 1 + 12)

if __name__ == "__main__":
    unittest.main()
