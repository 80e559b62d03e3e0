#!/usr/bin/env python3
"""Where a call's time goes: wall time and CPU per call, warden's own and
its server's, for npm server-everything's `echo` called directly and
through `warden gateway --stdio` (issue 15).

  scripts/bench-cpu.py [--calls N] [--bytes B] [--variant V] [--warden PATH] [--rounds R]
                      [--passthrough PATH] [--before PATH] [--before-env KEY=VALUE]

  --variant  full     the shipped default.rego and an audit log (`batch`)
             norego   `"policy": []` (rules only), audit on
             noaudit  default.rego, no audit log
             neither  no Rego, no audit log
  --warden   the binary (default: target/release/warden, or
             $CARGO_TARGET_DIR/release/warden)
  --passthrough  the calls bench's binary (`cargo bench --no-run --bench
             calls` prints its path): adds its bare rmcp proxy (no policy,
             no audit) as a third setup, the floor of any rmcp proxy
  --before   an older warden build, run as a fourth setup (`before`)
  --before-env KEY=VALUE  the `before` setup is this build run with KEY set
             (e.g. TOKIO_WORKER_THREADS=2: the runtime before the tenth
             pass), for a before/after of a change a variable undoes

The client writes JSON-RPC lines itself (no SDK: its own cost is the same
for every setup) and measures each call from write to answer. CPU comes
from /proc/PID/stat of the process it started (user and system, its
threads included) and of that process's children (the server), read
before and after the timed calls, so a figure is that process's own work
per call, whatever the other processes on the two cores did. Setups
alternate within each round; compare figures of one run only.

Needs node and tests/npm (scripts/test-deps.sh). Uses a temporary HOME,
WARDEN_CONFIG_DIR and workspace; leaves nothing behind.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERYTHING = os.path.join(ROOT, "tests/npm/node_modules/.bin/mcp-server-everything")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid):
    """(user, system) seconds of `pid`, its threads included."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def switches_of(pid):
    """Context switches (voluntary and not) of `pid`, its threads included."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def tree(root):
    """`root` and its descendants: {pid: parent}."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    parent = {int(p): int(pp) for p, pp in (line.split() for line in out.splitlines())}
    found, changed = {root}, True
    while changed:
        changed = False
        for pid, pp in parent.items():
            if pp in found and pid not in found:
                found.add(pid)
                changed = True
    return found


def cpu(root):
    """{'self': (user, sys, switches), 'children': (…)} for `root`'s tree."""
    totals = {"self": [0.0, 0.0, 0], "children": [0.0, 0.0, 0]}
    for pid in tree(root):
        try:
            user, system = cpu_of(pid)
            switches = switches_of(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
        side = totals["self" if pid == root else "children"]
        side[0] += user
        side[1] += system
        side[2] += switches
    return totals


def run(setup, calls, size, warden, variant, world, other=None, before_env=None):
    """One setup's figures; `other` is the passthrough binary or the
    `before` build; `before_env` (KEY, VALUE) is set for `before` only."""
    env = dict(os.environ, HOME=f"{world}/home", WARDEN_CONFIG_DIR=f"{world}/config", TMPDIR=world)
    env.pop("RUST_LOG", None)
    if setup == "before" and before_env:
        env[before_env[0]] = before_env[1]
    everything = os.path.realpath(EVERYTHING)
    if setup == "direct":
        cmd, tool = [everything, "stdio"], "echo"
    elif setup == "passthrough":
        cmd, tool = [other, "passthrough"], "echo"
    else:
        if setup == "before" and other:
            warden = other
        config = {
            "mcpServers": {"everything": {"trust": "trusted", "sandbox": False,
                                          "command": everything, "args": ["stdio"]}},
            "permissions": {"allow": ["mcp__everything__echo"]},
            "audit": {"path": f"{world}/audit.jsonl", "fsync": "batch"},
        }
        if variant in ("norego", "neither"):
            config["policy"] = []
        if variant in ("noaudit", "neither"):
            del config["audit"]
        with open(f"{world}/warden.json", "w") as f:
            json.dump(config, f)
        cmd = [warden, "--config", f"{world}/warden.json", "--workspace", f"{world}/workspace",
               "gateway", "--stdio"]
        tool = "everything__echo"
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=f"{world}/workspace")

    def send(message):
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    def answer(ident):
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"{setup}: the server closed its output")
            message = json.loads(line)
            if message.get("id") == ident:
                return message

    try:
        send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "bench-cpu", "version": "0"}}})
        answer(0)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        arguments = {"message": "x" * size}

        def call(ident):
            send({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                  "params": {"name": tool, "arguments": arguments}})
            reply = answer(ident)
            if "result" not in reply or reply["result"].get("isError"):
                raise SystemExit(f"{setup}: {reply}")

        for ident in range(1, 101):  # warm-up
            call(ident)
        before = cpu(proc.pid)
        latencies = []
        for ident in range(1000, 1000 + calls):
            started = time.perf_counter()
            call(ident)
            latencies.append(time.perf_counter() - started)
        after = cpu(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    per_call = lambda side, i: (after[side][i] - before[side][i]) / calls * 1e6
    latencies.sort()
    return {
        "median_us": statistics.median(latencies) * 1e6,
        "mean_us": sum(latencies) / calls * 1e6,
        "self_user_us": per_call("self", 0),
        "self_sys_us": per_call("self", 1),
        "children_user_us": per_call("children", 0),
        "children_sys_us": per_call("children", 1),
        "self_switches": (after["self"][2] - before["self"][2]) / calls,
        "children_switches": (after["children"][2] - before["children"][2]) / calls,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=16)
    parser.add_argument("--variant", default="full", choices=["full", "norego", "noaudit", "neither"])
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    parser.add_argument("--warden", default=os.path.join(target, "release/warden"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--passthrough")
    parser.add_argument("--before")
    parser.add_argument("--before-env")
    args = parser.parse_args()
    before_env = None
    if args.before_env:
        key, sep, value = args.before_env.partition("=")
        if not sep or not key:
            raise SystemExit("--before-env takes KEY=VALUE")
        before_env = (key, value)
    if not os.access(EVERYTHING, os.X_OK):
        raise SystemExit(f"{EVERYTHING} missing: run scripts/test-deps.sh")
    world = tempfile.mkdtemp(prefix="warden-bench-cpu-")
    try:
        for sub in ("home", "config", "workspace"):
            os.makedirs(f"{world}/{sub}")
        print(f"{args.calls} calls of {args.bytes} B, variant {args.variant}, {args.warden}")
        print("| round | setup | median | mean | proxy (warden) user + sys | server user + sys "
              "| context switches per call (proxy; server) |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        setups = ["direct"] + (["passthrough"] if args.passthrough else []) + ["gateway"]
        if args.before or before_env:
            setups.append("before")
        results = {setup: [] for setup in setups}
        for n in range(1, args.rounds + 1):
            for setup in setups:
                other = args.before if setup == "before" else args.passthrough
                r = run(setup, args.calls, args.bytes, args.warden, args.variant, world, other,
                        before_env)
                results[setup].append(r)
                if setup == "direct":
                    warden_cpu = "—"
                    server = f"{r['self_user_us']:.0f} + {r['self_sys_us']:.0f} µs"
                    switches = f"—; {r['self_switches']:.2f}"
                else:
                    warden_cpu = f"{r['self_user_us']:.0f} + {r['self_sys_us']:.0f} µs"
                    server = f"{r['children_user_us']:.0f} + {r['children_sys_us']:.0f} µs"
                    switches = f"{r['self_switches']:.2f}; {r['children_switches']:.2f}"
                print(f"| {n} | {setup} | {r['median_us']:.0f} µs | {r['mean_us']:.0f} µs | "
                      f"{warden_cpu} | {server} | {switches} |", flush=True)
        if args.rounds > 1:
            print("\nMedian over the rounds (each round's median call; CPU of the proxy, user + sys):")
            for setup, rs in results.items():
                wall = statistics.median(r["median_us"] for r in rs)
                own = statistics.median(r["self_user_us"] + r["self_sys_us"] for r in rs)
                print(f"  {setup:12} {wall:6.0f} µs" +
                      ("" if setup == "direct" else f", CPU {own:.0f} µs per call"))
    finally:
        shutil.rmtree(world, ignore_errors=True)


if __name__ == "__main__":
    main()
