# Measures broker.status round trips on one connection while another rewrites a large defaults
# suite (~15 MiB), which makes the group's journal compact (a whole-suite snapshot) now and then:
# whether compaction holds up the loop.
# Usage: python3 bench/status_during_defaults_compaction.py PATH/TO/sharebroker
import json, os, socket, subprocess, sys, tempfile, threading, time
broker = sys.argv[1]
d = tempfile.mkdtemp(dir=os.environ.get("BENCH_TMP"))  # (on a disk, not tmpfs, for real fsyncs)
state = d + "/state"; os.makedirs(state + "/apps")
json.dump({"bundleID": "com.ex.app", "appGroups": ["group.ex"]}, open(state + "/apps/a.json", "w"))
sock = d + "/s.sock"
p = subprocess.Popen([broker, "serve", "--socket", sock, "--state", state], stderr=subprocess.DEVNULL)
while not os.path.exists(sock): time.sleep(0.01)
time.sleep(0.2)
def conn(hello):
    s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rwb")
    f.write((json.dumps({"jsonrpc": "2.0", "id": 0, "method": "hello", "params": hello}) + "\n").encode()); f.flush(); f.readline(); return f
a = conn({"role": "app", "bundleID": "com.ex.app"}); b = conn({"role": "tool"})
value = "x" * (1000 * 1000 - 100)
def setkey(k):
    a.write((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "defaults.set", "params": {"group": "group.ex", "key": k, "value": value}}) + "\n").encode()); a.flush()
    r = json.loads(a.readline()); assert "result" in r, r
for i in range(15): setkey(f"k{i}")  # the suite: ~15 MB
done = threading.Event(); writes = [0]
def rewrite():
    t = time.monotonic()
    for i in range(120): setkey(f"k{i % 15}"); writes[0] += 1  # ~120 MB of records: a few compactions
    writes.append(time.monotonic() - t); done.set()
lat = []
th = threading.Thread(target=rewrite); th.start()
while not done.is_set():
    t = time.monotonic()
    b.write(b'{"jsonrpc":"2.0","id":2,"method":"broker.status"}\n'); b.flush(); b.readline()
    lat.append(time.monotonic() - t)
th.join()
p.terminate(); p.wait()
subprocess.run(["rm", "-rf", d])
lat.sort()
print(f"{writes[0]} sets of 1 MB took {writes[1]*1000:.0f} ms; status round trips during them: {len(lat)}, p50 {lat[len(lat)//2]*1e6:.0f} us, p99 {lat[len(lat)*99//100]*1000:.1f} ms, max {lat[-1]*1000:.1f} ms")
