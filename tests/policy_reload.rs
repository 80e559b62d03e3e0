//! Policy reload during a session: `Host::reload_policy` (what the repl's
//! `/policy reload` runs) and SIGHUP to `warden gateway --stdio`. New rules
//! decide the next call; a configuration that cannot be loaded (invalid
//! JSON, a bad rule, a missing file) keeps the previous policy, and every
//! attempt is reported and written to the audit log as `policy_reload`.
//! "Allow for this session" answers survive a reload for what the new
//! policy still asks about for the same reason, never against a new deny;
//! a gateway client is told when a reload hides or shows a tool.

mod gateway_support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use gateway_support::{
    TestClient, World, audit_lines, call, eventually, gateway_command, is_error, text_of,
};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden::config::LoadOptions;
use warden::host::{CallRequest, Host, HostOptions, ToolRef};
use warden_audit::{Caller, Outcome, VerifyReport, verify};
use warden_core::Mode;
use warden_policy::{AskAnswer, AskPrompt, Asker};

fn config(world: &World, echo: &str) -> Value {
    // A deny with a condition, so the tool stays listed (an unconditional
    // deny hides it) and the call reaches the pipeline.
    let rule = if echo == "deny" {
        "mcp__fx__echo(message: *)"
    } else {
        "mcp__fx__echo"
    };
    json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {echo: [rule]},
        "audit": {"path": world.path("audit.jsonl")},
    })
}

fn reloads(audit: &Path) -> Vec<Value> {
    audit_lines(audit)
        .into_iter()
        .filter(|r| r["event"] == "policy_reload")
        .collect()
}

async fn echo(host: &Host) -> Outcome {
    echo_asking(host, None).await
}

async fn echo_asking(host: &Host, asker: Option<&dyn Asker>) -> Outcome {
    host.call(
        CallRequest {
            target: ToolRef::Remote {
                server: "fx".into(),
                tool: "echo".into(),
            },
            arguments: json!({"message": "hi"}),
            caller: Caller::Cli,
        },
        asker,
        CancellationToken::new(),
    )
    .await
    .outcome
}

fn open_host(world: &World, file: &Path, mode: Mode) -> Arc<Host> {
    Arc::new(
        Host::open(HostOptions {
            load: LoadOptions {
                config_file: Some(file.to_path_buf()),
                workspace: world.workspace.clone(),
                config_dir: world.config_dir.clone(),
            },
            extra_policies: Vec::new(),
            mode,
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
    )
}

/// A person who answers "allow for this session" and is counted.
#[derive(Default)]
struct AllowsForSession(AtomicUsize);

impl Asker for AllowsForSession {
    fn ask<'a>(&'a self, _prompt: &'a AskPrompt) -> futures::future::BoxFuture<'a, AskAnswer> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { AskAnswer::AllowSession })
    }
}

fn with_rule(world: &World, effect: &str, rule: &str) -> Value {
    json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {effect: [rule]},
        "audit": {"path": world.path("audit.jsonl")},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_approvals_survive_a_reload_only_where_the_new_policy_still_asks() {
    let world = World::new();
    let file = world.write_config(&with_rule(&world, "ask", "mcp__fx__echo"));
    let host = open_host(&world, &file, Mode::Interactive);
    host.connect().await;
    let person = AllowsForSession::default();
    let asked = || person.0.load(Ordering::SeqCst);

    assert_eq!(echo_asking(&host, Some(&person)).await, Outcome::Ok);
    assert_eq!(asked(), 1);
    assert_eq!(echo_asking(&host, Some(&person)).await, Outcome::Ok);
    assert_eq!(asked(), 1, "the session approval was not used");

    // The same policy again: the approval stands.
    host.reload_policy().expect("reload");
    assert_eq!(echo_asking(&host, Some(&person)).await, Outcome::Ok);
    assert_eq!(asked(), 1, "the approval was dropped by a reload");

    // A stricter policy: its deny wins over the approval, nobody is asked.
    world.write_config(&with_rule(&world, "deny", "mcp__fx__echo(message: *)"));
    host.reload_policy().expect("reload");
    assert_eq!(echo_asking(&host, Some(&person)).await, Outcome::Denied);
    assert_eq!(asked(), 1, "asked about a call the policy denies");

    // Another reason to ask (another rule): the person is asked again.
    world.write_config(&with_rule(&world, "ask", "mcp__fx__echo(message: *)"));
    host.reload_policy().expect("reload");
    assert_eq!(echo_asking(&host, Some(&person)).await, Outcome::Ok);
    assert_eq!(
        asked(),
        2,
        "a new reason to ask was covered by an old answer"
    );

    // Without anyone to ask, an approval kept across reloads still covers
    // the call; a call it does not cover is denied.
    assert_eq!(echo_asking(&host, None).await, Outcome::Ok);
    world.write_config(&with_rule(&world, "ask", "mcp__fx__echo(message: h*)"));
    host.reload_policy().expect("reload");
    assert_eq!(echo_asking(&host, None).await, Outcome::Denied);
    host.shutdown().await;
    assert!(matches!(
        verify(&world.path("audit.jsonl"), None),
        VerifyReport::Ok { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_new_rules_and_keeps_the_old_ones_when_the_new_cannot_load() {
    let world = World::new();
    let file = world.write_config(&config(&world, "allow"));
    let host = open_host(&world, &file, Mode::Ci);
    host.connect().await;
    assert_eq!(echo(&host).await, Outcome::Ok);

    // New rules: the next call is decided by them.
    world.write_config(&config(&world, "deny"));
    let reloaded = host.reload_policy().expect("the new policy loads");
    assert_eq!(reloaded.rules, 1);
    assert_eq!(echo(&host).await, Outcome::Denied);

    // Three configurations that cannot load: each is refused, reported,
    // and the deny stays in force.
    type Breaks<'a> = [(&'a str, Box<dyn Fn() + 'a>); 3];
    let broken: Breaks = [
        (
            "invalid JSON",
            Box::new(|| std::fs::write(&file, "{\"permissions\": ").unwrap()),
        ),
        (
            "a bad rule",
            Box::new(|| {
                world.write_config(&json!({
                    "mcpServers": {"fx": world.fixture()},
                    "permissions": {"allow": ["mcp_"]},
                }));
            }),
        ),
        (
            "a missing file",
            Box::new(|| std::fs::remove_file(&file).unwrap()),
        ),
    ];
    for (what, make) in &broken {
        make();
        let error = host
            .reload_policy()
            .expect_err(&format!("{what} was accepted"));
        assert!(!error.is_empty(), "{what}: no reason given");
        assert_eq!(
            echo(&host).await,
            Outcome::Denied,
            "{what}: the old policy was lost"
        );
    }
    host.shutdown().await;

    let audit = world.path("audit.jsonl");
    let records = reloads(&audit);
    let oks: Vec<bool> = records.iter().map(|r| r["ok"] == true).collect();
    assert_eq!(oks, [true, false, false, false], "{records:#?}");
    assert_eq!(records[0]["rules"], 1);
    for r in &records[1..] {
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
        assert_eq!(r["policy_sha256"], records[0]["policy_sha256"]);
    }
    assert!(
        records[2]["error"].as_str().unwrap().contains("mcp_"),
        "the bad rule is named: {}",
        records[2]
    );
    assert!(matches!(verify(&audit, None), VerifyReport::Ok { .. }));
}

fn sighup(child: &tokio::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id().expect("running") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_gateways_policy() {
    let world = World::new();
    world.write_config(&config(&world, "allow"));
    let audit = world.path("audit.jsonl");
    let mut child = gateway_command(&world, &["--stdio"])
        .spawn()
        .expect("spawn gateway");
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        TestClient::plain().serve((stdout, stdin)),
    )
    .await
    .expect("initialize in time")
    .expect("initialize");
    let result = client
        .call_tool(call("fx__echo", json!({"message": "one"})))
        .await
        .expect("echo");
    assert!(!is_error(&result), "{result:?}");

    // The rule becomes a deny; SIGHUP; the next call is denied. Waited
    // for on the audit record of the reload (polled, generous deadline).
    world.write_config(&config(&world, "deny"));
    sighup(&child);
    assert!(
        eventually(30.0, || reloads(&audit).len() == 1),
        "no policy_reload record after SIGHUP"
    );
    assert_eq!(reloads(&audit)[0]["ok"], true);
    let result = client
        .call_tool(call("fx__echo", json!({"message": "two"})))
        .await
        .expect("echo");
    assert!(is_error(&result), "allowed after the reload: {result:?}");
    assert!(text_of(&result).contains("rules"), "{}", text_of(&result));

    // A configuration that does not load: refused, recorded, deny kept,
    // and the gateway keeps serving.
    std::fs::write(world.path("warden.json"), "{ not json").unwrap();
    sighup(&child);
    assert!(
        eventually(30.0, || reloads(&audit).len() == 2),
        "no policy_reload record after the second SIGHUP"
    );
    let refused = &reloads(&audit)[1];
    assert_eq!(refused["ok"], false, "{refused}");
    let result = client
        .call_tool(call("fx__echo", json!({"message": "three"})))
        .await
        .expect("echo");
    assert!(is_error(&result), "the old deny was lost: {result:?}");

    let _ = client.cancel().await;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the gateway exits after its client disconnects")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(matches!(verify(&audit, None), VerifyReport::Ok { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_hides_a_tool_tells_gateway_clients() {
    let world = World::new();
    world.write_config(&config(&world, "allow"));
    let audit = world.path("audit.jsonl");
    let mut child = gateway_command(&world, &["--stdio"])
        .spawn()
        .expect("spawn gateway");
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let handler = TestClient::plain();
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        handler.clone().serve((stdout, stdin)),
    )
    .await
    .expect("initialize in time")
    .expect("initialize");
    let listed = |tools: &[rmcp::model::Tool]| tools.iter().any(|t| t.name == "fx__echo");
    assert!(listed(&client.list_all_tools().await.expect("tools/list")));

    // An unconditional deny hides the tool: the client is told to list
    // again, and the new listing leaves it out.
    world.write_config(&with_rule(&world, "deny", "mcp__fx__echo"));
    sighup(&child);
    assert!(
        eventually(30.0, || handler.list_changed() >= 1),
        "no tools/list_changed after a reload that hid a tool"
    );
    assert_eq!(reloads(&audit)[0]["ok"], true);
    assert!(!listed(&client.list_all_tools().await.expect("tools/list")));

    // And back: shown again, told again.
    world.write_config(&config(&world, "allow"));
    sighup(&child);
    assert!(
        eventually(30.0, || handler.list_changed() >= 2),
        "no tools/list_changed after a reload that showed a tool"
    );
    assert!(listed(&client.list_all_tools().await.expect("tools/list")));

    let _ = client.cancel().await;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the gateway exits after its client disconnects")
        .expect("wait");
    assert!(status.success(), "{status:?}");
}

/// An `ask` with no terminal to put it on: the call is denied, saying no one
/// could be asked, and the log has no `approval` (no one answered), where a
/// person's deny has one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_no_one_could_answer_records_no_approval() {
    let world = World::new();
    let file = world.write_config(&with_rule(&world, "ask", "mcp__fx__echo"));
    let host = open_host(&world, &file, Mode::Interactive);
    host.connect().await;
    let no_terminal = warden::terminal::TerminalAsker::with_device("/nonexistent/tty");
    assert_eq!(
        echo_asking(&host, Some(&no_terminal)).await,
        Outcome::Denied
    );
    host.shutdown().await;
    let records = audit_lines(&world.path("audit.jsonl"));
    assert!(
        !records.iter().any(|r| r["event"] == "approval"),
        "{records:?}"
    );
    let call = records
        .iter()
        .find(|r| r["event"] == "tool_call")
        .expect("the call's record");
    let reasons = call["decision"]["reasons"].to_string();
    assert!(reasons.contains("no one could be asked"), "{reasons}");
    assert!(!reasons.contains("by the user"), "{reasons}");
}
