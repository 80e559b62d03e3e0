//! Load: 10 sandboxed stdio servers, many calls from 64 concurrent tasks
//! through the whole path (pipeline, write-ahead audit, connection), once
//! through `Host::call` in this process (the agent's path) and once
//! through `warden gateway --stdio` (one MCP client, 64 tasks sharing its
//! session). Every call carries a token of its own and each server signs
//! its answer (`fixture --sign-echo`), so a response lost, duplicated or
//! delivered to the wrong caller or from the wrong server fails the test.
//! Then the audit log: `warden audit verify` passes, and there is exactly
//! one `pending` `tool_call` and one `tool_result` per call, paired by
//! `call_id`, each with the arguments of that call. Peak RSS (`VmHWM`) is
//! printed before the calls and after each quarter of them.
//!
//! By default 1,000 calls per path (CI time); the figure of the issue,
//! 10,000, with `WARDEN_LOAD_CALLS=10000`:
//!
//! ```sh
//! WARDEN_LOAD_CALLS=10000 cargo test --locked --test load_concurrent -- --nocapture
//! ```

mod gateway_support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gateway_support::{TestClient, World, audit_lines, call};
use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden::config::LoadOptions;
use warden::host::{CallRequest, Host, HostOptions, ToolRef};
use warden_audit::{Caller, Outcome};
use warden_core::Mode;

const SERVERS: usize = 10;
const TASKS: usize = 64;

fn calls() -> usize {
    std::env::var("WARDEN_LOAD_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000)
}

/// `s0` … `s9`, each a fixture signing its echo with `s{k}-{marker}`.
fn config(world: &World) -> Value {
    let mut servers = serde_json::Map::new();
    let mut allow = Vec::new();
    for k in 0..SERVERS {
        servers.insert(
            format!("s{k}"),
            json!({
                "command": gateway_support::cli_support::WARDEN,
                "args": ["example-server", "fixture", "--sign-echo",
                         "--name", signature(&world.marker, k)],
            }),
        );
        allow.push(format!("mcp__s{k}__echo"));
    }
    json!({
        "mcpServers": servers,
        "permissions": {"allow": allow},
        "audit": {"path": world.path("audit.jsonl")},
    })
}

fn signature(marker: &str, server: usize) -> String {
    format!("s{server}-{marker}")
}

/// The arguments of call `i`: a token no other call has.
fn arguments(i: usize, task: usize) -> Value {
    json!({"token": format!("call-{i}-{}", uuid::Uuid::new_v4().simple()), "task": task})
}

/// What the server must answer to `arguments`: the same, signed by it.
fn expected(marker: &str, i: usize, arguments: &Value) -> Value {
    let mut answer = arguments.clone();
    answer["server"] = Value::String(signature(marker, i % SERVERS));
    answer
}

/// One call as the test keeps it: its number, its token, and the answer
/// only when it was not the one expected (kept small, so the test's own
/// memory does not hide the host's in `VmHWM`).
struct Answered {
    i: usize,
    token: String,
    wrong: Option<(Value, Value)>,
}

/// Resident memory of a process (`/proc/PID/status`): (VmHWM, VmRSS) in KiB.
fn memory_kib(pid: &str) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Memory samples: before the calls, after each quarter.
#[derive(Debug, Default)]
struct Samples(Vec<(String, (u64, u64))>);

impl Samples {
    fn report(&self, what: &str, calls: usize, took: Duration) {
        let rate = calls as f64 / took.as_secs_f64();
        eprintln!(
            "load: {what}: {calls} calls, {SERVERS} servers, {TASKS} tasks in {:.2} s ({rate:.0} calls/s)",
            took.as_secs_f64()
        );
        for (when, (hwm, rss)) in &self.0 {
            eprintln!("load: {what}: {when}: VmHWM {hwm} KiB, VmRSS {rss} KiB");
        }
    }
}

/// Runs `calls` calls from `TASKS` tasks, `one(i, task)` each, sampling
/// memory of `pid` before and after each quarter of the calls, checking
/// each answer against its call. Returns every call and the wall time.
async fn drive<F, Fut>(
    calls: usize,
    marker: &str,
    pid: &str,
    samples: &mut Samples,
    one: F,
) -> (Vec<Answered>, Duration)
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = (Value, Value)> + Send + 'static,
{
    let one = Arc::new(one);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let (quarter, mut quarters) = tokio::sync::mpsc::unbounded_channel();
    samples.0.push(("before".into(), memory_kib(pid)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (one, next, done, quarter) = (one.clone(), next.clone(), done.clone(), quarter.clone());
        let marker = marker.to_string();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= calls {
                    break;
                }
                let (args, answer) = one(i, task).await;
                let want = expected(&marker, i, &args);
                mine.push(Answered {
                    i,
                    token: args["token"].as_str().unwrap_or_default().to_string(),
                    wrong: (answer != want).then_some((answer, want)),
                });
                let finished = done.fetch_add(1, Ordering::SeqCst) + 1;
                if finished % (calls / 4).max(1) == 0 && finished < calls {
                    let _ = quarter.send(finished);
                }
            }
            mine
        }));
    }
    drop(quarter);
    let sampler = async {
        let mut taken = Vec::new();
        while let Some(finished) = quarters.recv().await {
            taken.push((format!("after {finished}"), memory_kib(pid)));
        }
        taken
    };
    let callers = async {
        let mut all = Vec::with_capacity(calls);
        for task in tasks {
            all.extend(task.await.expect("a caller task panicked"));
        }
        all
    };
    let (taken, all) = tokio::join!(sampler, callers);
    let took = started.elapsed();
    samples.0.extend(taken);
    samples
        .0
        .push((format!("after all {calls}"), memory_kib(pid)));
    (all, took)
}

/// Every answer is the one its call asked for, signed by the server the
/// call named; no call is missing or answered twice.
fn check_answers(calls: usize, answers: &[Answered]) {
    assert_eq!(answers.len(), calls, "calls lost or duplicated");
    let mut seen = HashSet::new();
    for a in answers {
        assert!(seen.insert(a.i), "call {} answered twice", a.i);
        if let Some((got, want)) = &a.wrong {
            panic!("call {} got another answer: {got} instead of {want}", a.i);
        }
    }
}

/// The audit log of `calls` calls: the chain verifies (`warden audit
/// verify`), one pending `tool_call` and one `tool_result` per call,
/// paired by `call_id`, and each `tool_call` with one call's arguments.
fn check_audit(world: &World, audit: &Path, calls: usize, tokens: &HashSet<String>) {
    let verify = world.run(&["audit", "verify", &audit.display().to_string()]);
    assert!(
        verify.status.success(),
        "audit verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let records = audit_lines(audit);
    let mut pending: HashMap<String, String> = HashMap::new();
    let mut results: BTreeMap<String, usize> = BTreeMap::new();
    for r in &records {
        let id = r["call_id"].as_str().unwrap_or_default().to_string();
        match r["event"].as_str() {
            Some("tool_call") => {
                assert_eq!(r["outcome"], "pending", "{r}");
                let token = r["arguments"]["token"].as_str().unwrap_or_default();
                assert!(
                    pending.insert(id.clone(), token.to_string()).is_none(),
                    "two tool_call records for {id}"
                );
            }
            Some("tool_result") => {
                assert_eq!(r["outcome"], "ok", "{r}");
                *results.entry(id).or_default() += 1;
            }
            _ => {}
        }
    }
    assert_eq!(pending.len(), calls, "tool_call records");
    assert_eq!(results.len(), calls, "tool_result records");
    for (id, n) in &results {
        assert_eq!(*n, 1, "{n} results for {id}");
        assert!(pending.contains_key(id), "a result without its call: {id}");
    }
    let recorded: HashSet<String> = pending.into_values().collect();
    assert_eq!(
        &recorded, tokens,
        "the audit's arguments are not the calls'"
    );
}

fn tokens(answers: &[Answered]) -> HashSet<String> {
    answers.iter().map(|a| a.token.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_call_under_load_loses_and_mixes_up_nothing() {
    let world = World::new();
    let file = world.write_config(&config(&world));
    let host = Arc::new(
        Host::open(HostOptions {
            load: LoadOptions {
                config_file: Some(file),
                workspace: world.workspace.clone(),
                config_dir: world.config_dir.clone(),
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
    let calls = calls();
    let mut samples = Samples::default();
    let driver = host.clone();
    let (answers, took) = drive(
        calls,
        &world.marker,
        "self",
        &mut samples,
        move |i, task| {
            let host = driver.clone();
            async move {
                let args = arguments(i, task);
                let report = host
                    .call(
                        CallRequest {
                            target: ToolRef::Remote {
                                server: format!("s{}", i % SERVERS),
                                tool: "echo".into(),
                            },
                            arguments: args.clone(),
                            caller: Caller::Model,
                        },
                        None,
                        CancellationToken::new(),
                    )
                    .await;
                assert_eq!(report.outcome, Outcome::Ok, "call {i}: {report:?}");
                let answer = report
                    .result
                    .as_ref()
                    .map(|r| r["structuredContent"].clone())
                    .unwrap_or_default();
                (args, answer)
            }
        },
    )
    .await;
    host.shutdown().await;
    samples.report("Host::call", calls, took);
    check_answers(calls, &answers);
    check_audit(&world, &world.path("audit.jsonl"), calls, &tokens(&answers));
    assert!(
        world.leftover_processes().is_empty(),
        "servers left running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_under_load_loses_and_mixes_up_nothing() {
    let world = World::new();
    world.write_config(&config(&world));
    let mut child = gateway_support::gateway_command(&world, &["--stdio"])
        .spawn()
        .expect("spawn gateway");
    let pid = child.id().expect("running").to_string();
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        TestClient::plain().serve((stdout, stdin)),
    )
    .await
    .expect("initialize in time")
    .expect("initialize");
    // The gateway serves only after every server's connect settled.
    let tools = client.list_all_tools().await.expect("tools/list");
    let echoes = tools.iter().filter(|t| t.name.ends_with("__echo")).count();
    assert_eq!(echoes, SERVERS, "{tools:?}");
    let calls = calls();
    let mut samples = Samples::default();
    let peer = client.peer().clone();
    let (answers, took) = drive(calls, &world.marker, &pid, &mut samples, move |i, task| {
        let peer = peer.clone();
        async move {
            let args = arguments(i, task);
            let result = peer
                .call_tool(call(&format!("s{}__echo", i % SERVERS), args.clone()))
                .await
                .unwrap_or_else(|e| panic!("call {i}: {e}"));
            assert_ne!(result.is_error, Some(true), "call {i}: {result:?}");
            (args, result.structured_content.unwrap_or_default())
        }
    })
    .await;
    samples.report("gateway --stdio", calls, took);
    let _ = client.cancel().await;
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the gateway exits after its client disconnects")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    check_answers(calls, &answers);
    check_audit(&world, &world.path("audit.jsonl"), calls, &tokens(&answers));
    assert!(
        world.leftover_processes().is_empty(),
        "servers left running"
    );
}
