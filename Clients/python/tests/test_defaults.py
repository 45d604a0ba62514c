"""defaults.get/set/remove/list/watch and defaults.changed (group-shared UserDefaults).

The broker's rpc.discover must list defaults.*.
"""

import unittest

import support
from support import APP, APP_GROUP, APP_GROUP2, APP_PDF, APP_SHARE, NOTES, NOTES_GROUP
import sharebroker as sb

DEFAULTS_METHODS = {"defaults.get", "defaults.set", "defaults.remove", "defaults.list", "defaults.watch"}


class DefaultsTests(support.BrokerTestCase):
    def test_defaults_methods_are_served(self):
        with self.broker.client() as c:
            served = {m["name"] for m in c.rpc_discover()["methods"]}
        self.assertTrue(DEFAULTS_METHODS <= served, DEFAULTS_METHODS - served)

    def test_get_set_remove_list_and_versions(self):
        app = self.app(NOTES)
        self.assertEqual(app.defaults_list(NOTES_GROUP), {"values": {}, "version": 0})  # fresh group
        r = app.defaults_get(NOTES_GROUP, "theme")
        self.assertEqual((r["exists"], r["value"]), (False, None))
        self.assertEqual(app.defaults_set(NOTES_GROUP, "theme", "dark")["version"], 1)
        value = {"nested": [1, 2.5, "ü", None, True], "empty": {}}
        self.assertEqual(app.defaults_set(NOTES_GROUP, "layout", value)["version"], 2)
        self.assertEqual(app.defaults_set(NOTES_GROUP, "nothing", None)["version"], 3)
        r = app.defaults_get(NOTES_GROUP, "layout")
        self.assertEqual((r["exists"], r["value"]), (True, value))
        r = app.defaults_get(NOTES_GROUP, "nothing")
        self.assertEqual((r["exists"], r["value"]), (True, None))  # a stored null exists
        listed = app.defaults_list(NOTES_GROUP)
        self.assertEqual(listed["values"], {"theme": "dark", "layout": value, "nothing": None})
        self.assertEqual(listed["version"], 3)
        self.assertEqual(app.defaults_remove(NOTES_GROUP, "theme"), {"removed": True, "version": 4})
        self.assertEqual(app.defaults_remove(NOTES_GROUP, "theme"), {"removed": False, "version": 4})
        self.assertFalse(app.defaults_get(NOTES_GROUP, "theme")["exists"])
        self.assertEqual(app.defaults_list(NOTES_GROUP)["version"], 4)

    def test_app_and_extension_share_the_group(self):
        ext = self.extension(APP_SHARE)
        app = self.app(APP)
        v = ext.defaults_set(APP_GROUP, "lastShared", "https://youtu.be/dQw4w9WgXcQ")["version"]
        r = app.defaults_get(APP_GROUP, "lastShared")
        self.assertEqual(r["value"], "https://youtu.be/dQw4w9WgXcQ")
        self.assertEqual(app.defaults_list(APP_GROUP)["version"], v)
        # Groups are separate suites with their own versions.
        self.assertFalse(app.defaults_get(APP_GROUP2, "lastShared")["exists"])

    def test_access(self):
        tool = self.tool()
        self.assertBrokerError(sb.UNAUTHORIZED, tool.defaults_get, APP_GROUP, "k")
        self.assertBrokerError(sb.UNAUTHORIZED, tool.defaults_set, APP_GROUP, "k", 1)
        self.assertBrokerError(sb.UNAUTHORIZED, self.connect().defaults_list, APP_GROUP)  # no hello
        app = self.app(APP)
        self.assertBrokerError(sb.UNAUTHORIZED, app.defaults_get, NOTES_GROUP, "k")
        self.assertBrokerError(sb.UNAUTHORIZED, app.defaults_watch, NOTES_GROUP)
        # The share extension lists only the first group.
        self.assertBrokerError(sb.UNAUTHORIZED, self.extension(APP_SHARE).defaults_list, APP_GROUP2)
        self.assertIn("version", self.extension(APP_PDF).defaults_list(APP_GROUP2))
        self.assertBrokerError(sb.INVALID_PARAMS, app.call, "defaults.get", {"group": APP_GROUP})
        self.assertBrokerError(sb.INVALID_PARAMS, app.call, "defaults.set", {"group": APP_GROUP, "key": "k"})
        self.assertBrokerError(sb.INVALID_PARAMS, app.defaults_get, APP_GROUP, "")

    def test_if_version_compare_and_set(self):
        app = self.app(APP)
        v = app.defaults_list(APP_GROUP2)["version"]
        self.assertEqual(app.defaults_set(APP_GROUP2, "counter", 1, if_version=v)["version"], v + 1)
        e = self.assertBrokerError(sb.VERSION_CONFLICT, app.defaults_set, APP_GROUP2, "counter", 2, if_version=v)
        self.assertEqual(e.data["version"], v + 1)
        self.assertEqual(app.defaults_get(APP_GROUP2, "counter")["value"], 1)
        e = self.assertBrokerError(sb.VERSION_CONFLICT, app.defaults_remove, APP_GROUP2, "counter", if_version=v)
        self.assertEqual(e.data["version"], v + 1)
        self.assertEqual(app.defaults_remove(APP_GROUP2, "counter", if_version=v + 1)["removed"], True)

    def test_watch_and_changed_notifications(self):
        watcher = self.app(APP)
        w = watcher.defaults_watch(APP_GROUP)
        self.assertIs(w["watching"], True)
        filtered = self.extension(APP_PDF)
        self.assertIs(filtered.defaults_watch(APP_GROUP, keys=["wanted"])["watching"], True)

        writer = self.extension(APP_SHARE)
        v1 = writer.defaults_set(APP_GROUP, "other", {"a": 1})["version"]
        v2 = writer.defaults_set(APP_GROUP, "wanted", [1, 2])["version"]
        v3 = writer.defaults_remove(APP_GROUP, "wanted")["version"]
        writer.defaults_remove(APP_GROUP, "never-there")  # removed nothing: nobody is told

        got = [n for n in watcher.events(timeout=0.5, method="defaults.changed")]
        self.assertEqual([n.params["version"] for n in got], [v1, v2, v3])  # in version order
        self.assertEqual(got[0].params, {"group": APP_GROUP, "key": "other", "value": {"a": 1}, "version": v1})
        self.assertEqual((got[1].params["key"], got[1].params["value"]), ("wanted", [1, 2]))
        self.assertIs(got[2].params.get("removed"), True)
        self.assertNotIn("value", got[2].params)

        only = [n.params for n in filtered.events(timeout=0.3, method="defaults.changed")]
        self.assertEqual([(p["key"], p["version"]) for p in only], [("wanted", v2), ("wanted", v3)])


if __name__ == "__main__":
    unittest.main()
