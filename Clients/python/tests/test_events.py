"""app.subscribe / app.event / app.ack: delivery, queueing, redelivery, takeover."""

import time
import unittest

import support
from support import APP, APP_SHARE, NOTES
import sharebroker as sb


class EventTests(support.BrokerTestCase):
    def drain(self, app):
        """Ack whatever the app still has (tests share one broker)."""
        ids = [e.params["id"] for e in app.events(timeout=0.2, method="app.event")]
        if ids:
            app.app_ack(ids)

    def test_live_delivery_and_ack(self):
        app = self.app()
        self.assertIn("pending", app.app_subscribe())
        self.drain(app)
        tool = self.tool()
        r = tool.url_open("deeplinkmyapp://customerdetail?id=42")
        self.assertIs(r["delivered"], True)
        self.assertIs(r["queued"], False)
        ev = app.next_event(timeout=5)
        self.assertIsNotNone(ev, "no app.event arrived")
        self.assertEqual(ev["id"], r["eventID"])
        self.assertEqual(ev["kind"], "openURL")
        self.assertEqual(ev["url"], "deeplinkmyapp://customerdetail?id=42")
        self.assertEqual(ev["via"], "scheme")
        self.assertNotIn("sourceApp", ev)  # opened by a tool
        self.assertEqual(app.app_ack([ev["id"]]), {"acked": 1})
        self.assertEqual(app.app_ack(ev["id"])["acked"], 0)  # already acked: 0, not an error
        self.assertEqual(app.app_ack(["ev-999999", "nope"])["acked"], 0)
        self.assertEqual(app.app_ack([])["acked"], 0)

    def test_universal_link_event_and_source_app(self):
        app = self.app()
        app.app_subscribe()
        self.drain(app)
        ext = self.extension(APP_SHARE)
        r = ext.url_open("https://example.com/computers/raspberry-pi")
        self.assertEqual(r["via"], "universalLink")
        ev = app.next_event(timeout=5)
        self.assertEqual(ev["kind"], "continueUserActivity")
        self.assertEqual(ev["activityType"], "NSUserActivityTypeBrowsingWeb")
        self.assertEqual(ev["webpageURL"], "https://example.com/computers/raspberry-pi")
        self.assertEqual(ev["id"], r["eventID"])
        r = ext.url_open("deeplinkmyapp://from-extension")
        ev = app.next_event(timeout=5)
        self.assertEqual(ev["sourceApp"], APP_SHARE)
        app.app_ack([ev["id"], r["eventID"]])
        self.drain(app)

    def test_queued_then_pending_in_order_and_redelivered_until_acked(self):
        tool = self.tool()
        # Notes has no subscriber in this class except here.
        opened = [tool.url_open(f"notes://note/{i}") for i in range(3)]
        self.assertTrue(all(o["queued"] and not o["delivered"] for o in opened))
        pending_before = tool.broker_status()["pendingEvents"]
        self.assertGreaterEqual(pending_before, 3)

        first = self.app(NOTES)
        sub = first.app_subscribe()
        self.assertGreaterEqual(sub["pending"], 3)
        got = [n.params for n in first.events(timeout=0.5, method="app.event")]
        ids = [e["id"] for e in got]
        for o in opened:
            self.assertIn(o["eventID"], ids)
        mine = [e for e in got if e["id"] in {o["eventID"] for o in opened}]
        self.assertEqual([e["url"] for e in mine], [f"notes://note/{i}" for i in range(3)])  # oldest first
        first.app_ack(ids[0])
        first.close()  # disconnect before acking the rest

        again = self.app(NOTES)
        again.app_subscribe()
        redelivered = [n.params for n in again.events(timeout=0.5, method="app.event")]
        self.assertEqual([e["id"] for e in redelivered], ids[1:])  # same ids, same order
        self.assertEqual(again.app_ack([e["id"] for e in redelivered])["acked"], len(ids) - 1)
        self.assertEqual(tool.broker_status()["pendingEvents"], pending_before - len(ids))

    def test_takeover(self):
        old = self.app()
        old.app_subscribe()
        self.drain(old)
        tool = self.tool()
        r1 = tool.url_open("deeplinkmyapp://takeover/1")
        e1 = old.next_event(timeout=5)
        self.assertEqual(e1["id"], r1["eventID"])
        new = self.app()
        new.app_subscribe()  # takes over; e1 (not acked) goes to the new subscriber
        e1_again = new.next_event(timeout=5)
        self.assertEqual(e1_again["id"], e1["id"])
        r2 = tool.url_open("deeplinkmyapp://takeover/2")
        self.assertEqual(new.next_event(timeout=5)["id"], r2["eventID"])
        # The old connection is told (app.subscriptionEnded): its wait for an event ends with
        # the broker's reason instead of waiting for events that no longer come.
        with self.assertRaises(sb.SubscriptionEnded) as cm:
            old.next_event(timeout=5)
        self.assertEqual(cm.exception.app, APP)
        self.assertIn("subscribed", cm.exception.reason)
        self.assertIn(cm.exception.reason, str(cm.exception))
        self.assertEqual(old.subscription_ended, {"app": APP, "reason": cm.exception.reason})
        self.assertIsNone(old.next_event(timeout=0.3), "the old subscriber still receives events")
        self.assertFalse(old.closed)
        self.assertEqual(old.app_ack(e1["id"])["acked"], 1)  # its acks still count
        self.assertEqual(new.app_ack([e1["id"], r2["eventID"]])["acked"], 1)

    def test_takeover_ends_the_old_connections_iteration(self):
        old = self.app()
        old.app_subscribe()
        self.drain(old)
        tool = self.tool()
        r1 = tool.url_open("deeplinkmyapp://takeover-iter/1")
        self.assertIs(r1["delivered"], True)
        new = self.app()
        new.app_subscribe()
        started = time.monotonic()
        # Without the end, this loop would wait out its 10 s idle timeout (or, without one,
        # for ever): the events sent before the takeover come first, then it ends.
        got = [n.params["id"] for n in old.events(timeout=10, method="app.event")]
        self.assertLess(time.monotonic() - started, 5, "the iteration did not end at the takeover")
        self.assertEqual(got, [r1["eventID"]])
        self.assertEqual(old.subscription_ended["app"], APP)
        self.assertIn("subscribed", old.subscription_ended["reason"])
        # The connection stays usable, and subscribing again takes the events back (the
        # notification queued before its answer does not end the next wait).
        self.assertIn("version", old.broker_status())
        self.assertIn("pending", old.app_subscribe())
        self.assertIsNone(old.subscription_ended)
        self.assertEqual(new.next_event(timeout=5)["id"], r1["eventID"])  # it had it, unacked
        with self.assertRaises(sb.SubscriptionEnded):
            new.next_event(timeout=5)  # then it is taken over in turn
        r2 = tool.url_open("deeplinkmyapp://takeover-iter/2")
        self.assertIs(r2["delivered"], True)
        ids = [n.params["id"] for n in old.events(timeout=0.5, method="app.event")]
        self.assertEqual(ids, [r1["eventID"], r2["eventID"]])
        old.app_ack(ids)

    def test_a_stale_subscription_ended_does_not_end_a_new_subscription(self):
        old = self.app()
        old.app_subscribe()
        self.drain(old)
        new = self.app()
        new.app_subscribe()  # old is sent app.subscriptionEnded, which it has not read
        self.assertIn("version", new.broker_status())
        time.sleep(0.2)
        old.broker_status()  # reads it (queued)
        self.assertGreaterEqual(old.pending_notifications, 1)
        old.app_subscribe()  # takes the events back: the queued notice concerned the old subscription
        r = self.tool().url_open("deeplinkmyapp://stale-ended")
        self.assertEqual(old.next_event(timeout=5)["id"], r["eventID"])
        old.app_ack(r["eventID"])

    def test_unsubscribe(self):
        app = self.app()
        app.app_subscribe()
        self.drain(app)
        tool = self.tool()
        self.assertIs(tool.url_open("deeplinkmyapp://unsub/live")["delivered"], True)
        live = app.next_event(timeout=5)
        self.assertEqual(app.app_unsubscribe(), {"unsubscribed": True})
        # New events wait for the next subscriber; the connection stays open.
        r = tool.url_open("deeplinkmyapp://unsub/queued")
        self.assertIs(r["delivered"], False)
        self.assertIs(r["queued"], True)
        self.assertIsNone(app.next_event(timeout=0.3), "an unsubscribed connection still receives events")
        self.assertEqual(app.app_unsubscribe(), {"unsubscribed": False})  # no longer the subscriber
        self.assertIn("version", app.broker_status())
        # Subscribing again: the unacked event and the queued one come.
        self.assertGreaterEqual(app.app_subscribe()["pending"], 2)
        ids = [n.params["id"] for n in app.events(timeout=0.5, method="app.event")]
        self.assertEqual(ids, [live["id"], r["eventID"]])
        self.assertEqual(app.app_ack(ids)["acked"], 2)
        self.assertEqual(self.app().app_unsubscribe(), {"unsubscribed": False})  # never subscribed

    def test_notifications_queue_while_a_call_waits(self):
        app = self.app()
        app.app_subscribe()
        self.drain(app)
        tool = self.tool()
        ids = [tool.url_open(f"deeplinkmyapp://queued/{i}")["eventID"] for i in range(3)]
        time.sleep(0.1)
        app.broker_status()  # the events arrive before this answer and are kept
        self.assertGreaterEqual(app.pending_notifications, 1)
        got = [n.params["id"] for n in app.events(timeout=0.5, method="app.event")]
        self.assertEqual(got, ids)
        app.app_ack(got)

    def test_role_checks(self):
        self.assertBrokerError(sb.UNAUTHORIZED, self.tool().app_subscribe)
        self.assertBrokerError(sb.UNAUTHORIZED, self.extension().app_subscribe)
        self.assertBrokerError(sb.UNAUTHORIZED, self.tool().app_ack, ["ev-1"])
        self.assertBrokerError(sb.UNAUTHORIZED, self.tool().app_unsubscribe)
        self.assertBrokerError(sb.INVALID_PARAMS, self.app().call, "app.ack", {"ids": "ev-1"})


if __name__ == "__main__":
    unittest.main()
