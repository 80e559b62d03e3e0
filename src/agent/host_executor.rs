//! Plugs the host into the agent loop: the model sees the host's visible
//! tools, and every call it proposes goes through [`Host::call`], i.e. the
//! permission pipeline and the audit log, like any other caller's.

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::run_loop::{ToolExecutor, ToolOutcome};
use super::{ToolCall, ToolSpec};
use crate::host::{CallRequest, Caller, Host, ToolRef};
use warden_audit::Outcome;
use warden_policy::Asker;

pub struct HostExecutor<'a> {
    host: &'a Host,
    asker: Option<&'a dyn Asker>,
    cancel: CancellationToken,
}

impl<'a> HostExecutor<'a> {
    pub fn new(host: &'a Host, asker: Option<&'a dyn Asker>, cancel: CancellationToken) -> Self {
        HostExecutor {
            host,
            asker,
            cancel,
        }
    }
}

/// The largest result (as canonical JSON) a call's record in the run
/// report keeps whole. The report holds every call of the run until it is
/// printed, and a server may answer each call with a 16 MiB message: kept
/// whole, `--max-tool-calls` such results were held (and copied again to
/// print), although the model saw at most `max_result_chars` of each.
pub const MAX_REPORTED_RESULT_BYTES: usize = 1 << 20;

/// A result over [`MAX_REPORTED_RESULT_BYTES`] becomes `{"omitted",
/// "bytes", "sha256"}` (of its canonical JSON), as the audit log names a
/// value too large to record.
fn bound_result(result: &mut Value) {
    if result.is_null() {
        return;
    }
    let canonical = warden_core::digest::canonical_json(result);
    if canonical.len() > MAX_REPORTED_RESULT_BYTES {
        *result = json!({
            "omitted": format!(
                "too large for the run report: more than {MAX_REPORTED_RESULT_BYTES} bytes"
            ),
            "bytes": canonical.len(),
            "sha256": warden_core::digest::sha256_hex(canonical.as_bytes()),
        });
    }
}

/// The host's visible tools as offered to a model.
pub fn tool_specs(host: &Host) -> Vec<ToolSpec> {
    host.tools().visible().map(ToolSpec::from_entry).collect()
}

impl ToolExecutor for HostExecutor<'_> {
    fn tools(&self) -> Vec<ToolSpec> {
        tool_specs(self.host)
    }

    fn execute<'b>(&'b self, call: &'b ToolCall) -> BoxFuture<'b, ToolOutcome> {
        Box::pin(async move {
            let request = CallRequest {
                target: ToolRef::Qualified(call.name.clone()),
                arguments: call.arguments.clone(),
                caller: Caller::Model,
            };
            let report = self
                .host
                .call(request, self.asker, self.cancel.child_token())
                .await;
            let mut record = serde_json::to_value(&report).unwrap_or_default();
            record["qualified"] = json!(report.qualified);
            bound_result(&mut record["result"]);
            let content = report.text_for_model();
            match report.outcome {
                Outcome::Ok => ToolOutcome::ok(content, record),
                Outcome::Denied => ToolOutcome::denied(content, record),
                Outcome::UnknownTool => {
                    ToolOutcome::error(format!("{content}; call one of the listed tools"), record)
                }
                _ => ToolOutcome::error(content, record),
            }
        })
    }

    fn record_skipped(&self, call: &ToolCall, reason: &str) {
        self.host.record_skipped(
            &ToolRef::Qualified(call.name.clone()),
            &call.arguments,
            Caller::Model,
            reason,
        );
    }
}
