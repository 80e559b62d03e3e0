//! The positive side: what `sandbox.read` / `sandbox.write` grant works,
//! and `warden sandbox exec` forwards the exit status.

mod sandbox_support;

use sandbox_support::*;
use serde_json::json;
use warden::config::SandboxSpec;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_read_and_write_paths_work() {
    let fx = Fixture::new();
    let data = fx.workspace.path().join("data");
    let out = fx.workspace.path().join("out");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::create_dir(&out).expect("mkdir");
    std::fs::write(data.join("in.txt"), "hello").expect("write");
    let spec = SandboxSpec {
        read: vec![data.clone()],
        write: vec![out.clone()],
        ..SandboxSpec::default()
    };
    let s = launch_hostile(&fx, Mode::Sandboxed, spec).await;
    let (r, rj) = call(&s, "read_file", json!({"path": data.join("in.txt")})).await;
    let (w, wj) = call(
        &s,
        "write_file",
        json!({"path": out.join("o.txt"), "content": "x"}),
    )
    .await;
    let (w2, w2j) = call(
        &s,
        "write_file",
        json!({"path": data.join("no.txt"), "content": "x"}),
    )
    .await;
    s.stop().await;
    assert_eq!(rj["detail"], json!("hello"), "{r}");
    assert_eq!(wj["ok"], json!(true), "{w}");
    assert_eq!(
        std::fs::read_to_string(out.join("o.txt")).expect("written"),
        "x"
    );
    assert_eq!(
        w2j["ok"],
        json!(false),
        "read grant must not allow writes: {w2}"
    );
    assert!(!data.join("no.txt").exists());
}

#[test]
fn sandbox_exec_forwards_exit_status_and_denies_reads() {
    let fx = Fixture::new();
    let run = |args: &[&str]| {
        std::process::Command::new(WARDEN)
            .args(["sandbox", "exec", "--"])
            .args(args)
            .env("TMPDIR", fx.runtime.path())
            .env_remove("XDG_RUNTIME_DIR")
            .current_dir(fx.workspace.path())
            .output()
            .expect("run")
    };
    let o = run(&["/bin/sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
    let secret = fx.secret_file.display().to_string();
    let o = run(&["/bin/cat", &secret]);
    assert_ne!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&fx.token));
    // Baseline: the same read without the sandbox succeeds.
    let plain = std::process::Command::new("/bin/cat")
        .arg(&secret)
        .output()
        .expect("cat");
    assert!(String::from_utf8_lossy(&plain.stdout).contains(&fx.token));
}

#[test]
fn sandbox_check_reports_json() {
    let o = std::process::Command::new(WARDEN)
        .args(["sandbox", "check", "--json"])
        .output()
        .expect("run");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert!(v["kernel"]["landlock_abi"].as_u64().is_some(), "{v}");
    if o.status.code() == Some(0) {
        assert_eq!(v["default_profile"]["network"], json!("none"));
    } else {
        assert_eq!(o.status.code(), Some(4));
    }
}

#[test]
fn profiles_that_cannot_be_enforced_as_written_are_refused() {
    use warden::config::{NetworkSpec, Trust};
    use warden_sandbox::SandboxError;
    let fx = Fixture::new();
    let prog = std::path::Path::new("/bin/true");
    let bad = [
        // A typo in a granted path is an error, not a silently skipped rule.
        (
            SandboxSpec {
                read: vec![fx.workspace.path().join("does-not-exist")],
                ..SandboxSpec::default()
            },
            Trust::Untrusted,
        ),
        // `host` network and no sandbox at all are for trusted servers only.
        (
            SandboxSpec {
                network: NetworkSpec::Host,
                ..SandboxSpec::default()
            },
            Trust::Untrusted,
        ),
        (
            SandboxSpec {
                enabled: false,
                ..SandboxSpec::default()
            },
            Trust::Untrusted,
        ),
    ];
    for (spec, trust) in bad {
        let cfg = server_config(prog, &[], spec.clone(), trust);
        match prepare(&cfg, &fx.ctx()) {
            Err(SandboxError::Setup { .. }) => {}
            Err(e) => panic!("unexpected error for {spec:?}: {e}"),
            Ok(_) => panic!("accepted {spec:?}"),
        }
    }
    // The same disabled sandbox is fine for a trusted server.
    let cfg = server_config(
        prog,
        &[],
        SandboxSpec {
            enabled: false,
            ..SandboxSpec::default()
        },
        Trust::Trusted,
    );
    let p = prepare(&cfg, &fx.ctx()).expect("trusted, sandbox off");
    assert!(!p.summary.enabled);
}

/// Where `warden-sandbox-exec` is not installed beside `warden` (e.g.
/// after `cargo run`, which builds one binary), warden re-executes itself
/// as the helper, says so at debug level, and the sandbox still holds.
#[test]
fn warden_alone_re_executes_itself_as_the_helper() {
    let fx = Fixture::new();
    let bin = fx.runtime.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let alone = bin.join("warden");
    if std::fs::hard_link(WARDEN, &alone).is_err() {
        std::fs::copy(WARDEN, &alone).expect("copy warden");
    }
    let secret = fx.secret_file.display().to_string();
    let run = |exe: &std::path::Path, args: &[&str]| {
        std::process::Command::new(exe)
            .args(["-vv", "sandbox", "exec", "--"])
            .args(args)
            .env("TMPDIR", fx.runtime.path())
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("RUST_LOG")
            .current_dir(fx.workspace.path())
            .output()
            .expect("run")
    };
    let o = run(&alone, &["/bin/sh", "-c", "exit 7"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{stderr}");
    assert!(stderr.contains("re-executing"), "{stderr}");
    let o = run(&alone, &["/bin/cat", &secret]);
    assert_ne!(o.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&o.stdout).contains(&fx.token));
    // Beside its helper, warden uses it and says nothing about a fallback.
    let o = run(std::path::Path::new(WARDEN), &["/bin/true"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("re-executing"), "{stderr}");
}
