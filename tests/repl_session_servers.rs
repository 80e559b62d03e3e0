//! The host API behind `/mcp add` and `/mcp remove`: a server added at run
//! time is connected in its sandbox, its tools are registered and pinned,
//! its calls go through the whole pipeline (as a user-scope, untrusted
//! server) and are audited; removing it stops its process and its tools.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden::config::{self, LoadOptions, Scope, Trust};
use warden::host::{CallRequest, Caller, Host, HostOptions, ToolRef};
use warden::mcp::ServerState;
use warden_policy::Mode;

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
}

/// A validated stdio server entry, as `/mcp add` builds one.
fn notes_server(dir: &Path, name: &str) -> config::ServerConfig {
    let file = dir.join(format!("{name}.json"));
    write_json(
        &file,
        &json!({"mcpServers": {name: {"command": WARDEN, "args": ["example-server", "notes"]}}, "policy": []}),
    );
    let loaded = config::load(&LoadOptions {
        config_file: Some(file),
        workspace: dir.join("ws"),
        config_dir: dir.join("cfg"),
    })
    .expect("valid entry");
    let mut server = loaded.servers.get(name).cloned().expect("server");
    server.scope = Scope::User;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_added_at_run_time_is_sandboxed_decided_audited_and_removable() {
    let dir = tempfile::Builder::new()
        .prefix("warden-session-servers-")
        .tempdir()
        .expect("temp dir");
    for sub in ["ws", "cfg"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
    }
    let config = dir.path().join("warden.json");
    write_json(
        &config,
        &json!({
            "mcpServers": {},
            "permissions": {"allow": ["mcp__extra__list_notes"], "deny": ["mcp__extra__delete_note(id: 1)"]},
            "audit": {"path": dir.path().join("audit.jsonl")}
        }),
    );
    let host = Arc::new(
        Host::open(HostOptions {
            load: LoadOptions {
                config_file: Some(config),
                workspace: dir.path().join("ws"),
                config_dir: dir.path().join("cfg"),
            },
            extra_policies: Vec::new(),
            mode: Mode::Ci,
            audit_path: None,
            lock: None,
            locked: false,
            protect: Vec::new(),
            hide: Vec::new(),
            only_servers: Vec::new(),
            sandbox_helper: Some(env!("CARGO_BIN_EXE_warden-sandbox-exec").into()),
            exit: None,
        })
        .expect("host"),
    );
    host.connect().await;
    assert!(host.statuses().is_empty());

    let server = notes_server(dir.path(), "extra");
    assert_eq!(server.trust, Trust::Untrusted);
    host.add_server(server.clone()).await.expect("connects");
    let status = host
        .statuses()
        .into_iter()
        .find(|s| s.name == "extra")
        .expect("listed");
    assert_eq!(status.state, ServerState::Connected);
    assert!(status.protocol.is_some());
    let sandbox = serde_json::to_value(&status.sandbox).expect("json");
    assert!(sandbox.is_object(), "sandboxed: {sandbox}");
    let pid = status.pid.expect("a process");
    assert_eq!(
        host.tools()
            .visible()
            .filter(|t| t.server == "extra")
            .count(),
        4
    );
    assert_eq!(
        host.server_config("extra").map(|s| s.scope),
        Some(Scope::User)
    );

    // The same name twice is refused.
    assert!(host.add_server(server).await.is_err());

    // Calls go through the pipeline: an allow rule, a deny rule with an
    // argument condition, and the CI default for the rest.
    let call = |tool: &str, arguments: Value| CallRequest {
        target: ToolRef::Qualified(format!("mcp__extra__{tool}")),
        arguments,
        caller: Caller::Cli,
    };
    let ok = host
        .call(
            call("list_notes", json!({})),
            None,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(serde_json::to_value(ok.outcome).expect("json"), "ok");
    let denied = host
        .call(
            call("delete_note", json!({"id": 1})),
            None,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(
        serde_json::to_value(denied.outcome).expect("json"),
        "denied"
    );
    assert_eq!(
        serde_json::to_value(denied.decision.as_ref().map(|d| d.stage)).expect("json"),
        "rules"
    );
    let default = host
        .call(
            call("read_note", json!({"id": 1})),
            None,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(
        serde_json::to_value(default.outcome).expect("json"),
        "denied"
    );

    // The tool definitions were pinned against the server's digest.
    let pins = std::fs::read_to_string(dir.path().join("cfg/pins.json")).expect("pins");
    assert!(pins.contains("extra"), "{pins}");

    // Removing stops the process and the tools.
    assert!(host.remove_server("extra").await);
    assert!(!host.remove_server("extra").await);
    assert!(host.statuses().is_empty());
    assert_eq!(host.tools().visible().count(), 0);
    assert!(host.server_config("extra").is_none());
    let unknown = host
        .call(
            call("list_notes", json!({})),
            None,
            CancellationToken::new(),
        )
        .await;
    assert_eq!(
        serde_json::to_value(unknown.outcome).expect("json"),
        "unknown_tool",
        "a removed server's tools are unknown"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "pid {pid} still alive"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    host.shutdown().await;

    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).expect("audit");
    let events: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let count = |event: &str| events.iter().filter(|r| r["event"] == event).count();
    // Three decided calls, and the refusal of the removed server's tool
    // (refusals before the pipeline are recorded too, CONTRACT §6).
    assert_eq!(count("tool_call"), 4);
    assert!(
        events
            .iter()
            .any(|r| r["event"] == "tool_call" && r["outcome"] == "unknown_tool")
    );
    assert_eq!(count("server_start"), 1);
    assert_eq!(count("server_exit"), 1);
}
