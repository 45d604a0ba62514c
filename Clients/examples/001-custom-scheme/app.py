#!/usr/bin/env python3
"""The DeepLinkingDemo app (seed 001's AppDelegate.application(_:open:options:)).

iOS: the app registers the URL type "DeepLinkingDemo"; when DeepLinkingDemo://customerdetail?id=...
is opened, AppDelegate reads the host and the first query item and shows
CustomerMessageViewController with customerId.

sharebroker: the manifest's "urlSchemes" registers the scheme; the app subscribes and gets each
opened URL as an app.event of kind openURL. Routing is the same: host "customerdetail", query "id".
It prints one line per screen it shows and exits after IDLE seconds without an event.
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402

BUNDLE = "com.bluemango.DeepLinkingDemo"


def open_url(url):
    """application(_:open:options:): route one URL; returns the screen shown."""
    parts = urllib.parse.urlsplit(url)
    if parts.netloc == "customerdetail":
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        customer_id = query.get("id", [None])[0]
        return f"CustomerMessageViewController: customerIdLabel.text = {customer_id}"
    return "ViewController (no route for this URL)"


def main(argv):
    idle = float(argv[1]) if len(argv) > 1 else 8.0
    with sb.Client(role="app", bundle_id=BUNDLE, timeout=10) as app:
        app.app_subscribe()
        print(f"[app] subscribed as {BUNDLE}", flush=True)
        while True:
            try:
                ev = app.next_event(timeout=idle)
            except sb.ConnectionClosed:
                return 0
            if ev is None:
                return 0
            print(f"[app] {ev['kind']} {ev['url']} (via {ev['via']}) -> {open_url(ev['url'])}", flush=True)
            app.app_ack([ev["id"]])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
