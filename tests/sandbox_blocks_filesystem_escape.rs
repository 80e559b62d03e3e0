//! A hostile server cannot read, list or write outside its grants; the
//! same attacks succeed without the sandbox (so each canary can fire).
//!
//! The refusal's errno depends on the layer that stops it first: a path
//! outside the grants does not exist in the server's mount namespace
//! (ENOENT), one inside a read grant is on a read-only bind (EROFS), and
//! Landlock answers EACCES where a path is visible but not granted.

mod sandbox_support;

use sandbox_support::*;
use serde_json::json;
use warden::config::SandboxSpec;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_file_outside_workspace_is_never_read() {
    let fx = Fixture::new();
    let secret = fx.secret_file.display().to_string();
    let dir = fx.secret_dir.path().display().to_string();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (read, rj) = call(&s, "read_file", json!({"path": secret})).await;
        let (shell, _) = call(
            &s,
            "spawn_shell",
            json!({"command": format!("cat {secret}")}),
        )
        .await;
        let (list, lj) = call(&s, "list_dir", json!({"path": dir})).await;
        s.stop().await;
        let listed = lj["detail"].to_string().contains("secret.txt");
        let leaked = read.contains(&fx.token) || shell.contains(&fx.token) || listed;
        match mode {
            Mode::Unsandboxed => assert!(leaked, "baseline must leak the canary: {read}"),
            Mode::Sandboxed => {
                assert!(!leaked, "canary leaked: {read} {shell} {list}");
                assert_refused(&rj, &read);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_file_appears_outside_writable_paths() {
    let fx = Fixture::new();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let outside = fx.secret_dir.path().join(format!("planted-{mode:?}"));
        let in_ws = fx.workspace.path().join(format!("planted-{mode:?}"));
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (w1, wj) = call(&s, "write_file", json!({"path": outside, "content": "x"})).await;
        // The workspace is not writable either unless `sandbox.write` grants it.
        let (w2, _) = call(&s, "write_file", json!({"path": in_ws, "content": "x"})).await;
        let (w3, _) = call(
            &s,
            "spawn_shell",
            json!({"command": format!("echo x > {}.sh", outside.display())}),
        )
        .await;
        s.stop().await;
        let planted = outside.exists() || in_ws.exists() || outside.with_extension("sh").exists();
        match mode {
            Mode::Unsandboxed => assert!(planted, "baseline must write: {w1}"),
            Mode::Sandboxed => {
                assert!(!planted, "a file appeared: {w1} {w2} {w3}");
                assert_refused(&wj, &w1);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_home_is_writable_not_executable_and_proc_is_closed() {
    let fx = Fixture::new();
    let s = launch_hostile(&fx, Mode::Sandboxed, SandboxSpec::default()).await;
    let (env, ej) = call(&s, "dump_env", json!({})).await;
    let home = ej["detail"]["HOME"].as_str().expect("HOME").to_string();
    // HOME and TMPDIR are the private tmpfs inside the mount namespace:
    // nothing of the server's is kept on the host.
    assert_eq!(home, "/tmp/home", "{env}");
    assert_eq!(ej["detail"]["TMPDIR"], json!("/tmp"), "{env}");
    let (w, wj) = call(
        &s,
        "write_file",
        json!({"path": format!("{home}/ok"), "content": "x"}),
    )
    .await;
    assert_eq!(wj["ok"], json!(true), "{w}");
    // Writable is not executable: a dropped binary cannot be run.
    let (x, xj) = call(
        &s,
        "spawn_shell",
        json!({"command": format!("cp /bin/true {home}/t && chmod +x {home}/t && {home}/t && echo RAN")}),
    )
    .await;
    assert_eq!(xj["ok"], json!(true), "{x}");
    assert!(
        !xj["detail"]["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("RAN"),
        "{x}"
    );
    // /proc is never granted: warden's own environ stays unreadable.
    let (p, pj) = call(
        &s,
        "read_file",
        json!({"path": format!("/proc/{}/environ", std::process::id())}),
    )
    .await;
    assert_eq!(pj["ok"], json!(false), "{p}");
    let (etc, sj) = call(&s, "read_file", json!({"path": "/etc/shadow"})).await;
    assert_eq!(sj["ok"], json!(false), "{etc}");
    s.stop().await;
    let left: Vec<_> = std::fs::read_dir(fx.runtime.path())
        .expect("runtime dir")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "host folders created: {left:?}");
}
