//! Issue 11, class 8, end to end: a hostile server's `inputSchema` (about
//! 3 KB of nested `anyOf`/`$ref`) made validation exponential: 23.6 s at
//! depth 22; at depth 40 `call --timeout 5` ran 659 s and ignored SIGTERM,
//! and two such calls wedged the HTTP gateway for every client.
//!
//! Now such a tool is skipped when its server lists it (reported in
//! `skipped_tools`), every decision runs off the caller's task with a
//! deadline, and SIGTERM, `--timeout` and other clients are never held up
//! by a slow decision.

mod resolving_support;

use std::time::{Duration, Instant};

use resolving_support::*;
use serde_json::json;

fn node_with_depth(world: &World, depth: u32) -> serde_json::Value {
    let mut node = server(world, "node");
    node["env"] = json!({"HOSTILE_DEPTH": depth.to_string()});
    node
}

/// A policy whose evaluation runs until regorus's own 2 s budget stops it,
/// for `read_note` of id 99 only.
const SLOW_POLICY: &str = "package warden\nimport rego.v1\n\n\
deny contains \"slow\" if {\n  input.arguments.id == 99\n  \
count([x | some x in numbers.range(1, 100000); some y in numbers.range(1, 100000); x == y + 100001]) >= 0\n}\n";

#[test]
fn the_hostile_schema_is_skipped_and_call_timeout_5_returns_at_once() {
    let world = World::new();
    populate(&world);
    for depth in [22, 40] {
        world.write_config(&json!({
            "mcpServers": {"node": node_with_depth(&world, depth)},
            "permissions": {"allow": ["mcp__node__*"]},
        }));
        let started = Instant::now();
        let out = world.run(&[
            "--timeout",
            "5",
            "call",
            "node",
            "hostile_schema",
            "--args",
            "{}",
        ]);
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("too complex"), "{}", stderr(&out));
        assert!(took < Duration::from_secs(5), "took {took:?}");

        let out = world.run(&["mcp", "status", "--json"]);
        let doc = stdout_json(&out);
        let skipped = doc["servers"][0]["skipped_tools"].to_string();
        assert!(
            skipped.contains("hostile_schema") && skipped.contains("too complex"),
            "{doc}"
        );
        let tools = doc["servers"][0]["tools"].to_string();
        assert!(
            tools.contains("read_file"),
            "the other tools are served: {doc}"
        );
    }
    assert!(world.leftover_processes().is_empty());
}

#[test]
fn sigterm_and_timeout_end_a_call_whose_decision_runs_long() {
    let world = World::new();
    populate(&world);
    std::fs::write(world.path("slow.rego"), SLOW_POLICY).unwrap();
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {"allow": ["mcp__py__*"]},
        "policy": ["slow.rego"],
    }));
    // Without interruption the policy is stopped at its budget: a deny.
    let started = Instant::now();
    let (code, report) = call(&world, "py", "read_note", &json!({"id": 99}));
    assert_denied(code, &report, "fail closed");
    assert!(started.elapsed() < Duration::from_secs(30));

    // SIGTERM while the decision runs: warden exits at once. It is sent
    // once warden logs (debug) that it is deciding the call.
    let mut child = world
        .warden(&["-vv", "call", "py", "read_note", "--args", r#"{"id": 99}"#])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deciding = wait_for_line(child.stderr.take().expect("stderr"), "deciding");
    assert!(
        deciding.recv_timeout(Duration::from_secs(60)).is_ok(),
        "warden never started deciding"
    );
    let signalled = Instant::now();
    let _ = std::process::Command::new("kill")
        .arg(child.id().to_string())
        .status();
    let exited = eventually(5.0, || matches!(child.try_wait(), Ok(Some(_))));
    assert!(exited, "warden ignored SIGTERM");
    assert!(signalled.elapsed() < Duration::from_secs(5));
    let _ = child.kill();
    let _ = child.wait();

    // `--timeout` ends the whole command, deciding included.
    let started = Instant::now();
    let out = world.run(&[
        "--timeout",
        "1",
        "call",
        "py",
        "read_note",
        "--args",
        r#"{"id": 99}"#,
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(eventually(10.0, || world.leftover_processes().is_empty()));
}

/// Reads `stream` to its end on a thread; says so on the returned channel
/// each time a line contains `needle`.
fn wait_for_line(
    stream: impl std::io::Read + Send + 'static,
    needle: &'static str,
) -> std::sync::mpsc::Receiver<()> {
    use std::io::BufRead;
    let (seen, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stream).lines() {
            match line {
                Ok(line) if line.contains(needle) => {
                    let _ = seen.send(());
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    receiver
}

/// Two clients of one listening gateway: one call whose decision runs
/// long (and one to the hostile tool) never delays the other client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_slow_decision_never_blocks_other_gateway_clients() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use tokio::io::AsyncBufReadExt;

    let world = World::new();
    populate(&world);
    std::fs::write(world.path("slow.rego"), SLOW_POLICY).unwrap();
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py"), "node": node_with_depth(&world, 40)},
        "permissions": {"allow": ["mcp__py__*", "mcp__node__*"]},
        "policy": ["slow.rego"],
    }));
    let mut child =
        tokio::process::Command::from(world.warden(&["-vv", "gateway", "--listen", "127.0.0.1:0"]))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn gateway");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let (url, token) = tokio::time::timeout(Duration::from_secs(60), async {
        let mut token = None;
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("warden gateway: bearer token") {
                token = line.rsplit(' ').next().map(str::to_string);
            }
            if let Some(url) = line.strip_prefix("warden gateway: listening on ") {
                return (url.trim().to_string(), token.expect("token"));
            }
        }
        panic!("no listening line");
    })
    .await
    .expect("listening");
    let (decided, mut deciding) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("deciding") {
                let _ = decided.send(());
            }
        }
    });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let connect = || {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token.clone()),
        );
        ().serve(transport)
    };
    let (slow_client, fast_client) = (connect().await.expect("a"), connect().await.expect("b"));
    let note = |id: u64| {
        CallToolRequestParams::new("py__read_note")
            .with_arguments(json!({"id": id}).as_object().cloned().unwrap_or_default())
    };
    // The hostile tool is not served: an immediate protocol error.
    let started = Instant::now();
    let hostile = slow_client
        .call_tool(CallToolRequestParams::new("node__hostile_schema"))
        .await;
    assert!(hostile.is_err(), "{hostile:?}");
    assert!(started.elapsed() < Duration::from_secs(2));

    let started = Instant::now();
    let slow = tokio::spawn(async move {
        let r = slow_client.call_tool(note(99)).await;
        (r, Instant::now())
    });
    // The fast calls start once the slow one is being decided (the
    // gateway's debug line; the hostile call above was refused before).
    tokio::time::timeout(Duration::from_secs(60), deciding.recv())
        .await
        .expect("the slow call was never decided")
        .expect("the gateway's stderr ended");
    for id in [1u64, 3] {
        let fast = fast_client.call_tool(note(id)).await.expect("fast call");
        assert_ne!(fast.is_error, Some(true), "{fast:?}");
    }
    let fast_done = Instant::now();
    let (slow_result, slow_done) = slow.await.expect("join");
    let slow_result = slow_result.expect("slow call answers");
    assert_eq!(slow_result.is_error, Some(true), "{slow_result:?}");
    assert!(
        fast_done < slow_done,
        "the fast client waited for the slow decision ({:?} vs {:?})",
        fast_done - started,
        slow_done - started
    );
    let _ = child.start_kill();
    let _ = child.wait().await;
    assert!(eventually(10.0, || world.leftover_processes().is_empty()));
}
