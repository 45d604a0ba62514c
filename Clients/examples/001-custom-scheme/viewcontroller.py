#!/usr/bin/env python3
"""Seed 001's ViewController.nextBtnClicked: open the app's deep link if something can open it,
else the web page.

iOS:
    if application.canOpenURL(appUrl) { application.open(appUrl) } else { application.open(webUrl) }

sharebroker: url.canOpen, then url.open. (url.open also takes the web page as its `fallback`, so
one call does both; `shareclient open URL --fallback URL` is that call.)

Unlike the seed, the message is percent-encoded: "DeepLinkingDemo://customerdetail?id=Hi Deep
Linking" is not a valid URL as written (URL(string:) returns nil there before iOS 17; the broker,
like iOS 17, opens it encoded).
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402


def main(argv):
    message = argv[1] if len(argv) > 1 else "Hi Deep Linking"
    app_url = "DeepLinkingDemo://customerdetail?id=" + urllib.parse.quote(message, safe="")
    web_url = "https://bluemangoglobal.com"
    with sb.Client(role="tool", timeout=10) as ui:
        can = ui.url_can_open(app_url)
        if can["canOpen"] and can["via"] == "scheme":
            r = ui.url_open(app_url)
            print(f"[viewcontroller] canOpen {app_url}: yes -> url.open -> {r['app']} (via {r['via']}, event {r['eventID']})")
        else:
            r = ui.url_open(web_url)
            print(f"[viewcontroller] canOpen {app_url}: no -> url.open {web_url} -> {r['app']} (via {r['via']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
