//! OAuth 2.1 for streamable-HTTP servers (the MCP authorization spec,
//! 2025-11-25), through rmcp's `auth` support: discovery (RFC 9728
//! protected-resource metadata from the challenge or the well-known paths,
//! then RFC 8414 / OIDC authorization-server metadata), the resource
//! check, dynamic registration (RFC 7591), PKCE S256, the `resource`
//! parameter (RFC 8707) and refresh are rmcp's; warden adds the login
//! command (`login.rs`), the stored login (`store.rs`), scope selection
//! and step-up across logins, and what a connection says when it needs a
//! login (`challenge.rs`). Connections never open a browser: only
//! `warden mcp login` does.

mod challenge;
mod login;
mod store;

use rmcp::transport::auth::{AuthClient, AuthorizationManager, OAuthClientConfig};

use crate::config::{OAuthMode, RemoteConfig};
pub use challenge::{Challenge, ChallengeKind, Challenges, Recording};
pub use login::{LoginError, LoginOptions, LoginOutcome, LogoutOutcome, login, logout};
pub use store::{LoginState, MAX_STEP_UPS, stored_secrets};

/// The state of the stored login of an http server (`Missing` when the
/// server is not one, or has `"oauth": false`).
pub fn login_state(remote: &RemoteConfig) -> LoginState {
    match (&remote.oauth_store, remote.oauth.mode) {
        (Some(path), OAuthMode::Discover | OAuthMode::Required) => store::state(path, &remote.url),
        _ => LoginState::Missing,
    }
}

/// Whether warden treats this server as one behind OAuth: configured so,
/// or a login is stored for it.
pub fn uses_oauth(remote: &RemoteConfig) -> bool {
    match remote.oauth.mode {
        OAuthMode::Required => true,
        OAuthMode::Off => false,
        OAuthMode::Discover => login_state(remote) != LoginState::Missing,
    }
}

/// The HTTP client for a remote server and its OAuth calls: no redirects
/// (a redirect must not carry a token or a session elsewhere), no idle
/// pool (rmcp's own default, for the same delayed-ACK reason).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// How to connect to an http server.
pub enum Plan {
    /// Without a token (no login stored, or `"oauth": false`).
    Plain,
    /// With the stored login (refreshed when it expires, the new tokens
    /// saved).
    Authorized(Box<AuthClient<reqwest::Client>>),
}

/// Decides [`Plan`]; `Err` is the message for a server that needs a login
/// warden does not have.
pub async fn plan(name: &str, remote: &RemoteConfig) -> Result<Plan, String> {
    if remote.oauth.mode == OAuthMode::Off {
        return Ok(Plan::Plain);
    }
    let Some(path) = &remote.oauth_store else {
        return Ok(Plan::Plain);
    };
    let stored = store::read_for(path, &remote.url).filter(|f| f.credentials.is_some());
    let (Some(file), state) = (stored, store::state(path, &remote.url)) else {
        return match remote.oauth.mode {
            OAuthMode::Required => Err(needs_login(name, None)),
            _ => Ok(Plan::Plain),
        };
    };
    if state == LoginState::Expired {
        return Err(needs_login(name, Some("the stored login has expired")));
    }
    let Some(metadata) = file.metadata.clone() else {
        return Err(needs_login(name, Some("the stored login is incomplete")));
    };
    let manager = new_manager(remote).await.map_err(|e| e.to_string())?;
    let mut manager = manager;
    manager.set_credential_store(store::FileStore {
        path: path.clone(),
        url: remote.url.clone(),
    });
    manager.set_metadata(metadata);
    let client_id = file
        .credentials
        .as_ref()
        .map(|c| c.client_id.clone())
        .unwrap_or_default();
    let redirect = file
        .redirect_uri
        .clone()
        .unwrap_or_else(|| "http://127.0.0.1/callback".into());
    let mut client = OAuthClientConfig::new(client_id, redirect);
    // The secret that goes with the client: the configured pre-registered
    // one, else the one dynamic registration returned.
    let secret = match (&remote.oauth.client_id, &remote.oauth.client_secret) {
        (Some(_), Some(secret)) => Some(secret.expose().to_string()),
        (Some(_), None) => None,
        (None, _) => file.client_secret.clone(),
    };
    if let Some(secret) = secret {
        client = client.with_client_secret(secret);
    }
    manager
        .configure_client(client)
        .map_err(|e| format!("the stored OAuth login cannot be used: {e}"))?;
    crate::scrub::register(store::stored_secrets(path));
    Ok(Plan::Authorized(Box::new(AuthClient::new(
        http_client(),
        manager,
    ))))
}

/// rmcp's manager for `remote`. Metadata URLs on loopback are allowed for
/// a loopback server (rmcp's default rule); private addresses only with
/// `oauth.allow_private_addresses`.
pub(crate) async fn new_manager(
    remote: &RemoteConfig,
) -> Result<AuthorizationManager, rmcp::transport::AuthError> {
    if remote.oauth.allow_private_addresses {
        AuthorizationManager::new_allowing_private_addresses(remote.url.as_str()).await
    } else {
        AuthorizationManager::new(remote.url.as_str()).await
    }
}

pub fn needs_login(name: &str, why: Option<&str>) -> String {
    let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
    format!(
        "server `{name}` needs an OAuth login{why}: run `warden mcp login {name}` (warden never opens a login on its own, and not in --ci)"
    )
}

/// What to tell the user after a connection or request failed with a
/// 401/403 from an OAuth server; a 403 `insufficient_scope` is also
/// remembered in the stored login, so the next `warden mcp login` asks for
/// the scopes the server named (step-up), within [`MAX_STEP_UPS`].
pub fn explain(name: &str, remote: &RemoteConfig, seen: &Challenges) -> Option<String> {
    if remote.oauth.mode == OAuthMode::Off {
        return None;
    }
    let challenge = seen.take()?;
    match challenge.kind {
        ChallengeKind::Unauthorized => {
            let why = (login_state(remote) != LoginState::Missing)
                .then_some("the server refused the stored login");
            Some(needs_login(name, why))
        }
        ChallengeKind::InsufficientScope => {
            let scopes = challenge.scopes();
            let path = remote.oauth_store.as_ref()?;
            let mut file = store::read_for(path, &remote.url)?;
            // Attempts count for one set of scopes; a new demand starts over.
            let attempts = file
                .step_up
                .as_ref()
                .filter(|s| s.scopes == scopes)
                .map_or(0, |s| s.attempts);
            if attempts >= MAX_STEP_UPS {
                return Some(format!(
                    "server `{name}` still refuses the login for insufficient scope (it asks for `{}`) after {attempts} re-authorizations; not asking again (run `warden mcp logout {name}` to start over)",
                    scopes.join(" ")
                ));
            }
            file.step_up = Some(store::StepUp {
                scopes: scopes.clone(),
                attempts,
            });
            if let Err(e) = store::write(path, &file) {
                tracing::warn!(server = name, error = %e, "cannot record the scope the server asked for");
            }
            Some(format!(
                "server `{name}` needs more scope (`{}`): run `warden mcp login {name}` to authorize it",
                scopes.join(" ")
            ))
        }
    }
}
