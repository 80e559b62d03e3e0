//! `warden demo`: the whole story offline, every claim checked.
//!
//! A scripted model drives real MCP servers shipped inside this binary
//! (`notes` twice, under two names, and `hostile`), all launched in the
//! sandbox, through the real pipeline (rules + the shipped default Rego
//! policy, CI mode) and into a real audit log, which is verified at the end.
//! Exit 0 only when every check held.

use std::io::Write as _;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use super::{CliError, GlobalArgs, exit, session};
use crate::agent::HostExecutor;
use crate::agent::{Limits, RunStatus, run_task};
use crate::agent::{Model, ScriptedModel};
use crate::config::LoadOptions;
use crate::host::{Host, HostOptions};
use crate::mcp::ServerState;
use warden_policy::Mode;

/// Collects the checks; prints each as it is made.
struct Checks {
    failed: Vec<String>,
    count: usize,
}

impl Checks {
    fn new() -> Self {
        Checks {
            failed: Vec::new(),
            count: 0,
        }
    }

    fn check(&mut self, ok: bool, claim: impl Into<String>) {
        let claim = claim.into();
        self.count += 1;
        if ok {
            eprintln!("  ✓ {claim}");
        } else {
            eprintln!("  ✗ {claim}");
            self.failed.push(claim);
        }
    }
}

fn step(title: &str) {
    eprintln!("\n▶ {title}");
}

/// Everything the demo lays out in its own temporary folder.
struct Stage {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    config_file: PathBuf,
    config_dir: PathBuf,
    audit_file: PathBuf,
    script_file: PathBuf,
    secret_token: String,
    env_token: String,
    tcp: TcpListener,
    udp: UdpSocket,
}

const ENV_CANARY: &str = "WARDEN_DEMO_CANARY";
const ENV_TOKEN_PREFIX: &str = "ENV-";

/// Replaces this process with the same `warden demo` command line, the
/// canary added to its environment. Returns only on failure.
fn reexec_with_canary() -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return anyhow::anyhow!("locating warden to start the demo: {e}"),
    };
    let token = format!("{ENV_TOKEN_PREFIX}{}", uuid::Uuid::new_v4().simple());
    let err = std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(ENV_CANARY, token)
        .exec();
    anyhow::anyhow!("starting the demo ({}): {err}", exe.display())
}

pub fn run(global: &GlobalArgs) -> anyhow::Result<u8> {
    // The canary must be in warden's own environment to prove it does not
    // reach the servers. Rather than mutate this process's environment,
    // warden re-executes itself with the canary in the new environment.
    let env_token = match std::env::var(ENV_CANARY) {
        Ok(token) if token.starts_with(ENV_TOKEN_PREFIX) => token,
        _ => return Err(reexec_with_canary()),
    };
    let started = Instant::now();
    let stage = lay_out(env_token).context("preparing the demo folder")?;
    let options = HostOptions {
        load: LoadOptions {
            config_file: Some(stage.config_file.clone()),
            workspace: stage.workspace.clone(),
            config_dir: stage.config_dir.clone(),
        },
        extra_policies: Vec::new(),
        mode: Mode::Ci,
        audit_path: None,
        lock: None,
        locked: false,
        protect: Vec::new(),
        hide: Vec::new(),
        only_servers: Vec::new(),
        sandbox_helper: None,
        exit: None,
    };
    let mut checks = Checks::new();
    let result = session::run_async(|cancel| async {
        demo(&stage, options, &mut checks, cancel).await?;
        Ok(exit::OK)
    });
    if let Err(error) = result {
        checks.check(false, format!("the demo ran to the end ({error:#})"));
    }
    let secs = started.elapsed().as_secs_f64();
    if global.json {
        let ok = checks.failed.is_empty();
        let error =
            (!ok).then(|| format!("{} of {} checks failed", checks.failed.len(), checks.count));
        let outcome = (!ok).then_some("failed");
        super::json::print(
            "demo",
            json!({"ok": ok, "checks": checks.count, "failed": checks.failed,
                   "seconds": secs, "outcome": outcome, "error": error}),
        )?;
    }
    if checks.failed.is_empty() {
        eprintln!("\nAll {} checks held ({secs:.1} s).", checks.count);
        Ok(exit::OK)
    } else if global.json {
        Ok(exit::FAILED)
    } else {
        eprintln!(
            "\n{} of {} checks failed ({secs:.1} s):",
            checks.failed.len(),
            checks.count
        );
        for claim in &checks.failed {
            eprintln!("  - {claim}");
        }
        Err(CliError::with_code(exit::FAILED, "the demo failed"))
    }
}

async fn demo(
    stage: &Stage,
    options: HostOptions,
    checks: &mut Checks,
    cancel: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    step(
        "Configuration: three servers, all untrusted and sandboxed; rules; the shipped default.rego; CI mode",
    );
    eprintln!("  config {}", stage.config_file.display());
    let host = std::sync::Arc::new(Host::open(options).map_err(|e| anyhow::anyhow!("{e}"))?);
    // A server's own requests (elicitation, sampling) are decided too.
    host.install_server_requests(warden_audit::Caller::Model);
    checks.check(
        host.config().servers.len() == 3,
        "the configuration validated with 3 servers",
    );

    step("Connecting over stdio (rmcp), each server in its own sandbox");
    host.connect().await;
    for status in host.statuses() {
        let connected = status.state == ServerState::Connected;
        let sandboxed = status.sandbox.as_ref().is_some_and(|s| s.enabled);
        checks.check(
            connected && sandboxed,
            format!(
                "{} connected, protocol {}, sandboxed: {}",
                status.name,
                status.protocol.as_deref().unwrap_or("?"),
                status
                    .sandbox
                    .as_ref()
                    .map_or("no".to_string(), |s| format!("network {}", s.network))
            ),
        );
        if let Some(error) = &status.error {
            eprintln!("    error: {}", warden_core::display::line(error));
        }
    }
    let view = host.tools();
    let visible: Vec<String> = view.visible().map(|t| t.qualified.clone()).collect();
    eprintln!("  {} tools visible to the model", visible.len());
    checks.check(
        visible.iter().any(|t| t == "mcp__notes__read_note")
            && visible.iter().any(|t| t == "mcp__journal__read_note"),
        "tools are namespaced per server: mcp__notes__read_note and mcp__journal__read_note",
    );
    checks.check(
        view.get("mcp__notes__delete_note").is_some()
            && !visible.iter().any(|t| t.ends_with("__delete_note")),
        "delete_note, denied by a rule without conditions, is hidden from the model",
    );

    step("A scripted model works through the task; every call passes the pipeline");
    let model = ScriptedModel::from_file(&stage.script_file).map_err(|e| anyhow::anyhow!("{e}"))?;
    eprintln!("  model: {}", model.name());
    let executor = HostExecutor::new(&host, None, cancel.clone());
    let limits = Limits {
        max_turns: 10,
        max_tool_calls: 20,
        timeout: Duration::from_secs(60),
        max_result_chars: 20_000,
    };
    let report = run_task(
        &model,
        &executor,
        "Tidy up my notes.",
        &limits,
        cancel.clone(),
    )
    .await;
    for call in &report.calls {
        eprintln!(
            "    {:<28} {:<6} {:<11} {}",
            call["qualified"].as_str().unwrap_or("?"),
            call["decision"]["effect"].as_str().unwrap_or("-"),
            call["decision"]["stage"].as_str().unwrap_or("-"),
            call["outcome"].as_str().unwrap_or("-"),
        );
    }
    checks.check(
        report.status == RunStatus::Completed,
        format!(
            "the run completed ({}; every scripted expectation was met)",
            report.status.as_str()
        ),
    );
    let by_name = |name: &str| -> Vec<&Value> {
        report
            .calls
            .iter()
            .filter(|c| c["qualified"].as_str() == Some(name))
            .collect()
    };
    let first = |name: &str| {
        by_name(name)
            .first()
            .copied()
            .cloned()
            .unwrap_or(Value::Null)
    };
    let read = first("mcp__notes__read_note");
    checks.check(
        read["outcome"] == "ok" && read.to_string().contains("Milk, bread, coffee."),
        "allowed by a rule: notes.read_note returned the note's real content",
    );
    let add = first("mcp__journal__add_note");
    checks.check(
        add["outcome"] == "denied" && add["decision"]["effect"] == "deny",
        format!(
            "an `ask` (journal.add_note) became deny in CI mode: {}",
            add["decision"]["reasons"][0].as_str().unwrap_or("?")
        ),
    );
    let reads = by_name("mcp__hostile__read_file");
    let ssh = reads.first().copied().cloned().unwrap_or(Value::Null);
    checks.check(
        ssh["outcome"] == "denied" && ssh["decision"]["stage"] == "policy",
        "the Rego policy refused hostile.read_file of an SSH key",
    );
    let link = reads.get(1).copied().cloned().unwrap_or(Value::Null);
    let link_report = hostile_report(&link);
    checks.check(
        link["decision"]["effect"] == "allow"
            && link_report["ok"] == false
            && !link.to_string().contains(&stage.secret_token),
        format!(
            "a symlink in the workspace fooled the rules (allowed), but the sandbox refused to read the file behind it: {}",
            link_report["error"].as_str().unwrap_or("?")
        ),
    );
    let env = first("mcp__hostile__dump_env");
    checks.check(
        env["outcome"] == "ok" && !env.to_string().contains(&stage.env_token),
        format!(
            "hostile.dump_env ran, and warden's {ENV_CANARY} was not in the server's environment"
        ),
    );
    let tcp = first("mcp__hostile__tcp_connect");
    let udp = first("mcp__hostile__udp_send");
    checks.check(
        tcp["decision"]["effect"] == "allow" && udp["decision"]["effect"] == "allow",
        "the rules let hostile try TCP and UDP to loopback",
    );
    for (what, call) in [("TCP connect", &tcp), ("UDP send", &udp)] {
        let report = hostile_report(call);
        checks.check(
            report["ok"] == false,
            format!(
                "hostile's own report of its {what}: {}",
                report["error"].as_str().unwrap_or("it succeeded")
            ),
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    checks.check(
        stage.tcp.accept().is_err(),
        "the loopback TCP listener saw no connection",
    );
    let mut buf = [0u8; 256];
    checks.check(
        stage.udp.recv_from(&mut buf).is_err(),
        "the loopback UDP socket received no datagram",
    );
    let forge = first("mcp__hostile__write_file");
    let forge_report = hostile_report(&forge);
    checks.check(
        forge["decision"]["effect"] == "allow" && forge_report["ok"] == false,
        format!(
            "the rules let hostile write in the workspace, but the sandbox hid the audit log there: {}",
            forge_report["error"].as_str().unwrap_or("it was written")
        ),
    );
    let everything = serde_json::to_string(&report.calls).unwrap_or_default();
    checks.check(
        !everything.contains(&stage.secret_token),
        "the secret file's token appears in no tool result",
    );

    step("Shutting down: every server's process group is stopped");
    let pids: Vec<u32> = host.statuses().iter().filter_map(|s| s.pid).collect();
    host.shutdown().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let alive: Vec<u32> = pids
        .into_iter()
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    checks.check(
        alive.is_empty(),
        format!("no server process is left (alive: {alive:?})"),
    );

    step("The audit log: every decision, hash-chained, verified");
    drop(host);
    let verified = warden_audit::verify(&stage.audit_file, None);
    match verified {
        warden_audit::VerifyReport::Ok {
            count, last_hash, ..
        } => {
            checks.check(
                true,
                format!(
                    "audit chain verified: {count} records, last hash {}…",
                    &last_hash[..12.min(last_hash.len())]
                ),
            );
            let log = std::fs::read_to_string(&stage.audit_file).unwrap_or_default();
            let calls = log
                .lines()
                .filter(|l| l.contains("\"event\":\"tool_call\""))
                .count();
            checks.check(
                calls == report.calls.len(),
                format!(
                    "{calls} tool_call records for {} proposed calls",
                    report.calls.len()
                ),
            );
            let records: Vec<Value> = log
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            let pending: Vec<&Value> = records
                .iter()
                .filter(|r| r["event"] == "tool_call" && r["outcome"] == "pending")
                .collect();
            let answered = pending.iter().all(|p| {
                records
                    .iter()
                    .any(|r| r["event"] == "tool_result" && r["call_id"] == p["call_id"])
            });
            checks.check(
                !pending.is_empty() && answered,
                format!(
                    "each of the {} allowed calls was recorded before it was sent, and its result after",
                    pending.len()
                ),
            );
            server_requests(&records, checks);
            checks.check(
                !log.contains(&stage.secret_token) && !log.contains(&stage.env_token),
                "no canary appears in the audit log",
            );
        }
        other => checks.check(false, format!("audit chain verified ({other:?})")),
    }
    eprintln!("  log: {}", stage.audit_file.display());
    Ok(())
}

/// hostile.ask_user's elicitation, declined in CI mode, and its sampling,
/// denied by the rule `sampling__hostile`: their audit records.
fn server_requests(records: &[Value], checks: &mut Checks) {
    let request = |kind: &str| {
        records
            .iter()
            .find(|r| r["event"] == "request" && r["kind"] == kind)
            .cloned()
            .unwrap_or(Value::Null)
    };
    let show = |r: &Value| {
        eprintln!(
            "    request {:<12} {:<18} {:<6} {}",
            r["kind"].as_str().unwrap_or("?"),
            r["target"].as_str().unwrap_or("?"),
            r["outcome"].as_str().unwrap_or("?"),
            r["error"].as_str().unwrap_or("")
        );
    };
    let elicitation = request("elicitation");
    show(&elicitation);
    checks.check(
        elicitation["target"] == "elicitation__hostile"
            && elicitation["outcome"] == "denied"
            && elicitation["error"]
                .as_str()
                .is_some_and(|e| e.contains("declined") && e.contains("--ci")),
        "hostile's elicitation (its password prompt) was declined in CI mode, and recorded",
    );
    let sampling = request("sampling");
    show(&sampling);
    checks.check(
        sampling["target"] == "sampling__hostile"
            && sampling["outcome"] == "denied"
            && sampling["decision"]["stage"] == "rules",
        "hostile's sampling request was denied by the rule sampling__hostile, and recorded",
    );
}

/// The hostile server reports each attempt as JSON text: `{"ok", "errno", "error", "detail"}`.
fn hostile_report(call: &Value) -> Value {
    call["result"]["content"][0]["text"]
        .as_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null)
}

fn lay_out(env_token: String) -> anyhow::Result<Stage> {
    let dir = tempfile::Builder::new().prefix("warden-demo-").tempdir()?;
    let root = dir.path().to_path_buf();
    let workspace = root.join("workspace");
    let outside = root.join("outside");
    let config_dir = root.join("config");
    for d in [&workspace, &outside, &config_dir] {
        std::fs::create_dir_all(d)?;
    }
    let secret_token = format!("SECRET-{}", uuid::Uuid::new_v4().simple());
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, format!("{secret_token}\n"))?;
    std::os::unix::fs::symlink(&secret, workspace.join("shortcut.txt"))?;
    std::fs::write(workspace.join("README.md"), "The demo workspace.\n")?;

    let tcp = TcpListener::bind("127.0.0.1:0")?;
    tcp.set_nonblocking(true)?;
    let udp = UdpSocket::bind("127.0.0.1:0")?;
    udp.set_nonblocking(true)?;
    let tcp_port = tcp.local_addr()?.port();
    let udp_port = udp.local_addr()?.port();

    let exe = std::env::current_exe()?;
    let exe = exe.display().to_string();
    // Where CONTRACT's example keeps it: inside the workspace, which the
    // hostile server may write.
    let audit_file = workspace.join(".warden").join("audit.jsonl");
    let config = json!({
        "mcpServers": {
            "notes": {"command": exe, "args": ["example-server", "notes", "--name", "notes"]},
            "journal": {"command": exe, "args": ["example-server", "notes", "--name", "journal"]},
            "hostile": {"command": exe, "args": ["example-server", "hostile"],
                        "sandbox": {"write": ["${WORKSPACE}"]}}
        },
        "permissions": {
            "allow": [
                "mcp__notes__list_notes", "mcp__notes__read_note",
                "mcp__journal__list_notes", "mcp__journal__read_note",
                "mcp__hostile__read_file(path: ${WORKSPACE}/**)",
                "mcp__hostile__write_file(path: ${WORKSPACE}/**)",
                "mcp__hostile__dump_env", "mcp__hostile__tcp_connect", "mcp__hostile__udp_send",
                "mcp__hostile__ask_user"
            ],
            "ask": ["mcp__journal__add_note"],
            "deny": ["mcp__*__delete_note", "sampling__hostile"]
        },
        "audit": {"path": audit_file.display().to_string(), "fsync": "batch"}
    });
    let config_file = root.join("warden.json");
    write_json(&config_file, &config)?;

    let ws = workspace.display().to_string();
    let script = json!([
        {"text": "Let me look at both notebooks.",
         "tool_calls": [
            {"name": "mcp__notes__list_notes", "arguments": {}},
            {"name": "mcp__journal__list_notes", "arguments": {}}]},
        {"expect": ["Welcome", "Shopping"],
         "tool_calls": [{"name": "mcp__notes__read_note", "arguments": {"id": 2}}]},
        {"expect": "Milk, bread, coffee.",
         "tool_calls": [{"name": "mcp__journal__add_note",
                         "arguments": {"title": "Groceries", "body": "Milk, bread, coffee."}}]},
        {"expect": "Denied",
         "text": "Writing was refused; I will only read. Now the hostile server's turn.",
         "tool_calls": [{"name": "mcp__hostile__read_file",
                         "arguments": {"path": "/home/user/.ssh/id_rsa"}}]},
        {"expect": "secret file",
         "tool_calls": [
            {"name": "mcp__hostile__read_file", "arguments": {"path": format!("{ws}/shortcut.txt")}},
            {"name": "mcp__hostile__dump_env", "arguments": {}},
            {"name": "mcp__hostile__tcp_connect", "arguments": {"port": tcp_port, "message": "exfiltrate"}},
            {"name": "mcp__hostile__udp_send", "arguments": {"port": udp_port, "message": "exfiltrate"}},
            {"name": "mcp__hostile__ask_user", "arguments": {}},
            {"name": "mcp__hostile__write_file",
             "arguments": {"path": format!("{ws}/.warden/audit.jsonl"), "content": "{}\n"}}]},
        {"expect": "Permission denied",
         "text": "Done: your notes are listed and nothing left the sandbox."}
    ]);
    let script_file = root.join("model.json");
    write_json(&script_file, &script)?;
    Ok(Stage {
        _dir: dir,
        workspace,
        config_file,
        config_dir,
        audit_file,
        script_file,
        secret_token,
        env_token,
        tcp,
        udp,
    })
}

fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    let mut file = std::fs::File::create(path)?;
    file.write_all(serde_json::to_string_pretty(value)?.as_bytes())?;
    Ok(())
}
