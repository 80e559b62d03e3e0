//! What the gateway does not serve is still recorded (CONTRACT §6:
//! nothing a client asks goes unrecorded), as a `malformed` request like
//! an unreadable line's; the log bounds its `method`, `error` and
//! `arguments` as for any request:
//!
//! - a request the gateway's handler answers "method not found" (-32601):
//!   a method nobody serves, `server/discover` (`Gateway`'s handlers call
//!   [`record`]);
//! - a notification for a method a client may send whose parameters are
//!   not that method's (rmcp hands it over as a custom notification,
//!   which the handler would otherwise ignore);
//! - a request rmcp refuses before any handler runs: the methods it
//!   answers -32601 for the gateway's capabilities (`tasks/*`,
//!   `skills/*`, `resources/directory/read`, `subscriptions/listen`, and
//!   `ping`/`resources/subscribe` outside the session lifecycle), and a
//!   request whose `_meta` names a revision the gateway does not speak, or
//!   2026-07-28 without the fields it requires (a `tools/call` included:
//!   it never reaches the host, which records every call it sees). Over
//!   stdio [`Recording`] sees rmcp's answer; over HTTP, where rmcp's
//!   service must be the `ServerHandler` itself, the body is read by
//!   `malformed::answer_unreadable`, and [`always_refused`] and
//!   [`refused_for_meta`] say which.

use std::borrow::Cow;

use rmcp::model::{
    CancelledNotificationMethod, ClientNotification, ClientRequest, ConstString, ErrorCode,
    InitializedNotificationMethod, ProgressNotificationMethod, ProtocolVersion, RequestMetaObject,
    RootsListChangedNotificationMethod, ServerConfig, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, Service};
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::Gateway;
use crate::host::{Caller, Host};
use crate::mcp::wire::unreadable;

/// Records one request or notification the gateway did not serve.
pub(super) fn record(host: &Host, method: &str, params: Option<Value>, error: &ErrorData) {
    host.record_malformed(
        Caller::Gateway,
        Some(method),
        params.unwrap_or_default(),
        error,
    );
}

/// A custom notification: recorded when it names a notification a client
/// may send (its parameters were not that method's, or rmcp would have
/// read it as that notification). Not answered: a notification never is;
/// the record says what an answer would have.
pub(super) fn custom_notification(host: &Host, method: &str, params: Option<Value>) {
    let known = [
        CancelledNotificationMethod::VALUE,
        ProgressNotificationMethod::VALUE,
        InitializedNotificationMethod::VALUE,
        RootsListChangedNotificationMethod::VALUE,
    ]
    .contains(&method);
    if known {
        record(host, method, params, &unreadable::invalid_params(method));
    }
}

/// The requests rmcp answers "method not found" before the gateway's
/// handler runs, whatever the session: the gateway declares neither the
/// tasks nor the skills extension, and serves no 2026-07-28 listen.
pub(super) fn always_refused(request: &ClientRequest) -> bool {
    matches!(
        request,
        ClientRequest::GetTaskRequest(_)
            | ClientRequest::UpdateTaskRequest(_)
            | ClientRequest::CancelTaskRequest(_)
            | ClientRequest::ListSkillsRequest(_)
            | ClientRequest::GetSkillRequest(_)
            | ClientRequest::ReadResourceDirectoryRequest(_)
            | ClientRequest::SubscriptionsListenRequest(_)
    )
}

/// The gateway as rmcp serves it over stdio: every request and
/// notification goes to the [`Gateway`]'s handler; what rmcp refuses
/// before the handler runs is recorded here.
#[derive(Clone)]
pub struct Recording(pub Gateway);

/// Whether rmcp refuses `request`, whose `_meta` is `meta`, before any
/// handler runs (the checks rmcp's `Service` makes that do not depend on
/// how the session began), for a gateway speaking `supported`.
pub(super) fn refused_for_meta(
    request: &ClientRequest,
    meta: &RequestMetaObject,
    supported: &[ProtocolVersion],
) -> bool {
    if matches!(request, ClientRequest::InitializeRequest(_)) {
        return false;
    }
    let Some(requested) = meta.protocol_version() else {
        return false;
    };
    if !supported.contains(&requested) {
        return true;
    }
    requested.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
        && !meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
}

/// The request's method and `params`, when rmcp may refuse it before the
/// handler runs. The handler records what it refuses itself (custom
/// methods, `server/discover`), and the host every call it sees, so a
/// `tools/call`'s arguments are copied only when rmcp will refuse it.
fn kept(request: &ClientRequest, refused_for_meta: bool) -> Option<(String, Option<Value>)> {
    let handler_records = matches!(
        request,
        ClientRequest::CallToolRequest(_)
            | ClientRequest::CustomRequest(_)
            | ClientRequest::DiscoverRequest(_)
    );
    if handler_records && !refused_for_meta {
        return None;
    }
    Some((request.method().to_string(), params_of(request)))
}

/// A request's `params` as the client sent them, for its record.
pub(super) fn params_of(request: &ClientRequest) -> Option<Value> {
    serde_json::to_value(request)
        .ok()
        .and_then(|mut v| v.get_mut("params").map(Value::take))
}

impl Service<RoleServer> for Recording {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let supported = Service::supported_protocol_versions(&self.0);
        let for_meta = refused_for_meta(&request, &context.meta, &supported);
        let kept = kept(&request, for_meta);
        let result = Service::handle_request(&self.0, request, context).await;
        if let (Err(error), Some((method, params))) = (&result, kept)
            && (for_meta || error.code == ErrorCode::METHOD_NOT_FOUND)
        {
            record(&self.0.inner.host, &method, params, error);
        }
        result
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Service::handle_notification(&self.0, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        Service::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Service::supported_protocol_versions(&self.0)
    }
}
