#!/usr/bin/env python3
"""One benchmark series, summarized the way bench/RESULTS.md counts it.

A series is three runs of the durable scenarios (status, open, share) followed by one run of
the peers (../shared/bench/peers.sh --items redis --runs 1), on a quiet machine. This script
either runs one (`--run`) or summarizes files already there, and prints the medians, the ratios
to the peers, which targets (issues 4 and 8) the series meets, and whether it is comparable by
the rule used since the eighth session: our `broker.status` at least 150k/s (the VM at its usual
speed), Redis XADD (`appendfsync always`, 16 clients) within 20-32k/s (the disk at its usual
speed), and other processes using under half a core (of 2) during each of our scenarios (a
series with more is not counted; what they used is printed either way).

usage:
  python3 bench/series.py --run                       # build, 3 runs + peers, then the summary
  python3 bench/series.py RUN1 RUN2 RUN3 PEERS        # summarize existing files
  python3 bench/series.py --latest                    # the newest three runs and newest peers file
"""

import glob
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
PEERS_SCRIPT = os.path.join(ROOT, "..", "shared", "bench", "peers.sh")

OTHERS_MAX_CORES = 0.50
STATUS_MIN = 150_000
XADD_RANGE = (20_000, 32_000)


def parse_run(path):
    """The figures of one `bench/run.sh` output file."""
    text = open(path, encoding="utf-8", errors="replace").read()
    out = {"file": os.path.basename(path), "others": []}

    def rate(prefix):
        m = re.search(r"^" + prefix + r".*?\brate=(\d+)/s", text, re.M)
        return int(m.group(1)) if m else None

    out["status"] = rate(r"status\s")
    out["open"] = rate(r"open-sink\s")
    out["share"] = rate(r"share\s+item=url\s")
    m = re.search(r"^open-paced\s.*?open→event p50=(\d+)us p99=(\d+)us", text, re.M)
    out["paced"] = (int(m.group(1)), int(m.group(2))) if m else None
    for m in re.finditer(r"\((\w+): other processes used ([\d.]+) cores", text):
        out["others"].append((m.group(1), float(m.group(2))))
    return out


def parse_peers(path):
    text = open(path, encoding="utf-8", errors="replace").read()

    def median(label):
        m = re.search(re.escape(label) + r": median ([\d.]+)", text)
        return float(m.group(1)) if m else None

    return {
        "file": os.path.basename(path),
        "xadd": median("3b XADD 300 B payload, -c 16 -P 1, AOF fsync always"),
        "set": median("3d SET 300 B, -c 16 -P 1, no AOF"),
        "delivered_p50": median("3c' e2e XADD→XREADGROUP→XACK, 1 producer paced 500/s, AOF fsync always, XADD→delivered p50"),
        "delivered_p99": median("3c' e2e XADD→XREADGROUP→XACK, 1 producer paced 500/s, AOF fsync always, XADD→delivered p99"),
    }


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v):
    return "—" if v is None else f"{v:,.0f}"


def ratio(a, b):
    return None if a is None or not b else a / b


def summarize(runs, peers):
    ours = {k: med([r[k] for r in runs]) for k in ("status", "open", "share")}
    p50 = med([r["paced"][0] for r in runs if r["paced"]])
    p99 = med([r["paced"][1] for r in runs if r["paced"]])
    print("runs:  " + ", ".join(r["file"] for r in runs))
    print("peers: " + peers["file"])
    print()
    print("| figure | sharebroker (median of %d; range) | peer | ratio | target |" % len(runs))
    print("| --- | --- | --- | --- | --- |")

    def row(name, key, peer, target, met):
        values = [r[key] for r in runs if r[key] is not None]
        rng = f"{fmt(min(values))}–{fmt(max(values))}" if values else ""
        q = ratio(ours[key], peer)
        print(f"| {name} | {fmt(ours[key])}/s ({rng}) | {fmt(peer)}/s | {'—' if q is None else f'{q:.2f}×'} | {target} {'✓' if q is not None and met(q) else '✗'} |")
        return q is not None and met(q)

    met = {}
    met["status"] = row("broker.status, 16 clients / Redis SET no AOF", "status", peers["set"], "≥ 1×", lambda q: q >= 1)
    met["open"] = row("durable url.open, 16 openers / Redis XADD always", "open", peers["xadd"], "≥ 2×", lambda q: q >= 2)
    met["share"] = row("durable share.send, 16 clients / Redis XADD always", "share", peers["xadd"], "≥ 2×", lambda q: q >= 2)
    q50, q99 = ratio(p50, peers["delivered_p50"]), ratio(p99, peers["delivered_p99"])
    paced_ok = q50 is not None and q99 is not None and q50 <= 0.6 and q99 <= 0.6
    met["paced"] = paced_ok
    print(
        f"| url.open → event, paced 500/s, p50 / p99 / Redis XADD → delivered | {fmt(p50)} / {fmt(p99)} µs | "
        f"{fmt(peers['delivered_p50'])} / {fmt(peers['delivered_p99'])} µs | "
        f"{'—' if q50 is None else f'{q50:.2f}×'} / {'—' if q99 is None else f'{q99:.2f}×'} | ≤ 0.6× both {'✓' if paced_ok else '✗'} |"
    )
    print()
    reasons = []
    if ours["status"] is None or ours["status"] < STATUS_MIN:
        reasons.append(f"our broker.status {fmt(ours['status'])}/s is under {STATUS_MIN:,}/s (the VM slower than usual)")
    if peers["xadd"] is None or not (XADD_RANGE[0] <= peers["xadd"] <= XADD_RANGE[1]):
        reasons.append(f"Redis XADD {fmt(peers['xadd'])}/s is outside {XADD_RANGE[0]:,}–{XADD_RANGE[1]:,}/s (the disk not at its usual speed)")
    busy = [(r["file"], s, c) for r in runs for (s, c) in r["others"] if c > OTHERS_MAX_CORES]
    for f, s, c in busy:
        reasons.append(f"other processes used {c:.2f} cores during {s} in {f}")
    if len(runs) != 3:
        reasons.append(f"{len(runs)} runs, not 3")
    most = max((c for r in runs for (_, c) in r["others"]), default=None)
    if most is not None:
        print(f"other processes: at most {most:.2f} cores during our scenarios")
    if reasons:
        print("NOT comparable:")
        for r in reasons:
            print("  - " + r)
    else:
        print("comparable: targets met: " + (", ".join(k for k, v in met.items() if v) or "none"))
    return not reasons


def newest(pattern, n):
    files = sorted(glob.glob(os.path.join(RESULTS, pattern)))
    return files[-n:]


def run_series():
    os.chdir(ROOT)
    subprocess.run(["swift", "build", "-c", "release", "--product", "sharebroker"], check=True)
    subprocess.run(["swift", "build", "-c", "release", "--product", "sharebroker-bench"], check=True)
    subprocess.run(["sync"])
    runs = []
    for _ in range(3):
        before = set(glob.glob(os.path.join(RESULTS, "run-*.txt")))
        subprocess.run(
            ["bash", "bench/run.sh", "--scenario", "status", "--scenario", "open", "--scenario", "share"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        new = sorted(set(glob.glob(os.path.join(RESULTS, "run-*.txt"))) - before)
        runs += new[-1:]
    stamp = subprocess.run(["date", "+%Y%m%d-%H%M%S"], capture_output=True, text=True).stdout.strip()
    peers = os.path.join(RESULTS, f"peers-{stamp}.txt")
    with open(peers, "w") as out:
        subprocess.run(["timeout", "600", "bash", PEERS_SCRIPT, "--items", "redis", "--runs", "1"], stdout=out, stderr=subprocess.STDOUT)
    return runs, peers


def main(argv):
    if argv == ["--run"]:
        runs, peers = run_series()
    elif argv == ["--latest"]:
        runs, peers = newest("run-2*.txt", 3), newest("peers-2*.txt", 1)[0]
    elif len(argv) >= 2 and not any(a.startswith("-") for a in argv):
        runs, peers = argv[:-1], argv[-1]
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 64
    comparable = summarize([parse_run(r) for r in runs], parse_peers(peers))
    return 0 if comparable else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
