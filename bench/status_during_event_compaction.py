# Measures broker.status round trips on one connection while the event journal compacts: an app
# that never acks holds a backlog in the oldest segments, and another app's events (opened and
# acked in batches) fill segments behind it, so compaction keeps carrying the backlog forward
# (up to 4,096 events per commit). Whether those copies hold up the loop.
# Usage: python3 bench/status_during_event_compaction.py PATH/TO/sharebroker [backlog] [rounds] [batch]
#   (rounds of `batch` url.opens then one app.ack of them; batch 1 keeps the loop's own work small,
#   so what a compaction costs the loop shows)
import json, os, socket, subprocess, sys, tempfile, threading, time
broker = sys.argv[1]
backlog = int(sys.argv[2]) if len(sys.argv) > 2 else 40000
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 400
per = int(sys.argv[4]) if len(sys.argv) > 4 else 100
d = tempfile.mkdtemp(dir=os.environ.get("BENCH_TMP"))  # (on a disk, not tmpfs, for real fsyncs)
state = d + "/state"; os.makedirs(state + "/apps")
json.dump({"bundleID": "com.ex.stuck", "urlSchemes": ["stuck"]}, open(state + "/apps/a.json", "w"))
json.dump({"bundleID": "com.ex.busy", "urlSchemes": ["busy"]}, open(state + "/apps/b.json", "w"))
sock = d + "/s.sock"
p = subprocess.Popen([broker, "serve", "--socket", sock, "--state", state, "--journal-segment-size", str(1 << 20)],
                     stderr=subprocess.DEVNULL)
while not os.path.exists(sock): time.sleep(0.01)
time.sleep(0.2)
def conn(hello):
    s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rwb")
    f.write((json.dumps({"jsonrpc": "2.0", "id": 0, "method": "hello", "params": hello}) + "\n").encode()); f.flush(); f.readline(); return f
def batch(f, calls):
    f.write((json.dumps([{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(calls)]) + "\n").encode()); f.flush()
    return json.loads(f.readline())
tool = conn({"role": "tool"}); busy = conn({"role": "app", "bundleID": "com.ex.busy"}); b = conn({"role": "tool"})
pad = "p" * 150
for i in range(0, backlog, 1000):
    r = batch(tool, [("url.open", {"url": f"stuck://item/{j}/{pad}"}) for j in range(i, min(backlog, i + 1000))])
    assert all("result" in x for x in r), r[0]
done = threading.Event(); took = [0.0]
def traffic():
    t = time.monotonic()
    for n in range(rounds):
        r = batch(tool, [("url.open", {"url": f"busy://event/{n}/{j}/{pad}"}) for j in range(per)])
        ids = [x["result"]["eventID"] for x in r]
        r = batch(busy, [("app.ack", {"ids": ids})]); assert "result" in r[0], r
    took[0] = time.monotonic() - t; done.set()
lat = []
th = threading.Thread(target=traffic); th.start()
while not done.is_set():
    t = time.monotonic()
    b.write(b'{"jsonrpc":"2.0","id":2,"method":"broker.status"}\n'); b.flush(); b.readline()
    lat.append(time.monotonic() - t)
th.join()
segments = len([n for n in os.listdir(state + "/queues") if n.endswith(".log")])
p.terminate(); p.wait()
subprocess.run(["rm", "-rf", d])
lat.sort()
print(f"backlog {backlog}; {rounds * per} events opened and acked in {took[0]*1000:.0f} ms ({segments} segments left); "
      f"status round trips during them: {len(lat)}, p50 {lat[len(lat)//2]*1e6:.0f} us, p99 {lat[len(lat)*99//100]*1000:.1f} ms, "
      f"max {lat[-1]*1000:.1f} ms")
