//! Every limit holds for the sandbox as a whole, root included: processes
//! and threads together (pids cgroup, or RLIMIT_NPROC per user namespace),
//! memory of all kinds across children (memory cgroup), CPU time across
//! children (accounting and a kill), bytes in the private HOME/TMPDIR
//! (tmpfs size). Each attack also runs without the sandbox and exceeds the
//! limit. An explicit limit the host cannot enforce exactly stops the
//! server (exit 4) unless `best_effort`.

mod cli_support;
mod sandbox_support;

use std::time::{Duration, Instant};

use sandbox_support::*;
use serde_json::json;
use warden::config::{Limits, SandboxSpec};
use warden_sandbox::SandboxError;

fn limits(f: impl FnOnce(&mut Limits)) -> SandboxSpec {
    let mut l = Limits::default();
    f(&mut l);
    SandboxSpec {
        limits: l,
        ..SandboxSpec::default()
    }
}

/// 100 processes, then 100 threads, under `processes: 32` (the server and
/// its own threads count too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_and_threads_are_capped_together() {
    let fx = Fixture::new();
    let spec = limits(|l| {
        l.processes = 32;
        l.explicit.processes = true;
    });
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, spec.clone()).await;
        let (f, fj) = call(&s, "fork_many", json!({"n": 100})).await;
        let (t, tj) = call(&s, "spawn_threads", json!({"n": 100})).await;
        s.stop().await;
        let forked = fj["started"].as_u64().expect("started");
        let threads = tj["started"].as_u64().expect("started");
        match mode {
            Mode::Unsandboxed => {
                assert_eq!(forked, 100, "baseline must fork 100: {f}");
                assert_eq!(threads, 100, "baseline must start 100 threads: {t}");
            }
            Mode::Sandboxed => {
                assert!(forked < 32, "processes not capped at 32: {f}");
                assert!(threads < 32, "threads not capped at 32: {t}");
            }
        }
    }
}

/// `memory_mb: 128` against memory a per-process limit does not see:
/// four children of 64 MB each, SysV shared memory, a memfd, and a stack
/// grown to its (raised) limit. Counted is what is held at the same time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_of_every_kind_and_every_child_counts_against_memory_mb() {
    let fx = Fixture::new();
    let spec = limits(|l| {
        l.memory_mb = 128;
        l.explicit.memory_mb = true;
        // A memfd is a file: keep RLIMIT_FSIZE out of the way.
        l.file_size_mb = 1024;
    });
    if let Err(e) = prepare_hostile(&fx, spec.clone()) {
        // No memory cgroup for this user: the explicit limit refuses to
        // start, which is the rule (tested in its own right below).
        assert!(matches!(e, SandboxError::Unsupported { .. }), "{e}");
        skipped(
            "memory_of_every_kind_and_every_child_counts_against_memory_mb",
            &format!("no writable memory cgroup: {e}"),
        );
        return;
    }
    let (_, stack_hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_STACK)
        .expect("getrlimit");
    for (kind, mb, children) in [
        ("anon", 64u64, 4u32),
        ("shm", 256, 1),
        ("memfd", 256, 1),
        ("stack", 200, 1),
    ] {
        for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
            let s = launch_hostile(&fx, mode, spec.clone()).await;
            let answer = try_call(
                &s,
                "alloc_children",
                json!({"kind": kind, "mb": mb, "children": children}),
            )
            .await;
            s.stop().await;
            let asked = mb * u64::from(children);
            match (mode, answer) {
                (Mode::Unsandboxed, Ok((raw, j))) => {
                    if kind == "stack" && stack_hard < (asked + 8) << 20 {
                        skipped(
                            "memory…: stack baseline",
                            &format!("the stack's hard limit is {stack_hard} bytes"),
                        );
                        continue;
                    }
                    assert_eq!(j["held_mb"], json!(asked), "baseline {kind}: {raw}")
                }
                (Mode::Unsandboxed, Err(e)) => panic!("baseline {kind}: {e}"),
                (Mode::Sandboxed, Ok((raw, j))) => {
                    let held = j["held_mb"].as_u64().expect("held_mb");
                    assert!(
                        held < 128,
                        "{kind}: {held} MB held under memory_mb 128: {raw}"
                    );
                    // The attack did run (a child got well into its
                    // allocation before the limit stopped it).
                    let progress = j["per_child_mb"]
                        .as_array()
                        .map(|p| p.iter().filter_map(|v| v.as_u64()).max().unwrap_or(0))
                        .unwrap_or(0);
                    assert!(progress >= 16, "{kind}: the attack never ran: {raw}");
                }
                // The OOM killer may take the server itself: bounded too.
                (Mode::Sandboxed, Err(e)) => assert!(
                    e.contains("closed") || e.contains("Transport") || e.contains("connection"),
                    "{kind}: {e}"
                ),
            }
        }
    }
}

/// `cpu_seconds: 2` against three children burning 1.5 s of CPU each:
/// each stays under a per-process limit, together they do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_time_of_all_children_together_is_capped() {
    let fx = Fixture::new();
    let spec = limits(|l| {
        l.cpu_seconds = 2;
        l.explicit.cpu_seconds = true;
    });
    if let Err(e) = prepare_hostile(&fx, spec.clone()) {
        assert!(matches!(e, SandboxError::Unsupported { .. }), "{e}");
        skipped(
            "cpu_time_of_all_children_together_is_capped",
            &format!("no writable CPU accounting cgroup: {e}"),
        );
        return;
    }
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, spec.clone()).await;
        let t = Instant::now();
        let answer = try_call(&s, "burn_cpu", json!({"seconds": 1.5, "children": 3})).await;
        let wall = t.elapsed();
        s.stop().await;
        match (mode, answer) {
            (Mode::Unsandboxed, Ok((raw, j))) => {
                assert_eq!(j["ok"], json!(true), "baseline: {raw}")
            }
            (Mode::Unsandboxed, Err(e)) => panic!("baseline: {e}"),
            (Mode::Sandboxed, Ok((raw, _))) => {
                panic!("4.5 CPU-seconds burnt under cpu_seconds 2: {raw}")
            }
            // The helper ended the whole sandbox at the limit.
            (Mode::Sandboxed, Err(e)) => {
                assert!(
                    e.contains("closed") || e.contains("Transport") || e.contains("connection"),
                    "{e}"
                );
                assert!(wall < Duration::from_secs(30), "ended late: {wall:?}");
            }
        }
    }
}

/// `private_mb: 16` against 64 MB written to HOME, TMPDIR and /dev/shm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_in_the_private_folders_are_capped_by_private_mb() {
    let fx = Fixture::new();
    let out = fx.workspace.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let mut spec = limits(|l| {
        l.private_mb = 16;
        l.explicit.private_mb = true;
    });
    spec.write = vec![out.clone()];
    // Baseline: the same server unsandboxed fills a scratch folder.
    let s = launch_hostile(&fx, Mode::Unsandboxed, spec.clone()).await;
    let (raw, j) = call(&s, "fill", json!({"path": out.join("big"), "mb": 64})).await;
    s.stop().await;
    assert_eq!(j["written_mb"], json!(64), "baseline: {raw}");

    let s = launch_hostile(&fx, Mode::Sandboxed, spec).await;
    for path in ["/tmp/home/big", "/tmp/big", "/dev/shm/big"] {
        let (raw, j) = call(&s, "fill", json!({"path": path, "mb": 64})).await;
        let written = j["written_mb"].as_u64().expect("written_mb");
        assert!(
            written <= 16,
            "{path}: {written} MB under private_mb 16: {raw}"
        );
        assert_eq!(
            j["errno"],
            json!(nix::errno::Errno::ENOSPC as i32),
            "{path}: {raw}"
        );
    }
    s.stop().await;
}

/// The explicit-vs-default rule, through `warden call`: on a host without
/// usable cgroups (here: the cgroup folders hidden in a private mount
/// namespace, or a user who may not write them), `memory_mb` written in the
/// configuration stops the server with exit 4; with `best_effort` it runs;
/// left at its default it runs and is reported as not exact.
#[test]
fn an_explicit_limit_the_host_cannot_enforce_stops_the_server() {
    let world = cli_support::World::new();
    let server = |sandbox: serde_json::Value| json!({"command": cli_support::WARDEN, "args": ["__hostile-server"], "sandbox": sandbox});
    world.write_config(&json!({
        "mcpServers": {
            "explicit": server(json!({"limits": {"memory_mb": 512}})),
            "lenient": server(json!({"limits": {"memory_mb": 512}, "best_effort": true})),
            "default": server(json!({})),
        },
        "permissions": {"allow": ["mcp__*__whoami"]},
    }));
    // As root every cgroup is writable here: hide them in a private mount
    // namespace (nothing of it reaches the host).
    let run = |args: &[&str]| {
        let mut cmd = world.warden(args);
        if is_root() {
            let inner = std::mem::replace(&mut cmd, std::process::Command::new("unshare"));
            let mut argv = vec![inner.get_program().to_os_string()];
            argv.extend(inner.get_args().map(|a| a.to_os_string()));
            cmd.args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c"])
                .arg("mount -t tmpfs none /sys/fs/cgroup && exec \"$@\"")
                .arg("sh")
                .args(argv);
            for (k, v) in inner.get_envs() {
                match v {
                    Some(v) => cmd.env(k, v),
                    None => cmd.env_remove(k),
                };
            }
            if let Some(d) = inner.get_current_dir() {
                cmd.current_dir(d);
            }
        }
        cmd.output().expect("run warden")
    };
    let out = run(&["call", "explicit", "whoami"]);
    assert_eq!(out.status.code(), Some(4), "{}", cli_support::stderr(&out));
    assert!(
        cli_support::stderr(&out).contains("memory_mb"),
        "{}",
        cli_support::stderr(&out)
    );
    for name in ["lenient", "default"] {
        let out = run(&["call", name, "whoami"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            cli_support::stderr(&out)
        );
    }
    let out = run(&["sandbox", "check", "--server", "default", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", cli_support::stderr(&out));
    let summary = cli_support::stdout_json(&out);
    let memory = summary["profile"]["limit_report"]
        .as_array()
        .and_then(|l| l.iter().find(|r| r["limit"] == "memory_mb"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(memory["exact"], json!(false), "{summary}");
    assert_eq!(memory["explicit"], json!(false), "{summary}");
    assert!(memory["why_not_exact"].is_string(), "{summary}");
}
