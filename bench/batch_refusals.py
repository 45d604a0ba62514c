# A 5,000-member batch of broker.status against --max-output 4096: bytes of the batch reply
# (how much output refusals cost; bench/RESULTS.md, twelfth session).
# Usage: python3 bench/batch_refusals.py PATH/TO/sharebroker
import json, os, socket, subprocess, sys, tempfile, time
broker = sys.argv[1]
d = tempfile.mkdtemp(dir=os.environ.get("BENCH_TMP")); state = d + "/state"; os.makedirs(state + "/apps")
sock = d + "/s.sock"
p = subprocess.Popen([broker, "serve", "--socket", sock, "--state", state, "--max-output", "4096"], stderr=subprocess.DEVNULL)
while not os.path.exists(sock): time.sleep(0.01)
time.sleep(0.2)
s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rwb")
n = 5000
batch = "[" + ",".join('{"jsonrpc":"2.0","id":%d,"method":"broker.status"}' % i for i in range(1, n + 1)) + "]\n"
f.write(batch.encode()); f.flush()
line = f.readline()
p.terminate(); p.wait(); subprocess.run(["rm", "-rf", d])
r = json.loads(line)
print(f"request {len(batch)} bytes, reply {len(line)} bytes ({len(line)/len(batch):.1f}x), refused {sum(1 for x in r if 'error' in x)} of {n}")
