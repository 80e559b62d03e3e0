//! After a server is stopped, or warden is killed with SIGKILL, nothing it
//! started survives, even a process that left the group with setsid().
//! Without the sandbox the detached process survives (the canary fires).

mod cli_support;
mod sandbox_support;

use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use sandbox_support::*;
use serde_json::json;
use warden::config::SandboxSpec;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_server_kills_its_detached_descendants() {
    let fx = Fixture::new();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let m = marker();
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (out, _) = call(&s, "detach", json!({"marker": m})).await;
        assert!(
            eventually(Duration::from_secs(5), || !processes_named(&m).is_empty()).await,
            "{out}"
        );
        s.stop().await;
        let gone = eventually(Duration::from_secs(3), || processes_named(&m).is_empty()).await;
        let left = processes_named(&m);
        kill_all(&left);
        match mode {
            Mode::Unsandboxed => assert!(!gone, "baseline: the detached process should survive"),
            Mode::Sandboxed => assert!(gone, "left behind: {left:?}"),
        }
    }
}

/// `warden sandbox exec [--profile FILE] -- warden __hostile-server`: a real
/// warden process hosting the server, then `kill -9` of that warden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_warden_leaves_no_process_behind() {
    let fx = Fixture::new();
    let off = fx.workspace.path().join("off.json");
    std::fs::write(&off, "false").expect("profile");
    for sandboxed in [false, true] {
        let m = marker();
        let mut cmd = tokio::process::Command::new(WARDEN);
        cmd.arg("sandbox").arg("exec");
        if !sandboxed {
            cmd.arg("--profile").arg(&off);
        }
        cmd.arg("--").arg(WARDEN).arg("__hostile-server");
        cmd.env("TMPDIR", fx.runtime.path())
            .env_remove("XDG_RUNTIME_DIR");
        cmd.current_dir(fx.workspace.path());
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn warden");
        let warden_pid = transport.id().expect("pid") as i32;
        let client = ().serve(transport).await.expect("initialize");
        let server = Server {
            client,
            guard: None,
            pid: None,
        };
        let (out, _) = call(&server, "detach", json!({"marker": m})).await;
        assert!(
            eventually(Duration::from_secs(5), || !processes_named(&m).is_empty()).await,
            "{out}"
        );
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(warden_pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let gone = eventually(Duration::from_secs(3), || processes_named(&m).is_empty()).await;
        let left = processes_named(&m);
        kill_all(&left);
        drop(server);
        if sandboxed {
            assert!(gone, "left behind after kill -9 of warden: {left:?}");
        } else {
            assert!(
                !gone,
                "baseline: the detached process should survive kill -9 of warden"
            );
        }
    }
}

/// The server must not die when the thread that spawned it exits (tokio's
/// blocking threads idle out): PR_SET_PDEATHSIG on the helper would do that.
#[test]
fn server_outlives_the_thread_that_spawned_it() {
    use std::io::{BufRead, Write};
    let fx = Fixture::new();
    // Answers each line it reads: alive is something it shows, not
    // something a sleep gives it time to stop being.
    let cfg = server_config(
        std::path::Path::new("/bin/sh"),
        &["-c", "while read line; do echo \"alive $line\"; done"],
        SandboxSpec::default(),
        warden::config::Trust::Untrusted,
    );
    let prepared = prepare(&cfg, &fx.ctx()).expect("prepare");
    let mut guard = prepared.guard;
    let mut cmd = prepared.command;
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    // The spawning thread exits before the server is asked anything (the
    // PR_SET_PDEATHSIG trap: it fires when the spawning *thread* exits).
    let mut child = std::thread::spawn(move || cmd.spawn().expect("spawn"))
        .join()
        .expect("thread");
    guard.attach(child.id());
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    for round in 1..=3 {
        writeln!(stdin, "{round}").expect("the server's stdin is open");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        assert_eq!(
            line.trim_end(),
            format!("alive {round}"),
            "the server did not answer after its spawning thread exited"
        );
    }
    drop(stdin);
    drop(guard); // kills the group
    let _ = child.wait();
}

/// The per-server cgroups go with the server: `kill -9` of warden makes the
/// helper kill the sandbox and remove them; `kill -9` of the helper itself
/// leaves an empty folder that the next sandbox start sweeps.
#[test]
fn kill_9_leaves_no_cgroup_behind() {
    let pids_root = std::path::Path::new("/sys/fs/cgroup/pids");
    let probe = Fixture::new();
    let writable = is_root() && pids_root.join("cgroup.procs").exists();
    if !writable || prepare_hostile(&probe, SandboxSpec::default()).is_err() {
        skipped(
            "kill_9_leaves_no_cgroup_behind",
            "needs a writable pids cgroup (v1 at /sys/fs/cgroup/pids)",
        );
        return;
    }
    let find = |suffix: &str| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(pids_root)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("warden-") && n.ends_with(suffix))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let wait = |f: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    };

    // 1. warden (a gateway hosting one server) killed with SIGKILL.
    let world = cli_support::World::new();
    let name = format!("leak{}", &world.marker[1..9]);
    world.write_config(&json!({
        "mcpServers": {&name: {"command": WARDEN, "args": ["__hostile-server"]}},
    }));
    let mut gateway = world
        .warden(&["gateway", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("gateway");
    let suffix = format!("-{name}");
    let started = wait(&|| !find(&suffix).is_empty());
    let _ = gateway.kill();
    let _ = gateway.wait();
    assert!(started, "the server's cgroup never appeared");
    assert!(
        wait(&|| find(&suffix).is_empty()),
        "cgroups left after kill -9 of warden: {:?}",
        find(&suffix)
    );

    // 2. The helper itself killed with SIGKILL (`sandbox exec` becomes the
    //    helper): its empty cgroup stays until the next start sweeps it.
    let fx = Fixture::new();
    let run = |args: &[&str]| {
        let mut c = std::process::Command::new(WARDEN);
        c.args(["sandbox", "exec", "--"])
            .args(args)
            .env("TMPDIR", fx.runtime.path())
            .env_remove("XDG_RUNTIME_DIR")
            .current_dir(fx.workspace.path());
        c
    };
    let mut helper = run(&["/bin/sleep", "30"])
        .stdout(Stdio::null())
        .spawn()
        .expect("sandbox exec");
    let mine = format!("warden-{}-exec", helper.id());
    let folder = pids_root.join(&mine);
    let appeared = wait(&|| folder.exists());
    let _ = helper.kill();
    let _ = helper.wait();
    assert!(appeared, "no cgroup {mine}");
    // init died with the helper (PDEATHSIG), taking the namespace along.
    assert!(
        wait(&|| std::fs::read_to_string(folder.join("cgroup.procs"))
            .is_ok_and(|p| p.trim().is_empty())),
        "processes left in {mine}"
    );
    assert!(folder.exists(), "nothing to sweep: the test proves nothing");
    let o = run(&["/bin/true"]).output().expect("sandbox exec");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!folder.exists(), "the stale cgroup {mine} was not swept");
}
