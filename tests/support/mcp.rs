//! Helpers for the connection-layer tests: server configurations built in
//! code (no config files, never the real HOME), permits for exact calls,
//! and a /proc check that no server process survived.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use warden::config::{
    RemoteConfig, SandboxSpec, Scope, Secret, ServerConfig, StdioConfig, TransportConfig, Trust,
};
use warden::mcp::{Admission, CallError, CallToolResult, LifecycleEvent, Manager, ServerStatus};
use warden_policy::Permit;
use warden_sandbox::LaunchContext;

pub fn warden_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_warden"))
}

fn server(name: &str, transport: TransportConfig, timeout: Duration) -> ServerConfig {
    ServerConfig {
        name: name.to_string(),
        transport,
        timeout,
        protocol: Default::default(),
        sampling: Default::default(),
        elicitation: Default::default(),
        disabled: false,
        trust: Trust::Untrusted,
        sandbox: SandboxSpec::default(),
        scope: Scope::Explicit,
        source: PathBuf::from("tests/support/mcp.rs"),
        digest: format!("test-{name}"),
        content: Default::default(),
        approval_digest: String::new(),
    }
}

/// A stdio server started as `PROGRAM ARGS…`.
pub fn stdio(name: &str, program: &Path, args: &[&str], timeout: Duration) -> ServerConfig {
    server(
        name,
        TransportConfig::Stdio(StdioConfig {
            command: program.display().to_string(),
            program: program.to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
            env_from: Vec::new(),
            cwd: None,
        }),
        timeout,
    )
}

/// `warden example-server NAME ARGS…` over stdio.
pub fn example(name: &str, server_name: &str, args: &[&str], timeout: Duration) -> ServerConfig {
    let mut full = vec!["example-server", server_name];
    full.extend_from_slice(args);
    stdio(name, &warden_bin(), &full, timeout)
}

pub fn http(name: &str, url: &str, headers: &[(&str, &str)], timeout: Duration) -> ServerConfig {
    server(name, TransportConfig::Http(remote(url, headers)), timeout)
}

pub fn sse(name: &str, url: &str, timeout: Duration) -> ServerConfig {
    server(name, TransportConfig::Sse(remote(url, &[])), timeout)
}

fn remote(url: &str, headers: &[(&str, &str)]) -> RemoteConfig {
    RemoteConfig {
        url: url.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(*v)))
            .collect(),
        oauth: Default::default(),
        oauth_store: None,
    }
}

/// A manager whose private folders live in `dir`.
pub fn manager(dir: &Path, servers: Vec<ServerConfig>) -> Arc<Manager> {
    manager_with(
        dir,
        servers.into_iter().map(|s| (s, Admission::Start)).collect(),
    )
}

pub fn manager_with(dir: &Path, servers: Vec<(ServerConfig, Admission)>) -> Arc<Manager> {
    Manager::new(
        servers,
        LaunchContext::new(dir, dir.join("run"))
            .with_helper(env!("CARGO_BIN_EXE_warden-sandbox-exec")),
    )
}

pub fn args(value: Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A permit for exactly this call.
pub fn permit(server: &str, tool: &str, arguments: &Option<Map<String, Value>>) -> Permit {
    let value = arguments.clone().map_or(Value::Null, Value::Object);
    Permit::for_tests(server, tool, &warden_core::digest::sha256_json(&value))
}

pub async fn call(
    manager: &Manager,
    server: &str,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, CallError> {
    let arguments = args(arguments);
    let permit = permit(server, tool, &arguments);
    manager
        .call(
            permit,
            arguments,
            tokio_util::sync::CancellationToken::new(),
        )
        .await
}

pub fn status(manager: &Manager, name: &str) -> ServerStatus {
    manager
        .statuses()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no status for {name}"))
}

pub fn tool_names(status: &ServerStatus) -> Vec<String> {
    status.tools.iter().map(|t| t.name.to_string()).collect()
}

/// Waits (up to `limit`) until `check` holds on the manager's statuses.
pub async fn wait_until(
    manager: &Manager,
    limit: Duration,
    check: impl Fn(&[ServerStatus]) -> bool,
) -> bool {
    let mut changes = manager.subscribe();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check(&manager.statuses()) {
            return true;
        }
        if tokio::time::timeout_at(deadline, changes.changed())
            .await
            .is_err()
        {
            return check(&manager.statuses());
        }
    }
}

/// Pids of server processes announced so far.
pub fn started_pids(events: &mut tokio::sync::mpsc::UnboundedReceiver<LifecycleEvent>) -> Vec<u32> {
    let mut pids = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let LifecycleEvent::Started { pid: Some(pid), .. } = event {
            pids.push(pid);
        }
    }
    pids
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn live_group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return members;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the `(comm)`: state ppid pgrp …
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            members.push(pid);
        }
    }
    members
}

/// Asserts that none of the groups led by `pids` has a live process left.
pub async fn assert_no_process_left(pids: &[u32]) {
    // Reaping is asynchronous; give it a moment.
    for _ in 0..50 {
        if pids.iter().all(|p| live_group_members(*p).is_empty()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for pid in pids {
        assert!(
            live_group_members(*pid).is_empty(),
            "process group {pid} still has live processes: {:?}",
            live_group_members(*pid)
        );
    }
}

/// Logs to the test's stderr when `RUST_LOG` is set.
pub fn init_logs() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
}
