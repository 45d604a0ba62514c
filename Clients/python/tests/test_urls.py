"""url.open / url.canOpen / url.explain: schemes, universal links, browser, fallback, errors."""

import unittest

import support
from support import APP, BROWSER, NOTES
import sharebroker as sb


class UrlTests(support.BrokerTestCase):
    def test_can_open(self):
        c = self.tool()
        cases = [
            ("deeplinkmyapp://customerdetail?id=42", APP, "scheme"),
            ("DeepLinkMyApp://customerdetail?id=42", APP, "scheme"),  # scheme compared case-insensitively
            ("notes://new", NOTES, "scheme"),
            ("https://example.com/computers/raspberry-pi", APP, "universalLink"),
            ("https://example.com/about", BROWSER, "browser"),  # not in the association document
            ("http://example.com/computers/pi", BROWSER, "browser"),  # http skips universal links
            ("https://www.example.org/", BROWSER, "browser"),
        ]
        for url, app, via in cases:
            with self.subTest(url=url):
                r = c.url_can_open(url)
                self.assertEqual((r["canOpen"], r.get("app"), r.get("via")), (True, app, via), r)
        r = c.url_can_open("nosuchscheme://x")
        self.assertFalse(r["canOpen"])
        self.assertBrokerError(sb.INVALID_PARAMS, c.url_can_open, "not a url")
        self.assertBrokerError(sb.INVALID_PARAMS, c.call, "url.canOpen", {})

    def test_open_scheme(self):
        c = self.tool()
        r = c.url_open("notes://new?title=hi")
        self.assertEqual((r["app"], r["via"]), (NOTES, "scheme"))
        self.assertTrue(r["eventID"].startswith("ev-"))
        self.assertIs(r["queued"], True)   # nobody subscribed to notes
        self.assertIs(r["delivered"], False)
        r2 = c.url_open("notes://second")
        self.assertNotEqual(r["eventID"], r2["eventID"])

    def test_open_no_handler(self):
        c = self.tool()
        e = self.assertBrokerError(sb.NO_HANDLER, c.url_open, "nosuchscheme://thing?id=1")
        self.assertIn("nosuchscheme://thing?id=1", e.message)
        self.assertBrokerError(sb.INVALID_PARAMS, c.url_open, "::::")
        self.assertBrokerError(sb.INVALID_PARAMS, c.url_open, "nosuchscheme://x", "not a url")

    def test_open_fallback(self):
        c = self.tool()
        r = c.url_open("nosuchscheme://customerdetail?id=42", fallback="notes://customers/42")
        self.assertEqual((r["app"], r["via"]), (NOTES, "fallback"))
        # A fallback that resolves through a universal link.
        r = c.url_open("nosuchscheme://x", fallback="https://example.com/customers/42")
        self.assertEqual((r["app"], r["via"]), (APP, "fallback"))
        self.assertEqual(r.get("kind"), "continueUserActivity")
        # The primary URL wins when it can be opened.
        r = c.url_open("deeplinkmyapp://x", fallback="notes://y")
        self.assertEqual((r["app"], r["via"]), (APP, "scheme"))

    def test_explain(self):
        c = self.tool()
        r = c.url_explain("https://example.com/computers/pi")
        self.assertEqual(r["url"], "https://example.com/computers/pi")
        self.assertEqual(r["decision"]["app"], APP)
        self.assertEqual(r["decision"]["via"], "universalLink")
        self.assertIsInstance(r["steps"], list)
        self.assertIn("example.com", r["text"])
        r = c.url_explain("nosuchscheme://x")
        self.assertEqual(r["decision"]["error"]["code"], sb.NO_HANDLER)
        r = c.url_explain("nosuchscheme://x", fallback="notes://y")
        self.assertEqual(r["decision"]["via"], "fallback")
        self.assertEqual(r["fallback"], "notes://y")


if __name__ == "__main__":
    unittest.main()
