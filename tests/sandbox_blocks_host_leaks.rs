//! What a server could learn about the host without reading a file:
//! names appearing in a folder it cannot read (inotify), the host's mounts
//! (listmount), whether a host process exists (stat of /proc/PID), and
//! warden's own environment. Each works without the sandbox and fails
//! with it (the mount and pid namespaces; seccomp for listmount).

mod sandbox_support;

use std::time::Duration;

use sandbox_support::*;
use serde_json::json;
use warden::config::SandboxSpec;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inotify_never_reports_names_from_outside_the_grants() {
    let fx = Fixture::new();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let name = format!("appeared-{mode:?}-{}", fx.token);
        let dir = fx.secret_dir.path().to_path_buf();
        // Names keep appearing until the watch ends, so some appear while
        // it is armed however late the server starts watching.
        let watching = std::sync::atomic::AtomicBool::new(true);
        let creator = async {
            let mut k = 0u32;
            while watching.load(std::sync::atomic::Ordering::SeqCst) {
                std::fs::write(dir.join(format!("{name}-{k}")), "x").expect("create");
                k += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let watch = async {
            let answer = call(
                &s,
                "inotify_names",
                json!({"path": fx.secret_dir.path(), "ms": 1500}),
            )
            .await;
            watching.store(false, std::sync::atomic::Ordering::SeqCst);
            answer
        };
        let ((raw, j), ()) = tokio::join!(watch, creator);
        s.stop().await;
        let seen = raw.contains(&name);
        match mode {
            Mode::Unsandboxed => assert!(seen, "baseline must see the name: {raw}"),
            Mode::Sandboxed => {
                assert!(!seen, "a name leaked through inotify: {raw}");
                assert_eq!(j["errno"], json!(nix::errno::Errno::ENOENT as i32), "{raw}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listmount_never_lists_the_hosts_mounts() {
    let fx = Fixture::new();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (raw, j) = call(&s, "list_mounts", json!({})).await;
        s.stop().await;
        match mode {
            Mode::Unsandboxed => {
                let n = j["detail"].as_u64().unwrap_or(0);
                assert!(n > 0, "baseline must list the host's mounts: {raw}");
            }
            Mode::Sandboxed => {
                assert_eq!(j["ok"], json!(false), "listmount allowed: {raw}");
                assert_eq!(j["errno"], json!(nix::errno::Errno::ENOSYS as i32), "{raw}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_processes_and_wardens_environment_are_invisible() {
    let fx = Fixture::new();
    let me = std::process::id();
    let mut victim = std::process::Command::new("/bin/sleep")
        .arg("30")
        .spawn()
        .expect("victim");
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (st, sj) = call(
            &s,
            "stat_path",
            json!({"path": format!("/proc/{}", victim.id())}),
        )
        .await;
        let (env, ej) = call(
            &s,
            "read_file",
            json!({"path": format!("/proc/{me}/environ")}),
        )
        .await;
        // Its own /proc works: a fresh proc of its pid namespace.
        let (own, oj) = call(&s, "read_file", json!({"path": "/proc/self/status"})).await;
        s.stop().await;
        assert_eq!(oj["ok"], json!(true), "{own}");
        match mode {
            Mode::Unsandboxed => {
                assert_eq!(
                    sj["ok"],
                    json!(true),
                    "baseline must see the host pid: {st}"
                );
                assert_eq!(
                    ej["ok"],
                    json!(true),
                    "baseline must read warden's environ: {env}"
                );
            }
            Mode::Sandboxed => {
                assert_eq!(sj["ok"], json!(false), "host pid visible: {st}");
                assert_eq!(ej["ok"], json!(false), "warden's environ readable: {env}");
                assert_eq!(sj["errno"], json!(nix::errno::Errno::ENOENT as i32), "{st}");
            }
        }
    }
    let _ = victim.kill();
    let _ = victim.wait();
}
