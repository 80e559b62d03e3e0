//! Real third-party MCP servers run under the default untrusted sandbox,
//! with only documented grants, and answer `tools/list` through rmcp:
//!
//! - npm `@modelcontextprotocol/server-filesystem` from `tests/npm`
//!   (installed by `npm ci` there): `node` is a system binary and the
//!   install prefix rule grants the outer `node_modules`; the served folder
//!   needs `sandbox.read` (and `write` for its write tools).
//! - PyPI `mcp-server-time` in a venv made by `tests/python/setup-venv.sh`:
//!   the venv and the interpreter its `pyvenv.cfg` names (e.g. pyenv's
//!   `versions/3.11.7`) are granted as the install prefix; no other grant.

mod sandbox_support;

use std::path::{Path, PathBuf};

use sandbox_support::*;
use serde_json::json;
use warden::config::SandboxSpec;

fn npm_bin(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/.bin")
        .join(name)
}

fn venv() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/setup-venv.sh"))
        .output()
        .expect("run tests/python/setup-venv.sh");
    assert!(
        out.status.success(),
        "setup-venv.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

async fn tool_names(s: &Server) -> Vec<String> {
    let tools = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        s.client.list_tools(None),
    )
    .await
    .expect("list_tools timed out")
    .expect("list_tools");
    tools.tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_server_filesystem_runs_sandboxed_and_sees_only_its_grant() {
    let bin = npm_bin("mcp-server-filesystem");
    assert!(
        bin.exists(),
        "run `npm ci` in tests/npm first ({} missing)",
        bin.display()
    );
    let fx = Fixture::new();
    let served = fx.workspace.path().canonicalize().expect("canon");
    std::fs::write(served.join("hello.txt"), "hi there").expect("write");
    let spec = SandboxSpec {
        read: vec![served.clone()],
        ..SandboxSpec::default()
    };
    let served_s = served.display().to_string();
    let s = launch(&fx, Mode::Sandboxed, &bin, &[&served_s], spec).await;
    let names = tool_names(&s).await;
    assert!(names.iter().any(|n| n == "read_text_file"), "{names:?}");
    let (ok, _) = call(
        &s,
        "read_text_file",
        json!({"path": served.join("hello.txt")}),
    )
    .await;
    assert!(ok.contains("hi there"), "{ok}");
    // The server's own path check would refuse this; Landlock refuses it
    // even if the server were compromised (see the hostile-server tests).
    let (no, _) = call(&s, "read_text_file", json!({"path": fx.secret_file})).await;
    assert!(!no.contains(&fx.token), "{no}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pypi_mcp_server_time_in_a_venv_runs_sandboxed() {
    let venv = venv();
    let bin = venv.join("bin/mcp-server-time");
    let fx = Fixture::new();
    let s = launch(
        &fx,
        Mode::Sandboxed,
        &bin,
        &["--local-timezone", "UTC"],
        SandboxSpec::default(),
    )
    .await;
    let names = tool_names(&s).await;
    assert!(names.iter().any(|n| n == "get_current_time"), "{names:?}");
    let (out, _) = call(&s, "get_current_time", json!({"timezone": "Europe/Paris"})).await;
    assert!(out.contains("Europe/Paris"), "{out}");
    s.stop().await;
}

/// `node` (libuv reads /proc/cpuinfo and /proc/stat) sees the host's CPUs
/// inside the sandbox: its /proc is a fresh one of its own pid namespace.
#[test]
fn node_sees_the_cpus_inside_the_sandbox() {
    let fx = Fixture::new();
    let script = "console.log(require('os').cpus().length)";
    let count = |out: std::process::Output| -> usize {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let plain = count(
        std::process::Command::new("node")
            .args(["-e", script])
            .output()
            .expect("run node"),
    );
    let sandboxed = count(
        std::process::Command::new(WARDEN)
            .args(["sandbox", "exec", "--", "node", "-e", script])
            .env("TMPDIR", fx.runtime.path())
            .env_remove("XDG_RUNTIME_DIR")
            .current_dir(fx.workspace.path())
            .output()
            .expect("run warden"),
    );
    assert!(plain > 0);
    assert_eq!(
        sandboxed, plain,
        "node sees {sandboxed} CPUs sandboxed, {plain} plain"
    );
}
