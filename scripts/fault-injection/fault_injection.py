#!/usr/bin/env python3
"""Fault-injection campaign for sharebroker: fail the N-th file system call the broker makes
under its state directory (EIO or ENOSPC, through an LD_PRELOAD shim), run a fixed workload,
SIGKILL the broker, restart it without the shim on the same state and check that

  * the broker neither crashed nor hung under the fault (a refusal to start, exit 1 with a
    message, is allowed: it is the start-up's way to fail);
  * every request answered with success is there exactly as answered: events with their ids, in
    order, none delivered again after its ack; shares with their items and files byte for byte;
    defaults values and the group version;
  * every request answered with an error (-32005 and any other code but -32603) left nothing
    visible, and no event of such a request was ever delivered;
  * a request answered -32603 (outcome unknown) may or may not be there, but whole;
  * event ids are never reused (a new url.open after the restart gets a larger id than every id
    seen before);
  * nothing is quarantined, no share files are left without their share (torn mode may
    quarantine: a half-written record is what it simulates).

    python3 scripts/fault-injection/fault_injection.py --count            # how many calls the workload makes
    python3 scripts/fault-injection/fault_injection.py --n 57 [--errno ENOSPC] [--mode sticky] [-v] [--keep]
    python3 scripts/fault-injection/fault_injection.py --sample 40 --seed 7  # CI: spread over the range
    python3 scripts/fault-injection/fault_injection.py --sweep [--jobs 2]    # every N, both errnos, transient
                                                                              # (+ --sticky-every K, --torn-every K)

Prints one line per failed run and a summary "fault-injection: R runs, F failed". Exit 0 when
every run passed, 1 when one failed (its N, the failed call and the violations are printed),
2 on a setup error (no gcc, no broker binary, the workload fails without faults).
"""

import argparse
import asyncio
import concurrent.futures
import hashlib
import json
import os
import random
import shutil
import signal
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
import sharebroker.aio as sb_aio  # noqa: E402
from sharebroker import BrokerError  # noqa: E402

APP = "com.faultinj.app"
EXT = "com.faultinj.app.share"
GROUP = "group.com.faultinj"
SCHEME = "fiapp"
APP_B = "com.faultinj.second"
EXT_B = "com.faultinj.second.share"
GROUP_B = "group.com.faultinj.second"
SCHEME_B = "fibapp"

MANIFEST = {
    "bundleID": APP, "name": "Fault injection app", "urlSchemes": [SCHEME], "appGroups": [GROUP],
    "extensions": [{"bundleID": EXT, "point": "com.apple.share-services", "name": "FI share",
                    "appGroups": [GROUP], "activationRule": "TRUEPREDICATE"}],
}
# Added by the workload before its apps.reload.
MANIFEST_B = {
    "bundleID": APP_B, "name": "Fault injection second app", "urlSchemes": [SCHEME_B],
    "appGroups": [GROUP_B],
    "extensions": [{"bundleID": EXT_B, "point": "com.apple.share-services", "name": "FI share 2",
                    "appGroups": [GROUP_B], "activationRule": "TRUEPREDICATE"}],
}

# --concurrent: a third group, the first app's, written by one connection only (its
# compare-and-set versions can be predicted).
GROUP_C = "group.com.faultinj.cas"
MANIFEST_C = dict(MANIFEST, appGroups=[GROUP, GROUP_C])
SCHEME_OF = {GROUP: SCHEME, GROUP_B: SCHEME_B}
APP_OF = {GROUP: APP, GROUP_B: APP_B, GROUP_C: APP}

SEGMENT = 4096          # --journal-segment-size: the smallest, so segments seal and go often
REQUEST_TIMEOUT = 20.0  # a request not answered in this long: the broker hangs
LOST = (sb.BrokerConnectionError, ConnectionError, OSError)
ABSENT = "<absent>"


def ev_num(eid):
    try:
        return int(str(eid).split("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def jkey(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


# ------------------------------------------------------------------------------------------------
# The shim


def build_shim(out_dir):
    src = HERE / "fault_shim.c"
    out = Path(out_dir) / "fault_shim.so"
    gcc = shutil.which("gcc") or shutil.which("cc")
    if not gcc:
        raise SetupError("gcc not found (the shim is built with it)")
    r = subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wno-format-truncation", "-o", str(out),
                        str(src), "-ldl"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SetupError(f"building the shim failed:\n{r.stderr}")
    return str(out)


class SetupError(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# Power cuts


def apply_power_cut(state, pcdir):
    """Rolls the state directory back to what a power loss at this moment would leave, from what
    the shim recorded under FI_POWER_CUT (pcdir): the broker must be dead (nothing runs while the
    files are rewritten). The model (README "Power cuts"):

      * names: a file or directory created, renamed, unlinked or removed in a directory that was
        not fsync'd after it is undone, newest first: a created file or directory goes (with all
        it holds), a rename is renamed back (the target it replaced is put back), an unlinked file
        comes back (the shim kept a hard link), a removed directory comes back empty;
      * data: each regular file the shim saw gets back its content and size as of its last
        fsync/fdatasync (the bytes replaced since by writes and truncations are written back,
        newest first, then the file is cut to that size); a file created and never synced is
        empty. Files never synced nor created under the shim (the driver's manifests) are left.

    Returns a list of notes (what was undone), for -v and the failed runs' report."""
    pcdir = Path(pcdir)
    notes = []
    try:
        lines = (pcdir / "pc.log").read_text(errors="surrogateescape").splitlines()
    except OSError:
        return ["power cut: no pc.log (the shim recorded nothing)"]
    ops = []
    for line in lines:
        f = line.split("\t")
        if len(f) < 3:
            continue
        try:
            ops.append((int(f[1]), f[0], f[2:]))
        except ValueError:
            continue
    ops.sort(key=lambda o: o[0])
    dsync = {}                      # dir -> the last seq a directory fsync began at
    for seq, kind, f in ops:
        if kind == "D":
            dsync[f[0]] = max(dsync.get(f[0], -1), seq)

    def durable(d, seq):
        return dsync.get(d, -1) > seq

    def ident(p):
        try:
            st = os.lstat(p)
            return (st.st_dev, st.st_ino)
        except OSError:
            return None

    def rel(p):
        return os.path.relpath(p, state) if str(p).startswith(str(state)) else str(p)

    # Names, newest first.
    for seq, kind, f in reversed(ops):
        try:
            if kind in ("C", "M"):
                d, name, dev, ino = f[0], f[1], int(f[2]), int(f[3])
                if durable(d, seq):
                    continue
                p = os.path.join(d, name)
                if ident(p) != (dev, ino):
                    continue
                if kind == "C":
                    os.unlink(p)
                else:
                    shutil.rmtree(p)
                notes.append(f"{'file' if kind == 'C' else 'directory'} {rel(p)} removed (created at {seq}, {rel(d)} not fsync'd since)")
            elif kind == "R":
                od, on, nd, nn, dev, ino, stash = f[0], f[1], f[2], f[3], int(f[4]), int(f[5]), f[6]
                if durable(nd, seq):
                    continue
                old, new = os.path.join(od, on), os.path.join(nd, nn)
                if ident(new) == (dev, ino) and os.path.isdir(od):
                    os.rename(new, old)
                    notes.append(f"rename {rel(old)} -> {rel(new)} undone (at {seq}, {rel(nd)} not fsync'd since)")
                if stash != "-" and os.path.exists(stash) and not os.path.lexists(new):
                    os.link(stash, new)
                    notes.append(f"{rel(new)}, replaced by that rename, put back")
            elif kind == "X":
                d, name, stash = f[0], f[1], f[4]
                if durable(d, seq):
                    continue
                p = os.path.join(d, name)
                if stash != "-" and os.path.exists(stash) and os.path.isdir(d) and not os.path.lexists(p):
                    os.link(stash, p)
                    notes.append(f"unlink of {rel(p)} undone (at {seq}, {rel(d)} not fsync'd since)")
            elif kind == "XD":
                d, name = f[0], f[1]
                if durable(d, seq):
                    continue
                p = os.path.join(d, name)
                if os.path.isdir(d) and not os.path.lexists(p):
                    os.mkdir(p, 0o700)
                    notes.append(f"rmdir of {rel(p)} undone (at {seq})")
        except OSError as e:
            notes.append(f"power cut: cannot undo {kind} {f} at {seq}: {e}")

    # Data, per inode.
    inodes = {}
    for seq, kind, f in ops:
        if kind == "C":
            inodes.setdefault((int(f[2]), int(f[3])), {"created": None, "sync": None, "undo": []})["created"] = seq
        elif kind == "S":
            i = inodes.setdefault((int(f[0]), int(f[1])), {"created": None, "sync": None, "undo": []})
            if i["sync"] is None or seq >= i["sync"][0]:
                i["sync"] = (seq, int(f[2]))
        elif kind == "U":
            inodes.setdefault((int(f[0]), int(f[1])), {"created": None, "sync": None, "undo": []})["undo"].append(
                (seq, int(f[2]), int(f[3]), int(f[4])))
    try:
        undo = open(pcdir / "pc.undo", "rb")
    except OSError:
        undo = None
    try:
        for root, dirs, files in os.walk(state):
            for name in files:
                p = os.path.join(root, name)
                st = os.lstat(p)
                info = inodes.get((st.st_dev, st.st_ino))
                if info is None or not stat_is_reg(st.st_mode):
                    continue
                if info["sync"] is not None:
                    since, size = info["sync"]
                elif info["created"] is not None:
                    since, size = info["created"], 0
                else:
                    since, size = -1, None
                back = [u for u in info["undo"] if u[0] > since]
                if size == 0 and st.st_size > 0:
                    back = []
                if back and undo is not None:
                    with open(p, "r+b") as out:
                        for seq, off, ln, uoff in sorted(back, reverse=True):
                            undo.seek(uoff)
                            out.seek(off)
                            out.write(undo.read(ln))
                now = os.lstat(p).st_size
                if size is not None and now > size:
                    os.truncate(p, size)
                if size is not None and (now != size or back):
                    notes.append(f"{rel(p)}: {st.st_size} -> {size} bytes"
                                 + (f", {len(back)} overwrites undone" if back else "")
                                 + (" (never synced)" if info["sync"] is None else f" (as at its sync at {since})"))
                if size is not None and now < size:
                    notes.append(f"power cut: {rel(p)} is {now} bytes, shorter than at its last sync ({size})")
    finally:
        if undo is not None:
            undo.close()
    return notes


def stat_is_reg(mode):
    import stat as _stat
    return _stat.S_ISREG(mode)


# ------------------------------------------------------------------------------------------------
# One run


class Broker:
    def __init__(self, binary, sock, state, log_path):
        self.binary, self.sock, self.state, self.log_path = binary, sock, state, log_path
        self.proc = None

    def start(self, env_extra=None, timeout=20.0):
        """Starts and waits until this process answers. Returns None, or ("exited", rc) when it
        exited during its start, or ("timeout", None)."""
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("FI_") or k == "LD_PRELOAD":
                del env[k]
        env.update(env_extra or {})
        with open(self.log_path, "ab") as log:
            log.write(f"---- fault-injection: starting broker ({'with' if env_extra else 'without'} the shim)\n".encode())
            log.flush()
            self.proc = subprocess.Popen([self.binary, "serve", "--socket", self.sock, "--state", self.state,
                                          "--journal-segment-size", str(SEGMENT), "--launch-grace", "0"],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                return ("exited", rc)
            try:
                with sb.Client(self.sock, timeout=2.0) as c:
                    st = c.broker_status()
                if st.get("pid") == self.proc.pid:
                    return None
            except (LOST + (BrokerError,)):
                pass
            time.sleep(0.01)
        return ("timeout", None)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def terminate(self, timeout=10.0):
        """SIGTERM; returns the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def log_tail(self, n=30):
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


class Model:
    """What the answers say must, may or must not be there."""

    def __init__(self):
        # url -> {"id": eid or None, "created": "ok"|"maybe"|"no", "acked": "ok"|"maybe"|"no", "app": bundle}
        self.events = {}
        self.ids_seen = {}          # eid -> url (answers and deliveries)
        self.delivered = []         # (app, eid, url) as delivered during the faulted run
        # marker -> {"id", "sent": ok|maybe|no, "completed": ok|maybe|no, "items": [...], "group", "open_url"}
        self.shares = {}
        # group -> {"values": {key: set(jkey)}, "versions": set}
        self.defaults = {}
        self.answers = []           # (step, outcome) for the report
        self.codes = {}

    def group(self, g):
        return self.defaults.setdefault(g, {"values": {}, "versions": {0}})


class Run:
    """One run of the workload with the fault at call n (n=0: no fault)."""

    def __init__(self, binary, shim, n, mode, err, work, verbose=False):
        self.binary, self.shim, self.n, self.mode, self.err = binary, shim, n, mode, err
        self.work = Path(work)
        self.verbose = verbose
        self.state = self.work / "state"
        self.sock = str(self.work / "sock" / "broker.sock")
        self.counter = str(self.work / "counter")
        self.fi_log = str(self.work / "calls.log")
        self.broker = Broker(binary, self.sock, str(self.state), str(self.work / "broker.log"))
        self.model = Model()
        self.failures = []
        self.notes = []
        self.clients = []
        self.inputs = self.work / "inputs"
        self.rng = random.Random(1234)   # the workload's bytes: the same in every run
        self.step_no = 0
        self.lost = None  # why the connection was lost (a request without an answer): later ones raise BrokerGone
        self.ready_count = None
        self.kill_at = 0            # the shim SIGKILLs the broker at this call (0: never)
        self.power_cut = False      # a power cut at the kill (at kill_at, or after the workload)
        self.also = ""              # FI_ALSO: more calls that fail (transient), "N2,N3"
        self.drop_syncs = 0         # (self-test) the power-cut model ignores file syncs from this call on
        self.pc_dir = self.work / "pc"
        self.cut_notes = []
        self.owed = {}              # app -> events it must be sent (counted from the answers)
        self.received = {}
        self.subscribed = set()

    # -- helpers -------------------------------------------------------------------------------

    def broker_gone(self, e):
        """The broker went away during the workload (`BrokerGone` e): killed by the shim as asked
        (a note), or crashed, exited or hung (a failure)."""
        try:  # a broker that just died may not be reaped yet
            rc = self.broker.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            rc = None
        if self.kill_at and rc == -signal.SIGKILL:
            self.notes.append(f"killed by the shim at call {self.kill_at} ({e})")
        elif rc is not None and rc < 0:
            self.fail(f"broker crashed (signal {-rc}) at: {e}")
        elif rc is not None:
            self.fail(f"broker exited (status {rc}) at: {e}")
        else:
            self.fail(f"broker hung or dropped the connection: {e}")

    def fail(self, msg):
        self.failures.append(msg)

    def shim_env(self):
        env = {"LD_PRELOAD": self.shim, "FI_STATE": str(self.state), "FI_N": str(self.n),
               "FI_MODE": self.mode, "FI_ERRNO": self.err, "FI_COUNTER": self.counter,
               "FI_LOG": self.fi_log, "FI_KILL_AT": str(self.kill_at)}
        if self.also:
            env["FI_ALSO"] = self.also
        if self.power_cut:
            env["FI_POWER_CUT"] = str(self.pc_dir)
            if self.drop_syncs:
                env["FI_PC_DROP_SYNCS"] = str(self.drop_syncs)
        return env

    def calls_so_far(self):
        try:
            with open(self.counter, "rb") as f:
                return int.from_bytes(f.read(8), "little")
        except OSError:
            return 0

    def connect(self, role, bundle=None):
        """A connected client that said hello; a client whose hello failed is returned too (its
        later calls then fail and are recorded as errors)."""
        try:
            c = sb.Client(self.sock, timeout=REQUEST_TIMEOUT)  # (connects)
            self.clients.append(c)
        except LOST as e:
            raise BrokerGone(f"connect: {e}")
        self.call(f"hello {role} {bundle or ''}", lambda: c.hello(role, bundle, None))
        return c

    def close_clients(self):
        for c in self.clients:
            try:
                c.close()
            except Exception:
                pass
        self.clients = []

    def call(self, step, fn):
        """Runs one request; returns ("ok", result) | ("err", code, message). A lost connection or
        a timeout is a failure of the run (raises BrokerGone)."""
        self.step_no += 1
        if self.lost:
            raise BrokerGone(self.lost)
        try:
            r = fn()
            out = ("ok", r)
        except BrokerError as e:
            out = ("err", e.code, str(e))
            self.model.codes[e.code] = self.model.codes.get(e.code, 0) + 1
        except TimeoutError:
            raise BrokerGone(f"{step}: no answer within {REQUEST_TIMEOUT:.0f} s (hang)")
        except LOST as e:
            # No answer: the request is in doubt, like one answered -32603 (the broker may have
            # made it durable before it died). Recorded as such; the next request raises.
            self.lost = f"{step}: connection lost ({type(e).__name__}: {e})"
            out = ("err", -32603, "no answer: " + self.lost)
        self.model.answers.append((step, out if out[0] == "err" else ("ok",)))
        if self.verbose:
            print(f"    {step[:100]}: {out[0]}{'' if out[0] == 'ok' else ' ' + str(out[1]) + ' ' + out[2][:150]}")
        return out

    @staticmethod
    def status_of(out):
        if out[0] == "ok":
            return "ok"
        return "maybe" if out[1] == -32603 else "no"

    # -- workload pieces -----------------------------------------------------------------------

    def url_open(self, tool, url, app=APP):
        out = self.call(f"url.open {url}", lambda: tool.url_open(url))
        e = {"id": None, "created": self.status_of(out), "acked": "no", "app": app}
        if out[0] == "ok":
            e["id"] = out[1]["eventID"]
            self.see_id(e["id"], url)
            if out[1].get("delivered"):
                self.owed[app] = self.owed.get(app, 0) + 1
        self.model.events[url] = e
        return out

    def subscribe(self, client, app):
        out = self.call(f"app.subscribe {app}", lambda: client.app_subscribe())
        if out[0] == "ok":
            self.subscribed.add(app)
            self.owed[app] = out[1].get("pending", 0)
            self.received[app] = 0
        return out

    def see_id(self, eid, url):
        prev = self.model.ids_seen.get(eid)
        if prev is not None and prev != url:
            self.fail(f"event id {eid} reused: first for {prev}, then for {url}")
        self.model.ids_seen[eid] = url

    def drain(self, app_client, app):
        """Collects the app.events owed to the app (answered delivered: true, the backlog a
        subscribe announced), waiting up to 5 s for each, then any already there."""
        got = []
        while True:
            owed = self.owed.get(app, 0) > self.received.get(app, 0)
            try:
                ev = app_client.next_event(timeout=5.0 if owed else 0)
            except (sb.SubscriptionEnded, sb.BrokerConnectionError, OSError):
                break
            if ev is None:
                if owed:
                    self.fail(f"{app}: {self.owed[app] - self.received.get(app, 0)} events answered as delivered "
                              f"(or announced by app.subscribe) did not come within 5 s")
                    self.received[app] = self.owed[app]
                break
            self.received[app] = self.received.get(app, 0) + 1
            url = ev.get("url") or ev.get("webpageURL")
            got.append((ev["id"], url))
            self.model.delivered.append((app, ev["id"], url))
            self.see_id(ev["id"], url)
        return got

    def ack(self, app_client, urls):
        ids = [self.model.events[u]["id"] for u in urls if self.model.events.get(u, {}).get("id")]
        if not ids:
            return
        out = self.call(f"app.ack {ids}", lambda: app_client.app_ack(ids))
        st = self.status_of(out)
        for u in urls:
            e = self.model.events.get(u)
            if e and e["id"] in ids and e["acked"] != "ok":
                e["acked"] = st if st != "no" else e["acked"]

    def share_send(self, client, marker, items, expect, group, open_=None):
        """expect: the items as share.get should show them, minus paths: list of dicts with
        url/text/name/sha256."""
        out = self.call(f"share.send {marker}", lambda: client.share_send(items, open=open_))
        s = {"id": None, "sent": self.status_of(out), "completed": "no", "items": expect,
             "group": group, "open": open_, "open_url": None}
        if out[0] == "ok":
            s["id"] = out[1]["shareID"]
            if open_ is not None:
                url = open_ if isinstance(open_, str) else f"{SCHEME}://open-from-share?share={s['id']}"
                s["open_url"] = url
                self.model.events[url] = {"id": out[1].get("eventID"), "created": "ok", "acked": "no", "app": APP}
                if out[1].get("eventID"):
                    self.see_id(out[1]["eventID"], url)
                if APP in self.subscribed:
                    self.owed[APP] = self.owed.get(APP, 0) + 1
        elif isinstance(open_, str):
            self.model.events[open_] = {"id": None, "created": s["sent"], "acked": "no", "app": APP}
        self.model.shares[marker] = s
        return out

    def share_complete(self, app_client, marker):
        s = self.model.shares.get(marker)
        if not s or not s["id"]:
            return
        out = self.call(f"share.complete {marker}", lambda: app_client.share_complete(s["id"]))
        st = self.status_of(out)
        if st != "no":
            s["completed"] = st

    def dset(self, client, group, key, value):
        out = self.call(f"defaults.set {group} {key}", lambda: client.defaults_set(group, key, value))
        g = self.model.group(group)
        if out[0] == "ok":
            g["values"][key] = {jkey(value)}
            g["versions"] = {out[1]["version"]}
        elif out[1] == -32603:
            g["values"].setdefault(key, {ABSENT}).add(jkey(value))
            g["versions"] = g["versions"] | {v + 1 for v in g["versions"]}
        return out

    def dremove(self, client, group, key):
        out = self.call(f"defaults.remove {group} {key}", lambda: client.defaults_remove(group, key))
        g = self.model.group(group)
        if out[0] == "ok" and out[1].get("removed"):
            g["values"][key] = {ABSENT}
            g["versions"] = {out[1]["version"]}
        elif out[1] == -32603:
            g["values"].setdefault(key, {ABSENT}).add(ABSENT)
            g["versions"] = g["versions"] | {v + 1 for v in g["versions"]}
        return out

    def file_input(self, name, size):
        p = self.inputs / name
        data = bytes(self.rng.getrandbits(8) for _ in range(size))
        p.write_bytes(data)
        return p, data

    # -- the workload --------------------------------------------------------------------------

    def setup(self):
        for d in (self.work, self.state, self.state / "apps", self.work / "sock", self.inputs):
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o700)
        (self.state / "apps" / "10-fi.json").write_text(json.dumps(MANIFEST))
        Path(self.counter).write_bytes(b"\0" * 4096)

    def start_faulted(self, which):
        r = self.broker.start(self.shim_env())
        if r is None:
            return True
        kind, rc = r
        if kind == "exited" and rc is not None and rc > 0:
            self.notes.append(f"{which} start refused (exit {rc}) under the fault")
            return False
        if kind == "exited" and self.kill_at and rc == -signal.SIGKILL:
            self.notes.append(f"killed by the shim at call {self.kill_at} (during the {which} start)")
            return False
        if kind == "exited":
            self.fail(f"{which} start: broker died with signal {-rc}")
        else:
            self.fail(f"{which} start: broker did not answer within 20 s (hang)")
        self.broker.kill()
        return False

    def workload(self):
        if not self.start_faulted("first"):
            return
        self.ready_count = self.calls_so_far()
        try:
            self.phase_one()
            self.broker_alive("before the restart")
            self.close_clients()
            rc = self.broker.terminate()
            if rc is None:
                self.fail("SIGTERM: the broker did not stop within 10 s (hang)")
            elif rc < 0:
                self.fail(f"SIGTERM: the broker died with signal {-rc}")
            elif rc != 0:
                self.notes.append(f"SIGTERM: exit status {rc}")
            if not self.start_faulted("second"):
                return
            self.phase_two()
            self.broker_alive("at the end")
        except BrokerGone as e:
            self.broker_gone(e)
        finally:
            self.close_clients()
            self.broker.kill()

    def broker_alive(self, when):
        if self.lost and not self.kill_at:
            raise BrokerGone(self.lost)  # (a live broker dropped a connection: not asked for)
        rc = self.broker.proc.poll()
        if rc is not None:
            raise BrokerGone(f"{when}: the broker is gone (status {rc})")
        try:
            with sb.Client(self.sock, timeout=REQUEST_TIMEOUT) as c:
                c.broker_status()
        except TimeoutError:
            raise BrokerGone(f"{when}: broker.status not answered (hang)")
        except LOST as e:
            raise BrokerGone(f"{when}: broker.status: {e}")

    def phase_one(self):
        tool = self.connect("tool")
        ext = self.connect("extension", EXT)
        app = self.connect("app", APP)
        self.subscribe(app, APP)
        # Events, some acked.
        for i in range(1, 5):
            self.url_open(tool, f"{SCHEME}://ev/{i}")
        self.drain(app, APP)
        self.ack(app, [f"{SCHEME}://ev/1", f"{SCHEME}://ev/2"])
        # Shares: a URL with open, inline data + text, a file from the file system.
        self.share_send(ext, "s1", [sb.url_item("https://example.org/fi/1")],
                        [{"url": "https://example.org/fi/1"}], GROUP, open_=True)
        data2 = bytes(self.rng.getrandbits(8) for _ in range(3000))
        self.share_send(ext, "s2", [sb.text_item("fi-share-2"), sb.data_item(data2, name="doc-2.bin")],
                        [{"text": "fi-share-2"}, {"name": "doc-2.bin", "sha": hashlib.sha256(data2).hexdigest()}], GROUP)
        p3, data3 = self.file_input("photo-3.dat", 70000)
        self.share_send(ext, "s3", [sb.url_item("https://example.org/fi/3"), sb.path_item(p3)],
                        [{"url": "https://example.org/fi/3"}, {"name": "photo-3.dat", "sha": hashlib.sha256(data3).hexdigest()}],
                        GROUP, open_=f"{SCHEME}://shared/3")
        self.drain(app, APP)
        # Defaults.
        self.dset(app, GROUP, "color", "blue")
        self.dset(ext, GROUP, "prefs", {"a": 1, "b": [1, 2.50, "x"], "c": None})
        self.dset(app, GROUP, "color", "green")
        self.dremove(app, GROUP, "prefs")
        self.share_complete(app, "s1")
        # Enough events (and acks) to seal several 4 KiB segments: segments are deleted and
        # pending events copied forward.
        pad = "p" * 300
        for i in range(5, 21):
            self.url_open(tool, f"{SCHEME}://ev/{i}?{pad}")
            if i % 4 == 0:
                self.drain(app, APP)
                self.ack(app, [f"{SCHEME}://ev/{k}?{pad}" for k in range(i - 3, i) if k >= 5])
        self.drain(app, APP)
        # A defaults compaction: >= 1 MiB superseded and more than twice the live records.
        blobs = [self.dset(app, GROUP, "blob", f"{i}-" + "b" * 400_000) for i in range(4)]
        if all(o[0] == "ok" for o in blobs):
            self.wait_compaction(tool)
        self.dset(app, GROUP, "after-compaction", 1)
        # A second app, added by a reload: its group is created on first use.
        (self.state / "apps" / "20-fi-second.json").write_text(json.dumps(MANIFEST_B))
        self.call("apps.reload", lambda: tool.apps_reload())
        app_b = self.connect("app", APP_B)
        ext_b = self.connect("extension", EXT_B)
        self.dset(app_b, GROUP_B, "k", 1)
        self.url_open(tool, f"{SCHEME_B}://b/1", app=APP_B)
        self.share_send(ext_b, "b1", [sb.text_item("fi-share-b1"), sb.data_item(b"second app bytes", name="b.txt")],
                        [{"text": "fi-share-b1"}, {"name": "b.txt", "sha": hashlib.sha256(b"second app bytes").hexdigest()}],
                        GROUP_B)

    def wait_compaction(self, tool):
        """Waits (up to 3 s) until the defaults compaction has finished (a snapshot segment, no
        temporary file, no older segment) or failed (compactionErrors), so that what comes next
        is counted in the same order in every run."""
        deadline = time.monotonic() + 3.0
        gdir = self.state / "groups" / GROUP
        while time.monotonic() < deadline:
            segs = sorted(gdir.glob("defaults-*.log"))
            tmp = list(gdir.glob("defaults-*.log.tmp"))
            if segs and not tmp:
                try:
                    with open(segs[0], "rb") as f:
                        head = f.read(3)
                except OSError:
                    head = b""
                if head[:3] == b"\xa5\x53\x03":     # the oldest segment is the snapshot
                    return
            out = self.call_quiet(lambda: tool.broker_status())
            if out is not None and out.get("defaults", {}).get("compactionErrors", 0):
                return
            time.sleep(0.01)
        self.notes.append("defaults compaction not seen finished within 3 s")

    def call_quiet(self, fn):
        try:
            return fn()
        except BrokerError:
            return None
        except TimeoutError:
            raise BrokerGone("broker.status: no answer (hang)")
        except LOST as e:
            raise BrokerGone(f"broker.status: {e}")

    def phase_two(self):
        tool = self.connect("tool")
        ext = self.connect("extension", EXT)
        app = self.connect("app", APP)
        self.subscribed = set()
        self.subscribe(app, APP)
        got = self.drain(app, APP)
        # Ack the two oldest events delivered after the restart.
        urls = [u for _, u in got[:2] if u in self.model.events]
        self.ack(app, urls)
        self.url_open(tool, f"{SCHEME}://after-restart/1")
        p4, data4 = self.file_input("after-4.dat", 20000)
        self.share_send(ext, "s4", [sb.text_item("fi-share-4"), sb.path_item(p4)],
                        [{"text": "fi-share-4"}, {"name": "after-4.dat", "sha": hashlib.sha256(data4).hexdigest()}], GROUP)
        self.share_complete(app, "s2")
        self.dset(app, GROUP, "color", "red")
        app_b = self.connect("app", APP_B)
        self.subscribe(app_b, APP_B)
        got_b = self.drain(app_b, APP_B)
        self.ack(app_b, [u for _, u in got_b if u in self.model.events])
        self.dremove(app_b, GROUP_B, "k")
        self.drain(app, APP)

    # -- the check after the restart without the shim ------------------------------------------

    def verify(self):
        self.lost = None  # (a new broker: its connections are new)
        if self.power_cut:
            if self.broker.alive():
                self.broker.kill()
            self.cut_notes = apply_power_cut(self.state, self.pc_dir)
            for nt in self.cut_notes:
                if nt.startswith("power cut:"):
                    self.notes.append(nt)
            if self.verbose:
                print("    power cut:\n" + "\n".join("      " + nt for nt in self.cut_notes))
        r = self.broker.start(None)
        if r is not None:
            self.fail(f"restart without the shim failed: {r}")
            return
        try:
            self.verify_running()
        except BrokerGone as e:
            self.fail(f"after the restart: {e}")
        finally:
            self.close_clients()
            self.broker.terminate()

    def verify_running(self):
        m = self.model
        tool = self.connect("tool")
        st = self.call("broker.status", lambda: tool.broker_status())
        if st[0] != "ok":
            self.fail("broker.status failed after the restart")
            return
        store = st[1].get("store", {})
        if not store.get("available", False):
            self.fail(f"event queues not available after the restart: {store.get('error')}")
        quarantined = store.get("quarantinedRecords", 0)
        qfiles = []
        for q in self.state.rglob("quarantine"):
            if q.is_dir():
                qfiles += [str(p.relative_to(self.state)) for p in q.iterdir()]
        if (quarantined or qfiles) and self.mode not in ("torn", "lie"):
            self.fail(f"quarantined after a {self.mode} fault: {quarantined} records, files {qfiles}")
        elif quarantined or qfiles:
            self.notes.append(f"quarantined (torn mode): {quarantined} records, {len(qfiles)} files")

        # Events, per app.
        present_urls = {}
        for app_id in (APP, APP_B):
            c = self.connect("app", app_id)
            out = self.call(f"app.subscribe {app_id} (check)", lambda: c.app_subscribe())
            if out[0] != "ok":
                if app_id == APP or any(e["app"] == APP_B and e["created"] == "ok" and e["acked"] != "ok"
                                        for e in m.events.values()):
                    self.fail(f"app.subscribe {app_id} after the restart: {out[1:]}")
                continue
            pending = out[1].get("pending", 0)
            evs = []
            while len(evs) < pending:
                try:
                    ev = c.next_event(timeout=5.0)
                except (sb.SubscriptionEnded, sb.BrokerConnectionError, OSError) as e:
                    raise BrokerGone(f"reading {app_id}'s events: {e}")
                if ev is None:
                    self.fail(f"{app_id}: subscribe said {pending} pending, only {len(evs)} came")
                    break
                evs.append(ev)
            nums = [ev_num(ev["id"]) for ev in evs]
            if nums != sorted(nums) or len(set(nums)) != len(nums):
                self.fail(f"{app_id}: events out of order or repeated after the restart: {[ev['id'] for ev in evs]}")
            for ev in evs:
                url = ev.get("url") or ev.get("webpageURL")
                present_urls[url] = ev["id"]
                e = m.events.get(url)
                if e is None:
                    # An open-from-share event of a share whose send answered -32603 is allowed
                    # when that share is there (checked with the shares below).
                    if "open-from-share?share=" in (url or ""):
                        continue
                    self.fail(f"{app_id}: unknown event after the restart: {ev['id']} {url}")
                    continue
                if e["created"] == "no":
                    self.fail(f"{app_id}: event {ev['id']} {url} is there, but its request was answered with an error")
                if e["acked"] == "ok":
                    self.fail(f"{app_id}: event {ev['id']} {url} came back after its ack was answered")
                if e["id"] and e["id"] != ev["id"]:
                    self.fail(f"{app_id}: event {url} answered as {e['id']} came back as {ev['id']}")
                prev = m.ids_seen.get(ev["id"])
                if prev is not None and prev != url:
                    self.fail(f"event id {ev['id']} was {prev}, is now {url}")
        for url, e in m.events.items():
            if e["created"] == "ok" and e["acked"] == "no" and url not in present_urls:
                self.fail(f"event {e['id']} {url} (answered, never acked) is missing after the restart")
        for app_id, eid, url in m.delivered:
            e = m.events.get(url)
            if e is not None and e["created"] == "no":
                self.fail(f"event {eid} {url} was delivered, but its request was answered with an error")
            # (delivered means durable: events are never delivered before their commit)
            elif e is not None and e["acked"] == "no" and url not in present_urls:
                self.fail(f"event {eid} {url} was delivered (never acked), and is missing after the restart")

        # Shares.
        app_clients = {APP: self.connect("app", APP), APP_B: self.connect("app", APP_B)}
        present = {}
        for app_id, group in ((APP, GROUP), (APP_B, GROUP_B)):
            c = app_clients[app_id]
            out = self.call(f"share.list {group} (check)", lambda: c.share_list(group))
            if out[0] != "ok":
                if group == GROUP or (self.state / "groups" / GROUP_B).exists():
                    if any(s["group"] == group and s["sent"] == "ok" for s in m.shares.values()):
                        self.fail(f"share.list {group} after the restart: {out[1:]}")
                continue
            for sh in out[1].get("shares", []):
                got = self.share_items(c, sh)
                marker = self.match_share(sh, got)
                present[sh["shareID"]] = (marker, group)
                if marker is None:
                    self.fail(f"{group}: unknown share {sh['shareID']} after the restart: {got}")
                    continue
                s = m.shares[marker]
                if s["sent"] == "no":
                    self.fail(f"{group}: share {marker} ({sh['shareID']}) is there, but share.send was answered with an error")
                if s["completed"] == "ok":
                    self.fail(f"{group}: share {marker} ({sh['shareID']}) came back after share.complete was answered")
                if s["id"] and s["id"] != sh["shareID"]:
                    self.fail(f"{group}: share {marker} answered as {s['id']} is there as {sh['shareID']}")
                if got != s["items"]:
                    self.fail(f"{group}: share {marker} ({sh['shareID']}) items differ: {got} != {s['items']}")
                if s["open"] is not None:
                    url = s["open_url"] or (s["open"] if isinstance(s["open"], str)
                                            else f"{SCHEME_OF.get(group, SCHEME)}://open-from-share?share={sh['shareID']}")
                    if url not in present_urls and self.acked_of(url) == "no":
                        self.fail(f"share {marker} ({sh['shareID']}) is there without its open event {url}")
        for marker, s in m.shares.items():
            if s["sent"] == "ok" and s["completed"] == "no" and s["id"] not in present:
                self.fail(f"share {marker} ({s['id']}, answered) is missing after the restart")
        for url, eid in present_urls.items():
            if "open-from-share?share=" in url and url not in m.events:
                sid = url.rsplit("=", 1)[1]
                # (a share whose send was answered -32603 is known only by its event's id: an app
                # that got the event may have completed it, as the concurrent workload's do)
                if sid not in present and sid not in getattr(self, "completed_ids", {}):
                    self.fail(f"event {eid} {url} announces a share that is not there")
        self.present_urls, self.present_shares = present_urls, present
        # Files: exactly the present shares' directories.
        for group in (GROUP, GROUP_B):
            files = self.state / "groups" / group / "files"
            if files.is_dir():
                dirs = {p.name for p in files.iterdir()}
                extra = dirs - {sid for sid, (_, g) in present.items() if g == group}
                if extra:
                    self.fail(f"{group}/files holds directories of shares that are not there: {sorted(extra)}")

        # Defaults.
        for group, g in m.defaults.items():
            c = app_clients[APP_OF.get(group, APP)]
            out = self.call(f"defaults.list {group} (check)", lambda: c.defaults_list(group))
            if out[0] != "ok":
                self.fail(f"defaults.list {group} after the restart: {out[1:]}")
                continue
            values = out[1].get("values", {})
            version = out[1].get("version")
            if version not in g["versions"]:
                self.fail(f"defaults {group}: version {version}, answered {sorted(g['versions'])}")
            for key, allowed in g["values"].items():
                have = jkey(values[key]) if key in values else ABSENT
                if have not in allowed:
                    shown = have if len(have) < 80 else have[:60] + f"...({len(have)} chars)"
                    self.fail(f"defaults {group} {key}: {shown} is not what was answered")
            for key in values:
                if key not in g["values"]:
                    self.fail(f"defaults {group}: key {key} is there, but no set of it was answered with success")

        # Ids never reused: a new event gets an id above every id seen.
        out = self.url_open(tool, f"{SCHEME}://check/after-restart")
        if out[0] == "ok":
            top = max([ev_num(i) for i in m.ids_seen if i != out[1]["eventID"]] +
                      [ev_num(i) for i in present_urls.values()] + [0])
            if ev_num(out[1]["eventID"]) <= top:
                self.fail(f"event id reused: a new url.open after the restart got {out[1]['eventID']}, ids up to ev-{top} were handed out")
        else:
            self.fail(f"url.open after the restart without the shim failed: {out[1:]}")
        self.extra_checks()

    def extra_checks(self):
        """(ConcurrentRun: the checks its workload adds)"""

    def acked_of(self, url):
        """What the ack of the event with this URL was answered: "ok", "maybe" or "no"."""
        return self.model.events.get(url, {}).get("acked", "no")

    def share_items(self, c, sh):
        out = self.call(f"share.get {sh['shareID']} (check)", lambda: c.share_get(sh["shareID"]))
        if out[0] != "ok":
            return [{"error": out[1]}]
        items = []
        for it in out[1].get("items", []):
            if "path" in it:
                try:
                    data = Path(it["path"]).read_bytes()
                    items.append({"name": it.get("name"), "sha": hashlib.sha256(data).hexdigest()})
                except OSError as e:
                    items.append({"name": it.get("name"), "error": str(e)})
            elif "url" in it:
                items.append({"url": it["url"]})
            elif "text" in it:
                items.append({"text": it["text"]})
            else:
                items.append({"other": it})
        return items

    def match_share(self, sh, got):
        for marker, s in self.model.shares.items():
            if s["id"] == sh["shareID"]:
                return marker
        key = jkey(got[:1])
        for marker, s in self.model.shares.items():
            if s["id"] is None and jkey(s["items"][:1]) == key:
                return marker
        return None

    # -- all of it -----------------------------------------------------------------------------

    def failed_call(self):
        try:
            for line in Path(self.fi_log).read_text(errors="replace").splitlines():
                if " FAULT" in line or " LIE" in line:
                    return line
        except OSError:
            pass
        return None

    def execute(self):
        self.setup()
        self.workload()
        self.verify()
        return self


class ConcurrentRun(Run):
    """--concurrent K: K client connections at once, each sending bursts of requests without
    waiting for their answers (pipelined), while two subscribed apps read their events, ack them,
    read and complete shares: requests accumulate behind a commit in flight when the fault fires.
    The request scripts come from the seed (the same in every run with that seed); the
    interleaving, and so which call N is, is not: a failing run is re-run with the same command
    line (--repeat R runs it R times)."""

    KINDS = ("tool", "ext", "ext_b", "cas")

    def __init__(self, binary, shim, n, mode, err, work, verbose=False, k=4, seed=1, rounds=6, ops=""):
        super().__init__(binary, shim, n, mode, err, work, verbose)
        self.k, self.seed, self.rounds, self.fi_ops = k, seed, rounds, ops
        self.acked_ids = {}       # eid -> "ok" | "maybe": the best answer of an app.ack naming it
        self.completed_ids = {}   # shareID -> "ok" | "maybe"
        self.delivered_ids = {}   # eid -> (app, url, shareID)
        self.got_shares = {}      # shareID -> the first item's text, from share.get during the run
        self.open_unknown = 0     # share.send {open: true} answered -32603 or not at all (no id)
        self.dver = {}            # group -> {"ok": [versions answered], "maybe": n}
        self.owed_ids = {}        # eid -> app: url.open answered delivered: true
        self.ok_shares = {GROUP: [], GROUP_B: []}  # answered share ids, for the apps to complete
        self.stop = None
        self.present_urls, self.present_shares = {}, {}

    def shim_env(self):
        env = super().shim_env()
        if self.fi_ops:
            env["FI_OPS"] = self.fi_ops
        return env

    def setup(self):
        super().setup()
        (self.state / "apps" / "10-fi.json").write_text(json.dumps(MANIFEST_C))
        (self.state / "apps" / "20-fi-second.json").write_text(json.dumps(MANIFEST_B))

    # -- asyncio plumbing ----------------------------------------------------------------------

    async def aconnect(self, role, bundle=None):
        c = sb_aio.AsyncClient(self.sock, timeout=REQUEST_TIMEOUT)
        try:
            await c.connect()
        except LOST as e:
            raise BrokerGone(f"connect: {e}")
        self.aclients.append(c)
        out = await self.acall(f"hello {role} {bundle or ''}", lambda: c.hello(role, bundle, None))
        if out[0] != "ok":
            raise BrokerGone(f"hello {role} {bundle}: {out[1:]}")
        return c

    async def acall(self, step, fn):
        """One request (others of the connection and of other connections may be in flight):
        ("ok", result) | ("err", code, message, data). No answer (the connection ended): in doubt,
        as -32603."""
        self.step_no += 1
        try:
            out = ("ok", await fn())
        except BrokerError as e:
            out = ("err", e.code, str(e), getattr(e, "data", None))
            self.model.codes[e.code] = self.model.codes.get(e.code, 0) + 1
        except TimeoutError:
            self.fail(f"{step}: no answer within {REQUEST_TIMEOUT:.0f} s (hang)")
            self.lost = self.lost or f"{step}: no answer (hang)"
            out = ("err", -32603, "no answer (hang)", None)
        except LOST as e:
            self.lost = self.lost or f"{step}: connection lost ({type(e).__name__}: {e})"
            out = ("err", -32603, f"no answer: {type(e).__name__}: {e}", None)
        self.model.answers.append((step, out if out[0] == "err" else ("ok",)))
        if self.verbose:
            print(f"    {step[:100]}: {out[0]}{'' if out[0] == 'ok' else ' ' + str(out[1]) + ' ' + out[2][:150]}")
        return out

    # -- the workload --------------------------------------------------------------------------

    def workload(self):
        if not self.start_faulted("first"):
            return
        self.ready_count = self.calls_so_far()
        try:
            asyncio.run(self.aworkload())
            if self.lost and not self.kill_at:
                raise BrokerGone(self.lost)
            rc = self.broker.proc.poll()
            if rc is not None:
                raise BrokerGone(f"at the end: the broker is gone (status {rc})")
            if not self.kill_at:
                self.broker_alive("at the end")
                try:
                    with sb.Client(self.sock, timeout=REQUEST_TIMEOUT) as c:
                        st = c.broker_status()
                    writes = sum(1 for step, _ in self.model.answers
                                 if step.split()[0] in ("url.open", "share.send", "defaults.set", "defaults.remove",
                                                        "app.ack", "share.complete"))
                    self.notes.append(f"{writes} write requests in {st.get('commits')} commits "
                                      f"({st.get('pacedCommits')} paced, {st.get('commitMicros')} us each)")
                except (LOST + (BrokerError,)):
                    pass
        except BrokerGone as e:
            self.broker_gone(e)
        finally:
            self.broker.kill()
        self.settle()

    async def aworkload(self):
        import logging
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # ("socket.send() raised exception" after a kill)
        self.aclients = []
        self.stop = asyncio.Event()
        try:
            subs = [asyncio.ensure_future(self.subscriber(APP, GROUP)),
                    asyncio.ensure_future(self.subscriber(APP_B, GROUP_B))]
            await asyncio.sleep(0.05)
            workers = [asyncio.ensure_future(self.worker(w)) for w in range(self.k)]
            res = await asyncio.gather(*workers, return_exceptions=True)
            self.stop.set()
            res += await asyncio.gather(*subs, return_exceptions=True)
            for r in res:
                if isinstance(r, BrokerGone):
                    raise r
                if isinstance(r, BaseException):
                    raise r
        finally:
            for c in self.aclients:
                try:
                    await asyncio.wait_for(c.close(), 2.0)
                except BaseException:
                    pass

    async def worker(self, w):
        rng = random.Random(self.seed * 7919 + w)
        kind = self.KINDS[w % len(self.KINDS)]
        role, bundle = {"tool": ("tool", None), "ext": ("extension", EXT), "ext_b": ("extension", EXT_B),
                        "cas": ("app", APP)}[kind]
        c = await self.aconnect(role, bundle)
        conn = {"w": w, "kind": kind, "last_eid": -1, "last_ver": {}, "version": {}}
        for r in range(self.rounds):
            if self.lost:
                break
            ops = [self.make_op(kind, conn, r, i, rng) for i in range(rng.randint(2, 8))]
            outs = await asyncio.gather(*(self.acall(op["step"], (lambda op=op: op["fn"](c))) for op in ops))
            for op, out in zip(ops, outs):   # (in the order sent: the broker handles a connection's requests so)
                op["record"](out)
            await asyncio.sleep(rng.random() * 0.005)

    def make_op(self, kind, conn, r, i, rng):
        w = conn["w"]
        tag = f"{w}/{r}/{i}"
        x = rng.random()
        if kind == "cas":
            return self.op_dset(conn, GROUP_C, f"cas-{rng.randint(0, 3)}", rng, cas=True) if x < 0.8 \
                else self.op_dremove(conn, GROUP_C, f"cas-{rng.randint(0, 3)}", rng, cas=True)
        group = {"tool": rng.choice((GROUP, GROUP_B)), "ext": GROUP, "ext_b": GROUP_B}[kind]
        if x < 0.3:
            return self.op_url(conn, f"{SCHEME_OF[group]}://c/{tag}", APP_OF[group])
        if x < 0.75 or kind == "tool":
            return self.op_share(conn, kind, group, tag, rng)
        if x < 0.92:
            return self.op_dset(conn, group, f"w{w}-k{rng.randint(0, 2)}", rng, cas=rng.random() < 0.3)
        return self.op_dremove(conn, group, f"w{w}-k{rng.randint(0, 2)}", rng, cas=False)

    def op_url(self, conn, url, app):
        def record(out):
            e = {"id": None, "created": self.status_of(out), "acked": "no", "app": app}
            if out[0] == "ok":
                e["id"] = out[1]["eventID"]
                self.see_id(e["id"], url)
                self.ids_increase(conn, e["id"], f"url.open {url}")
                if out[1].get("delivered"):
                    self.owed_ids[e["id"]] = app
            self.model.events[url] = e
        return {"step": f"url.open {url}", "fn": lambda c: c.url_open(url), "record": record}

    def ids_increase(self, conn, eid, step):
        if ev_num(eid) <= conn["last_eid"]:
            self.fail(f"{step}: answered {eid}, not above ev-{conn['last_eid']} answered before on the same connection")
        conn["last_eid"] = max(conn["last_eid"], ev_num(eid))

    def op_share(self, conn, kind, group, tag, rng):
        marker = f"cs-{tag}"
        items, expect = [sb.text_item(marker)], [{"text": marker}]
        if rng.random() < 0.4:
            items.append(sb.url_item(f"https://example.org/{tag}"))
            expect.append({"url": f"https://example.org/{tag}"})
        if rng.random() < 0.35:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000)))
            items.append(sb.data_item(data, name="d.bin"))
            expect.append({"name": "d.bin", "sha": hashlib.sha256(data).hexdigest()})
        if rng.random() < 0.3:
            p = self.inputs / f"f-{tag.replace('/', '-')}.dat"
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 40000)))
            p.write_bytes(data)
            items.append(sb.path_item(p))
            expect.append({"name": p.name, "sha": hashlib.sha256(data).hexdigest()})
        y = rng.random()
        open_ = True if y < 0.4 else (f"{SCHEME_OF[group]}://so/{tag}" if y < 0.6 else None)
        ext = (EXT if group == GROUP else EXT_B) if kind == "tool" else None
        app = APP_OF[group]

        def record(out):
            s = {"id": None, "sent": self.status_of(out), "completed": "no", "items": expect,
                 "group": group, "open": open_, "open_url": None}
            if out[0] == "ok":
                s["id"] = out[1]["shareID"]
                self.ok_shares[group].append(s["id"])
                if open_ is not None:
                    url = open_ if isinstance(open_, str) else f"{SCHEME_OF[group]}://open-from-share?share={s['id']}"
                    s["open_url"] = url
                    eid = out[1].get("eventID")
                    self.model.events[url] = {"id": eid, "created": "ok", "acked": "no", "app": app}
                    if eid:
                        self.see_id(eid, url)
                        self.ids_increase(conn, eid, f"share.send {marker}")
                    else:
                        self.fail(f"share.send {marker} with open answered without an eventID: {out[1]}")
            elif isinstance(open_, str):
                self.model.events[open_] = {"id": None, "created": s["sent"], "acked": "no", "app": app}
            elif open_ is True and s["sent"] == "maybe":
                self.open_unknown += 1
            self.model.shares[marker] = s
        return {"step": f"share.send {marker}{' open' if open_ else ''}{' +file' if len(items) > 2 else ''}",
                "fn": lambda c: c.share_send(items, extension=ext, open=open_), "record": record}

    def dver_of(self, group):
        return self.dver.setdefault(group, {"ok": [], "maybe": 0})

    def version_answered(self, conn, group, v, step):
        d = self.dver_of(group)
        if v in d["ok"]:
            self.fail(f"{step}: version {v} of {group} answered twice")
        d["ok"].append(v)
        last = conn["version"].get(group, -1)
        if v <= last:
            self.fail(f"{step}: version {v} not above {last} answered before on the same connection")
        conn["version"][group] = max(last, v)

    def predict(self, conn, group, cas):
        """ifVersion: the last version this connection knows of plus the writes it sent since."""
        if not cas:
            return None
        conn["last_ver"].setdefault(group, 0)
        return conn["last_ver"][group]

    def op_dset(self, conn, group, key, rng, cas=False):
        value = rng.choice([rng.randint(0, 1000), f"v-{rng.getrandbits(32):x}", {"n": rng.random()}, [1, None, "x"]])
        ifv = self.predict(conn, group, cas)
        if cas:
            conn["last_ver"][group] += 1   # (as if it succeeds: the next one in the burst builds on it)
            conn.setdefault("keys", set()).add(key)
        step = f"defaults.set {group} {key}{'' if ifv is None else f' ifVersion {ifv}'}"

        def record(out):
            g = self.model.group(group)
            if out[0] == "ok":
                g["values"][key] = {jkey(value)}
                v = out[1]["version"]
                self.version_answered(conn, group, v, step)
                if ifv is not None and v != ifv + 1:
                    self.fail(f"{step}: answered version {v}")
                conn["last_ver"][group] = max(conn["last_ver"].get(group, 0), v)
            else:
                self.resync(conn, group, out)
                if out[1] == -32603:
                    g["values"].setdefault(key, {ABSENT}).add(jkey(value))
                    self.dver_of(group)["maybe"] += 1
        return {"step": step, "fn": lambda c: c.defaults_set(group, key, value, if_version=ifv), "record": record}

    def op_dremove(self, conn, group, key, rng, cas=False):
        ifv = self.predict(conn, group, cas)
        if cas and key in conn.setdefault("keys", set()):
            conn["last_ver"][group] += 1
            conn["keys"].discard(key)
        step = f"defaults.remove {group} {key}{'' if ifv is None else f' ifVersion {ifv}'}"

        def record(out):
            g = self.model.group(group)
            if out[0] == "ok":
                if out[1].get("removed"):
                    g["values"][key] = {ABSENT}
                    self.version_answered(conn, group, out[1]["version"], step)
                    conn["last_ver"][group] = max(conn["last_ver"].get(group, 0), out[1]["version"])
                elif key in g["values"] and ABSENT not in g["values"][key]:
                    self.fail(f"{step}: removed: false, but the key was set (answered) and never removed")
            else:
                self.resync(conn, group, out)
                if out[1] == -32603:
                    g["values"].setdefault(key, {ABSENT}).add(ABSENT)
                    self.dver_of(group)["maybe"] += 1
        return {"step": step, "fn": lambda c: c.defaults_remove(group, key, if_version=ifv), "record": record}

    def resync(self, conn, group, out):
        if group not in conn["last_ver"]:
            return
        data = out[3] if len(out) > 3 else None
        if out[1] == -32006 and isinstance(data, dict) and isinstance(data.get("version"), int):
            conn["last_ver"][group] = data["version"]
        elif out[1] != -32006:
            conn["last_ver"][group] = max(self.dver_of(group)["ok"] + [0])  # (a guess: conflicts are allowed)

    async def subscriber(self, app, group):
        rng = random.Random(self.seed * 31 + (1 if app == APP else 2))
        c = await self.aconnect("app", app)
        out = await self.acall(f"app.subscribe {app}", lambda: c.app_subscribe())
        if out[0] != "ok":
            self.notes.append(f"app.subscribe {app}: {out[1:3]}")
            return
        seen, tasks, to_ack = set(), [], []
        deadline = None
        while True:
            try:
                ev = await c.next_event(timeout=0.02)
            except (sb.SubscriptionEnded,) + LOST:
                break
            if ev is None:
                if to_ack:
                    tasks.append(asyncio.ensure_future(self.ack(c, to_ack)))
                    to_ack = []
                if self.stop.is_set():
                    if self.lost:
                        break
                    deadline = deadline or time.monotonic() + 5.0
                    missing = [e for e, a in self.owed_ids.items() if a == app and e not in seen]
                    if not missing:
                        break
                    if time.monotonic() > deadline:
                        self.fail(f"{app}: events answered delivered: true never came: {sorted(missing, key=ev_num)[:10]}")
                        break
                continue
            eid = ev["id"]
            url = ev.get("url") or ev.get("webpageURL")
            sid = ev.get("shareID")
            if eid in seen:
                self.fail(f"{app}: event {eid} {url} delivered twice on one subscription")
            if self.acked_ids.get(eid) == "ok":
                self.fail(f"{app}: event {eid} {url} delivered after its ack was answered")
            seen.add(eid)
            self.delivered_ids[eid] = (app, url, sid)
            self.model.delivered.append((app, eid, url))
            self.see_id(eid, url)
            if sid and rng.random() < 0.6:
                tasks.append(asyncio.ensure_future(self.get_share(c, sid, complete=rng.random() < 0.6)))
            elif self.ok_shares[group] and rng.random() < 0.15:
                pick = self.ok_shares[group].pop(rng.randrange(len(self.ok_shares[group])))
                tasks.append(asyncio.ensure_future(self.complete(c, pick)))
            if rng.random() < 0.75:
                to_ack.append(eid)
            if len(to_ack) >= rng.randint(1, 4):
                tasks.append(asyncio.ensure_future(self.ack(c, to_ack)))
                to_ack = []
        await asyncio.gather(*tasks, return_exceptions=True)

    async def ack(self, c, ids):
        out = await self.acall(f"app.ack {ids}", lambda: c.app_ack(ids))
        st = self.status_of(out)
        if st != "no":
            for i in ids:
                if self.acked_ids.get(i) != "ok":
                    self.acked_ids[i] = st

    async def get_share(self, c, sid, complete):
        """What an app does with an open event: reads the share (its first item names the
        request), then, sometimes, completes it right away (pipelined)."""
        futs = [asyncio.ensure_future(self.acall(f"share.get {sid} (from its event)", lambda: c.share_get(sid)))]
        if complete:
            futs.append(asyncio.ensure_future(self.complete(c, sid)))
        outs = await asyncio.gather(*futs)
        out = outs[0]
        if out[0] == "ok":
            items = out[1].get("items") or [{}]
            self.got_shares[sid] = items[0].get("text")

    async def complete(self, c, sid):
        out = await self.acall(f"share.complete {sid}", lambda: c.share_complete(sid))
        st = self.status_of(out)
        if st != "no" and self.completed_ids.get(sid) != "ok":
            self.completed_ids[sid] = st
        return out

    def acked_of(self, url):
        e = self.model.events.get(url)
        if e is not None:
            return e.get("acked", "no")
        for eid, (_, u, _) in self.delivered_ids.items():   # (an open event of a share not answered)
            if u == url:
                return self.acked_ids.get(eid, "no")
        return "no"

    def settle(self):
        """Folds what the apps did (acks, completions by id) into the model once every answer is in."""
        m = self.model
        by_url = {url: eid for eid, (_, url, _) in self.delivered_ids.items()}
        for url, e in m.events.items():
            if e["id"] is None and url in by_url:   # (delivered before, or without, its answer)
                e["id"] = by_url[url]
            st = self.acked_ids.get(e["id"]) if e["id"] else None
            if st:
                e["acked"] = st
        for s in m.shares.values():
            st = self.completed_ids.get(s["id"]) if s["id"] else None
            if st:
                s["completed"] = st
        for group, d in self.dver.items():
            top = max(d["ok"] + [0])
            m.group(group)["versions"] = set(range(top, top + d["maybe"] + 1))

    # -- the checks it adds --------------------------------------------------------------------

    def extra_checks(self):
        m = self.model
        answered_sid = {s["id"] for s in m.shares.values() if s["id"]}
        orphans = {eid: v for eid, v in self.delivered_ids.items() if v[1] not in m.events}
        unknown_shares = set()
        for eid, (app, url, sid) in sorted(orphans.items(), key=lambda kv: ev_num(kv[0])):
            if sid is None or sid in answered_sid:
                continue
            unknown_shares.add(sid)
            marker = self.got_shares.get(sid)
            s = m.shares.get(marker) if marker else None
            if s is not None and s["sent"] == "no":
                self.fail(f"share.send {marker} was answered with an error, but its open event {eid} ({sid}) was delivered")
            acked = self.acked_ids.get(eid)
            if url in self.present_urls and acked == "ok":
                self.fail(f"{app}: event {eid} {url} came back after its ack was answered")
            if url not in self.present_urls and acked is None:
                self.fail(f"{app}: event {eid} {url} was delivered (never acked), and is missing after the restart")
        if len(unknown_shares) > self.open_unknown:
            self.fail(f"{len(unknown_shares)} open events delivered for shares no share.send answered "
                      f"({sorted(unknown_shares)}), but only {self.open_unknown} share.send {{open: true}} were "
                      f"answered -32603 or not at all: one answered -32005 had its event delivered")
        for sid, (marker, group) in self.present_shares.items():
            if self.completed_ids.get(sid) == "ok" and (marker is None or m.shares[marker]["completed"] != "ok"):
                self.fail(f"{group}: share {sid} ({marker}) came back after share.complete was answered")

    def repro(self):
        return (f"python3 scripts/fault-injection/fault_injection.py --concurrent {self.k} --rounds {self.rounds} "
                f"--seed {self.seed} --n {self.n} --mode {self.mode} --errno {self.err}"
                + (f" --also {self.also}" if self.also else "")
                + (f" --kill-at {self.kill_at}" if self.kill_at else "")
                + (" --power-cut" if self.power_cut else "")
                + (f" --ops {self.fi_ops}" if self.fi_ops else "") + " --repeat 10 -v --keep-failed")


class BrokerGone(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# Campaign


def run_one(args, shim, n, mode, err, kill_at=0, power_cut=False, drop_syncs=False, also=""):
    work = tempfile.mkdtemp(prefix=f"sb-fi-{n}-{'pc' + str(kill_at) + '-' if power_cut else ''}", dir=args.tmp)
    run = new_run(args, shim, n, mode, err, work)
    run.kill_at = kill_at
    run.power_cut = power_cut
    run.drop_syncs = drop_syncs
    run.also = also
    try:
        run.execute()
    except Exception as e:  # a bug of the driver is a failed run, with its traceback
        import traceback
        run.fail(f"driver error: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        try:
            run.broker.kill()
        except Exception:
            pass
    run.fault_line = run.failed_call()
    run.cut_at = cut_line(run) if run.power_cut else None
    run.log_tail = run.broker.log_tail() if run.failures else ""
    if isinstance(run, ConcurrentRun):
        run.repro_cmd = run.repro()
    if args.keep or (run.failures and args.keep_failed):
        run.kept = work
    else:
        run.kept = None
        shutil.rmtree(work, ignore_errors=True)
    return run


def new_run(args, shim, n, mode, err, work):
    if args.concurrent:
        return ConcurrentRun(args.broker, shim, n, mode, err, work, verbose=args.verbose, k=args.concurrent,
                             seed=args.seed if args.seed is not None else 1, rounds=args.rounds, ops=args.ops)
    return Run(args.broker, shim, n, mode, err, work, verbose=args.verbose)


def count_calls(args, shim):
    """The counting run: no fault; the number of calls and the trace."""
    work = tempfile.mkdtemp(prefix="sb-fi-count-", dir=args.tmp)
    run = new_run(args, shim, 0, "transient", "EIO", work)
    run.execute()
    trace = Path(run.fi_log).read_text().splitlines() if Path(run.fi_log).exists() else []
    total = run.calls_so_far()
    ready = run.ready_count
    codes = dict(run.model.codes)
    if args.concurrent:  # (compare-and-set conflicts, completions of shares already completed)
        codes = {c: k for c, k in codes.items() if c not in (-32006, -32002)}
    shutil.rmtree(work, ignore_errors=True)
    if run.failures:
        raise SetupError("the workload fails without any fault:\n  " + "\n  ".join(run.failures))
    if codes:
        raise SetupError(f"the workload got errors without any fault: {codes}")
    return total, ready, trace


def plan_sample(total, trace, k, seed):
    """k runs spread over 1..total: one N per stratum; every 5th run sticky, every 6th torn (on a
    write call), every 4th of the others transient with a SIGKILL 1 to 4 calls after the fault
    (a crash before the broker settles what the fault left), the errno drawn."""
    rng = random.Random(seed)
    writes = [i + 1 for i, line in enumerate(trace[:total]) if line.split()[1:2] and line.split()[1] in ("write", "pwrite", "writev")]
    plan = []
    for i in range(k):
        lo = 1 + (total * i) // k
        hi = max(lo, (total * (i + 1)) // k)
        n = rng.randint(lo, hi)
        err = rng.choice(("EIO", "ENOSPC"))  # (not alternating: every mode gets both)
        mode = "transient"
        if i % 5 == 4:
            mode = "sticky"
        elif i % 6 == 5 and writes:
            mode = "torn"
            near = [w for w in writes if lo <= w <= hi]
            n = rng.choice(near or writes)
        kill_at = n + rng.randint(1, 4) if mode == "transient" and i % 4 == 3 else 0
        plan.append((n, mode, err, kill_at, False))
    return plan


def plan_concurrent(ready, total, k, seed, modes):
    """k runs with N spread over the calls after the start (ready+1..total, from the counting
    run: under concurrency the count varies from run to run), the modes taken in turn:
    transient, sticky, torn, kill (transient + a SIGKILL 1-4 calls later), cut (a power cut at N,
    no fault), cutfault (a transient fault at N and a power cut 1-6 calls later), double (transient
    faults at N and 1-8 calls later: a commit's failure, then what undoes it fails)."""
    rng = random.Random(seed)
    lo0 = (ready or 0) + 1
    span = max(1, total - lo0 + 1)
    plan = []
    for i in range(k):
        lo = lo0 + (span * i) // k
        hi = max(lo, lo0 + (span * (i + 1)) // k - 1)
        n = rng.randint(lo, hi)
        err = rng.choice(("EIO", "ENOSPC"))
        mode = modes[i % len(modes)]
        if mode == "kill":
            plan.append((n, "transient", err, n + rng.randint(1, 4), False))
        elif mode == "cut":
            plan.append((0, "transient", "EIO", n, True))
        elif mode == "double":
            d = rng.randint(1, 8)
            plan.append((n, "transient", err, 0, False, f"{n + d}"))
        elif mode == "cutfault":
            plan.append((n, "transient", err, n + rng.randint(1, 6), True))
        else:
            plan.append((n, mode, err, 0, False))
    return plan


def plan_power_cuts(total, k=None, seed=None):
    """Power cuts without a fault: at every call M (k None), or at k calls spread over the
    range (one per stratum, seeded); M = total + 1 is a cut after the workload's last call."""
    if k is None:
        return [(0, "transient", "EIO", m if m <= total else 0, True) for m in range(1, total + 2)]
    rng = random.Random(seed)
    plan = []
    for i in range(k):
        lo = 1 + ((total + 1) * i) // k
        hi = max(lo, ((total + 1) * (i + 1)) // k)
        m = rng.randint(lo, hi)
        plan.append((0, "transient", "EIO", m if m <= total else 0, True))
    return plan


def plan_sweep(total, trace, sticky_every, torn_every, transient=True, kill_after=0):
    plan = [(n, "transient", err, 0, False) for n in range(1, total + 1) for err in ("EIO", "ENOSPC")] if transient else []
    if sticky_every:
        plan += [(n, "sticky", err, 0, False) for n in range(1, total + 1, sticky_every) for err in ("EIO", "ENOSPC")]
    if torn_every:
        writes = [i + 1 for i, line in enumerate(trace[:total]) if line.split()[1:2] and line.split()[1] in ("write", "pwrite", "writev")]
        plan += [(n, "torn", "EIO", 0, False) for n in writes[::torn_every]]
    if kill_after:
        plan += [(n, "transient", "EIO", n + k, False) for n in range(1, total + 1) for k in range(1, kill_after + 1)]
    return plan


def run_label(run):
    if run.power_cut:
        where = f"--kill-at {run.kill_at}" if run.kill_at else "after the workload"
        fault = f"N={run.n} {run.mode} {run.err} + " if run.n else ""
        return f"{fault}power cut {where}"
    return (f"N={run.n} {run.mode} {run.err}{f' --also {run.also}' if run.also else ''}"
            f"{f' --kill-at {run.kill_at}' if run.kill_at else ''}")


def cut_line(run):
    """The call the power cut (the kill) landed on, from calls.log."""
    try:
        for line in Path(run.fi_log).read_text(errors="replace").splitlines():
            if " KILL " in line:
                return line
    except OSError:
        pass
    return None


def describe(run):
    if run.power_cut:
        lines = [f"FAIL {run_label(run)}: cut at: {run.cut_at or '(the end of the workload)'}"
                 + (f"; failed call: {run.fault_line}" if run.n else "")]
    else:
        lines = [f"FAIL {run_label(run)}: failed call: {run.fault_line or '(the fault was not reached)'}"]
    for f in run.failures:
        lines.append(f"    - {f if len(f) < 400 or 'Traceback' in f else f[:400] + '...'}")
    for nt in run.notes:
        lines.append(f"    note: {nt}")
    if run.power_cut and run.cut_notes:
        lines.append(f"    power cut undid {len(run.cut_notes)} things:")
        for nt in run.cut_notes[:40]:
            lines.append(f"      {nt}")
    errs = [(s, o) for s, o in run.model.answers if o[0] == "err"]
    for s, o in errs[:8]:
        lines.append(f"    answered {o[1]} to {s}: {o[2][:160]}")
    if run.kept:
        lines.append(f"    kept: {run.kept}")
    if isinstance(run.__dict__.get("repro_cmd"), str):
        lines.append(f"    again: {run.repro_cmd}")
    if run.log_tail:
        lines.append("    broker log tail:\n" + "\n".join("      " + l for l in run.log_tail.splitlines()[-12:]))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--broker", help="broker binary (default: $SHAREBROKER_BIN, else .build/release/sharebroker, else .build/debug/sharebroker)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--count", action="store_true", help="only the counting run: print the number of calls (and the trace with -v)")
    g.add_argument("--n", type=int, help="one run with the fault at call N")
    g.add_argument("--sample", type=int, metavar="K", help="K runs with N spread over the range (CI)")
    g.add_argument("--sweep", action="store_true", help="every N, EIO and ENOSPC, transient (+ --sticky-every, --torn-every)")
    ap.add_argument("--self-test", action="store_true",
                    help="first check the checks: a run whose disk silently drops every write after the start "
                         "(shim mode lie) must fail; exit 1 if it passes")
    ap.add_argument("--mode", default="transient", choices=("transient", "sticky", "torn", "lie"), help="with --n")
    ap.add_argument("--errno", default="EIO", choices=("EIO", "ENOSPC"), help="with --n")
    ap.add_argument("--kill-at", type=int, default=0, metavar="M",
                    help="with --n: the shim SIGKILLs the broker at call M (a crash right after the fault; "
                         "the run goes on with the check after the restart)")
    ap.add_argument("--power-cut", action="store_true",
                    help="power cuts instead of faults: the kill (--kill-at M, else the end of the workload) is a power "
                         "loss: what was not fsync'd/fdatasync'd is undone (README \"Power cuts\"), then the restart and "
                         "the same checks; with --sweep: a cut at every call (no fault); with --sample K: K cuts spread "
                         "over the range; alone: one cut at --kill-at M (with --n N: after a fault at N)")
    ap.add_argument("--power-cuts", type=int, default=0, metavar="K",
                    help="with --sample (no --power-cut): K power cuts added to the plan, spread over the range")
    ap.add_argument("--seed", type=int, default=None, help="with --sample (default: random, printed)")
    ap.add_argument("--sticky-every", type=int, default=0, metavar="K", help="with --sweep: sticky runs (EIO and ENOSPC) every K calls")
    ap.add_argument("--no-transient", action="store_true", help="with --sweep: leave out the transient runs")
    ap.add_argument("--torn-every", type=int, default=0, metavar="K", help="with --sweep: a torn run on every K-th write call")
    ap.add_argument("--kill-after", type=int, default=0, metavar="K",
                    help="with --sweep: for every N, K more transient EIO runs with a SIGKILL 1..K calls after the fault")
    ap.add_argument("--concurrent", type=int, default=0, metavar="K",
                    help="the concurrent workload: K connections pipelining requests, two subscribed apps "
                         "(README \"The concurrent workload\"); with --n, --sample (modes taken in turn, --modes)")
    ap.add_argument("--rounds", type=int, default=6, help="with --concurrent: bursts per connection (default 6)")
    ap.add_argument("--modes", default="transient,sticky,torn,kill,cut,cutfault,double",
                    help="with --concurrent --sample: the modes taken in turn (default all: "
                         "transient,sticky,torn,kill,cut,cutfault,double)")
    ap.add_argument("--repeat", type=int, default=1, help="with --n: run it this many times (the concurrent "
                    "workload's call numbering varies: a failure may need a few tries)")
    ap.add_argument("--also", default="", metavar="N2,N3", help="with --n: these calls fail too (transient), "
                    "e.g. a commit's fault and then its take-back's")
    ap.add_argument("--ops", default="", help="FI_OPS: count (and fail) only these call classes, e.g. sync,write "
                    "(with --concurrent)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (default 1)")
    ap.add_argument("--budget", type=float, default=0, metavar="SECONDS", help="stop starting runs after this long (0: no limit); the runs not made are reported")
    ap.add_argument("--keep", action="store_true", help="keep every run's directory")
    ap.add_argument("--keep-failed", action="store_true", help="keep the directories of failed runs")
    ap.add_argument("--tmp", default=None, help="where the runs' directories go (default: the system's temp dir)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.power_cut and args.n is None and args.sample is None and not args.sweep and not args.count:
        args.n = 0
    if args.concurrent and args.seed is None:
        args.seed = random.randrange(1 << 30)
    if args.power_cut and args.mode in ("torn", "lie"):
        ap.error("--power-cut goes with transient or sticky faults only")

    if sys.platform != "linux":
        print("fault-injection: skipped: the shim is for Linux (glibc) only")
        return 0
    binary = args.broker or os.environ.get("SHAREBROKER_BIN")
    if not binary:
        for cand in (REPO / ".build" / "release" / "sharebroker", REPO / ".build" / "debug" / "sharebroker"):
            if cand.exists():
                binary = str(cand)
                break
    if not binary or not os.access(binary, os.X_OK):
        print(f"fault-injection: no broker binary ({binary}); swift build -c release --product sharebroker", file=sys.stderr)
        return 2
    args.broker = os.path.abspath(binary)

    shim_dir = tempfile.mkdtemp(prefix="sb-fi-shim-")
    started = time.monotonic()
    try:
        try:
            shim = build_shim(shim_dir)
            if args.n is not None and not args.self_test:
                total, ready, trace = None, None, []
            else:
                total, ready, trace = count_calls(args, shim)
                again = count_calls(args, shim)[0]
                print(f"fault-injection: broker {args.broker}; the workload makes {total} file calls under the state "
                      f"directory ({ready} before the broker answers; a second counting run: {again})")
                if args.count:
                    if args.verbose:
                        print("\n".join(trace))
                    return 0
        except SetupError as e:
            print(f"fault-injection: setup error: {e}", file=sys.stderr)
            return 2

        if args.self_test:
            # Every write from the first call after the broker answered is dropped while the
            # broker is told it succeeded: the answered events, shares and defaults are lost
            # at the SIGKILL, and the checks must say so.
            r = run_one(args, shim, ready + 1, "lie", "EIO")
            missing = [f for f in r.failures if "missing" in f or "is not what was answered" in f]
            if not missing:
                print("fault-injection: self-test FAILED: a disk that drops every write after the start was not "
                      "caught:\n" + describe(r))
                return 1
            print(f"fault-injection: self-test passed: a disk that drops writes is caught "
                  f"({len(r.failures)} violations, e.g. {missing[0]})")
            if args.power_cut or args.power_cuts:
                # A power cut at the end, with the model told to ignore the broker's file syncs
                # (as a disk that acknowledges flushes it does not make): what was answered is
                # lost, and the checks must say so; the same cut honouring them loses nothing.
                r = run_one(args, shim, 0, "transient", "EIO", 0, True, drop_syncs=ready + 1)
                missing = [f for f in r.failures if "missing" in f or "is not what was answered" in f]
                if not missing:
                    print("fault-injection: self-test FAILED: a power cut that ignores every file sync was not "
                          "caught:\n" + describe(r))
                    return 1
                print(f"fault-injection: self-test passed: a power cut on a disk that ignores fdatasync is caught "
                      f"({len(r.failures)} violations, e.g. {missing[0]})")

        if args.concurrent:
            print(f"fault-injection: --concurrent {args.concurrent} --rounds {args.rounds} --seed {args.seed}")
        if args.n is not None:
            plan = [(args.n, args.mode, args.errno, args.kill_at, args.power_cut, args.also)] * max(1, args.repeat)
        elif args.sample is not None and args.concurrent:
            plan = plan_concurrent(ready, total, args.sample, args.seed, args.modes.split(","))
        elif args.sample is not None:
            seed = args.seed if args.seed is not None else random.randrange(1 << 30)
            print(f"fault-injection: --sample {args.sample} --seed {seed}{' --power-cut' if args.power_cut else ''}"
                  + (f" --power-cuts {args.power_cuts}" if args.power_cuts and not args.power_cut else ""))
            if args.power_cut:
                plan = plan_power_cuts(total, args.sample, seed)
            else:
                plan = plan_sample(total, trace, args.sample, seed)
                if args.power_cuts:
                    plan += plan_power_cuts(total, args.power_cuts, seed + 1)
        elif args.power_cut:
            plan = plan_power_cuts(total)
        else:
            plan = plan_sweep(total, trace, args.sticky_every, args.torn_every, not args.no_transient, args.kill_after)

        results = []
        skipped = 0
        lock = threading.Lock()

        def one(item):
            nonlocal skipped
            if args.budget and time.monotonic() - started > args.budget:
                with lock:
                    skipped += 1
                return None
            r = run_one(args, shim, *item[:5], also=item[5] if len(item) > 5 else "")
            with lock:
                results.append(r)
                if r.failures:
                    print(describe(r), flush=True)
                elif args.verbose or args.n is not None:
                    where = (r.cut_at or "(the end of the workload)") if r.power_cut and not r.n else (r.fault_line or "(not reached)")
                    print(f"ok {run_label(r)}: {where}"
                          + (f" ({len(r.cut_notes)} things undone by the power cut)" if r.power_cut else "")
                          + "".join(f"\n    note: {nt}" for nt in r.notes), flush=True)
                if len(results) % 100 == 0:
                    print(f"  ... {len(results)}/{len(plan)} runs, {sum(1 for x in results if x.failures)} failed "
                          f"({time.monotonic() - started:.0f} s)", flush=True)
            return r

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(one, plan))

        failed = [r for r in results if r.failures]
        reached = sum(1 for r in results if r.fault_line)
        refused = sum(1 for r in results if any("start refused" in nt for nt in r.notes))
        cuts = [r for r in results if r.power_cut]
        cuts_at_kill = sum(1 for r in cuts if r.cut_at)
        by_mode = {}
        for r in results:
            k = ("power cut", "") if r.power_cut and not r.n else (r.mode + (" + another" if r.also else "") + (" + power cut" if r.power_cut else " + SIGKILL" if r.kill_at else ""), r.err)
            a, b = by_mode.get(k, (0, 0))
            by_mode[k] = (a + 1, b + (1 if r.failures else 0))
        modes = ", ".join(f"{m}{' ' + e if e else ''}: {a} runs, {b} failed" for (m, e), (a, b) in sorted(by_mode.items()))
        print(f"fault-injection: {len(results)} runs ({modes}); the fault was reached in {reached}, "
              f"start refused in {refused}; {len(failed)} failed"
              + (f"; {len(cuts)} power cuts ({cuts_at_kill} at their call, {len(cuts) - cuts_at_kill} after the workload)" if cuts else "")
              + (f"; {skipped} not run (--budget)" if skipped else "")
              + f" ({time.monotonic() - started:.0f} s)")
        return 1 if failed else 0
    except KeyboardInterrupt:
        return 130
    finally:
        shutil.rmtree(shim_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
