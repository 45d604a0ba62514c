"""share.targets / share.send / share.list / share.get / share.complete, and the seed flows."""

import base64
import os
import tempfile
import unittest
from pathlib import Path

import support
from support import (APP, APP_GROUP, APP_GROUP2, APP_PDF, APP_SHARE, APP_WIDGET, MINIMAL_PDF,
                     NOTES, NOTES_GROUP, NOTES_SHARE, SECURE_EXT, SECURE_TOKEN)
import sharebroker as sb
from sharebroker import data_item, path_item, text_item, url_item

YOUTUBE = "https://youtu.be/dQw4w9WgXcQ"


class ShareTests(support.BrokerTestCase):
    def drain(self, app):
        ids = [e.params["id"] for e in app.events(timeout=0.2, method="app.event")]
        if ids:
            app.app_ack(ids)

    def test_seed_flow_extension_shares_a_youtube_link_and_opens_the_app(self):
        app = self.app()
        app.app_subscribe()
        self.drain(app)

        ext = self.extension(APP_SHARE)
        sent = ext.share_send([url_item(YOUTUBE)], open=True)
        self.assertEqual(sent["extension"], APP_SHARE)
        self.assertEqual(sent["app"], APP)
        self.assertEqual(sent["group"], APP_GROUP)
        self.assertTrue(sent["shareID"])
        self.assertTrue(sent["eventID"])

        ev = app.next_event(timeout=5)
        self.assertIsNotNone(ev, "the app got no app.event")
        self.assertEqual(ev["id"], sent["eventID"])
        self.assertEqual(ev["kind"], "openURL")
        self.assertEqual(ev["url"], f"deeplinkmyapp://open-from-share?share={sent['shareID']}")
        self.assertEqual(ev["sourceApp"], APP_SHARE)

        listed = app.share_list()["shares"]
        self.assertIn(sent["shareID"], [s["shareID"] for s in listed])
        share = app.share_get(sent["shareID"])
        self.assertEqual(share["shareID"], sent["shareID"])
        self.assertEqual(share["extension"], APP_SHARE)
        self.assertEqual(share["group"], APP_GROUP)
        self.assertIn("created", share)
        self.assertEqual(len(share["items"]), 1)
        self.assertEqual(share["items"][0]["url"], YOUTUBE)
        self.assertEqual(share["items"][0].get("type"), "public.url")

        self.assertEqual(app.share_complete(sent["shareID"]), {"completed": True})
        self.assertEqual(app.app_ack([ev["id"]]), {"acked": 1})
        self.assertBrokerError(sb.NOT_FOUND, app.share_get, sent["shareID"])
        self.assertBrokerError(sb.NOT_FOUND, app.share_complete, sent["shareID"])
        self.assertNotIn(sent["shareID"], [s["shareID"] for s in app.share_list()["shares"]])

    def test_open_with_a_url(self):
        app = self.app()
        app.app_subscribe()
        self.drain(app)
        sent = self.extension(APP_SHARE).share_send(url_item(YOUTUBE), open="deeplinkmyapp://watch?v=dQw4w9WgXcQ")
        ev = app.next_event(timeout=5)
        self.assertEqual(ev["id"], sent["eventID"])
        self.assertEqual(ev["url"], "deeplinkmyapp://watch?v=dQw4w9WgXcQ")
        app.app_ack(ev["id"])
        app.share_complete(sent["shareID"])

    def test_targets(self):
        c = self.tool()
        targets = c.share_targets([url_item(YOUTUBE)])["targets"]
        self.assertEqual({t["extension"] for t in targets}, {APP_SHARE, APP_PDF, NOTES_SHARE, SECURE_EXT})
        for t in targets:
            self.assertIn("app", t)
            self.assertIn("name", t)
        self.assertEqual({t["app"] for t in targets if t["extension"] == APP_SHARE}, {APP})
        # Only the catch-all takes a PDF, text, or several URLs (the others take one web URL).
        for items in ([data_item(MINIMAL_PDF, "doc.pdf")], [text_item("a note")],
                      [url_item(YOUTUBE), url_item(YOUTUBE + "&t=1")],
                      [url_item(YOUTUBE), data_item(MINIMAL_PDF, "doc.pdf")]):
            with self.subTest(items=[list(i)[0] for i in items]):
                self.assertEqual([t["extension"] for t in c.share_targets(items)["targets"]], [APP_PDF])
        # Widgets are never share targets.
        self.assertNotIn(APP_WIDGET, {t["extension"] for t in targets})
        self.assertBrokerError(sb.INVALID_PARAMS, c.call, "share.targets", {})

    def test_tool_shares_a_pdf_as_data(self):
        c = self.tool()
        sent = c.share_send([data_item(MINIMAL_PDF, "report.pdf")], group=APP_GROUP2)  # the broker picks
        self.assertEqual((sent["extension"], sent["app"], sent["group"]), (APP_PDF, APP, APP_GROUP2))
        self.assertNotIn("eventID", sent)
        app = self.app()
        self.assertNotIn(sent["shareID"], [s["shareID"] for s in app.share_list(APP_GROUP)["shares"]])
        self.assertIn(sent["shareID"], [s["shareID"] for s in app.share_list(APP_GROUP2)["shares"]])
        self.assertIn(sent["shareID"], [s["shareID"] for s in app.share_list()["shares"]])
        share = app.share_get(sent["shareID"])
        item = share["items"][0]
        self.assertEqual(item.get("type"), "com.adobe.pdf")
        self.assertEqual(item.get("size"), len(MINIMAL_PDF))
        self.assertEqual(item.get("name"), "report.pdf")
        self.assertTrue(os.path.isabs(item["path"]))
        self.assertEqual(Path(item["path"]).read_bytes(), MINIMAL_PDF)
        # The same bytes through the socket (share.read), whole and in pieces.
        whole = app.share_read(sent["shareID"], 0)
        self.assertEqual(base64.b64decode(whole["data"]), MINIMAL_PDF)
        self.assertEqual((whole["offset"], whole["size"], whole["eof"]), (0, len(MINIMAL_PDF), True))
        piece = app.share_read(sent["shareID"], 0, offset=3, length=4)
        self.assertEqual(base64.b64decode(piece["data"]), MINIMAL_PDF[3:7])
        self.assertFalse(piece["eof"])
        self.assertBrokerError(sb.INVALID_PARAMS, app.share_read, sent["shareID"], 5)
        self.assertEqual(app.share_complete(sent["shareID"]), {"completed": True})
        self.assertFalse(os.path.exists(item["path"]), "share.complete left the file behind")

    def test_data_without_name_and_two_files_with_one_name(self):
        c = self.extension(APP_PDF)
        sent = c.share_send([data_item(MINIMAL_PDF), data_item(MINIMAL_PDF, "a.pdf"),
                             data_item(MINIMAL_PDF, "a.pdf"), text_item("and a note")])
        self.assertEqual(sent["group"], APP_GROUP)  # the extension's first group
        share = self.app().share_get(sent["shareID"])
        files = share["items"][:3]
        self.assertEqual(files[0].get("type"), "com.adobe.pdf")  # inferred from the content
        paths = [i["path"] for i in files]
        self.assertEqual(len(set(paths)), 3, paths)
        for p in paths:
            self.assertEqual(Path(p).read_bytes(), MINIMAL_PDF)
        self.assertEqual(share["items"][3]["text"], "and a note")
        self.app().share_complete(sent["shareID"])

    def test_path_item(self):
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / "scan.pdf"
            src.write_bytes(MINIMAL_PDF)
            sent = self.tool().share_send([path_item(src)])
            self.assertTrue(src.exists(), "the original was moved")  # read, never moved
            self.assertEqual((sent["extension"], sent["app"]), (APP_PDF, APP))
            share = self.app().share_get(sent["shareID"])
            item = share["items"][0]
            self.assertNotEqual(item["path"], str(src))
            self.assertEqual(Path(item["path"]).read_bytes(), MINIMAL_PDF)
            self.assertEqual(item.get("type"), "com.adobe.pdf")
        self.assertEqual(Path(item["path"]).read_bytes(), MINIMAL_PDF)  # a copy: the original is gone
        self.app().share_complete(sent["shareID"])

    def test_ambiguous_and_not_accepted(self):
        c = self.tool()
        e = self.assertBrokerError(sb.NOT_ACCEPTED, c.share_send, [url_item(YOUTUBE)])
        self.assertIsInstance(e.data, dict)
        cands = e.data["candidates"]
        self.assertEqual({x["extension"] for x in cands}, {APP_SHARE, APP_PDF, NOTES_SHARE, SECURE_EXT})
        for x in cands:
            self.assertTrue(set(x) >= {"extension", "app", "name"}, x)
        # Naming one resolves it.
        sent = c.share_send([url_item(YOUTUBE)], extension=NOTES_SHARE)
        self.assertEqual((sent["app"], sent["group"]), (NOTES, NOTES_GROUP))
        self.connect("app", NOTES).share_complete(sent["shareID"])
        # A named extension must accept the items.
        self.assertBrokerError(sb.NOT_ACCEPTED, c.share_send, [text_item("plain")], extension=NOTES_SHARE)
        # The URL-only extension does not take a PDF or two URLs (nothing stored).
        ext = self.extension(APP_SHARE)
        pending = self.tool().broker_status()["pendingShares"]
        self.assertBrokerError(sb.NOT_ACCEPTED, ext.share_send, [data_item(MINIMAL_PDF, "x.pdf")])
        self.assertBrokerError(sb.NOT_ACCEPTED, ext.share_send, [url_item(YOUTUBE), url_item(YOUTUBE + "2")])
        self.assertEqual(self.tool().broker_status()["pendingShares"], pending)
        self.assertEqual(self.app().share_list(APP_GROUP)["shares"], [])
        # An extension without an activation rule accepts nothing.
        self.assertBrokerError(sb.NOT_ACCEPTED, self.extension(APP_WIDGET).share_send, [url_item(YOUTUBE)])

    def test_errors(self):
        ext = self.extension(APP_SHARE)
        # Sending as another extension, or into a group the extension lacks.
        self.assertBrokerError(sb.UNAUTHORIZED, ext.share_send, [url_item(YOUTUBE)], extension=NOTES_SHARE)
        self.assertBrokerError(sb.UNAUTHORIZED, ext.share_send, [url_item(YOUTUBE)], group=NOTES_GROUP)
        # Bad params.
        self.assertBrokerError(sb.INVALID_PARAMS, ext.call, "share.send", {})
        self.assertBrokerError(sb.INVALID_PARAMS, ext.share_send, [{"bogus": 1}])
        self.assertBrokerError(sb.INVALID_PARAMS, ext.share_send, [{"data": "%%% not base64"}])
        e = self.assertBrokerError(sb.INVALID_PARAMS, self.tool().share_send,
                                   [path_item("/nonexistent/dir/missing.pdf")], extension=APP_PDF)
        self.assertIn("/nonexistent/dir/missing.pdf", e.message)
        # Group access: tools read no group; another app's group is refused; unknown ids.
        tool = self.tool()
        self.assertBrokerError(sb.UNAUTHORIZED, tool.share_list)
        self.assertBrokerError(sb.UNAUTHORIZED, tool.share_get, "sh-x")
        self.assertBrokerError(sb.UNAUTHORIZED, tool.share_complete, "sh-x")
        app = self.app()
        self.assertBrokerError(sb.UNAUTHORIZED, app.share_list, NOTES_GROUP)
        self.assertBrokerError(sb.NOT_FOUND, app.share_get, "sh-does-not-exist")
        self.assertBrokerError(sb.NOT_FOUND, app.share_complete, "sh-does-not-exist")
        notes_share = self.tool().share_send([url_item("https://example.net/n")], extension=NOTES_SHARE)
        self.assertBrokerError(sb.UNAUTHORIZED, app.share_get, notes_share["shareID"])
        self.assertBrokerError(sb.UNAUTHORIZED, app.share_complete, notes_share["shareID"])
        self.connect("app", NOTES).share_complete(notes_share["shareID"])
        # open=True from an extension whose app needs a token: the event goes to that app.
        sec = self.connect("extension", SECURE_EXT, SECURE_TOKEN)
        sent = sec.share_send([url_item(YOUTUBE)], open=True)
        self.assertTrue(sent["eventID"])
        sapp = self.connect("app", support.SECURE, SECURE_TOKEN)
        sapp.share_complete(sent["shareID"])
        sapp.app_ack(sent["eventID"])

    def test_extension_reads_its_group(self):
        ext = self.extension(APP_SHARE)
        sent = ext.share_send([url_item("https://example.net/a")])
        self.assertIn(sent["shareID"], [s["shareID"] for s in ext.share_list()["shares"]])
        self.assertEqual(ext.share_get(sent["shareID"])["items"][0]["url"], "https://example.net/a")
        self.assertEqual(ext.share_complete(sent["shareID"]), {"completed": True})

    def test_pending_shares_in_status(self):
        tool = self.tool()
        before = tool.broker_status()["pendingShares"]
        sent = self.extension(APP_SHARE).share_send([url_item("https://example.net/p")])
        self.assertEqual(tool.broker_status()["pendingShares"], before + 1)
        self.app().share_complete(sent["shareID"])
        self.assertEqual(tool.broker_status()["pendingShares"], before)


if __name__ == "__main__":
    unittest.main()
