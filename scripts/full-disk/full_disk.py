#!/usr/bin/env python3
"""Full-disk check for sharebroker (issue 8): run the broker with its state directory on a small
tmpfs, fill the disk through the broker's own write methods, and check end to end that

  * every write the broker could not store is answered exactly -32005, with a message that
    names the cause (ENOSPC, "No space left on device") and says nothing was stored;
  * the broker stays up and keeps answering reads (and new sessions) while the disk is full;
  * after SIGKILL and a restart on the same (still full) state, everything that was answered is
    there exactly as answered (events, shares with their files' bytes, defaults and the group
    version) and nothing that got -32005 is visible (no event, no share, no files directory,
    no changed defaults value);
  * two edge cases of a full disk hold: share.send {open: true} refused because the event queue
    is full, where the take-back of its share cannot be journaled either (the take-back probe),
    and a defaults compaction that cannot get space (the compaction probe);
  * once space is freed (share.complete / app.ack through the broker, and a remount of the tmpfs
    to a larger size), writes succeed again without restarting the broker, and survive one more
    SIGKILL.

    python3 scripts/full-disk/full_disk.py [--broker PATH] [--size 8M] [--require] [--strict]
                                           [--no-takeback-probe] [--keep] [--seed N] [-v]

Needs root (mount -t tmpfs). Without root, or when the mount fails, it prints
"full-disk: skipped: <why>" and exits 0, unless --require is given (then exit 1).
Prints "full-disk: N checks passed, M failed" at the end; exit 0 when nothing failed, 1 on any
failed check, 2 on a setup error (no broker binary, broker does not start on an empty state).
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "Clients" / "python"))

import sharebroker as sb  # noqa: E402
from sharebroker import BrokerError  # noqa: E402

APP = "com.fulldisk.app"
EXT = "com.fulldisk.app.share"
GROUP = "group.com.fulldisk"
GROUP2 = "group.com.fulldisk.compaction"    # one key overwritten with large values (compaction)
SCHEME = "fulldiskapp"

MANIFEST = {
    "bundleID": APP,
    "name": "Full-disk check app",
    "urlSchemes": [SCHEME],
    "appGroups": [GROUP, GROUP2],
    "extensions": [{
        "bundleID": EXT, "point": "com.apple.share-services", "name": "Full-disk share",
        "appGroups": [GROUP], "activationRule": "TRUEPREDICATE",
    }],
}

LOST = (sb.BrokerConnectionError, ConnectionError, TimeoutError, OSError)
KiB = 1024
MiB = 1024 * 1024


class SetupError(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# Checks


class Checks:
    def __init__(self, verbose):
        self.verbose = verbose
        self.passed = 0
        self.failures = []
        self.notes = []

    def check(self, cond, what, detail=None):
        if cond:
            self.passed += 1
            if self.verbose:
                print(f"  ok    {what}")
        else:
            msg = what if detail is None else f"{what}: {detail}"
            self.failures.append(msg)
            print(f"  FAIL  {msg}")
        return bool(cond)

    def equal(self, got, want, what):
        return self.check(got == want, what, None if got == want else f"got {short(got)}, expected {short(want)}")

    def note(self, msg):
        self.notes.append(msg)
        print(f"  note  {msg}")


def short(v, n=300):
    s = repr(v)
    return s if len(s) <= n else s[:n] + f"... ({len(s)} chars)"


def phase(title):
    print(f"== {title}")


# ------------------------------------------------------------------------------------------------
# tmpfs and the broker process


def parse_size(text):
    t = text.strip().lower()
    mult = 1
    if t and t[-1] in "kmg":
        mult = {"k": KiB, "m": MiB, "g": 1024 * MiB}[t[-1]]
        t = t[:-1]
    try:
        n = int(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8M, 6144K, 8388608)")
    if n < 4 * MiB or n > 256 * MiB:
        raise argparse.ArgumentTypeError(f"--size must be between 4M and 256M, got {text}")
    return n


def run(cmd):
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout.strip()


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class Broker:
    def __init__(self, binary, sock, state, log_path):
        self.binary, self.sock, self.state, self.log_path = binary, sock, state, log_path
        self.proc = None
        self.starts = 0

    def start(self, timeout=20.0):
        """Starts the broker and waits until this very process answers. Returns None or an error."""
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"---- full-disk: start #{self.starts} at {time.strftime('%H:%M:%S')}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--socket", self.sock, "--state", self.state, "--log-level", "info"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                return f"broker exited with status {rc} while starting"
            try:
                with sb.Client(self.sock, timeout=2.0) as c:
                    if c.broker_status().get("pid") == self.proc.pid:
                        return None
            except LOST + (BrokerError,):
                pass
            time.sleep(0.02)
        return f"broker did not answer within {timeout:.0f} s of starting"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self):
        """SIGTERM; returns the exit status (SIGKILL after 10 s)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log_since_start(self):
        try:
            text = Path(self.log_path).read_text(errors="replace")
        except OSError:
            return []
        return text.rsplit("---- full-disk: start", 1)[-1].splitlines()[1:]

    def log_tail(self, n=40):
        try:
            lines = Path(self.log_path).read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])


# ------------------------------------------------------------------------------------------------
# What the broker answered


class Model:
    def __init__(self):
        self.events = {}            # eventID -> {"url": ..., "shareID"?: ...} (answered, not acked)
        self.acked = set()          # eventIDs whose app.ack was answered
        self.failed_urls = []       # url.open answered -32005
        self.shares = {}            # shareID -> {"marker", "url", "text", "data", "name", "eventID"?}
        self.completed = set()      # shareIDs whose share.complete was answered
        self.failed_markers = []    # share.send answered -32005 (their text marker)
        self.leaked_shares = []     # answered -32005 but stored all the same (a broker bug, reported once)
        self.defaults = {}          # key -> value (answered)
        self.version = 0            # the group's version in the last answered write
        self.failed_defaults = []   # (op, key, value) answered -32005
        self.g2 = {"values": {}, "version": 0, "failed": []}   # the same for GROUP2
        self.storage_errors = []    # (method, message) of every -32005
        self.other_errors = []      # (method, code, message): anything else is a failure
        self.counts = {}            # method -> [answered ok, -32005]

    def count(self, method, ok):
        c = self.counts.setdefault(method, [0, 0])
        c[0 if ok else 1] += 1


def unique(n=8):
    return "".join(random.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(n))


class Driver:
    """Writes through the broker and records every answer in the model."""

    def __init__(self, sock, model, checks):
        self.sock, self.m, self.c = sock, model, checks
        self.n = 0
        self.tool = sb.Client(sock, role="tool", timeout=30)
        self.ext = sb.Client(sock, role="extension", bundle_id=EXT, timeout=30)
        self.app = sb.Client(sock, role="app", bundle_id=APP, timeout=30)   # defaults, shares (reads)
        self.live = None        # an app.subscribe connection read after every write, when set
        self.live_got = []

    def poll_live(self):
        if self.live is None:
            return
        while True:
            ev = self.live.next_event(timeout=0.001)
            if ev is None:
                return
            self.live_got.append(ev)

    def close(self):
        for cl in (self.tool, self.ext, self.app):
            try:
                cl.close()
            except Exception:
                pass

    def _error(self, method, e):
        """Classifies an error answer; returns True for -32005."""
        if e.code == sb.STORAGE_FAILURE:
            self.m.storage_errors.append((method, e.message))
            self.m.count(method, False)
            return True
        self.m.other_errors.append((method, e.code, e.message))
        self.c.check(False, f"{method} answered only success or -32005", f"got {e.code} {e.message!r}")
        return False

    # url.open, several in one batch (one loop turn, one group commit)
    def open_urls(self, count, pad):
        urls = []
        for _ in range(count):
            self.n += 1
            urls.append(f"{SCHEME}://open?n={self.n}&m={unique()}&pad={'p' * pad}")
        answers = self.tool.batch([("url.open", {"url": u}) for u in urls])
        failed = 0
        for u, a in zip(urls, answers):
            if isinstance(a, BrokerError):
                if self._error("url.open", a):
                    self.m.failed_urls.append(u)
                failed += 1
            else:
                self.m.count("url.open", True)
                self.c.check(a.get("app") == APP and isinstance(a.get("eventID"), str) and a["eventID"] not in self.m.events,
                             "url.open answers a new eventID for the app", short(a))
                self.m.events[a["eventID"]] = {"url": u}
        self.poll_live()
        return failed

    def send_share(self, data_size=0, text_size=0, open_app=False):
        """share.send with a URL item, a text item carrying a unique marker (padded to text_size),
        and, when data_size > 0, an inline file. Returns True when answered ok."""
        self.n += 1
        marker = f"fulldisk-share-{self.n}-{unique()}"
        text = marker if text_size <= len(marker) else marker + " " + "t" * (text_size - len(marker) - 1)
        url = f"https://example.com/fulldisk/{self.n:08d}"     # fixed width: record sizes are predictable
        items = [sb.url_item(url), sb.text_item(text)]
        data, name = None, None
        self.last = {"marker": marker, "url": url, "text": text}
        if data_size > 0:
            data = os.urandom(data_size)
            name = f"fill-{self.n}.bin"
            items.append(sb.data_item(data, name, type="public.data"))
        self.last.update(data=data, name=name)
        try:
            r = self.ext.share_send(items, open=True if open_app else None)
        except BrokerError as e:
            if self._error("share.send", e):
                self.m.failed_markers.append(marker)
            self.poll_live()
            return False
        self.poll_live()
        self.m.count("share.send", True)
        sid = r.get("shareID")
        self.c.check(isinstance(sid, str) and sid not in self.m.shares and r.get("group") == GROUP,
                     "share.send answers a new shareID in the group", short(r))
        rec = {"marker": marker, "url": url, "text": text, "data": data, "name": name}
        if open_app:
            ev = r.get("eventID")
            if self.c.check(isinstance(ev, str) and ev not in self.m.events, "share.send {open} answers a new eventID", short(r)):
                rec["eventID"] = ev
                self.m.events[ev] = {"url": f"{SCHEME}://open-from-share?share={sid}", "shareID": sid}
        self.m.shares[sid] = rec
        return True

    def set_default(self, key, value, group=GROUP):
        try:
            r = self.app.defaults_set(group, key, value)
        except BrokerError as e:
            if self._error("defaults.set", e):
                if group == GROUP:
                    self.m.failed_defaults.append(("set", key, value))
                else:
                    self.m.g2["failed"].append(("set", key, value))
            return False
        self.m.count("defaults.set", True)
        v = r.get("version")
        previous = self.m.version if group == GROUP else self.m.g2["version"]
        self.c.check(isinstance(v, int) and v == previous + 1,
                     "defaults.set answers the next group version", f"got {v}, previous {previous}")
        if group == GROUP:
            self.m.version = v if isinstance(v, int) else previous
            self.m.defaults[key] = value
        else:
            self.m.g2["version"] = v if isinstance(v, int) else previous
            self.m.g2["values"][key] = value
        return True

    def remove_default(self, key):
        try:
            r = self.app.defaults_remove(GROUP, key)
        except BrokerError as e:
            if self._error("defaults.remove", e):
                self.m.failed_defaults.append(("remove", key, None))
            return False
        self.m.count("defaults.remove", True)
        if r.get("removed"):
            self.m.version = r.get("version", self.m.version)
            self.m.defaults.pop(key, None)
        return True


# ------------------------------------------------------------------------------------------------
# Phases


def fill(d, m, c, deadline):
    """Fills the tmpfs through the broker: each writer steps down through smaller sizes on -32005
    and is done when its smallest size got -32005 three times in a row."""
    def filler(name, sizes, attempt):
        i, streak, ok = 0, 0, 0
        while time.monotonic() < deadline:
            if attempt(sizes[i]):
                ok += 1
                streak = 0
                continue
            if i + 1 < len(sizes):
                i += 1
                continue
            streak += 1
            if streak >= 3:
                print(f"  {name}: {ok} answered ok, full at {sizes[-1]} bytes (free {free_bytes(d.state_root)} bytes)")
                return True
        c.check(False, f"{name}: the disk filled within the time budget")
        return False

    k = [0]

    def share_file(size):
        k[0] += 1
        return d.send_share(data_size=size, open_app=(k[0] % 3 == 0))

    def share_text(size):
        return d.send_share(text_size=size)

    def urls(pad):
        return d.open_urls(10, pad) == 0

    def dset(size):
        k[0] += 1
        return d.set_default(f"fill-{k[0]}", {"n": k[0], "blob": "d" * size, "list": [1, 2.50, "x\u00e9"]})

    filler("share.send with files", [256 * KiB, 64 * KiB, 16 * KiB, 4 * KiB, 100], share_file)
    filler("url.open", [8 * KiB, 1 * KiB, 50, 0], urls)
    if not d.skip_takeback_probe:
        open_share_probe(d, m, c)
    filler("share.send, text only", [64 * KiB, 8 * KiB, 1 * KiB, 100, 0], share_text)
    compaction_on_full_disk(d, m, c)
    filler("defaults.set", [128 * KiB, 16 * KiB, 1 * KiB, 10, 0], dset)


BIG_KEY = "big"


def big_value(n):
    return {"n": n, "blob": "b" * (128 * KiB)}


def compaction_on_full_disk(d, m, c):
    """The warm-up overwrote one key with 128 KiB values until its superseded records nearly
    reach the compaction threshold (1 MiB of dead records, and twice the live ones). One more
    overwrite, now that the disk is full, still fits the defaults journal's reservation and is
    answered, and then the broker tries to compact: it starts a new segment, and the sealed one
    gives back the space it had reserved (and zeroed) past its last record. The snapshot then
    usually fits and the old segment is deleted; when it does not, the compaction fails. Either
    way nothing may be lost or changed (checked after restarts)."""
    if not d.compaction_probe:
        return
    segs = lambda: sorted(p.name for p in Path(d.state, "groups", GROUP2).glob("defaults-*.log"))
    before = segs()
    n = 0
    while segs() == before and n < 4:
        n += 1
        if not d.set_default(BIG_KEY, big_value(100 + n), group=GROUP2):
            break
    # The snapshot is written off the loop: wait for its outcome (an error counted, or the
    # segments it replaces gone).
    deadline = time.monotonic() + 10
    while True:
        with sb.Client(d.sock, timeout=10) as t:
            st = t.broker_status()
        errors = st.get("defaults", {}).get("compactionErrors")
        if errors or segs() == before or not set(before) & set(segs()) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    print(f"  defaults compaction on the full disk ({GROUP2}): {n} overwrites of '{BIG_KEY}', "
          f"segments {before} -> {segs()}, broker.status.defaults.compactionErrors {errors}")
    if segs() == before:
        c.note("the defaults journal did not try to compact on the full disk (no new segment)")
    answered = d.set_default(BIG_KEY, {"n": -1}, group=GROUP2)
    if errors:
        # The journal now writes to the new segment, which has no reservation: refused.
        c.check(not answered, "after the failed compaction, defaults.set in that group is refused with -32005")
    elif segs() != before:
        # Compacted: the old segments are deleted; the snapshot's segment and the one after it
        # (where records went on meanwhile) are left.
        c.check(not set(before) & set(segs()) and len(segs()) <= 2,
                "compaction on the full disk leaves the snapshot and the segment after it alone",
                f"segments {before} -> {segs()}")


def active_journal(state, prefix):
    """(bytes written, bytes allocated) of a group journal's newest segment. Records end where
    the zeros start: the journal zero-fills ahead of its last record (so fdatasync need not
    update the file's size), and every record's payload ends with JSON's '}'."""
    segs = sorted(Path(state, "groups", GROUP).glob(prefix + "-*.log"))
    if not segs:
        return 0, 0
    st = segs[-1].stat()
    return len(segs[-1].read_bytes().rstrip(b"\0")), st.st_blocks * 512


def open_share_probe(d, m, c):
    """share.send {open: true} while the event queue is full and the disk too, but the group's
    share journal still has reserved room. The share's record is appended to the share journal's
    uncommitted batch first; appending its event then fails (no room can be reserved in the event
    journal), and the broker takes the share out of that batch again before anything is written:
    -32005, the share journal not one byte longer and no reservation more, no share listed, and
    (checked after the restarts) never one. (The other take-back, by a completion record when the
    event's commit fails after the share's record was written, needs a write that fails after its
    space was reserved: the fault-injection campaign and CompensationCommitTests drive it.)"""
    for size in (1000, 100):
        size0, alloc0 = active_journal(d.state, "shares")
        if alloc0 - size0 < size + 1024:
            c.note(f"share.send {{open}} probe skipped: only {alloc0 - size0} bytes reserved in the share journal")
            return
        errors = len(m.storage_errors)
        ok = d.send_share(text_size=size, open_app=True)
        # An error is answered at once, and the turn's commit of the share journal (which would
        # write whatever the request left in its batch) may still be under way.
        time.sleep(0.3)
        size1, alloc1 = active_journal(d.state, "shares")
        print(f"  share.send {{open}} ({size} B of text) with the event queue full: "
              f"{'answered' if ok else '-32005'}; the share journal {size0} -> {size1} bytes (reserved {alloc0} -> {alloc1})")
        if ok:
            c.note("share.send {open} was stored although the event queue was full; probe skipped")
            return
        msgs = [msg for _, msg in m.storage_errors[errors:]]
        c.check(len(msgs) == 1 and "/queues/" in msgs[0],
                "share.send {open} with the event queue full: -32005 naming the event journal", short(msgs))
        c.check(size1 == size0 and alloc1 == alloc0,
                "share.send {open} refused with -32005 for its event leaves the share journal as it was",
                f"{size0} -> {size1} bytes, reserved {alloc0} -> {alloc1}")
        rec = dict(d.last)
        listed = [sh for sh in d.app.share_list(GROUP)["shares"]
                  if any(it.get("text") == rec["text"] for it in sh["items"])]
        if not c.check(not listed, "share.send {open} refused with -32005 for its event: no share listed",
                       f"share {listed[0]['shareID'] if listed else ''} is listed"):
            # From here on the share counts as stored, so that the later checks (restart,
            # freeing) are not all about this one share.
            sid = listed[0]["shareID"]
            m.failed_markers.remove(rec["marker"])
            m.shares[sid] = rec
            m.leaked_shares.append(sid)


def check_storage_messages(c, m, start, when):
    """Every -32005 (from index `start` on) names the cause: ENOSPC, the file, that nothing was
    stored. The broker says e.g. "Storage failure: cannot reserve space in STATE/queues/
    events-000001.log: fallocate: No space left on device (errno 28); nothing was stored"."""
    errs = m.storage_errors[start:]
    if not errs:
        return
    bad = [(meth, msg) for meth, msg in errs
           if not ("No space left on device" in msg or "ENOSPC" in msg or "errno 28" in msg)]
    c.check(not bad, f"{when}: every -32005 message names the cause (No space left on device, errno 28)",
            f"{len(bad)} of {len(errs)} did not, e.g. {short(bad[:3])}")
    bad = [(meth, msg) for meth, msg in errs if not msg.startswith("Storage failure") or "nothing was" not in msg]
    c.check(not bad, f"{when}: every -32005 message says 'Storage failure: ...; nothing was stored/changed'",
            f"{len(bad)} did not, e.g. {short(bad[:3])}")
    bad = [(meth, msg) for meth, msg in errs if "/state/" not in msg]
    c.check(not bad, f"{when}: every -32005 message names the file in the state directory", f"e.g. {short(bad[:3])}")
    c.check(not m.other_errors, f"{when}: no write got an error other than -32005", short(m.other_errors[:5]))


def while_full(d, m, c, broker):
    """More writes of every kind while full: each -32005; the broker keeps answering reads."""
    # Remember two existing keys to overwrite / remove.
    keys = sorted(m.defaults)
    c.check(len(keys) >= 2, "some defaults.set were answered before the disk filled", f"{len(keys)} keys")
    before_errors = len(m.storage_errors)
    n_ev, n_sh, ver = len(m.events), len(m.shares), m.version
    results = {
        "url.open": d.open_urls(1, 100) == 0,
        "share.send (file)": d.send_share(data_size=4 * KiB),
        "share.send (file, open)": d.send_share(data_size=4 * KiB, open_app=True),
        "share.send (url + text)": d.send_share(text_size=200),
    }
    if keys:
        old = m.defaults[keys[0]]
        value = {"n": -1, "blob": "o" * 64, "list": [1, 2.50, "x\u00e9"]}   # larger than the last fill record
        results["defaults.set (overwrite)"] = d.set_default(keys[0], value)
        results["defaults.set (new key)"] = d.set_default("while-full-" + unique(), value)
        # A removal frees space: it may use the journal's headroom for space-freeing records, so
        # it succeeds on the full disk (as app.ack and share.complete do).
        removed_ok = d.remove_default(keys[-1])
        c.check(removed_ok, "while full: defaults.remove succeeds (it frees space)")
        if removed_ok:
            ver = m.version
        if not results["defaults.set (overwrite)"]:
            # The failed overwrite left the value and the version as they were.
            g = d.app.defaults_get(GROUP, keys[0])
            c.check(g.get("exists") and g.get("value") == old and g.get("version") == m.version,
                    "a failed defaults.set leaves the value and the version unchanged", short(g))
    for what, ok in results.items():
        c.check(not ok, f"while full: {what} is refused with -32005")
    c.check(len(m.storage_errors) > before_errors, "while full: the refusals are -32005")
    c.equal((len(m.events), len(m.shares), m.version), (n_ev, n_sh, ver), "while full: nothing new was stored")

    # Reads, sessions.
    c.check(broker.alive(), "the broker process is still running while the disk is full")
    try:
        with sb.Client(d.sock, timeout=10) as fresh:
            st = fresh.broker_status()
            c.equal(st.get("pendingEvents"), len(m.events), "while full: broker.status.pendingEvents = answered events")
            c.equal(st.get("pendingShares"), len(m.shares), "while full: broker.status.pendingShares = answered shares")
            fresh.hello("tool")
            co = fresh.url_can_open(f"{SCHEME}://x")
            c.check(co.get("canOpen") and co.get("app") == APP, "while full: url.canOpen answers", short(co))
            c.check(any(a["bundleID"] == APP for a in fresh.apps_list()["apps"]), "while full: apps.list answers")
        with sb.Client(d.sock, role="app", bundle_id=APP, timeout=10) as app2:
            check_shares(app2, m, c, "while full")
            check_defaults(app2, m, c, "while full")
            try:
                app2.share_get("sh-000000000000000000000000")
                c.check(False, "while full: share.get of an unknown id is -32002")
            except BrokerError as e:
                c.equal(e.code, sb.NOT_FOUND, "while full: share.get of an unknown id is -32002")
    except LOST as e:
        c.check(False, "while full: the broker answers reads on a new connection", repr(e))


def check_shares(client, m, c, when):
    listed = client.share_list(GROUP)["shares"]
    ids = [s["shareID"] for s in listed]
    want = sorted(sid for sid in m.shares if sid not in m.completed)
    c.equal(sorted(ids), want, f"{when}: share.list holds exactly the answered shares")
    c.equal(len(ids), len(set(ids)), f"{when}: share.list has no duplicates")
    markers = set()
    bad = []
    for s in listed:
        texts = [it.get("text") for it in s["items"] if "text" in it]
        markers.update(t.split(" ")[0] for t in texts if t)
        rec = m.shares.get(s["shareID"])
        if rec is None:
            continue
        problems = share_problems(client, s, rec)
        if problems:
            bad.append((s["shareID"], problems))
    c.check(not bad, f"{when}: every share is whole: items, file names, sizes and bytes as sent",
            f"{len(bad)} differ, e.g. {short(bad[:3])}")
    leaked = [mk for mk in m.failed_markers if mk in markers]
    c.check(not leaked, f"{when}: no share that got -32005 is visible", short(leaked[:5]))


def share_problems(client, s, rec):
    problems = []
    if s.get("extension") != EXT or s.get("app") != APP or s.get("group") != GROUP:
        problems.append(f"wrong owner {s.get('extension')}/{s.get('app')}/{s.get('group')}")
    items = s["items"]
    want = 3 if rec["data"] is not None else 2
    if len(items) != want:
        return problems + [f"{len(items)} items, expected {want}"]
    if items[0].get("url") != rec["url"]:
        problems.append(f"url item {short(items[0].get('url'))}")
    if items[1].get("text") != rec["text"]:
        problems.append(f"text item differs ({len(items[1].get('text') or '')} chars, expected {len(rec['text'])})")
    if rec["data"] is not None:
        f = items[2]
        path = f.get("path")
        if f.get("name") != rec["name"]:
            problems.append(f"file name {f.get('name')!r}, expected {rec['name']!r}")
        if f.get("size") != len(rec["data"]):
            problems.append(f"file size {f.get('size')}, expected {len(rec['data'])}")
        try:
            got = Path(path).read_bytes()
            if hashlib.sha256(got).digest() != hashlib.sha256(rec["data"]).digest():
                problems.append(f"file {path}: {len(got)} bytes differ from the {len(rec['data'])} sent")
        except (OSError, TypeError) as e:
            problems.append(f"file {path!r} unreadable: {e}")
        g = client.share_get(s["shareID"])
        if g.get("items") != items:
            problems.append("share.get differs from share.list")
    return problems


def check_defaults(client, m, c, when):
    if m.g2["values"] or m.g2["failed"]:
        lst = client.defaults_list(GROUP2)
        c.check(lst.get("values") == m.g2["values"] and lst.get("version") == m.g2["version"],
                f"{when}: {GROUP2} (compacted on the full disk, or failed to) holds exactly the answered value and version",
                f"version {lst.get('version')} (expected {m.g2['version']}), "
                f"n {[v.get('n') for v in lst.get('values', {}).values()]} (expected {[v.get('n') for v in m.g2['values'].values()]})")
    lst = client.defaults_list(GROUP)
    c.equal(lst.get("version"), m.version, f"{when}: the group version is the last answered one")
    values = lst.get("values", {})
    c.equal(sorted(values), sorted(m.defaults), f"{when}: defaults.list holds exactly the answered keys")
    diff = [k for k in m.defaults if k in values and values[k] != m.defaults[k]]
    c.check(not diff, f"{when}: every answered defaults value is there exactly", f"keys {short(diff[:5])}")
    leaked = [(op, k) for op, k, _ in m.failed_defaults
              if (op == "set" and k not in m.defaults and k in values) or (op == "remove" and k in m.defaults and k not in values)]
    c.check(not leaked, f"{when}: no defaults write that got -32005 is visible", short(leaked[:5]))
    if m.defaults:
        k = sorted(m.defaults)[0]
        g = client.defaults_get(GROUP, k)
        c.check(g.get("exists") and g.get("value") == m.defaults[k] and g.get("version") == m.version,
                f"{when}: defaults.get answers the answered value", short(g))
    for op, k, _ in m.failed_defaults:
        if op == "set" and k not in m.defaults:
            g = client.defaults_get(GROUP, k)
            c.check(g.get("exists") is False and g.get("value") is None,
                    f"{when}: defaults.get of a key whose set got -32005: absent", short(g))
            break


def check_files_dir(state, m, c, when):
    """No files directory without an answered (pending) share: a failed share left nothing."""
    d = Path(state) / "groups" / GROUP / "files"
    on_disk = sorted(p.name for p in d.iterdir()) if d.is_dir() else []
    want = sorted(sid for sid, r in m.shares.items() if r["data"] is not None and sid not in m.completed)
    c.equal(on_disk, want, f"{when}: the group's files/ directories are exactly the pending shares with files")


def subscribe_and_check(app, m, c, when, expect_pending=None):
    """app.subscribe on a fresh connection: the pending events are exactly the answered, unacked
    ones (ids, URLs, shareIDs), each once; none for a failed url.open."""
    want = {i: e for i, e in m.events.items() if i not in m.acked}
    r = app.app_subscribe()
    c.equal(r.get("pending"), len(want) if expect_pending is None else expect_pending, f"{when}: app.subscribe pending")
    got = drain(app, len(want))
    ids = [e["id"] for e in got]
    c.equal(len(ids), len(set(ids)), f"{when}: no event delivered twice")
    c.equal(sorted(ids, key=ev_num), sorted(want, key=ev_num), f"{when}: the delivered events are exactly the answered ones")
    c.check(ids == sorted(ids, key=ev_num), f"{when}: events arrive in opening order")
    bad = [e for e in got if e["id"] in want and (e.get("url") != want[e["id"]]["url"] or e.get("kind") != "openURL"
                                                  or e.get("shareID") != want[e["id"]].get("shareID"))]
    c.check(not bad, f"{when}: every event carries the URL (and shareID) it was opened with", short(bad[:3]))
    failed = set(m.failed_urls)
    leaked = [e["id"] for e in got if e.get("url") in failed]
    c.check(not leaked, f"{when}: no event for a url.open that got -32005", short(leaked[:5]))
    failed_share_events = [e["id"] for e in got if "shareID" in e and e["shareID"] not in m.shares]
    c.check(not failed_share_events, f"{when}: no open-from-share event for a share.send that got -32005",
            short(failed_share_events[:5]))
    return got


def ev_num(i):
    try:
        return int(i.split("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def drain(app, expected, quiet=0.5, limit=15.0):
    """Reads app.event notifications until `expected` arrived and no more came for `quiet` s."""
    got = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ev = app.next_event(timeout=quiet if len(got) >= expected else min(5.0, deadline - time.monotonic()))
        if ev is None:
            if len(got) >= expected:
                break
            continue
        got.append(ev)
    return got


def ack_all(app, ids, m, c, when):
    """Acks in chunks; returns how many got -32005 (then those events must stay pending)."""
    refused = 0
    ids = list(ids)
    for i in range(0, len(ids), 200):
        chunk = ids[i:i + 200]
        try:
            r = app.app_ack(chunk)
            c.equal(r.get("acked"), len(chunk), f"{when}: app.ack counts the delivered events")
            m.acked.update(chunk)
            for e in chunk:
                m.events.pop(e, None)
        except BrokerError as e:
            c.equal(e.code, sb.STORAGE_FAILURE, f"{when}: a refused app.ack is -32005")
            m.storage_errors.append(("app.ack", e.message))
            refused += len(chunk)
    return refused


def complete_all(app, m, c, when):
    refused = 0
    for sid in [s for s in m.shares if s not in m.completed]:
        try:
            r = app.share_complete(sid)
            c.check(r.get("completed") is True, f"{when}: share.complete answers completed", short(r))
            m.completed.add(sid)
        except BrokerError as e:
            c.equal(e.code, sb.STORAGE_FAILURE, f"{when}: a refused share.complete is -32005")
            m.storage_errors.append(("share.complete", e.message))
            refused += 1
    return refused


def restart_checks(broker, m, c, state, when):
    """SIGKILL, restart on the same state, then compare with the model. Returns the subscribed
    app client (events received, not acked)."""
    broker.kill()
    err = broker.start()
    c.check(err is None, f"{when}: the broker restarts after SIGKILL", f"{err}\n{broker.log_tail()}")
    if err:
        return None
    lines = broker.log_since_start()
    bad = [ln for ln in lines if "checksum" in ln.lower()]
    c.check(not bad, f"{when}: recovery logs no checksum failure", short(bad[:3]))
    with sb.Client(broker.sock, timeout=10) as t:
        st = t.broker_status()
    store = st.get("store", {})
    c.equal(store.get("available"), True, f"{when}: the event store is available")
    c.equal(store.get("quarantinedRecords"), 0, f"{when}: no record quarantined")
    c.equal(st.get("pendingEvents"), len([e for e in m.events if e not in m.acked]), f"{when}: broker.status.pendingEvents")
    c.equal(st.get("pendingShares"), len([s for s in m.shares if s not in m.completed]), f"{when}: broker.status.pendingShares")
    app = sb.Client(broker.sock, role="app", bundle_id=APP, timeout=30)
    check_shares(app, m, c, when)
    check_defaults(app, m, c, when)
    check_files_dir(state, m, c, when)
    subscribe_and_check(app, m, c, when)
    return app


def after_free(broker, d, m, c, app, when):
    """Writes of every kind succeed again, without a restart, and a live event is delivered."""
    r_url = d.open_urls(3, 100) == 0
    r_file = d.send_share(data_size=128 * KiB, open_app=True)
    r_text = d.send_share(text_size=500)
    key = sorted(m.defaults)[0] if m.defaults else "after-free"
    r_set = d.set_default(key, {"after": "free", "n": 1})
    r_new = d.set_default("after-free-" + unique(), [True, None, 3])
    c.check(r_url, f"{when}: url.open succeeds again (no restart)")
    c.check(r_file, f"{when}: share.send with a file (and open) succeeds again")
    c.check(r_text, f"{when}: share.send without a file succeeds again")
    c.check(r_set and r_new, f"{when}: defaults.set succeeds again (overwrite and new key)")
    if m.g2["values"]:
        c.check(d.set_default(BIG_KEY, {"n": 999, "after": "free"}, group=GROUP2),
                f"{when}: defaults.set succeeds again in the group whose compaction failed")
    # The subscriber gets the new events live.
    new_ids = [i for i in m.events if i not in m.acked]
    got = drain(app, len(new_ids), quiet=0.3, limit=10)
    c.equal(sorted((e["id"] for e in got), key=ev_num), sorted(new_ids, key=ev_num),
            f"{when}: the subscriber receives exactly the new events live")
    check_shares(app, m, c, when)
    check_defaults(app, m, c, when)
    check_files_dir(d.state, m, c, when)
    return got


# ------------------------------------------------------------------------------------------------
# Main


def main():
    ap = argparse.ArgumentParser(
        description="Full-disk check for sharebroker: the broker's state on a small tmpfs, filled through "
                    "its own write methods; see scripts/full-disk/README.md.")
    ap.add_argument("--broker", help="the sharebroker binary (default: $SHAREBROKER_BIN, else <repo>/.build/debug/sharebroker)")
    ap.add_argument("--size", type=parse_size, default=parse_size("8M"), help="tmpfs size (default 8M; 4M..256M)")
    ap.add_argument("--require", action="store_true", help="exit 1 instead of skipping when tmpfs cannot be mounted")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (socket dir, broker log, a copy of the state)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    ap.add_argument("--time-budget", type=float, default=40.0, help="seconds allowed for filling the disk (default 40)")
    ap.add_argument("--strict", action="store_true",
                    help="also require that share.complete and app.ack free space through the broker while the "
                         "disk is full (without it a refusal is a note and the tmpfs is remounted larger)")
    ap.add_argument("--no-takeback-probe", action="store_true",
                    help="skip the share.send {open} probe (its event refused, the share taken back)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every passed check")
    args = ap.parse_args()

    def skip(why):
        if args.require:
            print(f"full-disk: cannot run: {why} (--require)")
            return 1
        print(f"full-disk: skipped: {why}")
        return 0

    binary = args.broker or os.environ.get("SHAREBROKER_BIN") or str(REPO / ".build" / "debug" / "sharebroker")
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"full-disk: setup error: no broker binary at {binary} (run `swift build`, or pass --broker)")
        return 2
    if not sys.platform.startswith("linux"):
        return skip(f"tmpfs mounts are only used on Linux (this is {sys.platform})")
    if os.geteuid() != 0:
        return skip("not root (mount -t tmpfs needs root)")
    seed = args.seed if args.seed is not None else int(time.time())
    random.seed(seed)

    # SIGTERM/SIGHUP end the run through the finally clauses (unmount, kill the broker).
    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    work = tempfile.mkdtemp(prefix="sharebroker-fulldisk-")     # socket and log: not on the tmpfs
    mnt = tempfile.mkdtemp(prefix="sharebroker-fulldisk-mnt-")
    mounted = False
    broker = None
    checks = Checks(args.verbose)
    started = time.monotonic()
    status = 0
    try:
        rc, out = run(["mount", "-t", "tmpfs", "-o", f"size={args.size},mode=0700,nodev,nosuid", "tmpfs", mnt])
        if rc != 0:
            return skip(f"mount -t tmpfs failed: {out or f'exit {rc}'}")
        mounted = True
        state = os.path.join(mnt, "state")
        os.mkdir(state, 0o700)
        os.chmod(state, 0o700)
        os.mkdir(os.path.join(state, "apps"), 0o700)
        Path(state, "apps", "fulldisk.json").write_text(json.dumps(MANIFEST, indent=2))
        sock = os.path.join(work, "broker.sock")
        log_path = os.path.join(work, "broker.log")
        print(f"full-disk: broker {binary}, tmpfs {args.size // KiB} KiB at {mnt}, seed {seed}")

        broker = Broker(binary, sock, state, log_path)
        err = broker.start()
        if err:
            print(f"full-disk: setup error: {err} on an empty state\n{broker.log_tail()}")
            return 2
        with sb.Client(sock, role="tool", timeout=10) as t:
            apps = t.apps_list()
        if not any(a["bundleID"] == APP for a in apps["apps"]):
            print(f"full-disk: setup error: the manifest was not loaded: {short(apps)}")
            return 2

        m = Model()
        d = Driver(sock, m, checks)
        d.state_root = mnt
        d.state = state
        d.skip_takeback_probe = args.no_takeback_probe
        # A subscriber during the fill: it must get exactly the answered events, none of the refused.
        live = sb.Client(sock, role="app", bundle_id=APP, timeout=30)
        checks.equal(live.app_subscribe().get("pending"), 0, "a fresh state has no pending events")
        d.live = live

        phase("1. warm-up: one write of each kind on an empty disk")
        checks.check(d.open_urls(1, 10) == 0, "url.open succeeds")
        checks.check(d.send_share(data_size=1000, open_app=True), "share.send with a file and open succeeds")
        checks.check(d.set_default("warm", {"a": [1, 2, 3]}), "defaults.set succeeds")
        d.compaction_probe = args.size >= 8 * MiB
        if d.compaction_probe:
            # Superseded records of one key, just short of the defaults compaction threshold.
            checks.check(all(d.set_default(BIG_KEY, big_value(i), group=GROUP2) for i in range(8)),
                         "defaults.set of a 128 KiB value, 8 times over one key, succeeds")
        else:
            checks.note("--size under 8M: the defaults compaction probe is skipped")
        checks.check(not m.storage_errors, "no -32005 on an empty disk", short(m.storage_errors))

        phase("2. fill the disk until every kind of write gets -32005")
        fill(d, m, checks, time.monotonic() + args.time_budget)
        print(f"  answered: {len(m.events)} events, {len(m.shares)} shares, {len(m.defaults)} defaults keys "
              f"(version {m.version}); -32005: {len(m.storage_errors)}; free now {free_bytes(mnt)} bytes")
        if m.storage_errors:
            print(f"  e.g. -32005 message: {m.storage_errors[0][1]}")

        phase("3. while full: writes refused with -32005, reads and new sessions still answered")
        while_full(d, m, checks, broker)
        check_storage_messages(checks, m, 0, "while full")
        checked_errors = len(m.storage_errors)
        check_files_dir(state, m, checks, "while full")
        got = d.live_got + drain(live, len(m.events) - len(d.live_got), quiet=0.5)
        ids = [e["id"] for e in got]
        checks.equal(sorted(ids, key=ev_num), sorted(m.events, key=ev_num),
                     "while full: the live subscriber got exactly the answered events")
        leaked = [e["id"] for e in got if e.get("url") in set(m.failed_urls)]
        checks.check(not leaked, "while full: no live event for a url.open that got -32005", short(leaked[:5]))
        checks.check(broker.alive(), "the broker is still running after the fill")
        d.live = None
        live.close()
        d.close()

        phase("4. SIGKILL, restart on the same (still full) state, compare with the answers")
        full_free = free_bytes(mnt)
        app = restart_checks(broker, m, checks, state, "after restart (full)")
        print(f"  free on the tmpfs after the restart: {full_free} bytes before, {free_bytes(mnt)} bytes now")
        if app is None:
            raise SetupError("the broker did not restart")
        d = Driver(sock, m, checks)
        d.state_root, d.state = mnt, state
        # Still full: a write after the restart is refused, nothing else changes.
        probe_ok = d.open_urls(1, 100) == 0
        if probe_ok:
            checks.note("a url.open right after the restart on the full disk was stored (its journal had space)")
            drain(app, 1, quiet=0.3)
        else:
            checks.check(m.storage_errors[-1][0] == "url.open", "after restart: url.open on the full disk is -32005")

        phase("5. free space through the broker (complete shares, ack events), then writes again")
        pending_ids = [i for i in m.events if i not in m.acked]
        refused_c = complete_all(app, m, checks, "freeing")
        refused_a = ack_all(app, pending_ids, m, checks, "freeing")
        freed_by_broker = refused_c == 0 and refused_a == 0
        if args.strict:
            checks.check(freed_by_broker, "on the full disk share.complete and app.ack free space (--strict)",
                         f"{refused_c} share.complete and {refused_a} app.ack got -32005")
        if not freed_by_broker:
            example = next((msg for meth, msg in m.storage_errors[checked_errors:] if meth == "share.complete"), "")
            checks.note(f"on the full disk {refused_c} share.complete and {refused_a} app.ack got -32005: "
                        f"space cannot be freed through the broker while full (e.g. {example!r})")
            # Nothing of a refused completion/ack may have taken.
            check_shares(app, m, checks, "after refused completions")
            check_files_dir(state, m, checks, "after refused completions")
            with sb.Client(sock, timeout=10) as t:
                st = t.broker_status()
            checks.equal(st.get("pendingEvents"), len([e for e in m.events if e not in m.acked]),
                         "after refused acks: the events are still pending")
            bigger = args.size * 2
            rc, out = run(["mount", "-o", f"remount,size={bigger}", mnt])
            checks.check(rc == 0, f"remount the tmpfs to {bigger // KiB} KiB", out)
            print(f"  remounted to {bigger // KiB} KiB: free {free_bytes(mnt)} bytes")
            refused_c = complete_all(app, m, checks, "after remount")
            refused_a = ack_all(app, [i for i in m.events if i not in m.acked], m, checks, "after remount")
            checks.check(refused_c == 0 and refused_a == 0, "after remount: share.complete and app.ack succeed",
                         f"{refused_c} completions, {refused_a} acks refused")
        else:
            print(f"  completed {len(m.completed)} shares and acked {len(m.acked)} events on the full disk; "
                  f"free {free_bytes(mnt)} bytes")
        check_storage_messages(checks, m, checked_errors, "freeing")
        check_files_dir(state, m, checks, "after freeing")
        with sb.Client(sock, timeout=10) as t:
            st = t.broker_status()
        checks.equal((st.get("pendingEvents"), st.get("pendingShares")), (0, 0), "after freeing: nothing pending")
        checks.check(broker.proc.pid == st.get("pid"), "the same broker process (no restart)")
        after_free(broker, d, m, checks, app, "after freeing")
        app.close()
        d.close()

        phase("6. SIGKILL once more: the writes after freeing are durable, acked events stay acked")
        app = restart_checks(broker, m, checks, state, "final restart")
        if app is not None:
            app.close()
        code = broker.terminate()
        checks.equal(code, 0, "SIGTERM stops the broker with status 0")
    except SetupError as e:
        checks.check(False, str(e))
    except KeyboardInterrupt as e:
        checks.check(False, f"interrupted ({e})")
        status = 130
    except LOST as e:
        checks.check(False, "the broker answered every request", f"{type(e).__name__}: {e}")
    except BrokerError as e:
        checks.check(False, "no unexpected error answer", f"{e.code} {e.message}")
        import traceback
        traceback.print_exc()
    finally:
        if broker is not None:
            if checks.failures:
                print("---- broker log (tail)\n" + broker.log_tail() + "\n----")
            broker.kill()
        if mounted and args.keep:
            try:
                shutil.copytree(os.path.join(mnt, "state"), os.path.join(work, "state"), symlinks=True)
            except OSError as e:
                print(f"full-disk: could not copy the state: {e}")
        if mounted:
            rc, out = run(["umount", mnt])
            if rc != 0:
                rc, out = run(["umount", "-l", mnt])
            if rc != 0:
                print(f"full-disk: could not unmount {mnt}: {out}")
                status = status or 1
        try:
            os.rmdir(mnt)
        except OSError:
            pass
        if args.keep:
            print(f"full-disk: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    elapsed = time.monotonic() - started
    nfail = len(checks.failures)
    for n in checks.notes:
        print(f"full-disk: note: {n}")
    for f in checks.failures:
        print(f"full-disk: FAILED: {f if len(f) < 400 else f[:400] + ' ...'}")
    print(f"full-disk: {elapsed:.1f} s")
    print(f"full-disk: {checks.passed} checks passed, {nfail} failed")
    if status:
        return status
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
