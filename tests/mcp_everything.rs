//! The connection layer against a real third-party server: npm
//! `@modelcontextprotocol/server-everything` (installed under tests/npm),
//! over stdio (through the sandbox seam), legacy HTTP+SSE and streamable
//! HTTP. Skipped with a note when the package or node is missing.

#[path = "support/ports.rs"]
mod ports;
#[path = "support/mcp.rs"]
mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::ContentBlock;
use serde_json::json;
use support::*;
use warden::mcp::{CallError, ServerState};

const T: Duration = Duration::from_secs(30);

fn everything() -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/.bin/mcp-server-everything");
    if path.exists() && which::which("node").is_ok() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: {} or node is missing (npm ci in tests/npm)",
            path.display()
        );
        None
    }
}

/// server-everything serving `transport` on a port it bound itself
/// (`PORT=0`; it prints no port, so it is read from /proc), in its own
/// process group, killed (group and all) when dropped.
struct NetworkServer {
    child: tokio::process::Child,
    port: u16,
    _home: tempfile::TempDir,
}

impl NetworkServer {
    async fn start(bin: &PathBuf, transport: &str) -> NetworkServer {
        let home = tempfile::tempdir().unwrap();
        let child = tokio::process::Command::new(bin)
            .arg(transport)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("PORT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().expect("running");
        let port = ports::listening_port(pid, Duration::from_secs(30))
            .await
            .unwrap_or_else(|| panic!("server-everything ({transport}) did not listen in 30 s"));
        NetworkServer {
            child,
            port,
            _home: home,
        }
    }
}

impl Drop for NetworkServer {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// What every transport must show: tools listed, echo and a structured
/// tool answered, an unknown tool a JSON-RPC error.
async fn exercise(manager: &warden::mcp::Manager, name: &str) {
    let st = status(manager, name);
    assert_eq!(st.state, ServerState::Connected, "{name}: {:?}", st.error);
    let names = tool_names(&st);
    assert!(names.iter().any(|n| n == "echo"), "{name}: {names:?}");
    let protocol = st.protocol.clone().unwrap();
    assert!(!protocol.is_empty());

    let echoed = call(manager, name, "echo", json!({"message": "hello warden"}))
        .await
        .unwrap();
    let text = match &echoed.content[0] {
        ContentBlock::Text(t) => t.text.clone(),
        other => panic!("{name}: expected text, got {other:?}"),
    };
    assert!(text.contains("hello warden"), "{name}: {text}");
    match call(manager, name, "definitely_not_a_tool", json!({})).await {
        Err(CallError::Rpc { .. }) => {}
        // Some SDK versions answer an unknown tool with isError instead.
        Ok(result) => assert_eq!(result.is_error, Some(true), "{name}"),
        Err(other) => panic!("{name}: expected an RPC error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_sse_and_streamable_http() {
    init_logs();
    let Some(bin) = everything() else { return };
    let sse_server = NetworkServer::start(&bin, "sse").await;
    let http_server = NetworkServer::start(&bin, "streamableHttp").await;
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![
            stdio("ev_stdio", &bin, &["stdio"], T),
            sse(
                "ev_sse",
                &format!("http://127.0.0.1:{}/sse", sse_server.port),
                T,
            ),
            http(
                "ev_http",
                &format!("http://127.0.0.1:{}/mcp", http_server.port),
                &[("Authorization", "Bearer not-a-real-token")],
                T,
            ),
        ],
    );
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;
    for name in ["ev_stdio", "ev_sse", "ev_http"] {
        exercise(&manager, name).await;
    }
    // The legacy transport negotiates an older revision than stdio may.
    assert_eq!(status(&manager, "ev_sse").transport.as_str(), "sse");

    manager.shutdown().await;
    let pids = started_pids(&mut events);
    assert_eq!(pids.len(), 1, "only the stdio server is warden's process");
    assert_no_process_left(&pids).await;
    drop(sse_server);
    drop(http_server);
}
