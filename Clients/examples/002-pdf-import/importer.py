#!/usr/bin/env python3
"""Reazy, the containing app (seed 002's openUrlScheme): imports the shared PDFs.

iOS: the app is opened with reazy://?file=NAME, finds each file in the App Group container,
uploads it into its library (homeViewModel.uploadPDF) and removes the container's copy.

sharebroker: launched on demand (the manifest's "launch"), the app subscribes and gets
reazy://open-from-share?share=ID. share.get lists the share's files with the absolute path of
each copy inside the group's directory; the app copies them into its library ($REAZY_LIBRARY)
and share.complete deletes the record and the group's copies. Then it acknowledges the event.
Its stderr is STATE/logs/com.reazy.app.log.
"""

import os
import shutil
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import sharebroker as sb  # noqa: E402


def log(msg):
    print(f"[reazy] {msg}", file=sys.stderr, flush=True)


def import_share(app, share_id, library):
    share = app.share_get(share_id)
    for item in share["items"]:
        path = item.get("path")
        if path is None:
            log(f"skipped an item without a file: {item}")
            continue
        with open(path, "rb") as f:
            head = f.read(5)
        if head != b"%PDF-":
            log(f"{item.get('name')} is not a PDF, skipped")
            continue
        os.makedirs(library, exist_ok=True)
        target = os.path.join(library, f"{share_id}-{item['name']}")
        shutil.copyfile(path, target)
        log(f"uploadPDF {item['name']} ({item.get('type')}, {item.get('size')} bytes) from {path} -> {target}")
    app.share_complete(share_id)
    log(f"share.complete {share_id}: the group's copy is deleted")


def main():
    bundle = os.environ.get("SHAREBROKER_BUNDLE_ID", "com.reazy.app")
    library = os.environ.get("REAZY_LIBRARY") or os.path.join(os.getcwd(), "ReazyLibrary")
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
            log(f"app.event {ev['id']} {ev['url']}")
            parts = urllib.parse.urlsplit(ev["url"])
            share_id = urllib.parse.parse_qs(parts.query).get("share", [None])[0]
            if parts.netloc == "open-from-share" and share_id:
                import_share(app, share_id, library)
            app.app_ack([ev["id"]])
            log(f"app.ack {ev['id']}")


if __name__ == "__main__":
    sys.exit(main())
