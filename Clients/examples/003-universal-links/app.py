#!/usr/bin/env python3
"""The UniversalLinks app (seed 003's AppDelegate.application(_:continue:restorationHandler:)).

iOS: the app lists applinks:rw-universal-links-final.herokuapp.com in its Associated Domains; the
site serves apple-app-site-association giving paths to KFCNEC27GU.com.razeware.UniversalLinksTutorial.
A tapped https link is then handed to the app as an NSUserActivity (NSUserActivityTypeBrowsingWeb,
webpageURL); the app shows the computer whose path matches, or opens the web site instead.

sharebroker: the manifest's "teamID" and "associatedDomains" and STATE/associations/HOST.json play
those parts. url.open of a covered https URL queues a continueUserActivity event; the broker launches
this program when it is not running (its stderr is STATE/logs/com.razeware.UniversalLinksTutorial.log).
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402

# ItemHandler.sharedInstance.items: the computers the app knows, by path.
COMPUTERS = {
    "/computers/raspberry-pi": "Raspberry Pi 3",
    "/computers/pcduino": "pcDuino3",
    "/computers/beaglebone-black": "BeagleBone Black",
}
WEBSITE = "http://rw-universal-links-final.herokuapp.com"


def log(msg):
    print(f"[app] {msg}", file=sys.stderr, flush=True)


def continue_user_activity(app, ev):
    # 1: only web browsing activities with a URL
    if ev.get("kind") != "continueUserActivity" or ev.get("activityType") != "NSUserActivityTypeBrowsingWeb":
        log(f"not a universal link: {ev}")
        return False
    path = urllib.parse.urlsplit(ev["webpageURL"]).path
    # 2: a computer the app knows: presentDetailViewController
    if path in COMPUTERS:
        log(f"continueUserActivity {ev['webpageURL']} -> ComputerDetailController: {COMPUTERS[path]}")
        return True
    # 3: otherwise ask the system to open the web site (the browser, since http is no universal link)
    r = app.url_open(WEBSITE)
    log(f"continueUserActivity {ev['webpageURL']} -> unknown computer, url.open {WEBSITE} -> {r['app']} (via {r['via']})")
    return False


def main():
    bundle = os.environ.get("SHAREBROKER_BUNDLE_ID", "com.razeware.UniversalLinksTutorial")
    with sb.Client(role="app", bundle_id=bundle, timeout=10) as app:
        log(f"launched as {bundle} (pid {os.getpid()}), {app.app_subscribe()['pending']} pending event(s)")
        while True:
            try:
                ev = app.next_event(timeout=3)
            except sb.ConnectionClosed:
                return 0
            if ev is None:
                log("no event for 3 s: exiting")
                return 0
            continue_user_activity(app, ev)
            app.app_ack([ev["id"]])


if __name__ == "__main__":
    sys.exit(main())
