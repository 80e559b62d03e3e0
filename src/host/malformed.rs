//! The record of a client message the gateway answered with an error
//! because it could not be read as a request (CONTRACT §6: nothing a
//! caller asked for goes unrecorded, the ones warden cannot read included).

use serde_json::Value;
use warden_audit::{Caller, Event, Outcome, RequestKind as AuditKind, RequestRecord};
use warden_core::digest::sha256_json;

use super::Host;

impl Host {
    /// Records a refused message: a `request` of kind `malformed` (target
    /// `malformed`, the `method` when it could be read, `decision: null`,
    /// outcome `invalid_request`), with `error` the JSON-RPC error the
    /// client was given. `arguments` are what was received; the log
    /// scrubs secrets from them and shortens long values as for any call.
    pub fn record_malformed(
        &self,
        caller: Caller,
        method: Option<&str>,
        arguments: Value,
        error: &rmcp::model::ErrorData,
    ) {
        let event = Event::Request(RequestRecord {
            call_id: uuid::Uuid::new_v4().to_string(),
            kind: AuditKind::Malformed,
            server: None,
            target: "malformed".into(),
            method: method.map(str::to_string),
            caller,
            args_sha256: sha256_json(&arguments),
            arguments,
            decision: None,
            outcome: Outcome::InvalidRequest,
            error: Some(format!("{} ({})", error.message, error.code.0)),
            capped: None,
        });
        self.audit.record(event);
    }
}
