#!/usr/bin/env bash
# Peer anchor for the `recovery` scenario: Redis restart time over N stream entries.
# Starts a private redis-server (unix socket only, appendonly yes, appendfsync always, no RDB
# snapshots) in a fresh /tmp directory, adds N entries with XADD (redis-benchmark, 16 clients,
# pipeline 16, ~60-byte entries as our url.open events), stops it with SIGTERM or SIGKILL, starts it
# again on the same AOF and times from the spawn until `XLEN` answers N. Stops its servers by PID.
#
# usage: bench/redis_recovery.sh [N=100000]
set -euo pipefail
n="${1:-100000}"
command -v redis-server >/dev/null || { echo "redis-server is not installed (bench peers.sh installs it)" >&2; exit 69; }
dir="$(mktemp -d /tmp/sb-redis-recovery-XXXXXX)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
sock="$dir/redis.sock"
cat > "$dir/redis.conf" <<CONF
port 0
unixsocket $sock
unixsocketperm 700
daemonize no
dir $dir
save ""
appendonly yes
appendfsync always
auto-aof-rewrite-percentage 0
logfile $dir/redis.log
CONF
now() { date +%s%N; }
start() { redis-server "$dir/redis.conf" & pid=$!; }
for sig in TERM KILL; do
    rm -rf "$dir/appendonlydir" "$dir"/*.aof
    start
    until redis-cli -s "$sock" ping >/dev/null 2>&1; do sleep 0.01; done
    t0=$(now)
    redis-benchmark -s "$sock" -n "$n" -c 16 -P 16 -q XADD bench:events '*' url 'benchapp://r?i=123456' kind openURL via scheme >/dev/null
    fill_ms=$(( ($(now) - t0) / 1000000 ))
    len=$(redis-cli -s "$sock" xlen bench:events)
    aof=$(du -sb "$dir" | cut -f1)
    kill -"$sig" "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    t0=$(now)
    start
    first=""
    while :; do
        got=$(redis-cli -s "$sock" xlen bench:events 2>/dev/null || true)
        [[ -z "$first" && -n "$got" && "$got" =~ ^[0-9]+$ ]] && first=$(( ($(now) - t0) / 1000000 ))
        [[ "$got" == "$len" ]] && break
        sleep 0.001
    done
    ready=$(( ($(now) - t0) / 1000000 ))
    echo "redis-recovery stop=SIG$sig entries=$len fill=${fill_ms}ms restart→XLEN=$len in ${ready}ms (first answer ${first}ms) data=$((aof / 1024))KiB ($(redis-server --version | cut -d' ' -f3), appendfsync always)"
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    redis-cli -s "$sock" ping >/dev/null 2>&1 && { echo "redis still running?" >&2; exit 70; }
    rm -rf "$dir/appendonlydir"
done
