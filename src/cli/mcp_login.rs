//! `warden mcp login NAME` / `warden mcp logout NAME`: an OAuth login for a
//! streamable-HTTP server (`crate::mcp::oauth`), stored under
//! `$WARDEN_CONFIG_DIR/oauth/`. Tokens are never printed.

use std::time::Duration;

use serde_json::json;

use super::{CliError, GlobalArgs, exit, session};
use crate::config::{Config, RemoteConfig, TransportConfig};
use crate::mcp::oauth;

/// How long `login` waits for the browser to come back.
const LOGIN_WAIT: Duration = Duration::from_secs(300);

fn remote_of<'c>(config: &'c Config, name: &str) -> anyhow::Result<&'c RemoteConfig> {
    let server = config
        .servers
        .get(name)
        .ok_or_else(|| session::unknown_server(config, name))?;
    match &server.transport {
        TransportConfig::Http(remote) => Ok(remote),
        _ => Err(CliError::usage(format!(
            "server `{name}` is not a streamable-HTTP server (`\"type\": \"http\"`): OAuth logins are for those only"
        ))),
    }
}

pub fn login(global: &GlobalArgs, name: &str) -> anyhow::Result<u8> {
    if global.ci {
        return Err(CliError::usage(
            "`warden mcp login` needs a person at a browser; it does not run with --ci",
        ));
    }
    let config = session::load_config(global)?;
    let server = config
        .servers
        .get(name)
        .ok_or_else(|| session::unknown_server(&config, name))?;
    let remote = remote_of(&config, name)?.clone();
    refuse_unapproved(&config, server)?;
    let timeout = server.timeout;
    let headers = remote
        .headers
        .iter()
        .filter_map(|(k, v)| {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).ok()?;
            let mut value = reqwest::header::HeaderValue::from_str(v.expose()).ok()?;
            value.set_sensitive(true);
            Some((name, value))
        })
        .collect();
    let json_out = global.json;
    let name = name.to_string();
    crate::mcp::ensure_crypto_provider();
    session::run_async(|cancel| async move {
        let outcome = oauth::login(oauth::LoginOptions {
            name: &name,
            remote: &remote,
            headers,
            timeout,
            wait: LOGIN_WAIT,
            cancel,
        })
        .await
        .map_err(|e| CliError::with_code(exit::FAILED, format!("login to `{name}` failed: {e}")))?;
        let scopes = if outcome.scopes.is_empty() {
            "none asked for".to_string()
        } else {
            outcome.scopes.join(" ")
        };
        if json_out {
            super::json::print(
                "mcp login",
                json!({"server": name, "action": "logged_in", "scopes": outcome.scopes,
                       "registered": outcome.registered, "step_up": outcome.step_up}),
            )?;
        } else {
            eprintln!(
                "Logged in to `{name}` (scopes: {scopes}{}). The tokens are stored for warden alone.",
                if outcome.registered {
                    "; warden registered itself as a client"
                } else {
                    ""
                }
            );
        }
        Ok(exit::OK)
    })
}

/// A login connects to the server with its configured headers (which a
/// project file may fill from your environment) and hands it a token: a
/// repository's server gets neither before it is approved, as it gets
/// nothing before it starts.
fn refuse_unapproved(config: &Config, server: &crate::config::ServerConfig) -> anyhow::Result<()> {
    if !server.needs_approval() {
        return Ok(());
    }
    let approvals = crate::config::Approvals::load(&config.config_dir)?;
    if approvals.is_approved(server) {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "server `{name}` comes from the project file {file} and is not approved ({why}): review \
         it with `warden mcp approve {name}` first; a login connects to it",
        name = server.name,
        file = warden_core::display::line(&server.source.display().to_string()),
        why = approvals.why_pending(server),
    )))
}

pub fn logout(global: &GlobalArgs, name: &str) -> anyhow::Result<u8> {
    let config = session::load_config(global)?;
    let remote = remote_of(&config, name)?.clone();
    let timeout = config
        .servers
        .get(name)
        .map_or(Duration::from_secs(30), |s| s.timeout);
    let json_out = global.json;
    let name = name.to_string();
    crate::mcp::ensure_crypto_provider();
    session::run_async(|_cancel| async move {
        let outcome = oauth::logout(&remote, timeout).await.map_err(|e| {
            CliError::with_code(exit::FAILED, format!("cannot remove the login: {e}"))
        })?;
        let action = match outcome {
            oauth::LogoutOutcome::NotLoggedIn => "not_logged_in",
            oauth::LogoutOutcome::Revoked => "revoked",
            oauth::LogoutOutcome::Deleted => "logged_out",
        };
        if json_out {
            super::json::print("mcp logout", json!({"server": name, "action": action}))?;
        } else {
            match outcome {
                oauth::LogoutOutcome::NotLoggedIn => eprintln!("No login stored for `{name}`."),
                oauth::LogoutOutcome::Revoked => eprintln!(
                    "Logged out of `{name}`: the server revoked the token and the stored tokens are deleted."
                ),
                oauth::LogoutOutcome::Deleted => {
                    eprintln!("Logged out of `{name}`: the stored tokens are deleted.")
                }
            }
        }
        Ok(exit::OK)
    })
}
