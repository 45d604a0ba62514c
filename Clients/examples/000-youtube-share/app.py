#!/usr/bin/env python3
"""The containing app (seed 000's AppDelegate + SharedURLRouter + Router), launched on demand.

iOS: the app is opened with deeplinkmyapp://open-from-share, reads "sharedURL" from the App
Group's UserDefaults, deletes it, and routes .openSharedURL(url) so that HomeViewModel shows the
YouTube link input filled in.

sharebroker: the broker starts this program (the manifest's "launch") when an event is queued
and the app has no live subscriber, with SHAREBROKER_SOCKET and SHAREBROKER_BUNDLE_ID set. Its
stderr goes to STATE/logs/com.mycompany.myapp.log. It subscribes (pending events come first),
routes each URL, fetches the share named in ?share=ID, completes it (record and files deleted:
the "consume then delete" of SharedURLRouter, without the race), and acknowledges the event.
It exits after IDLE seconds without events; the broker launches it again when needed.
"""

import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402

IDLE = float(os.environ.get("MYAPP_IDLE_SECONDS", "2"))


def log(msg):
    print(f"[app] {msg}", file=sys.stderr, flush=True)


def is_youtube(url):
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host == "youtu.be" or host == "youtube.com" or host.endswith(".youtube.com")


def route(app, event):
    """Router.shared.route(to:) for one event; True when handled."""
    url = event.get("url") or event.get("webpageURL") or ""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() != "deeplinkmyapp":
        log(f"no route for {url}")
        return False
    if parts.netloc != "open-from-share":
        log(f"route .openSharedURL({url})")
        return True
    share_id = urllib.parse.parse_qs(parts.query).get("share", [event.get("shareID")])[0]
    share = app.share_get(share_id)
    log(f"share.get {share_id} -> {len(share['items'])} item(s) from {share['extension']}")
    for item in share["items"]:
        link = item.get("url") or item.get("text", "")
        if is_youtube(link):
            log(f"HomeViewModel: showYoutubeLinkInput = true, inputYoutubeLink = {link}")
        else:
            log(f"not a YouTube link, ignored: {link}")
    app.share_complete(share_id)
    log(f"share.complete {share_id} (record and files deleted from the group)")
    return True


def main():
    bundle = os.environ.get("SHAREBROKER_BUNDLE_ID", "com.mycompany.myapp")
    launched = "SHAREBROKER_BUNDLE_ID" in os.environ
    with sb.Client(role="app", bundle_id=bundle, timeout=10) as app:
        log(f"{'launched by the broker' if launched else 'started'} as {bundle} (pid {os.getpid()})")
        pending = app.app_subscribe()["pending"]
        log(f"app.subscribe -> {pending} pending event(s)")
        while True:
            try:
                event = app.next_event(timeout=IDLE)
            except sb.ConnectionClosed:
                log("the broker closed the connection")
                return 0
            if event is None:
                log(f"no event for {IDLE:g} s: exiting")
                return 0
            log(f"app.event {event['id']} {event['kind']} {event.get('url') or event.get('webpageURL')}")
            route(app, event)
            app.app_ack([event["id"]])
            log(f"app.ack {event['id']}")


if __name__ == "__main__":
    sys.exit(main())
