"""The asyncio client against a real broker: the seed share flow, errors, notifications."""

import asyncio
import json
import os
import socket
import tempfile
import unittest

import support
from support import APP, APP_SHARE
import sharebroker as sb
from sharebroker.aio import AsyncClient


class AsyncClientTests(support.BrokerTestCase):
    def run_async(self, coro):
        return asyncio.run(asyncio.wait_for(coro, 15))

    def test_seed_flow(self):
        async def flow():
            path = self.broker.socket
            async with AsyncClient(path, role="app", bundle_id=APP) as app, \
                       AsyncClient(path, role="extension", bundle_id=APP_SHARE) as ext:
                self.assertEqual(app.hello_result["bundleID"], APP)
                await app.app_subscribe()
                sent = await ext.share_send([sb.url_item("https://youtu.be/dQw4w9WgXcQ")], open=True)
                ev = await app.next_event(timeout=5)
                self.assertEqual(ev["id"], sent["eventID"])
                self.assertIn(sent["shareID"], ev["url"])
                share = await app.share_get(sent["shareID"])
                self.assertEqual(share["items"][0]["url"], "https://youtu.be/dQw4w9WgXcQ")
                self.assertEqual(await app.share_complete(sent["shareID"]), {"completed": True})
                self.assertEqual((await app.app_ack([ev["id"]]))["acked"], 1)
                # Concurrent calls on one connection.
                results = await asyncio.gather(*(app.url_can_open(f"deeplinkmyapp://{i}") for i in range(20)))
                self.assertTrue(all(r["canOpen"] for r in results))
                with self.assertRaises(sb.BrokerError) as cm:
                    await ext.url_open("nosuchscheme://x")
                self.assertEqual(cm.exception.code, sb.NO_HANDLER)
                out = []
                await ext.url_open("deeplinkmyapp://one")
                async for n in app.events(timeout=0.3, method="app.event"):
                    out.append(n.params["id"])
                self.assertEqual(len(out), 1)
                await app.app_ack(out)
                raw = await ext.call("broker.status")
                self.assertIn("version", raw)
                await ext.send_raw([{"jsonrpc": "2.0", "id": "b1", "method": "broker.status"}])
                batch = await ext.receive(timeout=5)
                self.assertEqual(batch[0]["id"], "b1")

        self.run_async(flow())

    def test_batch_and_the_reason_a_session_ended(self):
        async def flow():
            async with AsyncClient(self.broker.socket, role="tool") as c:
                got = await c.batch([("url.canOpen", {"url": "deeplinkmyapp://x"}),
                                     ("url.open", {"url": "nosuchscheme://x"}),
                                     ("broker.status", None)])
                self.assertEqual(got[0]["app"], APP)
                self.assertIsInstance(got[1], sb.BrokerError)
                self.assertEqual(got[1].code, sb.NO_HANDLER)
                self.assertIn("version", got[2])
                # Batches and single calls in flight together each get their own answer.
                both = await asyncio.gather(c.batch([("broker.status", None)]), c.call("broker.status"),
                                            c.batch([("url.canOpen", {"url": "deeplinkmyapp://y"})]))
                self.assertIn("version", both[0][0])
                self.assertIn("version", both[1])
                self.assertTrue(both[2][0]["canOpen"])
                with self.assertRaises(ValueError):
                    await c.batch([])
            path = self.broker.state / "apps" / "93-gone.json"
            path.write_text('{"bundleID": "com.example.gone", "urlSchemes": ["goneapp"]}')
            async with AsyncClient(self.broker.socket, role="tool") as tool:
                await tool.call("apps.reload")
                async with AsyncClient(self.broker.socket, role="app", bundle_id="com.example.gone") as app:
                    await app.call("app.subscribe")
                    path.unlink()
                    await tool.call("apps.reload")
                    with self.assertRaises(sb.ConnectionClosed) as cm:
                        await app.next_notification(timeout=5)
                    self.assertIn("session ended by a manifest reload", str(cm.exception))

        self.run_async(flow())

    def test_the_error_the_broker_closes_with_ends_the_calls_waiting(self):
        async def flow():
            async with AsyncClient(self.broker.socket, role="tool") as c:
                # Over the broker's message limit (4 MiB), a call behind it: -32600 with id null
                # and data.closing, then it closes. That error answers neither call: both raise
                # ConnectionClosed with it as the reason, and so does the next one.
                big, behind = await asyncio.gather(
                    c.call("broker.status", {"pad": "x" * (5 << 20)}, timeout=10),
                    c.call("broker.status", timeout=10), return_exceptions=True)
                for e in (big, behind):
                    self.assertIsInstance(e, sb.ConnectionClosed)
                    self.assertEqual((e.reason["code"], e.reason["data"]), (sb.INVALID_REQUEST, {"closing": True}))
                    self.assertIn("message larger than the limit", str(e))
                with self.assertRaises(sb.ConnectionClosed) as cm:
                    await c.call("broker.status")
                self.assertEqual(cm.exception.reason["code"], sb.INVALID_REQUEST)
            # A peer that never answers (not timing-dependent: 1e-9 s raced a fast broker).
            with tempfile.TemporaryDirectory() as d:
                silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                silent.bind(os.path.join(d, "silent.sock"))
                silent.listen(1)
                try:
                    async with AsyncClient(os.path.join(d, "silent.sock"), role=None) as c:
                        with self.assertRaises(TimeoutError):  # the built-in one, on every Python
                            await c.call("broker.status", timeout=0.2)
                finally:
                    silent.close()

        self.run_async(flow())

    def test_the_reason_is_kept_when_a_write_meets_the_closed_socket(self):
        # A call over --max-message and one right behind it: the broker sends its closing error
        # and closes while the second is written, whose write fails (EPIPE): the client reads
        # what was left in the socket before failing the connection, so both calls raise
        # ConnectionClosed with the broker's reason, every time (without that: most times a
        # broken pipe or a reset, the reason lost).
        broker = support.Broker(args=["--max-message", "4096"]).start()
        self.addCleanup(broker.stop)

        async def flow():
            for i in range(50):
                c = await AsyncClient(broker.socket, timeout=10).connect()
                try:
                    results = await asyncio.gather(c.call("broker.status", {"pad": "x" * 5000}),
                                                   c.call("broker.status"), return_exceptions=True)
                    for e in results:
                        self.assertIsInstance(e, sb.ConnectionClosed, f"try {i}: {e!r}")
                        self.assertEqual((e.reason or {}).get("data"), {"closing": True}, f"try {i}: {e!r}")
                        self.assertIn("message larger than the limit", str(e))
                    with self.assertRaises(sb.ConnectionClosed) as cm:
                        await c.call("broker.status")
                    self.assertEqual((cm.exception.reason or {}).get("code"), sb.INVALID_REQUEST)
                finally:
                    await c.close()

        self.run_async(flow())

    def test_connection_errors(self):
        async def flow():
            with self.assertRaises(sb.BrokerConnectionError):
                await AsyncClient("/nonexistent/dir/s.sock").connect()
            with self.assertRaises(sb.BrokerError) as cm:
                await AsyncClient(self.broker.socket, role="app", bundle_id="com.nobody").connect()
            self.assertEqual(cm.exception.code, sb.UNAUTHORIZED)

        self.run_async(flow())

    def test_an_error_without_an_id_fails_only_the_request_it_answers(self):
        broker = support.Broker(args=["--max-batch", "2"]).start()
        self.addCleanup(broker.stop)

        async def flow():
            async with AsyncClient(broker.socket, role="tool", timeout=5) as c:
                refused, status, can = await asyncio.gather(
                    c.batch([("broker.status", {})] * 3), c.broker_status(),
                    c.url_can_open("https://example.com/computers/x"), return_exceptions=True)
                self.assertIsInstance(refused, sb.BrokerError)
                self.assertEqual(refused.code, sb.INVALID_REQUEST)
                self.assertIn("version", status)  # its own answer, not the batch's error
                self.assertIn("canOpen", can)
                with self.assertRaises(TimeoutError):
                    await c.receive(timeout=0.2)  # and nothing left over

        self.run_async(flow())

    def test_raw_messages_take_their_place_in_the_order_of_answers(self):
        # (the review: send_raw was not in the order, so the -32700 of a raw message the broker
        # cannot parse answered the call made after it)
        from test_protocol import nested

        async def flow():
            async with AsyncClient(self.broker.socket, role="tool", timeout=5) as c:
                await c.send_raw('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
                self.assertEqual((await c.broker_status())["apps"], 4)  # its own answer
                r = await c.receive(timeout=5)
                self.assertEqual((r["id"], r["error"]["code"]), (None, sb.PARSE_ERROR))
                # A call the broker cannot parse, raw ones around it, a call it can: each its own.
                await c.send_raw("not json")
                call = asyncio.ensure_future(c.call("broker.status", {"deep": nested(300)}))
                await asyncio.sleep(0)  # (written)
                await c.send_raw(b"\xff")
                await c.send_raw({"jsonrpc": "2.0", "method": "url.canOpen", "params": {"url": "notes://n"}})
                status = await c.broker_status()
                with self.assertRaises(sb.BrokerError) as cm:
                    await call
                self.assertEqual(cm.exception.code, sb.PARSE_ERROR)
                self.assertIn("version", status)
                self.assertEqual([(await c.receive(timeout=5))["error"]["code"] for _ in range(2)],
                                 [sb.PARSE_ERROR] * 2)
                with self.assertRaises(TimeoutError):
                    await c.receive(timeout=0.2)  # nothing left over
                self.assertFalse(c._must_read(), "an answered raw message still waits")
                # A notification the broker could not parse is not sent (its error answers no call).
                with self.assertRaises(sb.BrokerError) as cm:
                    await c.notify("broker.status", {"deep": nested(300)})
                self.assertIn("not sent", cm.exception.message)
                self.assertIn("version", await c.broker_status())

        self.run_async(flow())

    def test_late_answers_of_abandoned_calls_are_dropped(self):
        from test_unit import FakeBroker

        def handler(req):
            if req["method"] == "slow":
                return [(0.3, {"jsonrpc": "2.0", "id": req["id"], "result": "late"})]
            return [(0, {"jsonrpc": "2.0", "id": req["id"], "result": req["method"]})]
        fake = FakeBroker(handler)
        self.addCleanup(fake.close)

        async def flow():
            async with AsyncClient(fake.path) as c:
                with self.assertRaises(TimeoutError):
                    await c.call("slow", timeout=0.1)
                task = asyncio.ensure_future(c.call("slow", timeout=5))
                await asyncio.sleep(0.05)
                task.cancel()
                await asyncio.sleep(0.4)
                self.assertEqual(await c.call("fast"), "fast")
                with self.assertRaises(TimeoutError):
                    await c.receive(timeout=0.1)  # the late answers were dropped, not queued

        self.run_async(flow())

    def test_odd_ids_do_not_break_the_connection(self):
        from test_unit import FakeBroker

        def handler(req):
            return [(0, {"jsonrpc": "2.0", "id": [req["id"]], "result": "unhashable"}),
                    (0, {"jsonrpc": "2.0", "id": True, "result": "true"}),
                    (0, {"jsonrpc": "2.0", "id": req["id"], "result": "mine"})]
        fake = FakeBroker(handler)
        self.addCleanup(fake.close)

        async def flow():
            async with AsyncClient(fake.path) as c:
                self.assertEqual(await c.call("m"), "mine")
                self.assertEqual(await c.call("m"), "mine")

        self.run_async(flow())

    def test_a_peer_that_does_not_read_cannot_hold_a_call_or_close(self):
        async def flow():
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "deaf.sock")
                deaf = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                deaf.bind(path)
                deaf.listen(1)
                try:
                    c = AsyncClient(path, timeout=0.5)
                    await c.connect()
                    loop = asyncio.get_running_loop()
                    start = loop.time()
                    with self.assertRaises(TimeoutError):
                        await c.call("share.send", {"items": [{"text": "x" * (8 << 20)}]})
                    self.assertLess(loop.time() - start, 2)
                    start = loop.time()
                    await c.close()
                    self.assertLess(loop.time() - start, 3)
                finally:
                    deaf.close()

        self.run_async(flow())


    def test_a_call_on_an_ended_connection_leaves_nothing_waiting(self):
        # (the review: its future stayed first in the order of answers, took the next error
        # without an id after a reconnect, and kept back-pressure off)
        from test_unit import HangUpThenAnswer
        server = HangUpThenAnswer()
        self.addCleanup(server.close)

        async def flow():
            c = AsyncClient(server.path, timeout=5)
            await c.connect()
            await asyncio.sleep(0.3)  # the first connection hangs up
            with self.assertRaises(ConnectionError):
                await c.call("x")
            with self.assertRaises(ConnectionError):
                await c.call("y")  # on the ended connection: nothing written
            self.assertFalse(c._must_read(), "a call that was never sent still waits")
            await c.connect()
            self.assertEqual(await c.call("again"), "again")
            await c.close()

        self.run_async(flow())

    def test_messages_before_a_bad_frame_in_the_same_read_still_count(self):
        from test_unit import RawPeer

        def script(conn):
            f = conn.makefile("rb")
            req = json.loads(f.readline())
            conn.sendall(json.dumps({"jsonrpc": "2.0", "method": "app.event", "params": {"id": "e1"}}).encode()
                         + b"\n" + json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": "answer"}).encode()
                         + b"\n{garbage\n")
            f.read()
        peer = RawPeer(script)
        self.addCleanup(peer.close)

        async def flow():
            c = AsyncClient(peer.path, timeout=5)
            await c.connect()
            self.assertEqual(await c.call("broker.status"), "answer")
            n = await c.next_notification(timeout=1)
            self.assertEqual(n.params, {"id": "e1"})
            with self.assertRaises((sb.ProtocolError, sb.ConnectionClosed)):  # (the connection is dropped)
                await c.call("broker.status")
            await c.close()

        self.run_async(flow())

    def test_unsubscribe_and_takeover(self):
        async def flow():
            path = self.broker.socket
            async with AsyncClient(path, role="app", bundle_id=APP) as old, \
                       AsyncClient(path, role="app", bundle_id=APP) as new, \
                       AsyncClient(path, role="tool") as tool:
                await old.app_subscribe()
                async for n in old.events(timeout=0.3, method="app.event"):  # (earlier tests' leftovers)
                    await old.app_ack(n.params["id"])
                # app.unsubscribe: new events wait; the connection stays open.
                self.assertEqual(await old.app_unsubscribe(), {"unsubscribed": True})
                r1 = await tool.url_open("deeplinkmyapp://async-unsub/1")
                self.assertIs(r1["delivered"], False)
                self.assertIs(r1["queued"], True)
                self.assertIsNone(await old.next_event(timeout=0.3))
                self.assertEqual(await old.app_unsubscribe(), {"unsubscribed": False})
                # A takeover ends the old connection's iteration, with the broker's reason.
                await old.app_subscribe()
                got = []

                async def iterate():
                    async for n in old.events(method="app.event"):  # no idle timeout
                        got.append(n.params["id"])
                iteration = asyncio.ensure_future(iterate())
                await asyncio.sleep(0.3)  # r1 (pending) arrives, the loop waits for more
                self.assertFalse(iteration.done())
                await new.app_subscribe()
                await asyncio.wait_for(iteration, 5)  # (without the end: waits for ever)
                self.assertEqual(got, [r1["eventID"]])
                self.assertEqual(old.subscription_ended["app"], APP)
                self.assertIn("subscribed", old.subscription_ended["reason"])
                # next_event raises it.
                await old.app_subscribe()
                self.assertIsNone(old.subscription_ended)
                await new.app_subscribe()
                self.assertEqual((await old.next_event(timeout=5))["id"], r1["eventID"])  # sent before
                with self.assertRaises(sb.SubscriptionEnded) as cm:
                    await old.next_event(timeout=5)
                self.assertIn("subscribed", cm.exception.reason)
                self.assertIn("version", await old.broker_status())  # still usable
                self.assertEqual((await old.app_ack([r1["eventID"]]))["acked"], 1)

        self.run_async(flow())


if __name__ == "__main__":
    unittest.main()
