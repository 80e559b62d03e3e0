//! `warden mcp login NAME`: the authorization code flow with PKCE for one
//! streamable-HTTP server, from a person's browser back to a loopback
//! redirect URI (`http://127.0.0.1:PORT/callback`).
//!
//! 1. Probe: connect without a token (rmcp's client: `initialize`, one
//!    `tools/list`) and keep the server's 401 challenge, whose `scope` and
//!    `resource_metadata` seed discovery.
//! 2. Discover (rmcp): protected-resource metadata (refused when its
//!    `resource` is not this server), then authorization-server metadata.
//! 3. Choose scopes: `oauth.scopes`; after a 403 `insufficient_scope`, what
//!    was granted plus what the server asked for (step-up, offered at
//!    most [`super::MAX_STEP_UPS`] times); else the challenge's `scope`, else the
//!    resource's `scopes_supported`, else none (the parameter is omitted).
//! 4. The client: `oauth.client_id` (+ secret), else `oauth.client_metadata_url`
//!    when the authorization server takes metadata-document client IDs,
//!    else dynamic registration.
//! 5. The authorization URL goes to stderr, and to `$BROWSER` when set
//!    (run directly, no shell); the redirect is awaited on the loopback
//!    listener, its `state` checked, the code exchanged (with the PKCE
//!    verifier and the `resource` parameter) and the tokens stored.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, CredentialStore, InMemoryCredentialStore, OAuthClientConfig,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::challenge::{ChallengeKind, Challenges, Recording};
use super::store::{self, StepUp, TokenFile};
use crate::config::{OAuthMode, RemoteConfig};

pub struct LoginOptions<'a> {
    pub name: &'a str,
    pub remote: &'a RemoteConfig,
    /// Headers sent with the probe (the server's configured `headers`).
    pub headers:
        std::collections::HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
    /// Bounds the probe and each OAuth request.
    pub timeout: Duration,
    /// How long to wait for the browser to come back.
    pub wait: Duration,
    pub cancel: CancellationToken,
}

#[derive(Debug)]
pub struct LoginOutcome {
    /// Scopes asked for (empty: the parameter was omitted).
    pub scopes: Vec<String>,
    /// Whether warden registered itself with the authorization server.
    pub registered: bool,
    pub step_up: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error(
        "server `{0}` is not a streamable-HTTP server (`\"type\": \"http\"`): OAuth logins are for those only"
    )]
    NotHttp(String),
    #[error("server `{0}` has `\"oauth\": false`")]
    Disabled(String),
    #[error("OAuth discovery failed: {0}")]
    Discovery(String),
    #[error(
        "the authorization server does not support dynamic client registration; configure a pre-registered client (`oauth.client_id`, and `oauth.client_secret` for a confidential one)"
    )]
    NoRegistration,
    #[error("{0}")]
    Auth(String),
    #[error("cannot listen for the redirect on 127.0.0.1:{port}: {source}")]
    Listen { port: u16, source: std::io::Error },
    #[error("the authorization server answered with an error: {0}")]
    Denied(String),
    #[error("no redirect came back within {0:?}")]
    TimedOut(Duration),
    #[error("cancelled")]
    Cancelled,
    #[error("cannot store the login in {path}: {source}")]
    Store {
        path: String,
        source: std::io::Error,
    },
}

fn auth(e: AuthError) -> LoginError {
    LoginError::Auth(warden_core::redact::urls_in(&e.to_string()).into_owned())
}

pub async fn login(opts: LoginOptions<'_>) -> Result<LoginOutcome, LoginError> {
    let remote = opts.remote;
    if remote.oauth.mode == OAuthMode::Off {
        return Err(LoginError::Disabled(opts.name.into()));
    }
    let Some(path) = remote.oauth_store.clone() else {
        return Err(LoginError::NotHttp(opts.name.into()));
    };
    let previous = store::read_for(&path, &remote.url);
    // A step-up the last 403 asked for. Its limit is kept where the 403
    // is seen (a connection stops sending the person here after
    // MAX_STEP_UPS); a login the person runs anyway is theirs to make.
    let step_up = previous.as_ref().and_then(|f| f.step_up.clone());

    // 1. What the server says without a token.
    let challenge = tokio::select! {
        c = probe(remote, opts.headers.clone(), opts.timeout) => c,
        () = opts.cancel.cancelled() => return Err(LoginError::Cancelled),
    };
    let challenge_header = challenge
        .as_ref()
        .filter(|c| c.kind == ChallengeKind::Unauthorized)
        .map(|c| c.header.clone());

    // 2. Discovery.
    let mut manager = super::new_manager(remote).await.map_err(auth)?;
    let resolution = bounded(
        opts.timeout,
        &opts.cancel,
        manager.resolve_metadata_from_challenge(challenge_header.as_deref()),
    )
    .await?
    .map_err(|e| {
        LoginError::Discovery(warden_core::redact::urls_in(&e.to_string()).into_owned())
    })?;
    tracing::debug!(source = ?resolution.source, "OAuth metadata resolved");
    let metadata = resolution.metadata;
    manager.set_metadata(metadata.clone());

    // 3. Scopes.
    let granted: Vec<String> = previous
        .as_ref()
        .and_then(|f| f.credentials.as_ref())
        .map(|c| c.granted_scopes.clone())
        .unwrap_or_default();
    let mut scopes: Vec<String> = remote.oauth.scopes.clone();
    if let Some(s) = &step_up {
        scopes.extend(granted.iter().cloned());
        scopes.extend(s.scopes.iter().cloned());
        if scopes.is_empty() {
            scopes = manager.select_initial_scopes(&[]).await;
        }
    } else if scopes.is_empty() {
        scopes = manager.select_initial_scopes(&[]).await;
    }
    let mut seen = std::collections::HashSet::new();
    scopes.retain(|s| seen.insert(s.clone()));
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();

    // The redirect listener first: its port is part of the redirect URI.
    let port = remote.oauth.redirect_port.unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|source| LoginError::Listen { port, source })?;
    let port = listener
        .local_addr()
        .map_err(|source| LoginError::Listen { port, source })?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    // 4. The client.
    let (client_secret_to_store, registered) = match &remote.oauth.client_id {
        Some(id) => {
            let mut config = OAuthClientConfig::new(id.clone(), redirect_uri.clone());
            if let Some(secret) = &remote.oauth.client_secret {
                config = config.with_client_secret(secret.expose().to_string());
            }
            manager.configure_client(config).map_err(auth)?;
            (None, false)
        }
        None if remote.oauth.client_metadata_url.is_some() && supports_cimd(&metadata) => {
            let url = remote.oauth.client_metadata_url.clone().unwrap_or_default();
            manager
                .configure_client(OAuthClientConfig::new(url, redirect_uri.clone()))
                .map_err(auth)?;
            (None, false)
        }
        None => {
            if metadata.registration_endpoint.is_none() {
                return Err(LoginError::NoRegistration);
            }
            let config = bounded(
                opts.timeout,
                &opts.cancel,
                manager.register_client("warden", &redirect_uri, &scope_refs),
            )
            .await?
            .map_err(auth)?;
            (config.client_secret, true)
        }
    };

    // A login that fails from here on keeps the previous one.
    let mut file = TokenFile {
        url: remote.url.clone(),
        metadata: Some(metadata),
        client_secret: client_secret_to_store,
        redirect_uri: Some(redirect_uri.clone()),
        credentials: None,
        step_up: step_up.clone().map(|s| StepUp {
            attempts: s.attempts + 1,
            ..s
        }),
    };
    // The exchange saves the tokens here; they reach the file only with
    // the rest of the login, in one write.
    let exchanged = InMemoryCredentialStore::new();
    manager.set_credential_store(exchanged.clone());

    let auth_url = bounded(
        opts.timeout,
        &opts.cancel,
        manager.get_authorization_url(&scope_refs),
    )
    .await?
    .map_err(auth)?;
    let expected_state = url::Url::parse(&auth_url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| LoginError::Auth("the authorization URL carries no state".into()))?;

    // 5. The person authorizes; the browser comes back.
    eprintln!(
        "To authorize warden for server `{}`, open this URL in a browser:\n\n  {auth_url}\n",
        opts.name
    );
    let browser = open_browser(&auth_url);
    let callback = tokio::select! {
        c = await_redirect(&listener, &expected_state) => c,
        () = tokio::time::sleep(opts.wait) => return Err(LoginError::TimedOut(opts.wait)),
        () = opts.cancel.cancelled() => return Err(LoginError::Cancelled),
    };
    drop(listener);
    if let Some(mut child) = browser {
        // A launcher that hands the URL to a running browser exits at
        // once; one that does not is left to the person.
        let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    }
    let callback = callback?;

    bounded(
        opts.timeout,
        &opts.cancel,
        manager.exchange_code_for_token_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        ),
    )
    .await?
    .map_err(auth)?;
    file.credentials = exchanged.load().await.map_err(auth)?;
    store::write(&path, &file).map_err(|source| LoginError::Store {
        path: path.display().to_string(),
        source,
    })?;
    Ok(LoginOutcome {
        scopes,
        registered,
        step_up: step_up.is_some(),
    })
}

/// Whether the authorization server accepts an https URL of a client ID
/// metadata document as the client ID (SEP-991).
fn supports_cimd(metadata: &rmcp::transport::auth::AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// What `logout` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogoutOutcome {
    /// No login was stored.
    NotLoggedIn,
    /// Deleted; the authorization server revoked the token (RFC 7009).
    Revoked,
    /// Deleted; the server has no revocation endpoint, or refused.
    Deleted,
}

/// Deletes the stored login, first asking the authorization server to
/// revoke its refresh token (else the access token) when its metadata
/// names a `revocation_endpoint` (RFC 7009; rmcp has no call for it, so
/// this is one form POST). A revocation that fails does not keep the
/// login: it is deleted either way.
pub async fn logout(remote: &RemoteConfig, timeout: Duration) -> std::io::Result<LogoutOutcome> {
    let Some(path) = &remote.oauth_store else {
        return Ok(LogoutOutcome::NotLoggedIn);
    };
    let revoked = match store::read_for(path, &remote.url) {
        Some(file) => revoke(remote, &file, timeout).await,
        None => false,
    };
    Ok(match (store::remove(path)?, revoked) {
        (false, _) => LogoutOutcome::NotLoggedIn,
        (true, true) => LogoutOutcome::Revoked,
        (true, false) => LogoutOutcome::Deleted,
    })
}

async fn revoke(remote: &RemoteConfig, file: &TokenFile, timeout: Duration) -> bool {
    let Some(endpoint) = file
        .metadata
        .as_ref()
        .and_then(|m| m.additional_fields.get("revocation_endpoint"))
        .and_then(serde_json::Value::as_str)
        .and_then(|e| url::Url::parse(e).ok())
        .filter(|u| matches!(u.scheme(), "https" | "http"))
    else {
        return false;
    };
    let Some(credentials) = &file.credentials else {
        return false;
    };
    let Some(tokens) = credentials
        .token_response
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
    else {
        return false;
    };
    let (token, hint) = match (
        tokens["refresh_token"].as_str(),
        tokens["access_token"].as_str(),
    ) {
        (Some(refresh), _) => (refresh.to_string(), "refresh_token"),
        (None, Some(access)) => (access.to_string(), "access_token"),
        (None, None) => return false,
    };
    let secret = match (&remote.oauth.client_id, &remote.oauth.client_secret) {
        (Some(_), secret) => secret.as_ref().map(|s| s.expose().to_string()),
        (None, _) => file.client_secret.clone(),
    };
    let mut form = vec![("token", token), ("token_type_hint", hint.to_string())];
    let mut request = super::http_client().post(endpoint).timeout(timeout);
    match secret {
        Some(secret) => request = request.basic_auth(&credentials.client_id, Some(secret)),
        None => form.push(("client_id", credentials.client_id.clone())),
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&form)
        .finish();
    request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

async fn bounded<T>(
    timeout: Duration,
    cancel: &CancellationToken,
    fut: impl Future<Output = T>,
) -> Result<T, LoginError> {
    tokio::select! {
        r = tokio::time::timeout(timeout, fut) => r.map_err(|_| LoginError::TimedOut(timeout)),
        () = cancel.cancelled() => Err(LoginError::Cancelled),
    }
}

/// Connects without a token and lists tools once, to see the server's
/// challenge (some servers accept `initialize` unauthenticated and refuse
/// only later requests).
async fn probe(
    remote: &RemoteConfig,
    headers: std::collections::HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
    timeout: Duration,
) -> Option<super::Challenge> {
    let seen = Challenges::default();
    let client = Recording {
        inner: super::http_client(),
        seen: seen.clone(),
    };
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(remote.url.clone()).custom_headers(headers),
    );
    let attempt = async {
        let running = ().serve(transport).await.ok()?;
        let _ = running.list_tools(None).await;
        let _ = running.cancel().await;
        Some(())
    };
    let _ = tokio::time::timeout(timeout, attempt).await;
    seen.last()
}

/// Runs `$BROWSER URL` when `$BROWSER` is set: that program and nothing
/// else, with the URL as its one argument (no shell).
fn open_browser(url: &str) -> Option<tokio::process::Child> {
    let browser = std::env::var_os("BROWSER").filter(|b| !b.is_empty())?;
    match tokio::process::Command::new(&browser)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(false)
        .spawn()
    {
        Ok(child) => Some(child),
        Err(e) => {
            eprintln!(
                "warden: cannot run $BROWSER ({}): {e}; open the URL yourself",
                std::path::Path::new(&browser).display()
            );
            None
        }
    }
}

/// Largest request head read from the redirect.
const MAX_REQUEST: usize = 16 * 1024;

/// Waits for `GET /callback?…` with the expected `state`. Anything else
/// (another path, a wrong or missing state: a page or process on this
/// machine guessing) gets an error page and is otherwise ignored.
async fn await_redirect(
    listener: &TcpListener,
    expected_state: &str,
) -> Result<AuthorizationCallback, LoginError> {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let Some(target) = read_target(&mut stream).await else {
            respond(&mut stream, "400 Bad Request", "not an HTTP request").await;
            continue;
        };
        let Ok(url) = url::Url::parse(&format!("http://127.0.0.1{target}")) else {
            respond(&mut stream, "400 Bad Request", "bad request").await;
            continue;
        };
        if url.path() != "/callback" {
            respond(&mut stream, "404 Not Found", "not found").await;
            continue;
        }
        let param = |name: &str| {
            url.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        };
        if param("state").as_deref() != Some(expected_state) {
            respond(
                &mut stream,
                "400 Bad Request",
                "this redirect does not belong to the login warden started",
            )
            .await;
            continue;
        }
        if let Some(error) = param("error") {
            respond(
                &mut stream,
                "200 OK",
                "warden: the authorization was refused. You can close this page.",
            )
            .await;
            let description = param("error_description").unwrap_or_default();
            let raw = format!("{error} {description}");
            let text = warden_core::display::line(&raw).trim().to_string();
            return Err(LoginError::Denied(text));
        }
        let parsed = AuthorizationCallback::from_redirect_url(url.as_str()).map_err(auth);
        let body = if parsed.is_ok() {
            "warden: login complete. You can close this page."
        } else {
            "warden: the redirect carried no authorization code."
        };
        respond(&mut stream, "200 OK", body).await;
        return parsed;
    }
}

/// The request target of an HTTP/1.x request line (`GET TARGET HTTP/1.1`).
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .ok()??;
    let head = std::str::from_utf8(&buf).ok()?;
    let line = head.lines().next()?;
    let mut parts = line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    (method == "GET" && target.starts_with('/')).then(|| target.to_string())
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
