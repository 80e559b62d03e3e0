//! The fixture's resources, prompts, completion, logging and progress
//! (CONTRACT §8 tests):
//!
//! - resources `fixture://notes/1`, `fixture://notes/2`,
//!   `fixture://secret/key`, and `fixture://slow` (reports three progress
//!   steps and logs one `info` message before answering); the templates
//!   `fixture://items/{id}` and `fixture://wait/{ms}` (answers after ms
//!   milliseconds unless cancelled);
//! - subscriptions: `resources/subscribe` is remembered, and the tool
//!   `touch {uri}` sends `notifications/resources/updated` for a
//!   subscribed URI;
//! - prompts `greet {name}` and `review {file}`; completion of `greet`'s
//!   `name` from `Ada`, `Alan`, `Grace`;
//! - `logging/setLevel` is remembered; the tool `log {level, message}`
//!   sends a message when the level admits it;
//! - with `--count-calls FILE` every read, subscription and prompt is
//!   recorded there too (`resources/read URI`, `prompts/get NAME`…).
// `logging/*` and `resources/subscribe` are the session protocol's
// (2025-11-25); rmcp deprecates them for 2026-07-28 (SEP-2577).
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, Prompt, PromptArgument,
    PromptMessage, ReadResourceRequestParams, ReadResourceResult, Reference, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, Role,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

/// What the fixture remembers of its client.
#[derive(Debug, Default)]
pub(super) struct Extras {
    subscribed: Mutex<HashSet<String>>,
    level: Mutex<Option<LoggingLevel>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

const NOTES: [(&str, &str); 3] = [
    ("fixture://notes/1", "note one"),
    ("fixture://notes/2", "note two"),
    ("fixture://secret/key", "the secret key"),
];

fn text(uri: &str, body: &str) -> ReadResourceResult {
    ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
        uri: uri.to_string(),
        mime_type: Some("text/plain".into()),
        text: body.to_string(),
        meta: None,
    }])
}

pub(super) fn list_resources() -> ListResourcesResult {
    let mut resources: Vec<Resource> = NOTES
        .iter()
        .map(|(uri, _)| Resource::new(*uri, uri.rsplit('/').next().unwrap_or(uri)))
        .collect();
    resources.push(Resource::new("fixture://slow", "slow"));
    ListResourcesResult::with_all_items(resources)
}

pub(super) fn list_templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new("fixture://items/{id}", "item"),
        ResourceTemplate::new("fixture://wait/{ms}", "wait"),
    ])
}

impl Extras {
    pub(super) async fn read(
        &self,
        request: &ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, ErrorData> {
        let uri = request.uri.as_str();
        if let Some((_, body)) = NOTES.iter().find(|(u, _)| *u == uri) {
            return Ok(text(uri, body));
        }
        if let Some(id) = uri.strip_prefix("fixture://items/")
            && !id.is_empty()
            && !id.contains('/')
        {
            return Ok(text(uri, &format!("item {id}")));
        }
        if let Some(ms) = uri
            .strip_prefix("fixture://wait/")
            .and_then(|ms| ms.parse::<u64>().ok())
        {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => {
                    return Ok(text(uri, &format!("waited {ms} ms")));
                }
                () = context.ct.cancelled() => {
                    return Err(ErrorData::internal_error("cancelled", None));
                }
            }
        }
        if uri == "fixture://slow" {
            let token = context.meta.get_progress_token();
            for step in 1..=3u32 {
                if let Some(token) = &token {
                    let note = ProgressNotificationParam::new(token.clone(), f64::from(step))
                        .with_total(3.0)
                        .with_message(format!("step {step}"));
                    let _ = context.peer.notify_progress(note).await;
                }
                if step == 2 {
                    self.log(context, LoggingLevel::Info, json!("reading slowly"))
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return Ok(text(uri, "slow but done"));
        }
        Err(ErrorData::resource_not_found(
            format!("no resource `{uri}`"),
            None,
        ))
    }

    pub(super) fn subscribe(&self, uri: &str) {
        lock(&self.subscribed).insert(uri.to_string());
    }

    pub(super) fn unsubscribe(&self, uri: &str) {
        lock(&self.subscribed).remove(uri);
    }

    pub(super) fn set_level(&self, level: LoggingLevel) {
        *lock(&self.level) = Some(level);
    }

    /// Sends a log message when the client's level admits it.
    pub(super) async fn log(
        &self,
        context: &RequestContext<RoleServer>,
        level: LoggingLevel,
        data: Value,
    ) {
        let admitted = lock(&self.level).is_none_or(|min| rank(level) >= rank(min));
        if admitted {
            let mut note = LoggingMessageNotificationParam::new(level, data);
            note.logger = Some("fixture".into());
            let _ = context.peer.notify_logging_message(note).await;
        }
    }

    /// `touch {uri}`: an update notification when `uri` is subscribed.
    pub(super) async fn touch(&self, context: &RequestContext<RoleServer>, uri: &str) -> bool {
        let subscribed = lock(&self.subscribed).contains(uri);
        if subscribed {
            let _ = context
                .peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await;
        }
        subscribed
    }
}

pub(super) fn list_prompts() -> ListPromptsResult {
    ListPromptsResult::with_all_items(vec![
        Prompt::new(
            "greet",
            Some("Greets someone."),
            Some(vec![PromptArgument::new("name").with_required(true)]),
        ),
        Prompt::new(
            "review",
            Some("Asks for a review of a file."),
            Some(vec![PromptArgument::new("file").with_required(true)]),
        ),
    ])
}

pub(super) fn get_prompt(request: &GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
    let arg = |name: &str| {
        request
            .arguments
            .as_ref()
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("argument `{name}` is required"), None)
            })
    };
    match request.name.as_str() {
        "greet" => Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Hello, {}!", arg("name")?),
        )])
        .with_description("a greeting")),
        "review" => Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("Please review {}.", arg("file")?),
        )])),
        other => Err(ErrorData::invalid_params(
            format!("no prompt `{other}`"),
            None,
        )),
    }
}

pub(super) fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    let values: Vec<String> = match &request.r#ref {
        Reference::Prompt(p) if p.name == "greet" && request.argument.name == "name" => {
            ["Ada", "Alan", "Grace"]
                .iter()
                .filter(|v| v.starts_with(&request.argument.value))
                .map(|v| v.to_string())
                .collect()
        }
        _ => Vec::new(),
    };
    CompletionInfo::new(values)
        .map(CompleteResult::new)
        .map_err(|e| ErrorData::internal_error(e, None))
}

/// A log level by its MCP name.
pub(super) fn level_named(name: &str) -> Option<LoggingLevel> {
    serde_json::from_value(Value::String(name.to_string())).ok()
}
