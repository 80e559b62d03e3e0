//! Environment canaries, signals to outside processes, fork and memory
//! bombs: contained under the sandbox, and firing without it.

mod sandbox_support;

use std::time::Duration;

use sandbox_support::*;
use serde_json::json;
use warden::config::{Limits, SandboxSpec};

/// The canary is in the environment of the process that launches the
/// server: a plain spawn (baseline), or a `warden sandbox exec` process,
/// which applies the same default profile as a configured server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_canary_in_warden_env_never_reaches_the_server() {
    let fx = Fixture::new();
    let var = "WARDEN_TEST_SECRET_CANARY";
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let mut cmd = tokio::process::Command::new(WARDEN);
        if mode == Mode::Sandboxed {
            cmd.args(["sandbox", "exec", "--", WARDEN]);
        }
        cmd.arg("__hostile-server")
            .env(var, &fx.token)
            .env("TMPDIR", fx.runtime.path())
            .env_remove("XDG_RUNTIME_DIR")
            .current_dir(fx.workspace.path())
            .process_group(0);
        let s = launch_command(cmd).await;
        let (out, j) = call(&s, "dump_env", json!({})).await;
        let (sh, _) = call(&s, "spawn_shell", json!({"command": "env"})).await;
        s.stop().await;
        let leaked = out.contains(&fx.token) || sh.contains(&fx.token);
        match mode {
            Mode::Unsandboxed => assert!(leaked, "baseline must see the canary"),
            Mode::Sandboxed => {
                assert!(!leaked, "env canary leaked");
                let keys: Vec<&String> = j["detail"].as_object().expect("env").keys().collect();
                for k in &keys {
                    assert!(
                        ["PATH", "LANG", "HOME", "TMPDIR"].contains(&k.as_str()),
                        "unexpected var {k}"
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_to_processes_outside_the_sandbox_fail() {
    let fx = Fixture::new();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let mut victim = std::process::Command::new("/bin/sleep")
            .arg("30")
            .spawn()
            .expect("victim");
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (out, j) = call(&s, "kill_pid", json!({"pid": victim.id(), "signal": 9})).await;
        // warden itself (this test process): must survive too.
        let (me, _) = if mode == Mode::Sandboxed {
            call(
                &s,
                "kill_pid",
                json!({"pid": std::process::id(), "signal": 15}),
            )
            .await
        } else {
            (String::new(), json!(null))
        };
        let (pp, _) = if mode == Mode::Sandboxed {
            // Its parent inside the sandbox is the namespace's init.
            call(
                &s,
                "spawn_shell",
                json!({"command": "kill -9 1; echo done"}),
            )
            .await
        } else {
            (String::new(), json!(null))
        };
        s.stop().await;
        // A kill that succeeded has queued SIGKILL (the victim dies soon:
        // waited for); one that failed sent nothing, so "still alive now"
        // needs no grace period.
        let died = match mode {
            Mode::Unsandboxed => {
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                loop {
                    let gone = victim.try_wait().expect("try_wait").is_some();
                    if gone || std::time::Instant::now() > deadline {
                        break gone;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Mode::Sandboxed => victim.try_wait().expect("try_wait").is_some(),
        };
        let _ = victim.kill();
        let _ = victim.wait();
        match mode {
            Mode::Unsandboxed => assert!(died, "baseline must kill the victim: {out}"),
            Mode::Sandboxed => {
                assert_eq!(j["ok"], json!(false), "the kill reported success: {out}");
                assert!(!died, "victim killed from the sandbox: {out} {me} {pp}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_bomb_is_bounded() {
    let fx = Fixture::new();
    let n = 400;
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (out, j) = call(&s, "fork_many", json!({"n": n})).await;
        s.stop().await;
        let started = j["started"].as_u64().expect("started");
        match mode {
            Mode::Unsandboxed => assert_eq!(started, n, "baseline must fork {n}: {out}"),
            // RLIMIT_NPROC (non-root) or the pid namespace's pid_max (root).
            Mode::Sandboxed => assert!(started < 300, "fork bomb not bounded: {out}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bomb_is_bounded_by_the_memory_limit() {
    let fx = Fixture::new();
    let spec = SandboxSpec {
        limits: Limits {
            memory_mb: 128,
            ..Limits::default()
        },
        ..SandboxSpec::default()
    };
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, spec.clone()).await;
        let answer = try_call(&s, "alloc_mb", json!({"mb": 512})).await;
        s.stop().await;
        match (mode, answer) {
            (Mode::Unsandboxed, Ok((out, j))) => {
                assert_eq!(
                    j["allocated_mb"],
                    json!(512),
                    "baseline must allocate: {out}"
                )
            }
            (Mode::Sandboxed, Ok((out, j))) => {
                let got = j["allocated_mb"].as_u64().expect("allocated_mb");
                assert!(got < 128, "memory not bounded: {out}")
            }
            // The memory cgroup's OOM killer ended the server before
            // RLIMIT_DATA refused a malloc: bounded too.
            (Mode::Sandboxed, Err(e)) => assert!(
                e.contains("closed") || e.contains("Transport"),
                "unexpected error: {e}"
            ),
            (Mode::Unsandboxed, Err(e)) => panic!("baseline call failed: {e}"),
        }
    }
}
