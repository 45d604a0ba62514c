"""The scenarios every Python-driven interop suite runs, written against a thin adapter.

An adapter (one per third-party library, in the suite's own file) has:

- ``adapter.name``; ``adapter.batches`` (whether the library can send a batch and read its reply);
  ``adapter.error_data`` (whether the library's error type exposes the error's ``data``).
- ``adapter.connect(socket_path, ids="number"|"string")`` -> a session with
  ``call(method, params=None)`` (the result; a JSON-RPC error raised as the LIBRARY's own error
  type is turned into :class:`RpcError` by the adapter, anything else propagates and fails the
  test), ``next_notification(timeout)`` -> ``(method, params)`` (raises ``TimeoutError``),
  ``batch([(method, params, id_or_None), ...])`` -> the parsed responses (only when
  ``adapter.batches``), ``last_ids()`` -> ``(sent, received)`` of the last call when the library
  shows them (else ``None``), ``unexpected()`` -> messages read that nobody asked for, and
  ``close()``.
- optionally ``adapter.cannot_send``: characters the library cannot put in a string correctly.

The adapter does all encoding, framing, id bookkeeping and decoding through the library; the
scenarios only say what to send and what must come back.
"""

import time

from fixture import (ALPHA, ALPHA_GROUP, ALPHA_SCHEME, ALPHA_SHARE, ALPHA_TOKEN, ALPHA_WIDGET,
                     BETA, BETA_ACTION, BETA_GROUP, CONTRACT_METHODS, INVALID_PARAMS, LINK_HOST,
                     METHOD_NOT_FOUND, NO_HANDLER, NOT_ACCEPTED, NOWHERE, UNAUTHORIZED, Check,
                     WIDGET_TOKEN)

NO_DATA = object()


class RpcError(Exception):
    """A JSON-RPC error object as the library delivered it (converted by the adapter)."""

    def __init__(self, code, message, data=NO_DATA, library_error=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.library_error = library_error


def expect_error(code, fn, *args, **kwargs):
    try:
        result = fn(*args, **kwargs)
    except RpcError as e:
        Check.eq(e.code, code, "error code")
        Check.true(isinstance(e.message, str) and e.message, f"error {code} has an empty message")
        return e
    raise AssertionError(f"expected error {code}, got result {result!r}")


def hello(session, role, bundle=None, token=None):
    params = {"role": role}
    if bundle is not None:
        params["bundleID"] = bundle
    if token is not None:
        params["token"] = token
    r = session.call("hello", params)
    Check.eq(r.get("protocol"), 1, "hello.protocol")
    Check.eq(r.get("role"), role, "hello.role")
    Check.true(isinstance(r.get("session"), int), f"hello.session is not an integer: {r!r}")
    Check.eq(r.get("broker", {}).get("name"), "sharebroker", "hello.broker.name")
    if bundle is not None:
        Check.eq(r.get("bundleID"), bundle, "hello.bundleID")
    return r


def open_session(adapter, broker, role=None, bundle=None, token=None, ids="number"):
    s = adapter.connect(broker.socket, ids=ids)
    if role is not None:
        hello(s, role, bundle, token)
    return s


def next_notification(session, method, timeout=10.0):
    """The next notification, which must be ``method``; returns its params."""
    got_method, params = session.next_notification(timeout)
    Check.eq(got_method, method, "notification method")
    return params


def no_notification(session, within=0.3):
    try:
        m = session.next_notification(within)
    except TimeoutError:
        return
    raise AssertionError(f"unexpected notification {m!r}")


# ---------------------------------------------------------------------------------------------


def before_hello(adapter, broker):
    """broker.status and rpc.discover before hello; -32001 for a known method, -32601 unknown."""
    s = open_session(adapter, broker)
    try:
        st = s.call("broker.status")
        Check.true(isinstance(st.get("version"), str) and st["version"], f"broker.status.version: {st!r}")
        Check.true(st.get("connections", 0) >= 1, f"broker.status.connections: {st!r}")
        Check.eq(st.get("apps"), 2, "broker.status.apps")
        for field in ("subscribers", "pendingEvents", "pendingShares", "uptimeSeconds"):
            Check.true(field in st, f"broker.status lacks {field}")
        doc = s.call("rpc.discover")
        Check.true(isinstance(doc.get("openrpc"), str), "rpc.discover: no openrpc version")
        names = {m.get("name") for m in doc.get("methods", [])}
        missing = [m for m in CONTRACT_METHODS if m not in names]
        Check.eq(missing, [], "methods missing from rpc.discover")
        e = expect_error(UNAUTHORIZED, s.call, "url.canOpen", {"url": "interop-alpha://x"})
        expect_error(UNAUTHORIZED, s.call, "app.subscribe", {})
        e = expect_error(METHOD_NOT_FOUND, s.call, "no.such.method", {})
        Check.true("no.such.method" in e.message, f"-32601 message does not name the method: {e.message!r}")
        # The session is still usable and hello still works after errors.
        hello(s, "tool")
        expect_error(METHOD_NOT_FOUND, s.call, "no.such.method")
    finally:
        s.close()


def hello_failures(adapter, broker):
    s = adapter.connect(broker.socket)
    try:
        expect_error(UNAUTHORIZED, s.call, "hello", {"role": "app", "bundleID": ALPHA, "token": "wrong"})
        expect_error(INVALID_PARAMS, s.call, "hello", {"role": "app"})
        expect_error(INVALID_PARAMS, s.call, "hello", {"role": "extension", "token": ALPHA_TOKEN})
        expect_error(UNAUTHORIZED, s.call, "hello", {"role": "app", "bundleID": "org.interop.unknown"})
        e = expect_error(UNAUTHORIZED, s.call, "hello",
                         {"role": "extension", "bundleID": ALPHA, "token": ALPHA_TOKEN})
        if adapter.error_data:
            Check.eq(e.data, {"role": "app"}, "-32001 for the wrong role: data")
        # After failed hellos the connection is still anonymous and a good hello works.
        expect_error(UNAUTHORIZED, s.call, "url.canOpen", {"url": "interop-alpha://x"})
        hello(s, "app", ALPHA, ALPHA_TOKEN)
    finally:
        s.close()
    # An extension without its own token uses its app's; one with its own token needs that one.
    ext = open_session(adapter, broker, "extension", ALPHA_SHARE, ALPHA_TOKEN)
    ext.close()
    w = adapter.connect(broker.socket)
    try:
        expect_error(UNAUTHORIZED, w.call, "hello", {"role": "extension", "bundleID": ALPHA_WIDGET,
                                                     "token": ALPHA_TOKEN})
        hello(w, "extension", ALPHA_WIDGET, WIDGET_TOKEN)
    finally:
        w.close()


def tool_urls(adapter, broker):
    s = open_session(adapter, broker, "tool")
    try:
        r = s.call("url.canOpen", {"url": "INTEROP-ALPHA://item/1"})
        Check.eq((r.get("canOpen"), r.get("app"), r.get("via")), (True, ALPHA, "scheme"), "url.canOpen scheme")
        r = s.call("url.canOpen", {"url": f"https://{LINK_HOST}/items/7"})
        Check.eq((r.get("canOpen"), r.get("app"), r.get("via")), (True, ALPHA, "universalLink"),
                 "url.canOpen universal link")
        r = s.call("url.canOpen", {"url": NOWHERE})
        Check.eq(r.get("canOpen"), False, "url.canOpen of an unhandled URL")
        # Not a path the association document gives the app; http skips universal links; no browser.
        for url in (f"https://{LINK_HOST}/other/1", f"http://{LINK_HOST}/items/1"):
            Check.eq(s.call("url.canOpen", {"url": url}).get("canOpen"), False, f"url.canOpen {url}")
            expect_error(NO_HANDLER, s.call, "url.open", {"url": url})
        # A tool reads no group and subscribes to nothing.
        expect_error(UNAUTHORIZED, s.call, "defaults.get", {"group": ALPHA_GROUP, "key": "k"})
        expect_error(UNAUTHORIZED, s.call, "app.subscribe", {})
        e = expect_error(NO_HANDLER, s.call, "url.open", {"url": NOWHERE})
        Check.true(NOWHERE in e.message, f"-32004 message does not name the URL: {e.message!r}")
        r = s.call("url.open", {"url": NOWHERE, "fallback": "interop-beta://fallback"})
        Check.eq((r.get("app"), r.get("via"), r.get("queued"), r.get("delivered")),
                 (BETA, "fallback", True, False), "url.open with a fallback")
        Check.true(isinstance(r.get("eventID"), str), f"url.open eventID: {r!r}")
        expect_error(INVALID_PARAMS, s.call, "url.open", {})
        st = s.call("broker.status")
        Check.eq(st.get("pendingEvents"), 1, "broker.status.pendingEvents after one queued event")
    finally:
        s.close()


def app_events(adapter, broker):
    """app.subscribe, then app.event notifications for url.open (scheme, universal link), app.ack."""
    app = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN, ids="string")
    tool = open_session(adapter, broker, "tool")
    try:
        Check.eq(app.call("app.subscribe", {}), {"pending": 0}, "app.subscribe")
        url = "interop-alpha://item/1?q=caf%C3%A9&x=%22y%22"
        r = tool.call("url.open", {"url": url})
        Check.eq((r.get("app"), r.get("via"), r.get("delivered"), r.get("queued")),
                 (ALPHA, "scheme", True, False), "url.open to a subscribed app")
        ev = next_notification(app, "app.event")
        Check.eq(ev.get("id"), r["eventID"], "app.event id")
        Check.eq(ev.get("kind"), "openURL", "app.event kind")
        Check.eq(ev.get("url"), url, "app.event url")
        Check.true("sourceApp" not in ev, f"a tool's url.open carries no sourceApp: {ev!r}")
        Check.eq(ev.get("via"), "scheme", "app.event via")
        st = tool.call("broker.status")
        Check.eq((st.get("connections"), st.get("subscribers"), st.get("pendingEvents")), (2, 1, 1),
                 "broker.status connections/subscribers/pendingEvents")
        link = f"https://{LINK_HOST}/items/42"
        r2 = tool.call("url.open", {"url": link})
        Check.eq(r2.get("via"), "universalLink", "url.open via")
        ev2 = next_notification(app, "app.event")
        Check.eq((ev2.get("id"), ev2.get("kind"), ev2.get("webpageURL"), ev2.get("activityType")),
                 (r2["eventID"], "continueUserActivity", link, "NSUserActivityTypeBrowsingWeb"),
                 "universal-link app.event")
        Check.eq(app.call("app.ack", {"ids": [ev["id"], ev2["id"], "ev-999999"]}), {"acked": 2}, "app.ack")
        Check.eq(app.call("app.ack", {"ids": [ev["id"]]}), {"acked": 0}, "app.ack again")
        Check.eq(app.call("app.ack", {"ids": [7, None, {"id": ev2["id"]}]}), {"acked": 0}, "app.ack of non-strings")
        expect_error(INVALID_PARAMS, app.call, "app.ack", {"ids": ev["id"]})
        Check.eq(tool.call("broker.status").get("pendingEvents"), 0, "pendingEvents after the acks")
        no_notification(app)
    finally:
        app.close()
        tool.close()


def pending_events(adapter, broker):
    """Events queued with no subscriber arrive after app.subscribe's reply, oldest first."""
    tool = open_session(adapter, broker, "tool")
    ids = []
    try:
        for i in range(3):
            r = tool.call("url.open", {"url": f"interop-alpha://queued/{i}"})
            Check.eq((r.get("queued"), r.get("delivered")), (True, False), "url.open with no subscriber")
            ids.append(r["eventID"])
    finally:
        tool.close()
    app = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN)
    try:
        Check.eq(app.call("app.subscribe", {}), {"pending": 3}, "app.subscribe with 3 queued")
        got = [next_notification(app, "app.event") for _ in range(3)]
        Check.eq([e.get("id") for e in got], ids, "queued events' ids, in order")
        Check.eq([e.get("url") for e in got], [f"interop-alpha://queued/{i}" for i in range(3)], "urls")
        Check.eq(app.call("app.ack", {"ids": ids}), {"acked": 3}, "app.ack")
    finally:
        app.close()


def extension_share(adapter, broker):
    """share.send as an extension (as itself), with open: true; the app reads the share."""
    ext = open_session(adapter, broker, "extension", ALPHA_SHARE, ALPHA_TOKEN)
    app = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN)
    try:
        Check.eq(app.call("app.subscribe", {}), {"pending": 0}, "app.subscribe")
        link = "https://www.youtube.com/watch?v=dQw4w9WgXcQ"
        r = ext.call("share.send", {"items": [{"url": link}], "open": True})
        Check.eq((r.get("extension"), r.get("app"), r.get("group")), (ALPHA_SHARE, ALPHA, ALPHA_GROUP),
                 "share.send result")
        share_id = r.get("shareID")
        Check.true(isinstance(share_id, str) and share_id, f"share.send shareID: {r!r}")
        ev = next_notification(app, "app.event")
        Check.eq((ev.get("id"), ev.get("kind"), ev.get("shareID"), ev.get("sourceApp")),
                 (r.get("eventID"), "openURL", share_id, ALPHA_SHARE), "share.send open event")
        Check.eq(ev.get("url"), f"{ALPHA_SCHEME}://open-from-share?share={share_id}", "open event url")
        e = expect_error(NOT_ACCEPTED, ext.call, "share.send", {"items": [{"text": "just words"}]})
        # open: "URL" routes that URL instead; the event goes to whoever opens it (here beta).
        r2 = ext.call("share.send", {"items": [{"url": link + "&t=2"}], "open": "interop-beta://after-share"})
        Check.true(isinstance(r2.get("eventID"), str), f"share.send open: URL eventID: {r2!r}")
        no_notification(app)
        expect_error(UNAUTHORIZED, ext.call, "share.send",
                     {"items": [{"url": link}], "extension": BETA_ACTION})
        listed = app.call("share.list", {})
        Check.eq([s.get("shareID") for s in listed.get("shares", [])], [share_id, r2["shareID"]], "share.list, oldest first")
        got = app.call("share.get", {"shareID": share_id})
        Check.eq([i.get("url") for i in got.get("items", [])], [link], "share.get items")
        Check.eq(app.call("share.complete", {"shareID": share_id}), {"completed": True}, "share.complete")
        expect_error(-32002, app.call, "share.get", {"shareID": share_id})
        Check.eq(app.call("app.ack", {"ids": [ev["id"]]}), {"acked": 1}, "app.ack")
    finally:
        ext.close()
        app.close()


def tool_share(adapter, broker):
    """share.send as a tool (the share sheet): the one accepting extension, or -32003 with candidates."""
    s = open_session(adapter, broker, "tool")
    try:
        r = s.call("share.send", {"items": [{"text": "a note", "type": "public.plain-text"}]})
        Check.eq((r.get("extension"), r.get("app"), r.get("group")), (BETA_ACTION, BETA, BETA_GROUP),
                 "tool share.send of text")
        t = s.call("share.targets", {"items": [{"url": "https://example.org/"}]})
        Check.eq(sorted(x.get("extension") for x in t.get("targets", [])), [ALPHA_SHARE, BETA_ACTION],
                 "share.targets of a URL")
        t2 = s.call("share.targets", {"items": [{"url": "https://example.org/"}, {"text": "and words"}]})
        Check.eq([x.get("extension") for x in t2.get("targets", [])], [BETA_ACTION], "share.targets of URL + text")
        e = expect_error(NOT_ACCEPTED, s.call, "share.send", {"items": [{"url": "https://example.org/"}]})
        if adapter.error_data:
            Check.true(isinstance(e.data, dict), f"-32003 data: {e.data!r}")
            Check.eq(sorted((c.get("extension"), c.get("app"), c.get("name")) for c in e.data.get("candidates", [])),
                     [(ALPHA_SHARE, ALPHA, "Send to Alpha"), (BETA_ACTION, BETA, "Beta Action")], "-32003 data.candidates")
        r = s.call("share.send", {"items": [{"url": "https://example.org/"}], "extension": ALPHA_SHARE})
        Check.eq(r.get("extension"), ALPHA_SHARE, "tool share.send naming the extension")
        expect_error(UNAUTHORIZED, s.call, "share.list", {})
        Check.eq(s.call("broker.status").get("pendingShares"), 2, "pendingShares")
    finally:
        s.close()


def defaults_watch(adapter, broker):
    """defaults.watch, then defaults.changed for set and remove (in version order)."""
    widget = open_session(adapter, broker, "extension", ALPHA_WIDGET, WIDGET_TOKEN)
    app = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN, ids="string")
    try:
        w = widget.call("defaults.watch", {"group": ALPHA_GROUP})
        Check.eq(w.get("watching"), True, "defaults.watch")
        value = {"title": "Grüße \u2603", "n": 3, "ok": True, "list": [1, "two", None], "nested": {"x": 1.5}}
        r1 = app.call("defaults.set", {"group": ALPHA_GROUP, "key": "card", "value": value})
        r2 = app.call("defaults.set", {"group": ALPHA_GROUP, "key": "count", "value": 7})
        Check.eq((r1.get("version"), r2.get("version")), (1, 2), "defaults.set versions")
        c1 = next_notification(widget, "defaults.changed")
        Check.eq((c1.get("group"), c1.get("key"), c1.get("value"), c1.get("version"), c1.get("removed", False)),
                 (ALPHA_GROUP, "card", value, 1, False), "defaults.changed 1")
        c2 = next_notification(widget, "defaults.changed")
        Check.eq((c2.get("key"), c2.get("value"), c2.get("version")), ("count", 7, 2), "defaults.changed 2")
        absent = widget.call("defaults.get", {"group": ALPHA_GROUP, "key": "nope"})
        Check.eq((absent.get("exists"), absent.get("value"), "value" in absent), (False, None, True), "defaults.get absent")
        g = widget.call("defaults.get", {"group": ALPHA_GROUP, "key": "card"})
        Check.eq((g.get("exists"), g.get("value")), (True, value), "defaults.get")
        rm = app.call("defaults.remove", {"group": ALPHA_GROUP, "key": "count"})
        Check.eq((rm.get("removed"), rm.get("version")), (True, 3), "defaults.remove")
        c3 = next_notification(widget, "defaults.changed")
        Check.eq((c3.get("key"), c3.get("removed"), c3.get("version"), "value" in c3),
                 ("count", True, 3, False), "defaults.changed for a removal")
        rm2 = app.call("defaults.remove", {"group": ALPHA_GROUP, "key": "count"})
        Check.eq((rm2.get("removed"), rm2.get("version")), (False, 3), "defaults.remove of nothing")
        no_notification(widget)
        expect_error(UNAUTHORIZED, app.call, "defaults.get", {"group": BETA_GROUP, "key": "x"})
        expect_error(INVALID_PARAMS, app.call, "defaults.set", {"group": ALPHA_GROUP, "key": "k"})
    finally:
        widget.close()
        app.close()


def takeover(adapter, broker):
    """One subscriber per app: a new app.subscribe takes over and gets what was not acked; an app
    that disconnects without acking gets the same events, same ids, when it subscribes again."""
    first = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN)
    tool = open_session(adapter, broker, "extension", ALPHA_SHARE, ALPHA_TOKEN)
    try:
        Check.eq(first.call("app.subscribe", {}), {"pending": 0}, "first subscribe")
        r1 = tool.call("url.open", {"url": "interop-beta://from-alpha-share"})
        Check.eq(r1.get("app"), BETA, "url.open to beta")
        r2 = tool.call("url.open", {"url": "interop-alpha://one"})
        ev1 = next_notification(first, "app.event")
        Check.eq((ev1.get("id"), ev1.get("sourceApp")), (r2["eventID"], ALPHA_SHARE), "event with sourceApp")
        second = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN)
        try:
            Check.eq(second.call("app.subscribe", {}), {"pending": 1}, "takeover subscribe")
            again = next_notification(second, "app.event")
            Check.eq((again.get("id"), again.get("url")), (ev1["id"], "interop-alpha://one"), "redelivered event")
            r3 = tool.call("url.open", {"url": "interop-alpha://two"})
            ev3 = next_notification(second, "app.event")
            Check.eq(ev3.get("id"), r3["eventID"], "new event goes to the new subscriber")
            no_notification(first)
            # The old subscriber's acks still count.
            Check.eq(first.call("app.ack", {"ids": [ev1["id"]]}), {"acked": 1}, "ack from the old subscriber")
        finally:
            second.close()  # leaves ev3 unacked
        time.sleep(0.2)
        third = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN)
        try:
            Check.eq(third.call("app.subscribe", {}), {"pending": 1}, "subscribe after a disconnect")
            ev = next_notification(third, "app.event")
            Check.eq((ev.get("id"), ev.get("url")), (r3["eventID"], "interop-alpha://two"), "same id after reconnect")
            Check.eq(third.call("app.ack", {"ids": [ev["id"]]}), {"acked": 1}, "ack")
        finally:
            third.close()
    finally:
        first.close()
        tool.close()


def payloads(adapter, broker):
    """Values that stress framing and encoding: raw control characters and newlines inside strings
    (escaped on the wire, or newline framing breaks), U+2028, astral characters (surrogate pairs
    when escaped), a 600 KB string (many reads), deep nesting; all come back as sent, in the reply
    and in defaults.changed."""
    app = open_session(adapter, broker, "app", ALPHA, ALPHA_TOKEN)
    watcher = open_session(adapter, broker, "extension", ALPHA_WIDGET, WIDGET_TOKEN)
    try:
        watcher.call("defaults.watch", {"group": ALPHA_GROUP})
        nested = "leaf"
        for _ in range(60):
            nested = {"n": [nested]}
        controls = "".join(c for c in "\u0001\u001f" if c not in getattr(adapter, "cannot_send", ""))
        values = {
            "text": "line1\nline2\r\n\ttab \"quoted\" back\\slash " + controls + " \u2028\u2029 /slash",
            "astral": "\U0001F600 \U0001D11E \u00e9\u0301 \u4e2d\u6587 \ufeff",
            "big": ("0123456789abcdef\u00e9" * 36000),
            "nested": nested,
            "numbers": [0, -1, 2**53, 1.5, -0.25, 1e-7, 12345678.125],
        }
        version = 0
        for key, value in values.items():
            r = app.call("defaults.set", {"group": ALPHA_GROUP, "key": key, "value": value})
            version += 1
            Check.eq(r.get("version"), version, f"defaults.set {key}")
            g = app.call("defaults.get", {"group": ALPHA_GROUP, "key": key})
            Check.true(g.get("value") == value, f"defaults.get {key}: value changed on the way "
                                                f"({str(g.get('value'))[:80]!r}...)")
            c = next_notification(watcher, "defaults.changed")
            Check.eq((c.get("key"), c.get("version")), (key, version), f"defaults.changed {key}")
            Check.true(c.get("value") == value, f"defaults.changed {key}: value changed on the way")
        listed = app.call("defaults.list", {"group": ALPHA_GROUP})
        Check.eq(sorted(listed.get("values", {})), sorted(values), "defaults.list keys")
        # A URL with every reserved character class, through url.open into app.event.
        Check.eq(app.call("app.subscribe", {}), {"pending": 0}, "subscribe")
        url = "interop-alpha://h/p%20a/th;x=1?q=a%26b&r=%E2%9C%93&s=/?#frag%23"
        r = app.call("url.open", {"url": url})
        ev = next_notification(app, "app.event")
        Check.eq((ev.get("id"), ev.get("url"), ev.get("sourceApp")), (r["eventID"], url, ALPHA), "event url")
        app.call("app.ack", {"ids": [ev["id"]]})
    finally:
        app.close()
        watcher.close()


def id_kinds(adapter, broker):
    """String ids and number ids both come back as sent (where the library shows them)."""
    for ids in ("number", "string"):
        s = open_session(adapter, broker, ids=ids)
        try:
            for _ in range(3):
                s.call("broker.status")
                seen = s.last_ids()
                if seen is not None:
                    sent, received = seen
                    Check.eq(type(received), type(sent), f"{ids} id type")
                    Check.eq(received, sent, f"{ids} id")
                    Check.true(isinstance(sent, str if ids == "string" else int), f"sent id {sent!r}")
            expect_error(METHOD_NOT_FOUND, s.call, "no.such.method")
            seen = s.last_ids()
            if seen is not None:
                Check.eq(seen[1], seen[0], f"{ids} id of an error response")
        finally:
            s.close()


def batch(adapter, broker):
    """A batch: replies in order, notifications left out, each member validated on its own."""
    if not adapter.batches:
        return
    s = adapter.connect(broker.socket)
    try:
        out = s.batch([
            ("broker.status", None, 1),
            ("hello", {"role": "tool"}, "h-2"),
            ("url.canOpen", {"url": "interop-alpha://x"}, None),  # notification: no reply
            ("url.canOpen", {"url": "interop-alpha://x"}, 3),
            ("no.such.method", {}, "four"),
        ])
        Check.eq([r["id"] for r in out], [1, "h-2", 3, "four"], "batch reply ids, in order")
        Check.true("version" in out[0]["result"], "batch[0] result")
        Check.eq(out[1]["result"].get("role"), "tool", "batch[1] hello")
        Check.eq(out[2]["result"].get("app"), ALPHA, "batch[3] url.canOpen after hello in the same batch")
        Check.eq(out[3]["error"].code, METHOD_NOT_FOUND, "batch[4] error")
        # A batch of notifications gets no reply: the next call's reply is the next thing read.
        out2 = s.batch([("broker.status", None, None), ("url.canOpen", {"url": "interop-beta://"}, None)])
        Check.eq(out2, [], "reply to a batch of notifications")
        Check.true("version" in s.call("broker.status"), "call after a notification batch")
        Check.eq(s.unexpected(), [], "messages nobody asked for")
    finally:
        s.close()


SCENARIOS = [before_hello, hello_failures, tool_urls, app_events, pending_events, takeover, extension_share,
             tool_share, defaults_watch, payloads, id_kinds, batch]


def tests_for(adapter, scenarios=None):
    """The scenarios as test functions ``f(broker)`` for fixture.run_tests."""
    out = []
    for sc in scenarios or SCENARIOS:
        def t(broker, sc=sc):
            sc(adapter, broker)
        t.__name__ = sc.__name__
        out.append(t)
    return out
