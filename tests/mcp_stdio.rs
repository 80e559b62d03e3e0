//! The connection layer against real stdio servers: warden's own `fixture`
//! example server, started as `warden example-server fixture …` through the
//! sandbox launch seam, one process per server.

#[path = "support/mcp.rs"]
mod support;

use std::time::{Duration, Instant};

use rmcp::model::ContentBlock;
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;
use warden::mcp::{Admission, CallError, LifecycleEvent, ServerState};

const T: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_list_and_call_keep_every_block_and_outcome() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;

    let st = status(&manager, "fx");
    assert_eq!(st.state, ServerState::Connected, "{:?}", st.error);
    assert_eq!(st.transport.as_str(), "stdio");
    let protocol = st.protocol.clone().unwrap();
    assert!(
        protocol == "2026-07-28" || protocol == "2025-11-25",
        "negotiated {protocol}"
    );
    assert!(st.sandbox.is_some());
    let names = tool_names(&st);
    for expected in [
        "echo",
        "mixed_content",
        "fail",
        "rpc_error",
        "a.b",
        "a_b",
        "crash",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(!names.iter().any(|n| n == "added_tool"));

    // Every content block, in order, and structuredContent.
    let mixed = call(&manager, "fx", "mixed_content", json!(null))
        .await
        .unwrap();
    let kinds: Vec<&str> = mixed
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text(_) => "text",
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::Resource(_) => "resource",
            ContentBlock::ResourceLink(_) => "resource_link",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        ["text", "image", "audio", "resource", "resource_link"]
    );
    assert_eq!(
        mixed.structured_content,
        Some(json!({"kinds": 5, "ok": true}))
    );

    // Arguments arrive as given.
    let sent = json!({"path": "/tmp/x", "n": [1, 2, {"deep": true}], "s": "é"});
    let echoed = call(&manager, "fx", "echo", sent.clone()).await.unwrap();
    assert_eq!(echoed.structured_content, Some(sent));

    // A tool error is a result; a JSON-RPC error is an error.
    let failed = call(&manager, "fx", "fail", json!({})).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    match call(&manager, "fx", "rpc_error", json!({})).await {
        Err(CallError::Rpc { code, message }) => {
            assert_eq!(code, -32042);
            assert!(message.contains("deliberate"), "{message}");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    match call(&manager, "fx", "no_such_tool", json!({})).await {
        Err(CallError::Rpc { .. }) => {}
        other => panic!("expected a JSON-RPC error for an unknown tool, got {other:?}"),
    }

    // A permit for other arguments is refused before anything is sent.
    let arguments = args(json!({"a": 1}));
    let wrong = permit("fx", "echo", &args(json!({"a": 2})));
    assert!(matches!(
        manager
            .call(wrong, arguments, CancellationToken::new())
            .await,
        Err(CallError::PermitMismatch)
    ));

    manager.shutdown().await;
    let pids = started_pids(&mut events);
    assert_eq!(pids.len(), 1);
    assert_no_process_left(&pids).await;
    assert!(matches!(
        call(&manager, "fx", "echo", json!({})).await,
        Err(CallError::NotConnected { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_reads_every_page_and_bad_listings_register_nothing() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![
            example("one", "fixture", &[], T),
            example("paged", "fixture", &["--pages", "4"], T),
            example(
                "looping",
                "fixture",
                &["--pages", "3", "--repeat-cursor"],
                T,
            ),
            example(
                "huge",
                "fixture",
                &["--pages", "3", "--extra-tools", "1001"],
                T,
            ),
        ],
    );
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;

    let one = status(&manager, "one");
    let paged = status(&manager, "paged");
    assert_eq!(paged.state, ServerState::Connected, "{:?}", paged.error);
    assert!(tool_names(&one).len() >= 8);
    assert_eq!(tool_names(&one), tool_names(&paged));

    let looping = status(&manager, "looping");
    assert_eq!(looping.state, ServerState::Error);
    assert!(looping.tools.is_empty());
    let error = looping.error.unwrap();
    assert!(error.contains("repeated"), "{error}");

    let huge = status(&manager, "huge");
    assert_eq!(huge.state, ServerState::Error);
    assert!(huge.tools.is_empty());
    let error = huge.error.unwrap();
    assert!(error.contains("more than 1000 tools"), "{error}");

    manager.shutdown().await;
    let pids = started_pids(&mut events);
    assert_eq!(pids.len(), 4);
    assert_no_process_left(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_makes_the_new_tool_visible() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    manager.connect_all().await;
    assert!(!tool_names(&status(&manager, "fx")).contains(&"added_tool".to_string()));

    call(&manager, "fx", "add_tool", json!({})).await.unwrap();
    let visible = wait_until(&manager, Duration::from_secs(10), |s| {
        s.iter()
            .any(|s| s.name == "fx" && s.tools.iter().any(|t| t.name == "added_tool"))
    })
    .await;
    assert!(
        visible,
        "added_tool never appeared: {:?}",
        tool_names(&status(&manager, "fx"))
    );
    let result = call(&manager, "fx", "added_tool", json!({})).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_is_reported_and_the_next_call_reconnects() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;

    // A crash, then a call inside the backoff window: it fails fast,
    // saying when warden retries (had it waited for the window it would
    // have reconnected). On a machine so loaded that the window (500 ms
    // after the first crash) passes before the next call, that call
    // reconnects: crash again, each time with a window twice as long.
    let mut crashes = 0;
    loop {
        crashes += 1;
        match call(&manager, "fx", "crash", json!({})).await {
            Err(CallError::Disconnected { server, reason }) => {
                assert_eq!(server, "fx");
                assert!(reason.contains("exit status 3"), "{reason}");
            }
            other => panic!("expected Disconnected, got {other:?}"),
        }
        let st = status(&manager, "fx");
        assert_eq!(st.state, ServerState::Error);
        assert!(
            !st.tools.is_empty(),
            "tools stay known so a call can reconnect"
        );
        match call(&manager, "fx", "echo", json!({"x": 1})).await {
            Err(CallError::NotConnected { reason, .. }) => {
                assert!(reason.contains("next connection attempt in"), "{reason}");
                break;
            }
            Ok(_) if crashes < 6 => continue,
            other => panic!("expected NotConnected, got {other:?}"),
        }
    }

    // Until the backoff ends every call fails fast the same way; then one
    // reconnects. Polled (a condition, with a generous deadline), not
    // slept through: a slow machine only takes more rounds.
    let deadline = Instant::now() + Duration::from_secs(30);
    let echoed = loop {
        match call(&manager, "fx", "echo", json!({"x": 1})).await {
            Ok(result) => break result,
            Err(CallError::NotConnected { reason, .. })
                if reason.contains("next connection attempt in") =>
            {
                assert!(Instant::now() < deadline, "never reconnected: {reason}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("expected NotConnected or a reconnect, got {other:?}"),
        }
    };
    assert_eq!(echoed.structured_content, Some(json!({"x": 1})));
    assert_eq!(status(&manager, "fx").state, ServerState::Connected);

    manager.shutdown().await;
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push(event);
    }
    let exits: Vec<_> = seen
        .iter()
        .filter_map(|e| match e {
            LifecycleEvent::Exited { code, .. } => Some(*code),
            _ => None,
        })
        .collect();
    assert_eq!(exits.first(), Some(&Some(3)), "{seen:?}");
    let pids: Vec<u32> = seen
        .iter()
        .filter_map(|e| match e {
            LifecycleEvent::Started { pid, .. } => *pid,
            _ => None,
        })
        .collect();
    // The first start, one per crash retried, the last reconnect.
    assert_eq!(pids.len(), crashes + 1, "{seen:?}");
    assert_no_process_left(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_times_out_without_holding_up_the_others() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager_with(
        dir.path(),
        vec![
            (
                example("silent", "fixture", &["--silent"], Duration::from_secs(6)),
                Admission::Start,
            ),
            (example("good", "fixture", &[], T), Admission::Start),
            (example("off", "fixture", &[], T), Admission::Disabled),
            (example("bad", "fixture", &[], T), Admission::Blocked),
            (
                example("new", "fixture", &[], T),
                Admission::PendingApproval,
            ),
        ],
    );
    let mut events = manager.take_lifecycle_events();
    let started = Instant::now();
    let connecting = {
        let manager = manager.clone();
        tokio::spawn(async move { manager.connect_all().await })
    };
    // The good server connects while the silent one is still waiting.
    let good_first = wait_until(&manager, Duration::from_secs(6), |s| {
        s.iter()
            .any(|s| s.name == "good" && s.state == ServerState::Connected)
    })
    .await;
    assert!(good_first, "good: {:?}", status(&manager, "good"));
    assert_eq!(status(&manager, "silent").state, ServerState::Connecting);
    connecting.await.unwrap();
    let elapsed = started.elapsed();
    // One 6 s timeout, not one per retry (a failed server is tried again
    // in the background, never inside connect_all). The bound leaves room
    // for a loaded CI machine, where the sandboxed start itself took
    // seconds (12.7 s seen with two builds running beside the tests).
    assert!(
        elapsed < Duration::from_secs(18),
        "connect_all took {elapsed:?}"
    );

    let silent = status(&manager, "silent");
    assert_eq!(silent.state, ServerState::Error);
    let error = silent.error.unwrap();
    assert!(error.contains("within 6.00 s"), "{error}");
    assert_eq!(status(&manager, "off").state, ServerState::Disabled);
    assert_eq!(status(&manager, "bad").state, ServerState::Blocked);
    assert_eq!(status(&manager, "new").state, ServerState::PendingApproval);
    assert!(matches!(
        call(&manager, "off", "echo", json!({})).await,
        Err(CallError::NotConnected { .. })
    ));
    call(&manager, "good", "echo", json!({})).await.unwrap();

    manager.shutdown().await;
    let pids = started_pids(&mut events);
    assert_eq!(pids.len(), 2);
    assert_no_process_left(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_cancellation_are_distinct_and_leave_the_server_usable() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![example("fx", "fixture", &[], Duration::from_secs(1))],
    );
    manager.connect_all().await;

    let started = Instant::now();
    match call(&manager, "fx", "sleep", json!({"ms": 10_000})).await {
        Err(CallError::Timeout(limit)) => assert_eq!(limit, Duration::from_secs(1)),
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));

    let cancel = CancellationToken::new();
    let arguments = args(json!({"ms": 10_000}));
    let permit = permit("fx", "sleep", &arguments);
    let trigger = cancel.clone();
    let started = Instant::now();
    let in_flight = manager.call(permit, arguments, cancel);
    tokio::pin!(in_flight);
    // Cancel once the call is on its way: after the future has run until
    // it waits on the server (it cannot finish by itself for 10 s).
    tokio::select! {
        biased;
        result = &mut in_flight => panic!("the call ended before it was cancelled: {result:?}"),
        () = tokio::task::yield_now() => trigger.cancel(),
    }
    assert!(matches!(in_flight.await, Err(CallError::Cancelled)));
    // Well before the server would have answered on its own.
    assert!(started.elapsed() < Duration::from_secs(8));

    let ok = call(&manager, "fx", "sleep", json!({"ms": 10}))
        .await
        .unwrap();
    assert_ne!(ok.is_error, Some(true));
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_replaces_the_process() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![example("notes", "notes", &["--name", "work"], T)],
    );
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;
    let st = status(&manager, "notes");
    assert_eq!(st.state, ServerState::Connected, "{:?}", st.error);
    let read_only: Vec<_> = st
        .tools
        .iter()
        .filter(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true))
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(read_only, ["list_notes", "read_note"]);

    manager.reconnect("notes").await.unwrap();
    let listed = call(&manager, "notes", "list_notes", json!({}))
        .await
        .unwrap();
    assert_eq!(
        listed.structured_content.unwrap()["notes"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    manager.shutdown().await;
    let pids = started_pids(&mut events);
    assert_eq!(pids.len(), 2);
    assert_no_process_left(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ignoring_discover_falls_back_within_its_timeout() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![example(
            "old",
            "fixture",
            &["--ignore-discover"],
            Duration::from_secs(6),
        )],
    );
    let started = Instant::now();
    manager.connect_all().await;
    let st = status(&manager, "old");
    assert_eq!(st.state, ServerState::Connected, "{:?}", st.error);
    assert_eq!(st.protocol.as_deref(), Some("2025-11-25"));
    // Probe budget: half the timeout, well under rmcp's own 10 s.
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    call(
        &manager,
        "old",
        "echo",
        json!({"late": "answers are dropped"}),
    )
    .await
    .unwrap();
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_kills_the_whole_group_and_abandons_connects_in_flight() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let bin = warden_bin();
    let bin = bin.to_str().unwrap();
    let manager = manager(
        dir.path(),
        vec![
            // A server that leaves a grandchild in its process group.
            {
                let mut forks = stdio(
                    "forks",
                    std::path::Path::new("/bin/sh"),
                    &["-c", "sleep 300 & exec \"$0\" example-server fixture", bin],
                    T,
                );
                // The shell's install prefix is /usr; warden's own folder
                // must be granted for the `exec`.
                let warden_dir = warden_bin().parent().map(|d| d.to_path_buf());
                forks.sandbox.read.extend(warden_dir);
                forks
            },
            example("silent", "fixture", &["--silent"], Duration::from_secs(60)),
        ],
    );
    let mut events = manager.take_lifecycle_events();
    let connecting = {
        let manager = manager.clone();
        tokio::spawn(async move { manager.connect_all().await })
    };
    assert!(
        wait_until(&manager, Duration::from_secs(10), |s| {
            s.iter()
                .any(|s| s.name == "forks" && s.state == ServerState::Connected)
        })
        .await
    );
    let pids = started_pids(&mut events);
    assert_eq!(pids.len(), 2);
    let forks_group = live_group_members(pids[0])
        .len()
        .max(live_group_members(pids[1]).len());
    assert!(forks_group >= 2, "the grandchild should be running");

    let started = Instant::now();
    manager.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    connecting.await.unwrap();
    assert_no_process_left(&pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_or_exits_at_once_is_an_error_with_the_reason() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![
            stdio(
                "missing",
                std::path::Path::new("/nonexistent/server"),
                &[],
                T,
            ),
            stdio(
                "exits",
                std::path::Path::new("/bin/sh"),
                &["-c", "echo boom >&2; exit 7"],
                T,
            ),
        ],
    );
    manager.connect_all().await;
    let missing = status(&manager, "missing");
    assert_eq!(missing.state, ServerState::Error);
    let missing_error = missing.error.unwrap();
    assert!(
        missing_error.contains("/nonexistent/server"),
        "{missing_error}"
    );
    let exits = status(&manager, "exits");
    assert_eq!(exits.state, ServerState::Error);
    let error = exits.error.unwrap();
    assert!(error.contains("exit status 7"), "{error}");
    manager.shutdown().await;
}
