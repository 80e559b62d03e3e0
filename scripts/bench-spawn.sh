#!/usr/bin/env bash
# Start cost of /bin/true: plain vs `warden sandbox exec` (this build, and
# optionally an older warden for a "before" column) vs bwrap with
# equivalent restrictions, side by side in one run.
#
#   scripts/bench-spawn.sh [WARDEN] [BEFORE_WARDEN]
#
#   WARDEN         default: ${CARGO_TARGET_DIR:-target}/release/warden
#   BEFORE_WARDEN  an older build to compare with (optional)
#   RUNS           rounds (default 300)
#
# Needs hyperfine and bubblewrap (apt-get install -y hyperfine bubblewrap).
set -euo pipefail
WARDEN="${1:-${CARGO_TARGET_DIR:-target}/release/warden}"
BEFORE="${2:-}"
RUNS="${RUNS:-300}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
command -v hyperfine >/dev/null || { echo "hyperfine missing" >&2; exit 1; }
command -v bwrap >/dev/null || { echo "bwrap missing" >&2; exit 1; }
[ -x "$WARDEN" ] || { echo "no warden binary at $WARDEN" >&2; exit 1; }
cd /tmp

# bwrap with what warden's default profile has, mount namespace included:
# fresh user+pid+net+ipc+mount namespaces, die with the parent, a new
# session, no capabilities, a cleared environment, /usr read-only with the
# merged-/usr symlinks, warden's /etc list and /sys/devices/system/cpu
# read-only with /etc/ssl/private hidden, /dev nodes, a fresh /proc (its
# owner-only files covered, for root, as warden does), a 256 MB tmpfs
# /tmp with HOME in it. (bwrap has no Landlock, seccomp filter, cgroups or rlimits; warden
# applies those on top.)
ETC=(/etc/ld.so.cache /etc/ld.so.conf /etc/ld.so.conf.d /etc/localtime /etc/timezone /etc/ssl
  /etc/ca-certificates /etc/pki /etc/crypto-policies /etc/resolv.conf /etc/hosts /etc/host.conf
  /etc/nsswitch.conf /etc/gai.conf /etc/passwd /etc/group /etc/services /etc/protocols
  /etc/mime.types /etc/alternatives /etc/os-release /etc/locale.alias /etc/locale.conf
  /etc/debian_version /sys/devices/system/cpu)
BWRAP=(bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --die-with-parent --new-session
  --cap-drop ALL --clearenv --setenv PATH /usr/bin:/bin --setenv HOME /tmp/home --setenv TMPDIR /tmp
  --ro-bind /usr /usr)
for l in /bin /sbin /lib /lib32 /lib64 /libx32; do
  if [ -L "$l" ]; then BWRAP+=(--symlink "$(readlink "$l")" "$l"); elif [ -d "$l" ]; then BWRAP+=(--ro-bind "$l" "$l"); fi
done
for e in "${ETC[@]}"; do BWRAP+=(--ro-bind-try "$e" "$e"); done
# What warden hides inside those grants (the host's TLS private keys).
[ -d /etc/ssl/private ] && BWRAP+=(--tmpfs /etc/ssl/private --remount-ro /etc/ssl/private)
BWRAP+=(--dev /dev --proc /proc)
# Started by root, warden covers the kernel's owner-only files of the
# fresh /proc (crates/warden-sandbox/src/proc_mask.rs): bwrap gets the
# same covers, those its fresh /proc has (found by the same walk).
if [ "$(id -u)" = 0 ]; then
  mapfile -t covers < <(find /proc -mindepth 1 -maxdepth 9 \
    \( -path '/proc/[0-9]*' -o -path /proc/self -o -path /proc/thread-self \) -prune -o \
    \( -type d ! -perm -005 -printf 'd %p\n' -prune \) -o \
    \( -type f ! -perm -004 -perm -400 -printf 'f %p\n' \) 2>/dev/null)
  mapfile -t present < <(bwrap --unshare-user --unshare-pid --unshare-net --ro-bind / / --proc /proc \
    /bin/sh -c 'for f; do [ -e "${f#? }" ] && echo "$f"; done; true' sh "${covers[@]}")
  for c in "${present[@]}"; do
    if [ "${c%% *}" = d ]; then BWRAP+=(--tmpfs "${c#d }" --remount-ro "${c#d }")
    else BWRAP+=(--ro-bind /dev/null "${c#f }"); fi
  done
fi
BWRAP+=(--size 268435456 --tmpfs /tmp --dir /tmp/home --chdir /tmp /bin/true)
printf -v BWRAP_CMD '%q ' "${BWRAP[@]}"

names=(plain)
cmds=("/bin/true")
if [ -n "$BEFORE" ]; then
  names+=("warden before"); cmds+=("$BEFORE sandbox exec -- /bin/true")
fi
names+=("warden sandbox exec" "bwrap (same namespaces + view)")
cmds+=("$WARDEN sandbox exec -- /bin/true" "$BWRAP_CMD")

# 1. hyperfine, one command after the other.
args=()
for i in "${!names[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
hyperfine -N --warmup 20 --runs "$RUNS" --export-json "$OUT/spawn.json" "${args[@]}" >&2
python3 - "$OUT/spawn.json" <<'PY'
import json, os, sys
res = json.load(open(sys.argv[1]))["results"]
base = next(r["median"] for r in res if r["command"] == "plain")
ld = os.getloadavg()
print(f"\nhyperfine (sequential), load {ld[0]:.1f}/{ld[1]:.1f}/{ld[2]:.1f}:\n")
print("| command | median | mean ± σ | overhead vs plain (median) |")
print("| --- | --- | --- | --- |")
for r in res:
    print(f"| {r['command']} | {r['median']*1e3:.2f} ms | {r['mean']*1e3:.2f} ± {r['stddev']*1e3:.2f} ms | {(r['median']-base)*1e3:+.2f} ms |")
PY

# 2. Interleaved: each round runs every command once, in a shuffled order,
# so a noisy neighbour on a shared machine hits all alike.
python3 - "$RUNS" "${#names[@]}" "${names[@]}" "${cmds[@]}" <<'PY'
import os, random, shlex, statistics, subprocess, sys, time
runs, n = int(sys.argv[1]), int(sys.argv[2])
names, cmds = sys.argv[3:3 + n], [shlex.split(c) for c in sys.argv[3 + n:3 + 2 * n]]
times = {k: [] for k in names}
order = list(range(n))
for i in range(runs + 10):
    random.shuffle(order)
    for j in order:
        t = time.perf_counter()
        r = subprocess.run(cmds[j], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        d = time.perf_counter() - t
        if r.returncode != 0:
            sys.exit(f"{names[j]} failed: {r.returncode} {r.stderr.decode()[:300]}")
        if i >= 10:
            times[names[j]].append(d)
base = statistics.median(times["plain"])
ld = os.getloadavg()
print(f"\ninterleaved, {runs} rounds, load {ld[0]:.1f}/{ld[1]:.1f}/{ld[2]:.1f} (timed from Python: its fork/exec is in every row):\n")
print("| command | median | p10 | p90 | overhead vs plain (median) |")
print("| --- | --- | --- | --- | --- |")
for k in names:
    v = sorted(times[k])
    q = lambda p: v[int(p * (len(v) - 1))] * 1e3
    print(f"| {k} | {statistics.median(v)*1e3:.2f} ms | {q(0.1):.2f} | {q(0.9):.2f} | {(statistics.median(v)-base)*1e3:+.2f} ms |")
PY
