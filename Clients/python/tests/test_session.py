"""hello, roles and tokens; what is allowed before hello; rpc.discover; broker.status; apps.*."""

import json
import unittest

import support
from support import (APP, APP_GROUP, APP_SHARE, APP_WIDGET, BROWSER, SECURE, SECURE_EXT,
                     SECURE_EXT_OWN, SECURE_EXT_TOKEN, SECURE_TOKEN)
import sharebroker as sb

CONTRACT_METHODS = {
    "hello", "rpc.discover", "broker.status", "apps.list", "apps.reload",
    "url.open", "url.canOpen", "url.explain", "app.subscribe", "app.ack",
    "share.targets", "share.send", "share.list", "share.get", "share.complete",
}


class SessionTests(support.BrokerTestCase):
    def test_allowed_before_hello(self):
        c = self.connect()
        status = c.broker_status()
        for key in ("version", "connections", "apps", "subscribers", "pendingEvents",
                    "pendingShares", "uptimeSeconds"):
            self.assertIn(key, status)
        self.assertEqual(status["apps"], 4)
        doc = c.rpc_discover()
        self.assertIn("methods", doc)
        self.assertIn("hello", {m["name"] for m in doc["methods"]})
        self.assertIsNone(c.session)

    def test_other_methods_need_hello(self):
        c = self.connect()
        for fn, args in ((c.url_open, ("deeplinkmyapp://x",)), (c.apps_list, ()),
                         (c.app_subscribe, ()), (c.share_list, ()),
                         (c.share_targets, ([sb.url_item("https://a.example/")],))):
            self.assertBrokerError(sb.UNAUTHORIZED, fn, *args)
        # An unknown method is -32601 even before hello.
        self.assertBrokerError(sb.METHOD_NOT_FOUND, c.call, "no.such.method", {})
        # The connection stays usable.
        self.assertEqual(c.hello("tool")["role"], "tool")

    def test_hello_tool(self):
        c = self.connect()
        r = c.hello("tool")
        self.assertEqual(r["protocol"], 1)
        self.assertEqual(r["broker"]["name"], "sharebroker")
        self.assertIsInstance(r["broker"]["version"], str)
        self.assertEqual(r["role"], "tool")
        self.assertEqual(c.session, r["session"])
        self.assertNotEqual(self.tool().session, c.session)

    def test_hello_app_and_extension(self):
        a = self.connect()
        r = a.hello("app", APP)
        self.assertEqual((r["role"], r["bundleID"]), ("app", APP))
        e = self.connect()
        r = e.hello("extension", APP_SHARE)
        self.assertEqual((r["role"], r["bundleID"]), ("extension", APP_SHARE))
        # A widget extension is a registered extension too.
        self.assertEqual(self.connect().hello("extension", APP_WIDGET)["bundleID"], APP_WIDGET)

    def test_hello_errors(self):
        c = self.connect()
        self.assertBrokerError(sb.INVALID_PARAMS, c.hello, "wizard")
        self.assertBrokerError(sb.INVALID_PARAMS, c.hello, "app")
        self.assertBrokerError(sb.INVALID_PARAMS, c.hello, "extension")
        self.assertBrokerError(sb.UNAUTHORIZED, c.hello, "app", "com.nobody.here")
        # Wrong role for the bundle: an extension's ID as an app, an app's as an extension.
        self.assertBrokerError(sb.UNAUTHORIZED, c.hello, "app", APP_SHARE)
        self.assertBrokerError(sb.UNAUTHORIZED, c.hello, "extension", APP)
        self.assertEqual(c.hello("app", APP)["bundleID"], APP)

    def test_second_hello(self):
        c = self.connect()
        first = c.hello("app", APP)
        again = c.hello("app", APP)  # same identity: answered again
        self.assertEqual(first["session"], again["session"])
        self.assertBrokerError(sb.UNAUTHORIZED, c.hello, "app", BROWSER)
        self.assertBrokerError(sb.UNAUTHORIZED, c.hello, "tool")

    def test_tokens(self):
        c = self.connect()
        self.assertBrokerError(sb.UNAUTHORIZED, c.hello, "app", SECURE)
        self.assertBrokerError(sb.UNAUTHORIZED, c.hello, "app", SECURE, "wrong")
        self.assertEqual(self.connect().hello("app", SECURE, SECURE_TOKEN)["bundleID"], SECURE)
        # An extension without its own token uses its app's.
        self.assertBrokerError(sb.UNAUTHORIZED, self.connect().hello, "extension", SECURE_EXT)
        self.assertEqual(self.connect().hello("extension", SECURE_EXT, SECURE_TOKEN)["bundleID"], SECURE_EXT)
        # An extension with its own token must give that one.
        self.assertBrokerError(sb.UNAUTHORIZED, self.connect().hello, "extension", SECURE_EXT_OWN, SECURE_TOKEN)
        self.assertEqual(
            self.connect().hello("extension", SECURE_EXT_OWN, SECURE_EXT_TOKEN)["bundleID"], SECURE_EXT_OWN)
        # The constructor's role/bundle_id/token say hello on connect.
        c = self.connect("app", SECURE, SECURE_TOKEN)
        self.assertEqual(c.hello_result["bundleID"], SECURE)
        with self.assertRaises(sb.BrokerError) as cm:
            self.broker.client(role="app", bundle_id=SECURE, token="nope")
        self.assertEqual(cm.exception.code, sb.UNAUTHORIZED)

    def test_rpc_discover_names_the_contract_methods(self):
        doc = self.tool().rpc_discover()
        self.assertIn("openrpc", doc)
        names = {m["name"] for m in doc["methods"]}
        # The contract: its methods name every method, hello included.
        self.assertTrue(CONTRACT_METHODS <= names, CONTRACT_METHODS - names)
        # Every served method answers something other than -32601 (documented == served).
        c = self.tool()
        for name in sorted(CONTRACT_METHODS | names):
            try:
                c.call(name, {})
            except sb.BrokerError as e:
                self.assertNotEqual(e.code, sb.METHOD_NOT_FOUND, f"{name} is not served: {e}")

    def test_broker_status_counts(self):
        c = self.tool()
        before = c.broker_status()
        self.assertIsInstance(before["version"], str)
        self.assertIsInstance(before["uptimeSeconds"], (int, float))
        extra = [self.connect("tool") for _ in range(3)]  # hello: the broker has accepted them
        after = c.broker_status()
        self.assertEqual(after["connections"], before["connections"] + 3)
        for x in extra:
            x.close()
        sub = self.app()
        sub.app_subscribe()
        self.assertGreaterEqual(c.broker_status()["subscribers"], 1)

    def test_apps_list_and_reload(self):
        c = self.tool()
        apps = c.apps_list()
        for key in ("apps", "errors", "warnings", "conflicts"):
            self.assertIn(key, apps)
        by_id = {a["bundleID"]: a for a in apps["apps"]}
        self.assertEqual(set(by_id), {APP, SECURE, support.NOTES, BROWSER})
        self.assertIn(APP_GROUP, by_id[APP]["appGroups"])
        self.assertTrue(by_id[SECURE]["hasToken"])
        self.assertNotIn("token", json.dumps(by_id[SECURE]).replace("hasToken", ""))
        self.assertEqual({e["bundleID"] for e in by_id[APP]["extensions"]},
                         {APP_SHARE, support.APP_PDF, APP_WIDGET})
        # A new manifest shows after apps.reload; a broken one is reported, the rest still load.
        extra = {"bundleID": "com.example.later", "urlSchemes": ["laterapp"]}
        (self.broker.state / "apps" / "90-later.json").write_text(json.dumps(extra))
        (self.broker.state / "apps" / "91-broken.json").write_text("{ not json")
        try:
            reloaded = c.apps_reload()
            self.assertIn("com.example.later", {a["bundleID"] for a in reloaded["apps"]})
            self.assertTrue(any(e.get("file") == "91-broken.json" for e in reloaded["errors"]), reloaded["errors"])
            self.assertTrue(c.url_can_open("laterapp://x")["canOpen"])
        finally:
            (self.broker.state / "apps" / "90-later.json").unlink()
            (self.broker.state / "apps" / "91-broken.json").unlink()
            c.apps_reload()
        self.assertFalse(c.url_can_open("laterapp://x")["canOpen"])
        # With a fallback: whether url_open would open it or the fallback.
        fb = c.url_can_open("laterapp://x", fallback="deeplinkmyapp://fb")
        self.assertEqual((fb["canOpen"], fb["via"]), (True, "fallback"))

    def test_a_session_a_reload_ends_is_told_why(self):
        extra = {"bundleID": "com.example.later", "urlSchemes": ["laterapp"]}
        path = self.broker.state / "apps" / "92-later.json"
        path.write_text(json.dumps(extra))
        c = self.tool()
        try:
            c.apps_reload()
            app = self.app("com.example.later")
            app.call("app.subscribe")
            path.unlink()
            c.apps_reload()
            with self.assertRaises(sb.ConnectionClosed) as cm:
                app.next_notification(timeout=5)
            self.assertIn("session ended by a manifest reload: its bundle com.example.later is no longer registered (-32001)",
                          str(cm.exception))
            self.assertEqual(cm.exception.reason["code"], sb.UNAUTHORIZED)
            app.close()
        finally:
            if path.exists():
                path.unlink()
                c.apps_reload()


class LifecycleTests(unittest.TestCase):
    def test_sigterm_closes_clients_and_exits_zero(self):
        broker = support.Broker().start()
        try:
            c = broker.client(role="tool")
            self.addCleanup(c.close)
            c.broker_status()
            self.assertEqual(broker.stop(cleanup=False), 0)
            with self.assertRaises(sb.BrokerConnectionError):
                c.broker_status()
            self.assertTrue(c.closed)
            c.close()
        finally:
            broker.stop()

    def test_context_manager(self):
        broker = support.Broker().start()
        try:
            with sb.Client(broker.socket, connect=False) as c:
                self.assertFalse(c.closed)
                self.assertEqual(c.hello("tool")["role"], "tool")
            self.assertTrue(c.closed)
            with self.assertRaises(sb.BrokerConnectionError):
                c.broker_status()
        finally:
            broker.stop()


if __name__ == "__main__":
    unittest.main()
