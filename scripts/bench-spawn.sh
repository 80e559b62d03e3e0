#!/usr/bin/env bash
# Spawn cost of /bin/true: plain vs `warden sandbox exec` vs bwrap with
# equivalent restrictions. Median over >= 200 runs (hyperfine).
#
#   scripts/bench-spawn.sh [WARDEN_BINARY]    (default: target/release/warden)
#
# Needs hyperfine and bubblewrap (apt-get install -y hyperfine bubblewrap).
set -euo pipefail
WARDEN="${1:-${CARGO_TARGET_DIR:-target}/release/warden}"
RUNS="${RUNS:-300}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
command -v hyperfine >/dev/null || { echo "hyperfine missing" >&2; exit 1; }
command -v bwrap >/dev/null || { echo "bwrap missing" >&2; exit 1; }
[ -x "$WARDEN" ] || { echo "no warden binary at $WARDEN" >&2; exit 1; }

# bwrap with restrictions equivalent to warden's default profile: fresh
# user+pid+net+ipc+uts+cgroup namespaces, new session, die with parent,
# cleared environment (PATH, LANG, private HOME/TMPDIR), system folders
# read-only, a short /etc list, private writable tmp, /dev nodes, no /proc,
# all capabilities dropped. (bwrap has no Landlock, seccomp deny-list or
# rlimits; warden applies those on top.)
BWRAP=(bwrap --unshare-all --die-with-parent --new-session --cap-drop ALL --clearenv
  --setenv PATH /usr/bin:/bin --setenv LANG C.UTF-8 --setenv HOME /tmp/home --setenv TMPDIR /tmp
  --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64
  --symlink usr/sbin /sbin
  --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache --ro-bind-try /etc/localtime /etc/localtime
  --ro-bind-try /etc/ssl /etc/ssl --ro-bind-try /etc/passwd /etc/passwd --ro-bind-try /etc/group /etc/group
  --ro-bind-try /etc/nsswitch.conf /etc/nsswitch.conf --ro-bind-try /etc/hosts /etc/hosts
  --dev /dev --tmpfs /tmp --dir /tmp/home
  /bin/true)
printf -v BWRAP_CMD '%q ' "${BWRAP[@]}"

# 1. hyperfine, one command after the other.
hyperfine -N --warmup 20 --runs "$RUNS" --export-json "$OUT/spawn.json" \
  -n plain '/bin/true' \
  -n 'warden sandbox exec' "$WARDEN sandbox exec -- /bin/true" \
  -n bwrap "$BWRAP_CMD" >&2

python3 - "$OUT/spawn.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
base = next(r["median"] for r in res if r["command"] == "plain")
print("\nhyperfine (sequential):\n")
print("| command | median | mean ± σ | overhead vs plain (median) |")
print("| --- | --- | --- | --- |")
for r in res:
    print(f"| {r['command']} | {r['median']*1e3:.2f} ms | {r['mean']*1e3:.2f} ± {r['stddev']*1e3:.2f} ms | {(r['median']-base)*1e3:+.2f} ms |")
PY

# 2. Interleaved: each round runs the three commands once, in turn, so a
# noisy neighbour (a shared 2-core machine) hits all three alike.
python3 - "$RUNS" "$WARDEN" "${BWRAP[@]}" <<'PY'
import os, statistics, subprocess, sys, time
runs, warden, bwrap = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
cmds = {"plain": ["/bin/true"],
        "warden sandbox exec": [warden, "sandbox", "exec", "--", "/bin/true"],
        "bwrap": bwrap}
times = {k: [] for k in cmds}
for i in range(runs + 10):
    for name, argv in cmds.items():
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
        if i >= 10:
            times[name].append(time.perf_counter() - t)
base = statistics.median(times["plain"])
print(f"\ninterleaved, {runs} rounds (python subprocess.run, so each figure includes its fork/exec cost):\n")
print("| command | median | p90 | overhead vs plain (median) |")
print("| --- | --- | --- | --- |")
for name, ts in times.items():
    ts.sort()
    med = statistics.median(ts)
    p90 = ts[int(len(ts) * 0.9)]
    print(f"| {name} | {med*1e3:.2f} ms | {p90*1e3:.2f} ms | {(med-base)*1e3:+.2f} ms |")
PY
