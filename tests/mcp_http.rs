//! Streamable HTTP against warden's own example servers served in-process on
//! 127.0.0.1 (rmcp's streamable HTTP server under axum, Host and Origin
//! checked).

#[path = "support/ports.rs"]
mod ports;
#[path = "support/mcp.rs"]
mod support;

use std::time::Duration;

use rmcp::model::ContentBlock;
use serde_json::json;
use support::*;
use warden::example_servers::{serve_http, serve_http_with_args};
use warden::mcp::{CallError, ServerState};

const T: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_connects_lists_calls_and_follows_list_changed() {
    init_logs();
    let (addr, server) = serve_http_with_args(
        "fixture",
        &["--pages".into(), "3".into()],
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let (notes_addr, notes) = serve_http("notes", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![
            http(
                "fx",
                &format!("http://{addr}/mcp"),
                &[("X-Test-Token", "s3cret")],
                T,
            ),
            http("notes", &format!("http://{notes_addr}/mcp"), &[], T),
        ],
    );
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;

    let st = status(&manager, "fx");
    assert_eq!(st.state, ServerState::Connected, "{:?}", st.error);
    assert_eq!(st.transport.as_str(), "http");
    assert!(st.protocol.is_some());
    assert!(st.sandbox.is_none());
    assert!(tool_names(&st).contains(&"mixed_content".to_string()));
    assert_eq!(status(&manager, "notes").state, ServerState::Connected);

    let mixed = call(&manager, "fx", "mixed_content", json!({}))
        .await
        .unwrap();
    assert_eq!(mixed.content.len(), 5);
    assert!(matches!(mixed.content[4], ContentBlock::ResourceLink(_)));
    assert!(mixed.structured_content.is_some());
    assert!(matches!(
        call(&manager, "fx", "rpc_error", json!({})).await,
        Err(CallError::Rpc { code: -32042, .. })
    ));
    assert_eq!(
        call(&manager, "fx", "fail", json!({}))
            .await
            .unwrap()
            .is_error,
        Some(true)
    );

    call(&manager, "fx", "add_tool", json!({})).await.unwrap();
    let visible = wait_until(&manager, Duration::from_secs(10), |s| {
        s.iter()
            .any(|s| s.name == "fx" && s.tools.iter().any(|t| t.name == "added_tool"))
    })
    .await;
    assert!(visible, "added_tool never appeared over HTTP");

    let read = call(&manager, "notes", "read_note", json!({"id": 1}))
        .await
        .unwrap();
    assert!(matches!(&read.content[0], ContentBlock::Text(t) if t.text.contains("Welcome")));

    manager.shutdown().await;
    let mut started = 0;
    while let Ok(event) = events.try_recv() {
        if matches!(
            event,
            warden::mcp::LifecycleEvent::Started { pid: None, .. }
        ) {
            started += 1;
        }
    }
    assert_eq!(started, 2);
    server.shutdown().await;
    notes.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_http_server_checks_host_and_origin() {
    init_logs();
    let (addr, server) = serve_http("notes", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let post = |origin: Option<&str>, host: Option<&str>| {
        let mut request = client
            .post(format!("http://{addr}/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(origin) = origin {
            request = request.header("Origin", origin);
        }
        if let Some(host) = host {
            request = request.header("Host", host);
        }
        request.send()
    };
    let foreign = post(Some("http://evil.example"), None).await.unwrap();
    assert_eq!(foreign.status().as_u16(), 403);
    let rebound = post(None, Some("evil.example")).await.unwrap();
    assert_eq!(rebound.status().as_u16(), 403);
    let own = post(Some(&format!("http://127.0.0.1:{}", addr.port())), None)
        .await
        .unwrap();
    assert_ne!(own.status().as_u16(), 403);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_http_server_is_an_error_state() {
    init_logs();
    // Bound, never listened on: refused, and no other test's server can
    // take the port meanwhile.
    let reserved = ports::ReservedPort::new();
    let port = reserved.port;
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![http(
            "gone",
            &format!("http://127.0.0.1:{port}/mcp"),
            &[],
            Duration::from_secs(3),
        )],
    );
    manager.connect_all().await;
    let st = status(&manager, "gone");
    assert_eq!(st.state, ServerState::Error);
    assert!(st.error.is_some());
    manager.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_sends_the_configured_headers_and_refuses_a_foreign_endpoint() {
    init_logs();
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;

    // A legacy SSE endpoint that demands a token, then points elsewhere.
    let app = axum::Router::new().route(
        "/sse",
        get(|headers: HeaderMap| async move {
            if headers.get("x-test-token").and_then(|v| v.to_str().ok()) != Some("s3cret") {
                return (StatusCode::UNAUTHORIZED, String::new());
            }
            (
                StatusCode::OK,
                "event: endpoint\ndata: http://evil.example/message\n\n".to_string(),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let url = format!("http://{addr}/sse");
    let dir = tempfile::tempdir().unwrap();
    let mut with_token = sse("with_token", &url, Duration::from_secs(3));
    if let warden::config::TransportConfig::Sse(remote) = &mut with_token.transport {
        remote
            .headers
            .insert("X-Test-Token".into(), warden::config::Secret::new("s3cret"));
    }
    let manager = manager(
        dir.path(),
        vec![with_token, sse("without", &url, Duration::from_secs(3))],
    );
    manager.connect_all().await;

    let refused = status(&manager, "with_token");
    assert_eq!(refused.state, ServerState::Error);
    let error = refused.error.unwrap();
    assert!(error.contains("not on the stream's origin"), "{error}");
    assert!(!error.contains("s3cret"));
    let unauthorized = status(&manager, "without").error.unwrap();
    assert!(unauthorized.contains("401"), "{unauthorized}");
    manager.shutdown().await;
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_goes_away_is_reconnected_on_a_later_call() {
    init_logs();
    let (addr, server) = serve_http("fixture", "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(
        dir.path(),
        vec![http(
            "fx",
            &format!("http://{addr}/mcp"),
            &[],
            Duration::from_secs(5),
        )],
    );
    manager.connect_all().await;
    call(&manager, "fx", "echo", json!({"n": 1})).await.unwrap();

    server.shutdown().await;
    let outcome = call(&manager, "fx", "echo", json!({"n": 2})).await;
    assert!(
        matches!(
            outcome,
            // Which one depends on whether the call or a background
            // re-listing notices first that the server went away.
            Err(CallError::Disconnected { .. })
                | Err(CallError::Timeout(_))
                | Err(CallError::NotConnected { .. })
        ),
        "{outcome:?}"
    );

    // The server comes back on the same address.
    let (_, server) = serve_http("fixture", addr).await.unwrap();
    let mut answered = None;
    for _ in 0..40 {
        match call(&manager, "fx", "echo", json!({"n": 3})).await {
            Ok(result) => {
                answered = Some(result);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let answered = answered.expect("no reconnect after the server came back");
    assert_eq!(answered.structured_content, Some(json!({"n": 3})));
    assert_eq!(status(&manager, "fx").state, ServerState::Connected);
    manager.shutdown().await;
    server.shutdown().await;
}
