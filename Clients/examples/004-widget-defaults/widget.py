#!/usr/bin/env python3
"""The watchlist widget (seed 004's WatchlistStatsWidget), as a process of its own.

iOS: the app saves the watchlist into UserDefaults(suiteName: "group.junyeongPark.Covid19Stats")
and calls WidgetCenter.shared.reloadTimelines(ofKind:); the widget reads "watchlist" from the same
suite and draws one row per country, each a Link to stats://watchlist?id=&name=&iso=.

sharebroker: the group's defaults are the suite. The widget (an extension of the group) reads
"watchlist" with defaults.get and watches it with defaults.watch: every change arrives as a
defaults.changed notification carrying the new value and the group's version, so there is no
reloadTimelines to forget. Tapping a row opens its deep link with url.open.

    python3 widget.py watch [COUNT]    # draw, then redraw on each change; exit after COUNT changes
    python3 widget.py tap ROW          # open row ROW's deep link (1 = first)
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402

WIDGET = "com.junyeongpark.Covid19Stats.WatchlistStatsWidget"
GROUP = "group.junyeongPark.Covid19Stats"


def country_url(c):
    """Country.url, with every value percent-encoded (the seed's .urlQueryAllowed leaves '&' and '='
    alone, so "São Tomé & Príncipe" would cut the name short)."""
    query = urllib.parse.urlencode({"id": c["id"], "name": c["name"], "iso": c["iso"]}, quote_via=urllib.parse.quote)
    return "stats://watchlist?" + query


def draw(watchlist, version):
    if not watchlist:
        print(f"[widget] v{version}: Add countries to watchlist from the App", flush=True)
        return
    print(f"[widget] v{version}: Watchlist ({len(watchlist)})", flush=True)
    for c in watchlist[:4]:  # systemLarge shows 4 rows
        print(f"[widget]   {c['name']} ({c['iso']})  {country_url(c)}", flush=True)


def main(argv):
    mode = argv[1] if len(argv) > 1 else "watch"
    with sb.Client(role="extension", bundle_id=WIDGET, timeout=10) as widget:
        got = widget.defaults_get(GROUP, "watchlist")
        watchlist = got["value"] if got["exists"] else []
        if mode == "tap":
            row = watchlist[int(argv[2]) - 1]
            r = widget.url_open(country_url(row))
            print(f"[widget] tap {row['name']}: url.open {country_url(row)} -> {r['app']} (via {r['via']}, event {r['eventID']})")
            return 0
        count = int(argv[2]) if len(argv) > 2 else None
        watching = widget.defaults_watch(GROUP, keys=["watchlist"])
        print(f"[widget] defaults.watch {GROUP} watchlist (version {watching.get('version')})", flush=True)
        draw(watchlist, got.get("version", watching.get("version")))
        seen = 0
        while count is None or seen < count:
            n = widget.next_notification(timeout=8, method="defaults.changed")
            if n is None:
                print("[widget] no change for 8 s: exiting", flush=True)
                return 1
            change = n.params
            print(f"[widget] defaults.changed {change['key']} version {change['version']}: reloadTimelines", flush=True)
            draw([] if change.get("removed") else change["value"], change["version"])
            seen += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
