//! Who may talk to `warden gateway --listen`, and which client is a
//! person's.
//!
//! Every request must carry `Authorization: Bearer TOKEN`: the client
//! token (generated at start and printed once to stderr, or read from
//! `--token-file`), or the person's-client token (`--ask-client`: generated
//! and printed once, or read from `--ask-client-token`). Anything else is
//! refused with 401 before the request reaches the MCP service, so before
//! its Host/Origin checks, sessions or any other effect. Tokens are
//! compared in constant time (on their SHA-256 digests, so the lengths do
//! not leak either). `--no-auth` lets requests without a token in as
//! ordinary clients (loudly); the person's client is still only the one
//! presenting its token.
//!
//! A session belongs to the role that created it: a request that names a
//! session created under the other token is refused (403), so an ordinary
//! client cannot answer the person's questions by joining their session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What a request's token makes its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRole {
    /// Any authenticated (or, with `--no-auth`, any) client: its `ask`
    /// decisions are denied.
    Client,
    /// The operator's marked client (`--ask-client`): asked by elicitation.
    Person,
}

/// The tokens a listening gateway accepts.
#[derive(Clone)]
pub struct Tokens {
    /// `None` with `--no-auth`.
    client: Option<[u8; 64]>,
    person: Option<[u8; 64]>,
    sessions: Arc<Mutex<HashMap<String, ClientRole>>>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("client", &self.client.map(|_| "[REDACTED]"))
            .field("person", &self.person.map(|_| "[REDACTED]"))
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// `client`: `None` turns authentication off (`--no-auth`); `person`:
    /// the person's-client token, if any.
    pub fn new(client: Option<&str>, person: Option<&str>) -> Tokens {
        Tokens {
            client: client.map(digest),
            person: person.map(digest),
            sessions: Arc::default(),
        }
    }

    /// The role a presented token (or none) gives, `None` when refused.
    pub fn role(&self, presented: Option<&str>) -> Option<ClientRole> {
        let presented = presented.map(digest);
        if let (Some(p), Some(want)) = (presented, self.person)
            && constant_time_eq(&p, &want)
        {
            return Some(ClientRole::Person);
        }
        match (presented, self.client) {
            (Some(p), Some(want)) if constant_time_eq(&p, &want) => Some(ClientRole::Client),
            // `--no-auth`: anyone is an ordinary client (a wrong token too).
            (_, None) => Some(ClientRole::Client),
            _ => None,
        }
    }
}

/// Hex SHA-256 of a token, as bytes (fixed length, whatever the token's).
fn digest(token: &str) -> [u8; 64] {
    let hex = warden_core::digest::sha256_hex(token.as_bytes());
    let mut out = [0u8; 64];
    out.copy_from_slice(&hex.as_bytes()[..64]);
    out
}

fn constant_time_eq(a: &[u8; 64], b: &[u8; 64]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A fresh random token (`wdn_` and 64 hex digits; 244 random bits from
/// the OS through two v4 UUIDs).
pub fn generate() -> String {
    format!(
        "wdn_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Reads a token file: the first line, trimmed; at least 16 characters;
/// not readable by other users.
pub fn read_token_file(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{}: readable by other users (mode {:o}); run `chmod 600 {}`",
            path.display(),
            meta.permissions().mode() & 0o777,
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 || token.chars().any(|c| c.is_control() || c == ' ') {
        return Err(format!(
            "{}: a token is one line of at least 16 printable characters without spaces",
            path.display()
        ));
    }
    Ok(token)
}

fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

const SESSION_HEADER: &str = "mcp-session-id";

/// The middleware in front of `/mcp`: authenticates, binds sessions to
/// roles, and tells the handler the role (a request extension).
pub async fn authenticate(
    State(tokens): State<Tokens>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(role) = tokens.role(bearer(&request)) else {
        let mut response = (
            StatusCode::UNAUTHORIZED,
            "warden gateway: missing or wrong bearer token (Authorization: Bearer TOKEN)\n",
        )
            .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"warden\""),
        );
        return response;
    };
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(id) = &session {
        let owner = tokens
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .copied();
        if owner.is_some_and(|owner| owner != role) {
            return Response::builder()
                .status(StatusCode::FORBIDDEN)
                .body(Body::from(
                    "warden gateway: this session belongs to another client\n",
                ))
                .unwrap_or_default();
        }
    }
    request.extensions_mut().insert(role);
    let response = next.run(request).await;
    if session.is_none()
        && let Some(id) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
    {
        tokens
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), role);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_by_token() {
        let t = Tokens::new(
            Some("client-token-0123456789"),
            Some("person-token-0123456789"),
        );
        assert_eq!(
            t.role(Some("client-token-0123456789")),
            Some(ClientRole::Client)
        );
        assert_eq!(
            t.role(Some("person-token-0123456789")),
            Some(ClientRole::Person)
        );
        assert_eq!(t.role(Some("client-token-012345678")), None);
        assert_eq!(t.role(None), None);
        let open = Tokens::new(None, Some("person-token-0123456789"));
        assert_eq!(open.role(None), Some(ClientRole::Client));
        assert_eq!(open.role(Some("x")), Some(ClientRole::Client));
        assert_eq!(
            open.role(Some("person-token-0123456789")),
            Some(ClientRole::Person)
        );
    }

    #[test]
    fn generated_tokens_differ() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
    }
}
