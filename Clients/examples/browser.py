#!/usr/bin/env python3
"""A stand-in for Safari: an app that registers the http and https schemes, so the broker sends it
every web URL that no app claims (url.open -> via "browser", or "fallback"). Used by examples
001 and 003. It prints one line per URL it opens and exits after IDLE seconds without one.

    python3 browser.py [IDLE]
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import sharebroker as sb  # noqa: E402


def main(argv):
    idle = float(argv[1]) if len(argv) > 1 else 8.0
    bundle = os.environ.get("BROWSER_BUNDLE_ID", "com.example.browser")
    with sb.Client(role="app", bundle_id=bundle, timeout=10) as browser:
        browser.app_subscribe()
        print(f"[browser] subscribed as {bundle}", flush=True)
        while True:
            try:
                ev = browser.next_event(timeout=idle)
            except sb.ConnectionClosed:
                return 0
            if ev is None:
                return 0
            url = ev.get("url") or ev.get("webpageURL")
            source = f" from {ev['sourceApp']}" if ev.get("sourceApp") else ""
            print(f"[browser] opens {url} (via {ev['via']}{source})", flush=True)
            browser.app_ack([ev["id"]])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
