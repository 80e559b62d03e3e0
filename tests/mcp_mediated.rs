//! The connection layer's send path for every decided kind (CONTRACT §8):
//! a `Permit` binds server, subject and arguments for resources and
//! prompts as for tools; progress reaches the request that registered it,
//! in order; listings are forwarded; log messages outside a request go to
//! the notification broadcast.

#[path = "support/mcp.rs"]
mod support;

use std::time::Duration;

use rmcp::model::ServerResult;
use serde_json::json;
use support::*;
use tokio_util::sync::CancellationToken;
use warden::mcp::{CallError, Forwarded, Mediated, SendOptions};
use warden_policy::Permit;

const T: Duration = Duration::from_secs(20);

fn permit_for(server: &str, request: &Mediated) -> Permit {
    Permit::for_tests(
        server,
        request.subject(),
        &warden_core::digest::sha256_json(&request.arguments()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_are_sent_only_with_their_own_permit() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    let mut events = manager.take_lifecycle_events();
    manager.connect_all().await;

    let read = Mediated::ReadResource {
        uri: "fixture://notes/1".into(),
    };
    let result = manager
        .send(
            permit_for("fx", &read),
            read.clone(),
            SendOptions::default(),
        )
        .await
        .expect("read");
    let ServerResult::ReadResourceResult(result) = result else {
        panic!("not a read result: {result:?}");
    };
    assert_eq!(
        serde_json::to_value(&result.contents).unwrap()[0]["text"],
        "note one"
    );

    // A permit for another URI, or for a tool of the same name, is refused
    // before anything is sent.
    let other = Mediated::ReadResource {
        uri: "fixture://secret/key".into(),
    };
    assert!(matches!(
        manager
            .send(permit_for("fx", &read), other, SendOptions::default())
            .await,
        Err(CallError::PermitMismatch)
    ));
    let prompt = Mediated::GetPrompt {
        name: "greet".into(),
        arguments: args(json!({"name": "Ada"})),
    };
    let tampered = Mediated::GetPrompt {
        name: "greet".into(),
        arguments: args(json!({"name": "Mallory"})),
    };
    assert!(matches!(
        manager
            .send(permit_for("fx", &prompt), tampered, SendOptions::default())
            .await,
        Err(CallError::PermitMismatch)
    ));
    let ServerResult::GetPromptResult(greeting) = manager
        .send(permit_for("fx", &prompt), prompt, SendOptions::default())
        .await
        .expect("prompt")
    else {
        panic!("not a prompt result");
    };
    assert_eq!(
        serde_json::to_value(&greeting.messages).unwrap()[0]["content"]["text"],
        "Hello, Ada!"
    );

    // Progress goes to the request that registered for it, in order.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let count = Mediated::CallTool {
        tool: "count".into(),
        arguments: args(json!({"steps": 20})),
    };
    manager
        .send(
            permit_for("fx", &count),
            count,
            SendOptions {
                cancel: CancellationToken::new(),
                progress: Some(tx),
                downstream: None,
            },
        )
        .await
        .expect("count");
    let mut steps = Vec::new();
    while let Ok(p) = rx.try_recv() {
        steps.push(p.progress);
    }
    assert_eq!(steps, (1..=20).map(f64::from).collect::<Vec<_>>());

    // Listings are forwarded undecided.
    let listed = manager
        .forward(
            "fx",
            Forwarded::ListResourceTemplates(None),
            SendOptions::default(),
        )
        .await
        .expect("templates");
    let ServerResult::ListResourceTemplatesResult(templates) = listed else {
        panic!("not a template listing");
    };
    assert_eq!(
        templates.resource_templates[0].uri_template,
        "fixture://items/{id}"
    );

    // A log message is broadcast to whoever listens (the gateway's
    // clients), with the server's name.
    let mut notes = manager.notifications();
    #[allow(deprecated)]
    manager.set_log_level(Some(rmcp::model::LoggingLevel::Debug));
    let log = Mediated::CallTool {
        tool: "log".into(),
        arguments: args(json!({"level": "warning", "message": "hello"})),
    };
    manager
        .send(permit_for("fx", &log), log, SendOptions::default())
        .await
        .expect("log");
    let note = tokio::time::timeout(Duration::from_secs(5), notes.recv())
        .await
        .expect("a notification in time")
        .expect("broadcast");
    assert_eq!(note.server, "fx");
    let text = serde_json::to_string(&note.notification).unwrap();
    assert!(text.contains("hello") && text.contains("warning"), "{text}");

    manager.shutdown().await;
    assert_no_process_left(&started_pids(&mut events)).await;
}
