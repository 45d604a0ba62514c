#!/usr/bin/env python3
"""Crash campaign for sharebroker: SIGKILL the broker at random moments under load, restart it
on the same state directory, and check that every answered write survived exactly, that nothing
unanswered is half-visible, and that no acked event comes back.

    python3 scripts/crash-campaign/crash_campaign.py [--rounds 100] [--seed N] [--seconds-per-round 0.3]

One state directory for the whole campaign. Each round: worker threads (URL openers, share
extension senders, two defaults writers, one subscribing app that acks and completes) run
against the broker; after a random delay it gets SIGKILL; it is restarted on the same state and a
checker compares what the broker shows with what it answered before the kill. Uncertain outcomes
(requests sent but not answered) are resolved at each check: whatever state is seen then becomes
the known state, and anything resolved as absent must never show up later.

Prints one line per round and a final line "N passed, N failed" (rounds). Exit status 0 when
every round passed, 1 on any violation (details and the broker log tail are printed), 2 on a
usage/setup error. Deterministic given --seed except for timing.
"""

import argparse
import base64
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "Clients" / "python"))

import sharebroker as sb  # noqa: E402
from sharebroker import BrokerError  # noqa: E402

APP = "com.crashcampaign.app"
EXT = "com.crashcampaign.app.share"
GROUP = "group.com.crashcampaign"
SCHEME = "crashapp"
CAS_KEY = "cas-counter"
ABSENT = object()

MANIFEST = {
    "bundleID": APP,
    "name": "Crash campaign app",
    "urlSchemes": [SCHEME],
    "appGroups": [GROUP],
    "extensions": [{
        "bundleID": EXT, "point": "com.apple.share-services", "name": "Crash campaign share",
        "appGroups": [GROUP], "activationRule": "TRUEPREDICATE",
    }],
}

# Errors that mean "the broker went away": the request is unanswered.
LOST = (sb.BrokerConnectionError, ConnectionError, TimeoutError, OSError)


def share_open_url(share_id):
    return f"{SCHEME}://open-from-share?share={share_id}"


# ------------------------------------------------------------------------------------------------
# Broker process


class Broker:
    def __init__(self, binary, sock, state, log_path):
        self.binary, self.sock, self.state, self.log_path = binary, sock, state, log_path
        self.proc = None

    def start(self, timeout=20.0):
        """Start and wait until this very process answers broker.status. Returns an error string
        or None."""
        log = open(self.log_path, "ab")
        log.write(f"---- campaign: starting broker at {time.strftime('%H:%M:%S')}\n".encode())
        log.flush()
        # Small journal segments (64 KiB): compaction (deleting segments, copying the few pending
        # records forward) runs many times per campaign, between the kills.
        self.proc = subprocess.Popen([self.binary, "serve", "--socket", self.sock, "--state", self.state,
                                      "--journal-segment-size", "65536"],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                return f"broker exited with status {rc} during start (recovery failed?)"
            try:
                with sb.Client(self.sock, timeout=2.0) as c:
                    st = c.broker_status()
                if st.get("pid") == self.proc.pid:
                    return None
            except (LOST + (BrokerError,)):
                pass
            time.sleep(0.02)
        return f"broker did not answer within {timeout:.0f} s of starting"

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def terminate(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def since_start(self):
        """The log lines written since the last start."""
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return []
        return text.rsplit("---- campaign: starting broker", 1)[-1].splitlines()

    def log_tail(self, n=40):
        try:
            lines = Path(self.log_path).read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])


# ------------------------------------------------------------------------------------------------
# Round records: what the workers sent and what was answered


class RoundLog:
    def __init__(self):
        self.lock = threading.Lock()
        self.opens_answered = []      # (url, eventID)
        self.opens_unanswered = []    # url
        self.sends_answered = []      # (marker, result)
        self.sends_unanswered = []    # marker
        self.deliveries = []          # event params, in order, all subscriptions
        self.acks_answered = []       # ids
        self.acks_unanswered = []     # ids
        self.completes_answered = []  # shareID
        self.completes_unanswered = []
        self.shares_seen = {}         # shareID -> share (share.get during the round)
        self.dflt_ops = []            # (thread, key, kind, value, answered, result)
        self.violations = []
        self.counts = {"opens": [0, 0], "sends": [0, 0], "dset": [0, 0], "acks": [0, 0]}

    def add(self, attr, value):
        with self.lock:
            getattr(self, attr).append(value)

    def count(self, what, answered):
        with self.lock:
            self.counts[what][0] += 1
            self.counts[what][1] += 1 if answered else 0

    def violate(self, msg):
        with self.lock:
            self.violations.append(msg)


class Model:
    """What the campaign knows the broker holds (resolved at each check)."""

    def __init__(self):
        self.ev_url = {}          # eventID -> url (never changes)
        self.ev_source = {}       # eventID -> sourceApp or None
        self.ev_pending = set()   # ids known to be pending
        self.ev_acked = set()     # ids acked (answered) or resolved absent: must never appear again
        self.url_status = {}      # url -> "unknown" | "live" | "dead"
        self.shares = {}          # marker -> dict(items=..., data=..., open=..., id=..., state=...)
        self.share_id_marker = {}
        self.share_events = set() # shareIDs for which an open-from-share event was ever seen
        self.dflt = {}            # key -> known value (ABSENT when removed)
        self.dflt_owner = {}      # key -> thread name
        self.group_version = 0


# ------------------------------------------------------------------------------------------------
# Workers


def run_opener(sock, name, rnd, rng, log, stop):
    n = 0
    try:
        c = sb.Client(sock, role="tool", timeout=15)
    except LOST + (BrokerError,):
        return
    with c:
        while not stop.is_set():
            n += 1
            url = f"{SCHEME}://open?m=r{rnd}-{name}-{n}&x={rng.randrange(10**9)}"
            log.add("opens_unanswered", url)   # provisional: moved when answered
            try:
                r = c.url_open(url)
            except BrokerError as e:
                log.violate(f"{name}: url.open {url} answered with error {e.code} {e.message}")
                log.count("opens", True)
                return
            except LOST:
                log.count("opens", False)
                return
            with log.lock:
                log.opens_unanswered.remove(url)
                log.opens_answered.append((url, r.get("eventID")))
            log.count("opens", True)
            if r.get("app") != APP or r.get("kind") != "openURL":
                log.violate(f"{name}: url.open {url} answered {r}")


def make_share(rnd, name, n, rng):
    marker = f"r{rnd}-{name}-{n}"
    data = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 17, 512, 4096])))
    items = [
        sb.url_item(f"https://example.com/share/{marker}?q={rng.randrange(10**6)}"),
        sb.text_item(f"text {marker} caf\u00e9 \u2603 {rng.randrange(10**6)}"),
        sb.data_item(data, f"{marker}.bin", type="public.data"),
    ]
    return marker, items, data, rng.random() < 0.3


def run_sender(sock, name, rnd, rng, log, stop, model_shares):
    n = 0
    try:
        c = sb.Client(sock, role="extension", bundle_id=EXT, timeout=15)
    except LOST + (BrokerError,):
        return
    with c:
        while not stop.is_set():
            n += 1
            marker, items, data, do_open = make_share(rnd, name, n, rng)
            with log.lock:
                model_shares[marker] = {"items": items, "data": data, "open": do_open, "id": None,
                                        "state": "unknown", "event": None}
                log.sends_unanswered.append(marker)
            try:
                r = c.share_send(items, open=True if do_open else None)
            except BrokerError as e:
                log.violate(f"{name}: share.send {marker} answered with error {e.code} {e.message}")
                log.count("sends", True)
                return
            except LOST:
                log.count("sends", False)
                return
            with log.lock:
                log.sends_unanswered.remove(marker)
                log.sends_answered.append((marker, r))
            log.count("sends", True)
            if do_open and not r.get("eventID"):
                log.violate(f"{name}: share.send {marker} with open answered without eventID: {r}")


def run_defaults(sock, name, rnd, rng, log, stop, removable, cas_only):
    n = 0
    last_version = -1
    try:
        c = sb.Client(sock, role="app", bundle_id=APP, timeout=15)
    except LOST + (BrokerError,):
        return
    with c:
        while not stop.is_set():
            n += 1
            roll = rng.random()
            if cas_only or roll < 0.2:
                # compare-and-set on the shared counter
                try:
                    g = c.defaults_get(GROUP, CAS_KEY)
                except LOST:
                    return
                cur = g.get("value") if g.get("exists") else {"n": 0}
                value = {"n": (cur or {}).get("n", 0) + 1, "by": f"r{rnd}-{name}-{n}"}
                op = [name, CAS_KEY, "cas", value, False, g["version"]]
                log.add("dflt_ops", op)
                try:
                    r = c.defaults_set(GROUP, CAS_KEY, value, if_version=g["version"])
                except BrokerError as e:
                    op[4] = True
                    op[2] = "conflict"
                    log.count("dset", True)
                    if e.code != sb.VERSION_CONFLICT:
                        log.violate(f"{name}: CAS answered with error {e.code} {e.message}")
                    continue
                except LOST:
                    log.count("dset", False)
                    return
                op[4], op[5] = True, (g["version"], r["version"])
                log.count("dset", True)
                if r["version"] != g["version"] + 1:
                    log.violate(f"{name}: CAS ifVersion={g['version']} answered version {r['version']} (expected +1)")
                ver = r["version"]
            elif roll < 0.3 and removable:
                key = removable.pop(rng.randrange(len(removable)))
                op = [name, key, "remove", ABSENT, False, None]
                log.add("dflt_ops", op)
                try:
                    r = c.defaults_remove(GROUP, key)
                except LOST:
                    log.count("dset", False)
                    return
                op[4], op[5] = True, r
                log.count("dset", True)
                if not r.get("removed"):
                    log.violate(f"{name}: defaults.remove {key} (a key answered as set) answered {r}")
                ver = r["version"]
            else:
                key = f"k-r{rnd}-{name}-{n}"
                value = {"m": key, "i": rng.randrange(-10**12, 10**12), "f": rng.random(),
                         "s": "\u00e9\u2603" * rng.randrange(3), "l": [True, None, rng.randrange(9)],
                         "nested": {"deep": [{"x": rng.randrange(100)}]}}
                op = [name, key, "set", value, False, None]
                log.add("dflt_ops", op)
                try:
                    r = c.defaults_set(GROUP, key, value)
                except LOST:
                    log.count("dset", False)
                    return
                op[4], op[5] = True, r
                log.count("dset", True)
                ver = r["version"]
            if ver <= last_version:
                log.violate(f"{name}: group version went back in answers: {last_version} then {ver}")
            last_version = ver


def run_subscriber(sock, rnd, rng, log, stop, acked_before):
    """Receives app.event, acks some (recording answered acks), completes some shares, and now
    and then re-subscribes on a fresh connection. Flags an acked (answered) id delivered again."""
    acked = set(acked_before)   # ids whose ack was answered (this round or before)
    subno = 0
    while not stop.is_set():
        subno += 1
        try:
            c = sb.Client(sock, role="app", bundle_id=APP, timeout=15)
            c.app_subscribe()
        except LOST + (BrokerError,):
            return
        seen = set()
        to_ack = []
        with c:
            while not stop.is_set():
                try:
                    ev = c.next_event(timeout=0.02)
                except LOST:
                    return
                if ev is not None:
                    eid = ev.get("id")
                    log.add("deliveries", dict(ev, _sub=subno))
                    if eid in seen:
                        log.violate(f"subscriber: event {eid} delivered twice in one subscription: {ev}")
                    if eid in acked:
                        log.violate(f"subscriber: event {eid} delivered again after its ack was answered: {ev}")
                    seen.add(eid)
                    if rng.random() < 0.7:
                        to_ack.append(eid)
                    sid = ev.get("shareID")
                    if sid and rng.random() < 0.5:
                        try:
                            share = c.share_get(sid)
                            with log.lock:
                                log.shares_seen[sid] = share
                        except BrokerError as e:
                            if e.code != sb.NOT_FOUND:
                                log.violate(f"subscriber: share.get {sid} error {e.code} {e.message}")
                        except LOST:
                            return
                        else:
                            log.add("completes_unanswered", sid)
                            try:
                                c.share_complete(sid)
                            except BrokerError as e:
                                log.violate(f"subscriber: share.complete {sid} error {e.code} {e.message}")
                                return
                            except LOST:
                                return
                            with log.lock:
                                log.completes_unanswered.remove(sid)
                                log.completes_answered.append(sid)
                if to_ack and (ev is None or len(to_ack) >= rng.randrange(1, 6)):
                    ids, to_ack = to_ack, []
                    log.add("acks_unanswered", ids)
                    try:
                        r = c.app_ack(ids)
                    except LOST:
                        log.count("acks", False)
                        return
                    with log.lock:
                        log.acks_unanswered.remove(ids)
                        log.acks_answered.append(ids)
                    log.count("acks", True)
                    acked.update(ids)
                    if r.get("acked") != len(ids):
                        log.violate(f"subscriber: app.ack {ids} (all delivered, none acked before) answered {r}")
                if rng.random() < 0.03:
                    break   # re-subscribe on a new connection: unacked events come again


# ------------------------------------------------------------------------------------------------
# Checks after the restart


class Checker:
    def __init__(self, sock, state, model, rng):
        self.sock, self.state, self.model, self.rng = sock, Path(state), model, rng

    def check(self, log, v_start):
        m = self.model
        bad = list(log.violations)
        issued_urls = set(log.opens_unanswered) | {u for u, _ in log.opens_answered}
        for u in issued_urls:
            m.url_status.setdefault(u, "unknown")

        # -- store health
        with sb.Client(self.sock, timeout=15) as c:
            st = c.broker_status()
        q = (st.get("store") or {}).get("quarantinedRecords")
        if q != 0:
            bad.append(f"broker.status store.quarantinedRecords = {q} (SIGKILL must never corrupt a record): {st.get('store')}")

        # -- shares: resolve sends
        for marker, r in log.sends_answered:
            s = m.shares[marker]
            s["id"], s["state"], s["event"] = r["shareID"], "live", r.get("eventID")
            m.share_id_marker[r["shareID"]] = marker
            if r.get("eventID"):
                self._learn_event(bad, r["eventID"], share_open_url(r["shareID"]), EXT, "share.send answer")
                if r["eventID"] not in m.ev_acked:
                    m.ev_pending.add(r["eventID"])
        for sid, share in log.shares_seen.items():
            self._adopt_share(bad, share, "share.get during the round")
        with sb.Client(self.sock, role="app", bundle_id=APP, timeout=15) as c:
            listed = c.share_list(GROUP)["shares"]
        listed_ids = set()
        for share in listed:
            listed_ids.add(share.get("shareID"))
            self._adopt_share(bad, share, "share.list after the restart", check_files=True)
        # -- events: answered opens
        for url, eid in log.opens_answered:
            self._learn_event(bad, eid, url, None, "url.open answer")
            m.url_status[url] = "live"
            if eid not in m.ev_acked:
                m.ev_pending.add(eid)
        # -- deliveries during the round
        for ev in log.deliveries:
            self._check_event_shape(bad, ev, "delivered during the round")
        for ids in log.acks_answered:
            for i in ids:
                m.ev_acked.add(i)
                m.ev_pending.discard(i)
        maybe_acked = {i for ids in log.acks_unanswered for i in ids}

        # -- pending events after the restart
        pending = self._drain(bad)
        for eid, ev in pending.items():
            if eid in m.ev_acked:
                bad.append(f"event {eid} is pending after the restart but its ack was answered (or it was seen absent before): {ev}")
                continue
            self._check_event_shape(bad, ev, "pending after the restart")
            m.ev_pending.add(eid)
        for eid in sorted(m.ev_pending - set(pending), key=_evkey):
            if eid in maybe_acked:
                m.ev_pending.discard(eid)
                m.ev_acked.add(eid)
            else:
                bad.append(f"event {eid} ({m.ev_url.get(eid)}) was answered/known pending and not acked, but is missing after the restart")
                m.ev_pending.discard(eid)
                m.ev_acked.add(eid)
        for u, s in m.url_status.items():
            if s == "unknown":
                m.url_status[u] = "dead"   # never answered, never seen: must never appear

        # -- shares after the restart (listed and adopted above)
        completed = set(log.completes_answered)
        maybe_completed = set(log.completes_unanswered)
        for marker, s in m.shares.items():
            if s["state"] == "live" and s["id"] not in listed_ids:
                if s["id"] in completed or s["id"] in maybe_completed:
                    s["state"] = "gone"
                else:
                    bad.append(f"share {s['id']} ({marker}) was answered and never completed, but is missing after the restart")
                    s["state"] = "gone"
            elif s["state"] == "live" and s["id"] in completed:
                bad.append(f"share {s['id']} ({marker}): share.complete was answered, but it is listed after the restart")
            elif s["state"] == "unknown":
                s["state"] = "dead"
        for marker, s in m.shares.items():
            # a share sent with open that is whole must have its open-from-share event (same send)
            if s["open"] and s["id"] in listed_ids and s["id"] not in m.share_events and s["state"] == "live" \
                    and marker in set(log.sends_unanswered):
                bad.append(f"half-visible share.send (unanswered, open: true): share {s['id']} ({marker}) is whole but its open-from-share event never appeared")
        files = self.state / "groups" / GROUP / "files"
        if files.is_dir():
            extra = sorted(p.name for p in files.iterdir() if p.name not in listed_ids)
            if extra:
                bad.append(f"files without a pending share record under {files}: {extra[:10]}")

        # -- defaults after the restart
        with sb.Client(self.sock, role="app", bundle_id=APP, timeout=15) as c:
            dl = c.defaults_list(GROUP)
        values, version = dl["values"], dl["version"]
        alternatives = {}
        incr, unanswered = 0, 0
        answered_max = v_start
        cas_known = None  # (version, value)
        for thread, key, kind, value, answered, res in log.dflt_ops:
            if kind == "conflict":
                continue
            if not answered:
                unanswered += 1
                alternatives.setdefault(key, []).append(value)
                continue
            if kind == "cas":
                incr += 1
                answered_max = max(answered_max, res[1])
                if cas_known is None or res[1] > cas_known[0]:
                    cas_known = (res[1], value)
            elif kind == "set":
                incr += 1
                answered_max = max(answered_max, res["version"])
                m.dflt[key] = value
                m.dflt_owner[key] = thread
            elif kind == "remove":
                incr += 1 if res.get("removed") else 0
                answered_max = max(answered_max, res["version"])
                m.dflt[key] = ABSENT
        if cas_known is not None:
            m.dflt[CAS_KEY] = cas_known[1]
        for key in set(m.dflt) | set(alternatives) | set(values):
            seen = values.get(key, ABSENT)
            known = m.dflt.get(key, ABSENT)
            ok = [known] + alternatives.get(key, [])
            if not any(_same(seen, v) for v in ok):
                bad.append(f"defaults key {key!r}: after the restart {_show(seen)}, expected {_show(known)}"
                           + (f" or (unanswered) {[_show(v) for v in alternatives.get(key, [])]}" if key in alternatives else ""))
            m.dflt[key] = seen
        if version < answered_max or version < m.group_version:
            bad.append(f"group version went back: {version} after the restart; answered up to {answered_max}, seen before {m.group_version}")
        if not (v_start + incr <= version <= v_start + incr + unanswered):
            bad.append(f"group version {version} after the restart: at the round's start {v_start}, {incr} answered changes, {unanswered} unanswered writes")
        m.group_version = max(m.group_version, version)
        return bad

    # ----------------------------------------------------------------------------------------

    def _learn_event(self, bad, eid, url, source, where):
        m = self.model
        if eid in m.ev_url and m.ev_url[eid] != url:
            bad.append(f"event id {eid} reused: {where} says {url}, known as {m.ev_url[eid]}")
        m.ev_url.setdefault(eid, url)
        m.ev_source.setdefault(eid, source)

    def _check_event_shape(self, bad, ev, where):
        m = self.model
        eid, url = ev.get("id"), ev.get("url")
        if ev.get("kind") != "openURL" or not isinstance(url, str) or ev.get("via") != "scheme":
            bad.append(f"malformed event {where}: {ev}")
            return
        if eid in m.ev_url:
            if m.ev_url[eid] != url:
                bad.append(f"event {eid} {where} has url {url}, but it was answered/seen as {m.ev_url[eid]}")
            if m.ev_source.get(eid) != ev.get("sourceApp"):
                bad.append(f"event {eid} {where} has sourceApp {ev.get('sourceApp')}, expected {m.ev_source.get(eid)}")
            if ev.get("shareID"):
                m.share_events.add(ev["shareID"])
            return
        # an event nobody was answered about: must come from an unanswered request, whole
        if url.startswith(share_open_url("")):
            sid = url[len(share_open_url("")):]
            marker = m.share_id_marker.get(sid)
            if ev.get("shareID") != sid or ev.get("sourceApp") != EXT:
                bad.append(f"event {eid} {where}: open-from-share event malformed: {ev}")
            if marker is None:
                bad.append(f"half-visible share.send: event {eid} {where} opens share {sid}, which was never answered nor seen whole")
            elif not m.shares[marker]["open"]:
                bad.append(f"event {eid} {where} opens share {sid} ({marker}), which was sent without open")
            m.share_events.add(sid)
        else:
            st = m.url_status.get(url)
            if st is None:
                bad.append(f"event {eid} {where} has url {url}, which no opener ever sent")
            elif st == "dead":
                bad.append(f"event {eid} {where} has url {url}, whose unanswered url.open was absent at an earlier check (ghost)")
            elif st == "live":
                bad.append(f"event {eid} {where} has url {url}, which already belongs to another event (duplicate)")
            if ev.get("sourceApp") is not None:
                bad.append(f"event {eid} {where}: tool-opened URL has sourceApp {ev.get('sourceApp')}")
            m.url_status[url] = "live"
        m.ev_url[eid] = url
        m.ev_source[eid] = ev.get("sourceApp")

    def _adopt_share(self, bad, share, where, check_files=False):
        m = self.model
        sid = share.get("shareID")
        items = share.get("items") or []
        text = items[1].get("text", "") if len(items) > 1 else ""
        parts = text.split(" ")
        marker = parts[1] if len(parts) > 1 else None
        s = m.shares.get(marker)
        if s is None:
            bad.append(f"share {sid} {where}: not sent by this campaign or not whole: {share}")
            return
        if s["id"] is not None and s["id"] != sid:
            bad.append(f"share {where} for {marker} has id {sid}, but share.send answered {s['id']}")
            return
        if s["state"] in ("dead", "gone"):
            bad.append(f"share {sid} ({marker}) {where}: it was absent (or completed) at an earlier check, now it is back")
        sent = s["items"]
        ok = (len(items) == 3 and items[0].get("url") == sent[0]["url"] and items[1].get("text") == sent[1]["text"]
              and items[2].get("name") == sent[2]["name"] and items[2].get("size") == len(s["data"])
              and items[2].get("type") == "public.data" and share.get("group") == GROUP
              and share.get("extension") == EXT)
        if not ok:
            bad.append(f"share {sid} ({marker}) {where} is not exactly what was sent: got {share}, sent {sent}")
        if check_files and ok:
            p = items[2].get("path")
            try:
                content = Path(p).read_bytes()
            except OSError as e:
                bad.append(f"share {sid} ({marker}) {where}: file {p} unreadable: {e}")
            else:
                if content != s["data"]:
                    bad.append(f"share {sid} ({marker}) {where}: file {p} has {len(content)} bytes, differing from the {len(s['data'])} sent")
        if s["id"] is None:
            s["id"] = sid
            m.share_id_marker[sid] = marker
        if s["state"] == "unknown":
            s["state"] = "live"

    def _drain(self, bad):
        """Subscribe and read every pending event; returns id -> event."""
        out = {}
        with sb.Client(self.sock, role="app", bundle_id=APP, timeout=15) as c:
            n = c.app_subscribe()["pending"]
            while len(out) < n:
                ev = c.next_event(timeout=10)
                if ev is None:
                    bad.append(f"app.subscribe said {n} pending but only {len(out)} arrived")
                    break
                if ev["id"] in out:
                    bad.append(f"event {ev['id']} delivered twice on subscribe after the restart")
                out[ev["id"]] = ev
            extra = c.next_event(timeout=0.05)
            if extra is not None:
                bad.append(f"more events than app.subscribe's pending count {n}: {extra}")
        return out

    def tidy(self, bad, keep_events=0.3, keep_shares=0.3, cap=300):
        """Ack most pending events and complete most shares (answered), keeping some across rounds;
        then verify the pending set is exactly the kept set."""
        m, rng = self.model, self.rng
        pend = sorted(m.ev_pending, key=_evkey)
        keep = [e for e in pend if rng.random() < keep_events][-cap:]
        ack = [e for e in pend if e not in set(keep)]
        live = sorted((s["id"] for s in m.shares.values() if s["state"] == "live"))
        done = [sid for sid in live if rng.random() >= keep_shares or len(live) > cap]
        with sb.Client(self.sock, role="app", bundle_id=APP, timeout=15) as c:
            if ack:
                r = c.app_ack(ack)
                if r.get("acked") != len(ack):
                    bad.append(f"checker: app.ack of {len(ack)} pending ids answered {r}")
                m.ev_pending.difference_update(ack)
                m.ev_acked.update(ack)
            for sid in done:
                c.share_complete(sid)
                m.shares[m.share_id_marker[sid]]["state"] = "gone"
        got = set(self._drain(bad))
        if got != m.ev_pending:
            bad.append(f"after the checker's ack, pending is {sorted(got - m.ev_pending, key=_evkey)[:10]} extra / "
                       f"{sorted(m.ev_pending - got, key=_evkey)[:10]} missing")
        return bad


def _evkey(e):
    try:
        return int(str(e).split("-")[-1])
    except ValueError:
        return 0


def _same(a, b):
    if a is ABSENT or b is ABSENT:
        return a is b
    return a == b and type(a) is type(b)


def _show(v):
    return "(absent)" if v is ABSENT else repr(v)


# ------------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    ap.add_argument("--seconds-per-round", type=float, default=0.3,
                    help="upper bound of the random delay before SIGKILL (default 0.3)")
    ap.add_argument("--openers", type=int, default=2)
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--workdir", help="campaign directory (default: a temporary one, removed on success)")
    ap.add_argument("--keep", action="store_true", help="keep the campaign directory")
    ap.add_argument("--bin", default=os.environ.get("SHAREBROKER_BIN") or str(REPO / ".build" / "debug" / "sharebroker"))
    args = ap.parse_args(argv)
    if not os.access(args.bin, os.X_OK):
        print(f"crash campaign: broker binary not found: {args.bin} (build with `swift build` or set SHAREBROKER_BIN)", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="sb-crash-"))
    state = work / "state"
    (state / "apps").mkdir(parents=True, exist_ok=True)
    import json
    (state / "apps" / "10-crash.json").write_text(json.dumps(MANIFEST, indent=1))
    sock = str(work / "sb.sock")
    broker = Broker(args.bin, sock, str(state), str(work / "broker.log"))
    model = Model()
    checker = Checker(sock, state, model, random.Random(f"{seed}-checker"))
    print(f"crash campaign: seed {seed}, {args.rounds} rounds, kill within {args.seconds_per_round}s, state {state}", flush=True)

    t0 = time.monotonic()
    passed = failed = 0
    err = broker.start()
    if err:
        print(f"FAIL: initial start: {err}\n--- broker log tail:\n{broker.log_tail()}")
        print(f"0 passed, {args.rounds} failed")
        return 1
    aborted = False
    torn = 0
    for rnd in range(1, args.rounds + 1):
        delay = rng.uniform(0.01, args.seconds_per_round)
        rr = lambda who: random.Random(f"{seed}-{rnd}-{who}")  # noqa: E731
        log, stop = RoundLog(), threading.Event()
        v_start = model.group_version
        removable = [k for k, v in sorted(model.dflt.items()) if k != CAS_KEY and v is not ABSENT and model.dflt_owner.get(k) == "dA"]
        threads = []
        for i in range(args.openers):
            threads.append(threading.Thread(target=run_opener, args=(sock, f"o{i}", rnd, rr(f"o{i}"), log, stop)))
        for i in range(args.senders):
            threads.append(threading.Thread(target=run_sender, args=(sock, f"s{i}", rnd, rr(f"s{i}"), log, stop, model.shares)))
        threads.append(threading.Thread(target=run_defaults, args=(sock, "dA", rnd, rr("dA"), log, stop, removable, False)))
        threads.append(threading.Thread(target=run_defaults, args=(sock, "dB", rnd, rr("dB"), log, stop, [], True)))
        threads.append(threading.Thread(target=run_subscriber, args=(sock, rnd, rr("sub"), log, stop, set(model.ev_acked))))
        for t in threads:
            t.daemon = True
            t.start()
        time.sleep(delay)
        broker.kill()
        stop.set()
        for t in threads:
            t.join(30)
            if t.is_alive():
                log.violate(f"worker {t.name} did not stop within 30 s after the kill")
        err = broker.start()
        if err:
            bad = [f"restart after kill: {err}"]
            aborted = True
        else:
            try:
                bad = checker.check(log, v_start)
                checker.tidy(bad)
                # checksum failures in any journal (events, shares, defaults) are corruption; torn
                # tails (an incomplete last record) are allowed and only counted
                for ln in broker.since_start():
                    if "failed their checksum" in ln or "damaged records quarantined" in ln:
                        bad.append(f"damaged record after SIGKILL: {ln}")
                    elif "torn tail" in ln and "truncated a torn tail" in ln:
                        torn += 1
            except (BrokerError,) + LOST as e:
                bad = [f"checker failed talking to the restarted broker: {e!r}"]
        c = log.counts
        line = (f"round {rnd}/{args.rounds}: kill after {delay:.3f}s; answered opens {c['opens'][1]}/{c['opens'][0]}, "
                f"shares {c['sends'][1]}/{c['sends'][0]}, defaults writes {c['dset'][1]}/{c['dset'][0]}, "
                f"acks {c['acks'][1]}/{c['acks'][0]}; pending events {len(model.ev_pending)}, "
                f"pending shares {sum(1 for s in model.shares.values() if s['state'] == 'live')}, "
                f"group version {model.group_version}: ")
        if bad:
            failed += 1
            print(line + f"FAIL ({len(bad)} violations)", flush=True)
            for b in bad[:50]:
                print(f"  - {b}")
            if len(bad) > 50:
                print(f"  ... and {len(bad) - 50} more")
            print("  --- broker log tail:")
            print("  " + broker.log_tail().replace("\n", "\n  "), flush=True)
        else:
            passed += 1
            print(line + "ok", flush=True)
        if aborted:
            failed += args.rounds - rnd
            print(f"crash campaign aborted: the broker does not start on the campaign's state ({state})")
            break
    broker.terminate()
    print(f"crash campaign: seed {seed}, {time.monotonic() - t0:.1f}s, {torn} torn journal tails truncated at recovery", flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    if failed == 0 and not args.workdir and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    elif failed:
        print(f"campaign directory kept: {work}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
