//! A client's message the gateway cannot read as a request: answered
//! with a JSON-RPC error and recorded, over stdio and HTTP alike
//! (`mcp::wire::unreadable` says what is answered), so that a client is
//! told at once instead of waiting out its timeout, and the audit log has
//! the attempt (CONTRACT §6).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    ClientJsonRpcMessage, CustomRequest, ErrorData, GetMeta, ProtocolVersion, ServerJsonRpcMessage,
};

use crate::host::{Caller, Host};
use crate::mcp::wire::Refusals;
use crate::mcp::wire::unreadable::{self, Unreadable};

/// The largest request body the HTTP service reads (rmcp's default,
/// given to it explicitly so that both agree).
pub(super) const MAX_BODY: usize = 4 * 1024 * 1024;

fn record(host: &Host, unreadable: &Unreadable) {
    host.record_malformed(
        Caller::Gateway,
        unreadable.method.as_deref(),
        unreadable.recorded.clone(),
        &unreadable.error,
    );
}

/// The stdio transport's report of each line it answered.
pub(super) fn refusals(host: Arc<Host>) -> Refusals {
    Arc::new(move |unreadable: &Unreadable| record(&host, unreadable))
}

/// A request rmcp read as a `CustomRequest`: for a method the gateway
/// serves, that means its parameters are not that method's (rmcp tries
/// the typed reading first), so it is answered with invalid params and
/// recorded rather than "method not found"; any other method is not
/// found, and recorded too.
pub(super) fn custom_request(host: &Host, request: &CustomRequest) -> ErrorData {
    if !unreadable::is_served_method(&request.method) {
        let error = unreadable::method_not_found(&request.method);
        super::unserved::record(host, &request.method, request.params.clone(), &error);
        return error;
    }
    let error = unreadable::invalid_params(&request.method);
    host.record_malformed(
        Caller::Gateway,
        Some(&request.method),
        request.params.clone().unwrap_or_default(),
        &error,
    );
    error
}

/// HTTP: rmcp answers a body it cannot read as a message with a bare 415
/// (after its Host, Origin, Accept and Content-Type checks, which run
/// first and are left to answer as they do). That answer becomes the
/// JSON-RPC error the stdio transport gives, and the body is recorded.
pub(super) async fn answer_unreadable(
    State(host): State<Arc<Host>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        });
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        // Over the limit: not read (rmcp answers it so too, with 413).
        // rmcp's checks of the headers still come first: it is given an
        // empty body, which it refuses as unreadable (415) only once they
        // passed; then the client gets the JSON-RPC error stdio gives,
        // with 413, and the attempt is recorded.
        let response = next.run(Request::from_parts(parts, Body::empty())).await;
        if !json || response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
            return response;
        }
        let unreadable = unreadable::oversized(MAX_BODY);
        record(&host, &unreadable);
        let mut response = answer(unreadable);
        *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
        return response;
    };
    let read = json.then(|| serde_json::from_slice::<ClientJsonRpcMessage>(&bytes));
    if let Some(Ok(ClientJsonRpcMessage::Request(request))) = &read {
        // An initialize it cannot read, outside a session (inside one rmcp
        // hands it to the handler: [`custom_request`]).
        if !parts.headers.contains_key("mcp-session-id")
            && let Some(unreadable) = unreadable::unread_initialize(request)
        {
            record(&host, &unreadable);
            return answer(unreadable);
        }
        // rmcp answers these before any handler runs: "method not found",
        // or a `_meta` it refuses.
        let request = &request.request;
        let error = if super::unserved::always_refused(request) {
            Some(unreadable::method_not_found(request.method()))
        } else if super::unserved::refused_for_meta(
            request,
            request.get_meta(),
            ProtocolVersion::KNOWN_VERSIONS,
        ) {
            Some(ErrorData::invalid_params(
                "refused before it was served: its _meta names a protocol revision the gateway \
                 does not speak, or lacks what that revision requires",
                None,
            ))
        } else {
            None
        };
        if let Some(error) = error {
            let params = super::unserved::params_of(request);
            super::unserved::record(&host, request.method(), params, &error);
        }
    }
    let refused = read.and_then(Result::err);
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    let Some(error) = refused else {
        return response;
    };
    if response.status() != StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return response;
    }
    match unreadable::classify(&bytes, &error) {
        Some(unreadable) => {
            record(&host, &unreadable);
            answer(unreadable)
        }
        None => response,
    }
}

/// The JSON-RPC error, in rmcp's type: 200 for an answer under the
/// request's id (an in-band error, as rmcp answers one), 400 without.
fn answer(unreadable: Unreadable) -> Response {
    let status = if unreadable.id.is_some() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let message = ServerJsonRpcMessage::error(unreadable.error, unreadable.id);
    match serde_json::to_vec(&message) {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Bytes::from(body),
        )
            .into_response(),
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    }
}
