#!/usr/bin/env bash
# What warden adds, measured in one run and printed as one table (issue 15):
# per-call latency (median, p90, p99) and throughput (1, 8, 64 concurrent
# callers) of npm server-everything's `echo` called directly, through a
# bare rmcp proxy (the floor of any proxy built on rmcp: no policy, no
# audit), through `warden gateway --stdio` and through `Host::call`
# in-process, at 16 B,
# 10 KB and 100 KB, with the server unsandboxed (trusted) and sandboxed;
# server start (/bin/true: plain, warden's launch seam, bwrap); a cold
# `warden call` from process start to exit (hyperfine) and to its result
# on stdout; the RSS of a gateway with 10 servers and its peak during
# 10,000 calls.
#
#   scripts/bench.sh [--quick]
#
#   --quick            a smoke run (~1 min): fewer rounds and calls
#   CARGO_TARGET_DIR   where to build (default target)
#   BENCH_PROFILE      the cargo profile measured (default dist: what is
#                      installed or packaged, Cargo.toml; release builds
#                      faster, and its 16 B calls take about 1.15x the CPU)
#   BENCH_OUT          keep the raw results here (default: a temp folder)
#   BENCH_RSS_CALLERS  concurrent callers of the RSS run (default 64)
#
# Needs: cargo, node + tests/npm (scripts/test-deps.sh), python3 (only to
# print the table), hyperfine and bubblewrap (installed with apt-get when
# missing and running as root; else: apt-get install hyperfine bubblewrap).
# The calls, start and RSS figures come from benches/calls.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    *) echo "usage: scripts/bench.sh [--quick]" >&2; exit 2 ;;
  esac
done

need=()
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v bwrap >/dev/null || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${need[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >&2
  else
    echo "missing: ${need[*]} (apt-get install ${need[*]})" >&2
    exit 1
  fi
fi
EVERYTHING=tests/npm/node_modules/.bin/mcp-server-everything
[ -x "$EVERYTHING" ] || { echo "$EVERYTHING missing: run scripts/test-deps.sh" >&2; exit 1; }

TARGET="${CARGO_TARGET_DIR:-target}"
PROFILE="${BENCH_PROFILE:-dist}"
OUT="${BENCH_OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
WORLD="$(mktemp -d)"
trap 'rm -rf "$WORLD"' EXIT
mkdir -p "$WORLD/home" "$WORLD/config" "$WORLD/workspace"
# warden never sees the real HOME; the toolchains keep theirs.
export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
export PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}"
export HOME="$WORLD/home" WARDEN_CONFIG_DIR="$WORLD/config" TMPDIR="$WORLD"
unset RUST_LOG

# One build: `cargo bench` builds the binaries the benches use (with the
# dev-dependencies' features), so a separate `cargo build` would
# only relink warden back and forth.
echo "building (profile $PROFILE)…" >&2
cargo bench --locked --profile "$PROFILE" --no-run --bench calls >&2
WARDEN="$TARGET/$PROFILE/warden"

# 1. calls, server start, RSS (benches/calls.rs; JSON lines).
echo "calls, server start, RSS…" >&2
BENCH_QUICK=$QUICK cargo bench --locked --profile "$PROFILE" --bench calls -- start calls rss >"$OUT/calls.jsonl"

# 2. A cold `warden call`: process start → exit, and → the result printed,
# the server started and stopped each time (plain and sandboxed).
EVERYTHING_ABS="$(realpath "$EVERYTHING")"  # the sandbox grants the real install prefix
for mode in plain sandbox; do
  if [ "$mode" = plain ]; then extra='"trust": "trusted", "sandbox": false,'; else extra=''; fi
  cat >"$WORLD/$mode.json" <<EOF
{"mcpServers": {"everything": {$extra "command": "$EVERYTHING_ABS", "args": ["stdio"]}},
 "permissions": {"allow": ["mcp__everything__echo"]},
 "audit": {"path": "$WORLD/audit-$mode.jsonl", "fsync": "batch"}}
EOF
done
RUNS=$([ "$QUICK" = 1 ] && echo 5 || echo 30)
call() { printf '%q ' "$WARDEN" --ci --config "$WORLD/$1.json" --workspace "$WORLD/workspace" call everything echo --args '{"message":"hi"}'; }
echo "cold warden call…" >&2
hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$OUT/cold.json" \
  -n cold_plain "$(call plain)" -n cold_sandbox "$(call sandbox)" >&2
# hyperfine times the whole process, which ends only after warden has
# stopped the server: closed its stdin and, for a server that ignores that
# (server-everything's timers keep node alive), waited 2 s as the official
# SDKs do before SIGTERM. The result itself is printed before that: time
# it to its first line on stdout, the same runs alternating.
# `direct` is the same call without warden: the server started, initialized,
# called (JSON-RPC lines written here), its answer read.
python3 - "$OUT/cold_result.json" "$RUNS" "$WARDEN" "$WORLD" "$EVERYTHING_ABS" <<'PY' >&2
import json, subprocess, sys, time
out, runs, warden, world, everything = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
times = {"direct": [], "plain": [], "sandbox": []}

def direct():
    started = time.perf_counter()
    proc = subprocess.Popen([everything, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=f"{world}/workspace")
    def send(m):
        proc.stdin.write((json.dumps(m) + "\n").encode()); proc.stdin.flush()
    def answer(i):
        while True:
            line = proc.stdout.readline()
            if not line:
                sys.exit("cold direct: the server closed its output")
            message = json.loads(line)
            if message.get("id") == i:
                return message
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
          "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
    answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}}})
    answer(1)
    printed = time.perf_counter()
    proc.kill(); proc.wait()
    return (printed - started) * 1e6

for n in range(runs):
    for mode in times:
        if mode == "direct":
            times[mode].append(direct())
            continue
        cmd = [warden, "--ci", "--config", f"{world}/{mode}.json", "--workspace", f"{world}/workspace",
               "call", "everything", "echo", "--args", '{"message":"hi"}']
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = proc.stdout.readline()
        printed = time.perf_counter()
        proc.stdout.read()
        code = proc.wait()
        if code != 0 or not line.startswith(b"Echo: hi"):
            sys.exit(f"cold {mode}: exit {code}, first line {line!r}")
        times[mode].append((printed - started) * 1e6)
json.dump(times, open(out, "w"))
print("cold warden call, process start to result printed: "
      + ", ".join(f"{m} {sorted(t)[len(t) // 2] / 1000:.0f} ms" for m, t in times.items()))
PY

# 3. The table.
COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src crates benches || echo '+changes')"
python3 - "$OUT/calls.jsonl" "$OUT/cold.json" "$COMMIT" "$QUICK" "$OUT/cold_result.json" <<'PY'
import datetime, json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cold = json.load(open(sys.argv[2]))["results"]
commit, quick = sys.argv[3], sys.argv[4] == "1"
ld = os.getloadavg()
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
print(f"scripts/bench.sh{' --quick' if quick else ''}: {now}, commit {commit}, "
      f"load average {ld[0]:.2f} {ld[1]:.2f} {ld[2]:.2f}, {os.cpu_count()} CPUs\n")
us = lambda v: f"{v:,.0f} µs" if v < 10000 else f"{v/1000:,.2f} ms"
print("| measurement | path | sandbox | size | median | p90 | p99 | 1 caller | 8 callers | 64 callers | vs direct (median added; throughput at 64) | vs rmcp passthrough (median added; throughput at 64) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
calls = [r for r in rows if r["kind"] == "call"]
direct = {r["bytes"]: r for r in calls if r["path"] == "direct"}
floor = {r["bytes"]: r for r in calls if r["path"] == "rmcp passthrough"}
size = lambda b: f"{b} B" if b < 1024 else f"{b // 1024} KB"
for b in sorted(direct):
    for r in [c for c in calls if c["bytes"] == b]:
        d = direct[b]
        if r["path"] == "direct":
            vs = "—"
        else:
            added = r["median_us"] - d["median_us"]
            vs = (f"+{added:,.0f} µs ({100 * added / d['median_us']:+.0f} %); "
                  f"{100 * r['calls_per_s_64'] / d['calls_per_s_64']:.0f} %")
        f = floor.get(b)
        if f is None or r["path"] in ("direct", "rmcp passthrough"):
            vs_floor = "—"
        else:
            over = r["median_us"] - f["median_us"]
            vs_floor = (f"{over:+,.0f} µs; "
                        f"{100 * r['calls_per_s_64'] / f['calls_per_s_64']:.0f} %")
        print(f"| call `echo` | {r['path']} | {r['sandbox']} | {size(b)} | {us(r['median_us'])} | "
              f"{us(r['p90_us'])} | {us(r['p99_us'])} | {r['calls_per_s_1']:,.0f}/s | "
              f"{r['calls_per_s_8']:,.0f}/s | {r['calls_per_s_64']:,.0f}/s | {vs} | {vs_floor} |")
starts = {r["path"]: r for r in rows if r["kind"] == "start"}
names = {"plain": "plain spawn", "seam_plain": "launch seam, sandbox off",
         "seam_sandbox": "launch seam, sandboxed", "bwrap": "bwrap (the same view: every bind, hidden path and /proc cover of warden's plan)",
         "bwrap_floor": "bwrap (namespaces, /usr, /dev, /proc, /tmp only)"}
base = starts.get("plain", {}).get("median_us")
for k, r in starts.items():
    vs = "—" if k == "plain" else f"+{(r['median_us'] - base) / 1000:.2f} ms"
    print(f"| server start (`/bin/true`, {r['n']} runs) | {names.get(k, k)} | | | {us(r['median_us'])} | "
          f"{us(r['p90_us'])} | {us(r['p99_us'])} | | | | {vs} | |")
for r in cold:
    t = sorted(r["times"])
    q = lambda p: t[round((len(t) - 1) * p)] * 1e6
    print(f"| cold `warden call` (process start → exit, {len(t)} runs) | {r['command']} | | 16 B | "
          f"{us(r['median'] * 1e6)} | {us(q(0.9))} | {us(q(0.99))} | | | | | |")
for mode, t in json.load(open(sys.argv[5])).items():
    t = sorted(t)
    q = lambda p: t[round((len(t) - 1) * p)]
    what = "the server alone" if mode == "direct" else f"cold_{mode}"
    print(f"| cold `warden call` (process start → result printed, {len(t)} runs) | {what} | | 16 B | "
          f"{us(q(0.5))} | {us(q(0.9))} | {us(q(0.99))} | | | | | |")
for r in [r for r in rows if r["kind"] == "rss"]:
    print(f"| RSS of `warden gateway --stdio`, {r['servers']} servers ({r['tools']} tools) connected | gateway | plain | | "
          f"{r['rss_connected_kb'] / 1024:.1f} MB | | | | | | | |")
    print(f"| peak RSS (VmHWM) over {r['calls']:,} calls, {r.get('callers', 64)} callers | gateway | plain | 16 B | "
          f"{r['peak_kb'] / 1024:.1f} MB | | | | | {r['calls_per_s']:,.0f}/s | after: {r['rss_after_kb'] / 1024:.1f} MB | |")
PY
echo "raw results: $OUT" >&2
