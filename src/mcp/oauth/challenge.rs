//! Remembering what a server's last 401/403 said. rmcp's transport turns
//! them into errors that reach the session only as "the transport closed";
//! this wrapper around the HTTP client keeps the `WWW-Authenticate`
//! challenge so warden can say what to do (log in, or log in again for
//! more scope) and `warden mcp login` can seed discovery with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChallengeKind {
    /// 401: no token, or one the server does not accept.
    Unauthorized,
    /// 403 `insufficient_scope`: a token with more scope is needed.
    InsufficientScope,
}

#[derive(Debug, Clone)]
pub struct Challenge {
    pub kind: ChallengeKind,
    /// The `WWW-Authenticate` header value.
    pub header: String,
}

impl Challenge {
    /// The challenge's `scope="…"` parameter, split into scopes.
    pub fn scopes(&self) -> Vec<String> {
        param(&self.header, "scope")
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }
}

/// One auth-param of a `WWW-Authenticate` value (quoted or token form).
fn param(header: &str, name: &str) -> Option<String> {
    let lower = header.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find(name) {
        let at = from + found;
        from = at + name.len();
        let before_ok = at == 0 || matches!(lower.as_bytes()[at - 1], b' ' | b',' | b'\t');
        let rest = header[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let value = rest[1..].trim_start();
        return Some(if let Some(quoted) = value.strip_prefix('"') {
            quoted.split('"').next().unwrap_or_default().to_string()
        } else {
            value
                .split([',', ' '])
                .next()
                .unwrap_or_default()
                .to_string()
        });
    }
    None
}

/// The last challenge one connection received.
#[derive(Debug, Clone, Default)]
pub struct Challenges(Arc<Mutex<Option<Challenge>>>);

impl Challenges {
    pub fn last(&self) -> Option<Challenge> {
        self.0.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// The last challenge, forgotten: it explains one failure, not a later
    /// unrelated one.
    pub fn take(&self) -> Option<Challenge> {
        self.0.lock().map(|mut g| g.take()).unwrap_or_default()
    }

    fn note<T, E: std::error::Error + Send + Sync + 'static>(
        &self,
        result: &Result<T, StreamableHttpError<E>>,
    ) {
        let challenge = match result {
            Err(StreamableHttpError::AuthRequired(e)) => Challenge {
                kind: ChallengeKind::Unauthorized,
                header: e.www_authenticate_header.clone(),
            },
            Err(StreamableHttpError::InsufficientScope(e)) => Challenge {
                kind: ChallengeKind::InsufficientScope,
                header: e.www_authenticate_header.clone(),
            },
            _ => return,
        };
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(challenge);
        }
    }
}

/// An HTTP client for rmcp's streamable-HTTP transport that records
/// challenges in [`Challenges`] and otherwise does what `inner` does.
#[derive(Clone)]
pub struct Recording<C> {
    pub inner: C,
    pub seen: Challenges,
}

type Post<E> = Result<StreamableHttpPostResponse, StreamableHttpError<E>>;
type Stream<E> = Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<E>>;

impl<C> StreamableHttpClient for Recording<C>
where
    C: StreamableHttpClient + Sync,
{
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Post<Self::Error> {
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.seen.note(&result);
        result
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Post<Self::Error> {
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.seen.note(&result);
        result
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Post<Self::Error> {
        let result = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.seen.note(&result);
        result
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        // A refused session delete says nothing about what to do next.
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Stream<Self::Error> {
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.seen.note(&result);
        result
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Stream<Self::Error> {
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.seen.note(&result);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_parameter_is_read_quoted_or_bare() {
        let c = Challenge {
            kind: ChallengeKind::Unauthorized,
            header: r#"Bearer resource_metadata="http://x/y", scope="mcp:basic mcp:write""#.into(),
        };
        assert_eq!(c.scopes(), ["mcp:basic", "mcp:write"]);
        let c = Challenge {
            kind: ChallengeKind::InsufficientScope,
            header: "Bearer error=insufficient_scope, scope=admin".into(),
        };
        assert_eq!(c.scopes(), ["admin"]);
        let c = Challenge {
            kind: ChallengeKind::Unauthorized,
            header: r#"Bearer myscope="no""#.into(),
        };
        assert!(c.scopes().is_empty());
    }
}
