//! Servers that misbehave at the transport: a 100 MiB line on stdout
//! (memory stays bounded, the connection survives), stdout closed while
//! the process keeps running (the call ends, the process is killed, the
//! next call reconnects), SIGTERM ignored on shutdown (escalation to
//! SIGKILL), a flood of `notifications/tools/list_changed` (coalesced;
//! calls keep working). Real processes: warden's `fixture` server in its
//! sandbox.

#[path = "support/mcp.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;
use warden::mcp::{CallError, ServerState};

const T: Duration = Duration::from_secs(60);

/// Peak resident memory of this process, in KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mib_line_is_dropped_without_buffering_it() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    manager.connect_all().await;
    assert_eq!(status(&manager, "fx").state, ServerState::Connected);

    let before = peak_rss_kib();
    let result = call(&manager, "fx", "huge_line", json!({"mb": 100}))
        .await
        .expect("the answer after the huge line arrives");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    let limit_mib = (warden::mcp::MAX_LINE >> 20) as u64;
    eprintln!("peak RSS grew {grown_mib} MiB reading a 100 MiB line");
    assert!(
        grown_mib < 2 * limit_mib + 16,
        "reading a 100 MiB line grew the peak RSS by {grown_mib} MiB (line cap {limit_mib} MiB)"
    );
    // The connection is intact.
    let echoed = call(&manager, "fx", "echo", json!({"x": 1})).await.unwrap();
    assert_eq!(echoed.structured_content, Some(json!({"x": 1})));
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_closed_by_a_live_server_ends_the_call_and_the_process() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;
    let first = started_pids(&mut events);
    assert_eq!(first.len(), 1);

    let started = Instant::now();
    match call(&manager, "fx", "close_stdout", json!({})).await {
        Err(CallError::Disconnected { .. }) => {}
        other => panic!("expected Disconnected, got {other:?}"),
    }
    // Seen as the end of the connection, not waited out as a timeout.
    assert!(started.elapsed() < T / 2, "took {:?}", started.elapsed());
    // The process that stayed alive behind its closed stdout is gone.
    assert_no_process_left(&first).await;

    // The next call starts a new process (after the backoff).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match call(&manager, "fx", "echo", json!({"x": 2})).await {
            Ok(result) => {
                assert_eq!(result.structured_content, Some(json!({"x": 2})));
                break;
            }
            Err(CallError::NotConnected { reason, .. })
                if reason.contains("next connection attempt in") =>
            {
                assert!(Instant::now() < deadline, "never reconnected: {reason}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("expected a reconnect, got {other:?}"),
        }
    }
    let second = started_pids(&mut events);
    assert_eq!(second.len(), 1);
    assert_ne!(second, first);
    manager.shutdown().await;
    assert_no_process_left(&second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ignoring_sigterm_is_killed_on_shutdown() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![example("fx", "fixture", &["--stubborn"], T)],
    );
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;
    assert_eq!(status(&manager, "fx").state, ServerState::Connected);
    let pids = started_pids(&mut events);
    assert_eq!(pids.len(), 1);

    let started = Instant::now();
    manager.shutdown().await;
    let took = started.elapsed();
    eprintln!("shutdown of a server ignoring SIGTERM took {took:?}");
    // stdin closed, then SIGTERM (ignored), then SIGKILL: a bounded wait.
    assert!(took < Duration::from_secs(20), "shutdown took {took:?}");
    assert_no_process_left(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_list_changed_is_coalesced_and_calls_keep_working() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    manager.connect_all().await;
    let tools = tool_names(&status(&manager, "fx"));

    let started = Instant::now();
    let result = call(
        &manager,
        "fx",
        "flood_list_changed",
        json!({"count": 20_000}),
    )
    .await
    .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let echoed = call(&manager, "fx", "echo", json!({"x": 3})).await.unwrap();
    assert_eq!(echoed.structured_content, Some(json!({"x": 3})));
    assert!(
        started.elapsed() < T / 2,
        "calls were held up by the flood: {:?}",
        started.elapsed()
    );
    let st = status(&manager, "fx");
    assert_eq!(st.state, ServerState::Connected, "{:?}", st.error);
    assert_eq!(tool_names(&st), tools);
    manager.shutdown().await;
}

/// A large message crosses each stdio pipe in one turn: warden widens the
/// pipes to a sandboxed server (a plain pipe holds 64 KiB), and a 1 MB
/// argument and its echo still arrive whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_stdio_pipes_are_widened_and_large_messages_arrive_whole() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    manager.connect_all().await;
    let sizes = call(&manager, "fx", "pipe_sizes", json!({}))
        .await
        .unwrap()
        .structured_content
        .unwrap();
    for pipe in ["stdin", "stdout"] {
        let size = sizes[pipe].as_u64().unwrap();
        assert!(
            size >= warden_sandbox::STDIO_PIPE_BYTES as u64,
            "the server's {pipe} holds {size} bytes: {sizes}"
        );
    }
    let big = "é\"\\\n".repeat(250_000);
    let echoed = call(&manager, "fx", "echo", json!({"big": big}))
        .await
        .unwrap();
    assert_eq!(echoed.structured_content, Some(json!({"big": big})));
    manager.shutdown().await;
}
