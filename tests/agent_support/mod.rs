//! Shared by the `agent_*` tests: a loopback HTTP server that records every
//! request and answers from a queue of canned responses, a model wrapper
//! that records requests, and fast retry settings.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::Value;
use warden::agent::{HttpSettings, Model, ModelError, ModelRequest, ModelTurn};

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub raw: String,
    pub body: Value,
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A canned answer.
#[derive(Debug, Clone)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Canned {
    pub fn json(status: u16, body: Value) -> Self {
        Self::raw(status, &body.to_string())
    }
    pub fn raw(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub fn delayed(mut self, d: Duration) -> Self {
        self.delay = d;
        self
    }
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Recorded>>,
    responses: Mutex<VecDeque<Canned>>,
}

/// A loopback server speaking whatever the canned responses say.
pub struct MockServer {
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = String::from_utf8_lossy(&body).to_string();
    let parsed = serde_json::from_str(&raw).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        method,
        path: uri.path().to_string(),
        headers,
        raw,
        body: parsed,
        at: Instant::now(),
    });
    let next = shared.responses.lock().unwrap().pop_front();
    let Some(c) = next else {
        return (StatusCode::IM_A_TEAPOT, "no canned response left").into_response();
    };
    if !c.delay.is_zero() {
        tokio::time::sleep(c.delay).await;
    }
    let mut builder = Response::builder().status(c.status);
    for (k, v) in &c.headers {
        builder = builder.header(k, v);
    }
    builder.body(axum::body::Body::from(c.body)).unwrap()
}

impl MockServer {
    pub async fn start(responses: Vec<Canned>) -> Self {
        let shared = Arc::new(Shared::default());
        shared.responses.lock().unwrap().extend(responses);
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}"),
            shared,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }
}

/// Retries without long waits; short request timeout.
pub fn fast_http() -> HttpSettings {
    HttpSettings {
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        max_retry_after: Duration::from_secs(5),
    }
}

/// Wraps a model and keeps every request it was sent.
pub struct Recording<'m> {
    pub inner: &'m dyn Model,
    pub seen: Mutex<Vec<ModelRequest>>,
}

impl<'m> Recording<'m> {
    pub fn new(inner: &'m dyn Model) -> Self {
        Self {
            inner,
            seen: Mutex::new(Vec::new()),
        }
    }
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap().clone()
    }
}

impl Model for Recording<'_> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.complete(request)
    }
}

/// The sorted keys of a JSON object (for exact shape checks).
pub fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

use serde_json::json;
use warden::agent::{ToolCall, ToolExecutor, ToolOutcome, ToolSpec};

/// Two notes tools and a write tool that the "pipeline" always denies.
pub struct NotesTools;

pub fn notes_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "mcp__notes__read_note".into(),
            description: "Read a note by id".into(),
            input_schema: json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        },
        ToolSpec {
            name: "mcp__fs__write_file".into(),
            description: "Write a file".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
        },
    ]
}

pub const DENIAL: &str =
    "denied by warden (stage: rules): matched deny rule \"mcp__fs__write_file\"";

impl ToolExecutor for NotesTools {
    fn tools(&self) -> Vec<ToolSpec> {
        notes_specs()
    }
    fn execute<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let record = json!({"id": call.id, "tool": call.name, "arguments": call.arguments});
            match call.name.as_str() {
                "mcp__notes__read_note" => ToolOutcome::ok(
                    format!(
                        "note {}: buy milk",
                        call.arguments["id"].as_str().unwrap_or("?")
                    ),
                    record,
                ),
                "mcp__fs__write_file" => ToolOutcome::denied(DENIAL, record),
                other => ToolOutcome::error(format!("unknown tool {other}"), record),
            }
        })
    }
}
