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
use warden_core::RequestKind;
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

/// A permit as the pipeline issues it: it holds the decided arguments,
/// and `Manager::send` compares what it sends with them.
async fn decided_permit(kind: RequestKind, subject: &str, arguments: serde_json::Value) -> Permit {
    use std::sync::Arc;
    use warden_core::{Scope, TransportKind, Trust};
    use warden_policy::{
        CallContext, CallFacts, Effect, Mode, PinState, Pipeline, PipelineConfig, RuleEffect,
        RuleSource, ServerFacts, ToolFacts,
    };
    let rule = |index: usize, text: &str| RuleSource {
        effect: RuleEffect::Allow,
        text: text.into(),
        scope: Scope::User,
        file: "/config.json".into(),
        index,
    };
    let pipeline = Pipeline::load(PipelineConfig {
        rules: vec![
            rule(0, "mcp__fx__*"),
            rule(1, "resource__fx"),
            rule(2, "prompt__fx__*"),
        ],
        policies: Some(vec![]),
        workspace: "/w".into(),
        ..PipelineConfig::default()
    })
    .expect("pipeline");
    let qualified = match kind {
        RequestKind::Resource => "resource__fx".to_string(),
        RequestKind::Prompt => format!("prompt__fx__{subject}"),
        _ => format!("mcp__fx__{subject}"),
    };
    let facts = Arc::new(CallFacts {
        kind,
        server: ServerFacts {
            name: "fx".into(),
            trust: Trust::Trusted,
            transport: TransportKind::Stdio,
            scope: Scope::User,
            dirs: Default::default(),
        },
        tool: ToolFacts {
            name: subject.into(),
            qualified,
            annotations: json!({"readOnlyHint": true}),
            input_schema: json!({"type": "object"}).into(),
            pin: PinState::Pinned,
        },
        arguments,
        context: CallContext {
            mode: Mode::Ci,
            session: "t".into(),
            call_index: 1,
        },
    });
    let decision = pipeline.decide(&facts);
    assert_eq!(decision.effect, Effect::Allow, "{decision:?}");
    let permit = pipeline
        .authorize(&facts, decision, None)
        .await
        .expect("permit");
    assert!(permit.arguments().is_some());
    permit
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_permit_covers_only_the_arguments_it_decided() {
    init_logs();
    let dir = tempfile::tempdir().unwrap();
    let manager = manager(dir.path(), vec![example("fx", "fixture", &[], T)]);
    manager.connect_all().await;
    let send = |permit, request| manager.send(permit, request, SendOptions::default());

    // Tools: other values, an extra key, no arguments at all.
    let decided = json!({"level": "info", "message": "hello"});
    for tampered in [
        args(json!({"level": "info", "message": "rm -rf /"})),
        args(json!({"level": "info", "message": "hello", "extra": true})),
        None,
    ] {
        let permit = decided_permit(RequestKind::Tool, "log", decided.clone()).await;
        let request = Mediated::CallTool {
            tool: "log".into(),
            arguments: tampered.clone(),
        };
        assert!(
            matches!(send(permit, request).await, Err(CallError::PermitMismatch)),
            "{tampered:?}"
        );
    }
    // Absent arguments are decided as `null`, and only they match it.
    let permit = decided_permit(RequestKind::Tool, "log", serde_json::Value::Null).await;
    let request = Mediated::CallTool {
        tool: "log".into(),
        arguments: args(json!({})),
    };
    assert!(matches!(
        send(permit, request).await,
        Err(CallError::PermitMismatch)
    ));
    // The permit's own arguments, in another key order, are sent.
    let permit = decided_permit(RequestKind::Tool, "log", decided.clone()).await;
    let request = Mediated::CallTool {
        tool: "log".into(),
        arguments: args(json!({"message": "hello", "level": "info"})),
    };
    send(permit, request).await.expect("the decided call");

    // Resources: another URI; prompts: other arguments.
    let permit = decided_permit(
        RequestKind::Resource,
        "fixture://notes/1",
        json!({"uri": "fixture://notes/1"}),
    )
    .await;
    let other = Mediated::ReadResource {
        uri: "fixture://secret/key".into(),
    };
    assert!(matches!(
        send(permit, other).await,
        Err(CallError::PermitMismatch)
    ));
    let permit = decided_permit(
        RequestKind::Resource,
        "fixture://notes/1",
        json!({"uri": "fixture://notes/1"}),
    )
    .await;
    let read = Mediated::ReadResource {
        uri: "fixture://notes/1".into(),
    };
    send(permit, read).await.expect("the decided read");
    let permit = decided_permit(RequestKind::Prompt, "greet", json!({"name": "Ada"})).await;
    let tampered = Mediated::GetPrompt {
        name: "greet".into(),
        arguments: args(json!({"name": "Mallory"})),
    };
    assert!(matches!(
        send(permit, tampered).await,
        Err(CallError::PermitMismatch)
    ));
    manager.shutdown().await;
}
