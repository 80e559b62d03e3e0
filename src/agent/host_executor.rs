//! Plugs the host into the agent loop: the model sees the host's visible
//! tools, and every call it proposes goes through [`Host::call`], i.e. the
//! permission pipeline and the audit log, like any other caller's.

use futures::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::run_loop::{ToolExecutor, ToolOutcome};
use super::{ToolCall, ToolSpec};
use crate::audit::Outcome;
use crate::host::{CallRequest, Caller, Host};
use crate::policy::Asker;
use crate::registry::object_schema;

pub struct HostExecutor<'a> {
    host: &'a Host,
    asker: Option<&'a dyn Asker>,
    cancel: CancellationToken,
}

impl<'a> HostExecutor<'a> {
    pub fn new(host: &'a Host, asker: Option<&'a dyn Asker>, cancel: CancellationToken) -> Self {
        HostExecutor { host, asker, cancel }
    }
}

/// The host's visible tools as offered to a model.
pub fn tool_specs(host: &Host) -> Vec<ToolSpec> {
    host.tools()
        .visible()
        .map(|t| ToolSpec {
            name: t.qualified.clone(),
            description: t
                .definition
                .description
                .as_deref()
                .unwrap_or_default()
                .to_string(),
            input_schema: object_schema(&t.definition),
        })
        .collect()
}

impl ToolExecutor for HostExecutor<'_> {
    fn tools(&self) -> Vec<ToolSpec> {
        tool_specs(self.host)
    }

    fn execute<'b>(&'b self, call: &'b ToolCall) -> BoxFuture<'b, ToolOutcome> {
        Box::pin(async move {
            let request = CallRequest {
                qualified: call.name.clone(),
                arguments: call.arguments.clone(),
                caller: Caller::Model,
            };
            match self
                .host
                .call(request, self.asker, self.cancel.child_token())
                .await
            {
                Ok(report) => {
                    let mut record = serde_json::to_value(&report).unwrap_or_default();
                    record["qualified"] = json!(report.qualified);
                    ToolOutcome {
                        content: report.text_for_model(),
                        is_error: report.outcome != Outcome::Ok,
                        denied: report.outcome == Outcome::Denied,
                        record,
                    }
                }
                Err(refusal) => ToolOutcome {
                    content: format!("{refusal}; call one of the listed tools"),
                    is_error: true,
                    denied: false,
                    record: json!({
                        "qualified": call.name,
                        "outcome": "unknown_tool",
                        "error": refusal.to_string(),
                    }),
                },
            }
        })
    }
}
