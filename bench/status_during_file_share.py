# Measures broker.status round trips on one connection while another sends a 255-MiB path share:
# whether file work holds up the loop (bench/RESULTS.md, twelfth session).
# Usage: python3 bench/status_during_file_share.py PATH/TO/sharebroker
import json, os, socket, subprocess, sys, tempfile, threading, time
broker = sys.argv[1]
d = tempfile.mkdtemp(dir=os.environ.get("BENCH_TMP"))  # (on a disk, not tmpfs, for real fsyncs)
state = d + "/state"; os.makedirs(state + "/apps")
json.dump({"bundleID": "com.ex.pdf", "appGroups": ["group.ex"], "extensions": [{"bundleID": "com.ex.pdf.share", "point": "com.apple.share-services", "appGroups": ["group.ex"], "activationRule": "TRUEPREDICATE"}]}, open(state + "/apps/a.json", "w"))
src = d + "/big.bin"
with open(src, "wb") as f:
    chunk = os.urandom(1 << 20)
    for _ in range(255): f.write(chunk)
sock = d + "/s.sock"
p = subprocess.Popen([broker, "serve", "--socket", sock, "--state", state], stderr=subprocess.DEVNULL)
while not os.path.exists(sock): time.sleep(0.01)
time.sleep(0.2)
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rwb")
    f.write(b'{"jsonrpc":"2.0","id":0,"method":"hello","params":{"role":"tool"}}\n'); f.flush(); f.readline(); return f
a = conn(); b = conn()
res = {}
def share():
    t = time.monotonic()
    a.write((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "share.send", "params": {"items": [{"path": src}], "extension": "com.ex.pdf.share"}}) + "\n").encode()); a.flush()
    r = json.loads(a.readline()); res["share"] = (time.monotonic() - t, "result" in r)
lat = []
th = threading.Thread(target=share); th.start()
while th.is_alive():
    t = time.monotonic()
    b.write(b'{"jsonrpc":"2.0","id":2,"method":"broker.status"}\n'); b.flush(); b.readline()
    lat.append(time.monotonic() - t)
th.join()
p.terminate(); p.wait()
subprocess.run(["rm", "-rf", d])
lat.sort()
print(f"share of 255 MiB took {res['share'][0]*1000:.0f} ms (ok={res['share'][1]}); status round trips during it: {len(lat)}, p50 {lat[len(lat)//2]*1e6:.0f} us, max {lat[-1]*1000:.1f} ms")
