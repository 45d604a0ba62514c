#!/usr/bin/env python3
"""The Covid19Stats app (seed 004): edits the watchlist, and opens a country from a widget link.

iOS: the view model's `watchlist` didSet saves the whole array into the group's UserDefaults; two
writers (the app and, say, an intent or a second scene) can overwrite each other's change.
.onOpenURL parses stats://watchlist?id=&name=&iso= and shows CountryDetailView.

sharebroker: the app writes with compare-and-set: defaults.get gives the value and the group's
version, defaults.set(..., if_version=v) succeeds only if nobody wrote in between; on -32006 the
app re-reads, merges and tries again, so no update is lost. Opened URLs arrive as app.event
(the broker launches the app for them: the manifest's "launch").

    python3 app.py add ID NAME ISO [--interleave ID NAME ISO]   # add a country (CAS); --interleave
                                                                # makes another writer add one in between
    python3 app.py                                              # launched by the broker: handle URLs
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402

APP = "com.junyeongpark.Covid19Stats"
GROUP = "group.junyeongPark.Covid19Stats"


def add(argv):
    country = {"id": int(argv[0]), "name": argv[1], "iso": argv[2]}
    other = None
    if len(argv) >= 7 and argv[3] == "--interleave":
        other = {"id": int(argv[4]), "name": argv[5], "iso": argv[6]}
    with sb.Client(role="app", bundle_id=APP, timeout=10) as app:
        attempt = 0
        while True:
            attempt += 1
            got = app.defaults_get(GROUP, "watchlist")
            watchlist, version = (got["value"] if got["exists"] else []), got["version"]
            print(f"[app] read watchlist v{version}: {[c['iso'] for c in watchlist]}")
            if other is not None:  # another writer of the group saves its change right now
                with sb.Client(role="app", bundle_id=APP, timeout=10) as second:
                    v = second.defaults_set(GROUP, "watchlist", watchlist + [other])["version"]
                    print(f"[app] (another writer adds {other['iso']} -> v{v})")
                other = None
            if any(c["iso"] == country["iso"] for c in watchlist):
                print(f"[app] {country['iso']} is already on the watchlist")
                return 0
            try:
                v = app.defaults_set(GROUP, "watchlist", watchlist + [country], if_version=version)["version"]
            except sb.BrokerError as e:
                if e.code != sb.VERSION_CONFLICT or attempt >= 5:
                    raise
                print(f"[app] defaults.set if_version={version}: conflict (-32006, now v{(e.data or {}).get('version')}): re-read, merge, retry")
                continue
            print(f"[app] defaults.set watchlist + {country['iso']} if_version={version} -> v{v}")
            return 0


def log(msg):
    print(f"[app] {msg}", file=sys.stderr, flush=True)


def on_open_url(url):
    parts = urllib.parse.urlsplit(url)
    selection = parts.netloc or "summary"
    q = dict(urllib.parse.parse_qsl(parts.query))
    if not all(k in q for k in ("id", "name", "iso")):
        return f"tab {selection}, no country"
    return f"tab {selection}, CountryDetailView(id: {q['id']}, name: {q['name']}, iso: {q['iso']})"


def serve():
    bundle = os.environ.get("SHAREBROKER_BUNDLE_ID", APP)
    with sb.Client(role="app", bundle_id=bundle, timeout=10) as app:
        log(f"launched as {bundle} (pid {os.getpid()}), {app.app_subscribe()['pending']} pending event(s)")
        while True:
            try:
                ev = app.next_event(timeout=2)
            except sb.ConnectionClosed:
                return 0
            if ev is None:
                log("no event for 2 s: exiting")
                return 0
            log(f"onOpenURL {ev['url']} (from {ev.get('sourceApp', 'a tool')}) -> {on_open_url(ev['url'])}")
            app.app_ack([ev["id"]])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "add":
        sys.exit(add(sys.argv[2:]))
    sys.exit(serve())
