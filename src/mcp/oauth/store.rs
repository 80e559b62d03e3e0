//! One server's stored OAuth login: `$WARDEN_CONFIG_DIR/oauth/NAME.json`,
//! mode 0600 in a 0700 folder, written whole through a temporary file and
//! a rename. It holds the tokens rmcp's `AuthorizationManager` keeps
//! (through [`FileStore`], its `CredentialStore`), and what warden needs
//! to use them again without a new discovery: the server URL the login
//! belongs to (a login is never sent to another URL), the authorization
//! server's metadata, the client's secret from dynamic registration and
//! the scopes a server asked for in a 403 (step-up).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{
    AuthError, AuthorizationMetadata, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

/// How many times in a row warden re-authorizes for a server that keeps
/// answering 403 `insufficient_scope`: the first login plus two step-ups
/// (the MCP authorization spec asks clients to bound this loop).
pub const MAX_STEP_UPS: u32 = 2;

#[derive(Clone, Serialize, Deserialize)]
pub struct TokenFile {
    /// The server URL (as configured) this login was made for.
    pub url: String,
    pub metadata: Option<AuthorizationMetadata>,
    /// From dynamic client registration; a pre-registered secret stays in
    /// the configuration and is not copied here.
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub redirect_uri: Option<String>,
    #[serde(default)]
    pub credentials: Option<StoredCredentials>,
    /// A 403 `insufficient_scope` asked for these scopes: the next login
    /// asks for them (with what was granted before).
    #[serde(default)]
    pub step_up: Option<StepUp>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepUp {
    pub scopes: Vec<String>,
    /// Logins made for this step-up so far.
    #[serde(default)]
    pub attempts: u32,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("url", &warden_core::redact::url(&self.url))
            .field("credentials", &self.credentials)
            .field("step_up", &self.step_up)
            .finish_non_exhaustive()
    }
}

/// What `mcp status`, `doctor` and connections need to know about a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginState {
    /// No login stored (or one made for another URL).
    Missing,
    /// An access token that has not expired (or whose lifetime is unknown).
    Valid,
    /// Expired, with a refresh token to get a new one.
    Refreshable,
    /// Expired, no refresh token: log in again.
    Expired,
}

impl LoginState {
    pub fn present(self) -> bool {
        matches!(self, LoginState::Valid | LoginState::Refreshable)
    }
}

pub fn read(path: &Path) -> Option<TokenFile> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The login stored at `path` for `url`.
pub fn read_for(path: &Path, url: &str) -> Option<TokenFile> {
    read(path).filter(|file| file.url == url)
}

pub fn state(path: &Path, url: &str) -> LoginState {
    let Some(file) = read_for(path, url) else {
        return LoginState::Missing;
    };
    let Some(tokens) = token_fields(&file) else {
        return LoginState::Missing;
    };
    let received = file.credentials.as_ref().and_then(|c| c.token_received_at);
    let expired = match (tokens["expires_in"].as_u64(), received) {
        (Some(lifetime), Some(at)) => now_secs() >= at.saturating_add(lifetime),
        _ => false,
    };
    match (expired, tokens["refresh_token"].is_string()) {
        (false, _) => LoginState::Valid,
        (true, true) => LoginState::Refreshable,
        (true, false) => LoginState::Expired,
    }
}

/// Every secret value a stored login holds (scrubbed from all output).
pub fn stored_secrets(path: &Path) -> Vec<String> {
    let Some(file) = read(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(tokens) = token_fields(&file) {
        for key in ["access_token", "refresh_token", "id_token"] {
            if let Some(value) = tokens[key].as_str() {
                out.push(value.to_string());
            }
        }
    }
    out.extend(file.client_secret);
    out
}

/// The token response as the authorization server sent it (rmcp keeps it
/// as oauth2's type, which serialises to the RFC 6749 fields).
fn token_fields(file: &TokenFile) -> Option<serde_json::Value> {
    let tokens = file.credentials.as_ref()?.token_response.as_ref()?;
    serde_json::to_value(tokens)
        .ok()
        .filter(|v| v["access_token"].is_string())
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Writes `file` to `path`: the folder 0700 (created if needed), the file
/// 0600 from its first byte (a temporary file in the same folder, then
/// renamed over the old one).
pub fn write(path: &Path, file: &TokenFile) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the login file has no folder"))?;
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    // A folder made by someone else (or before) is narrowed too.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".login-")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)?;
    let bytes = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    tmp.write_all(&bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    crate::scrub::register(stored_secrets(path));
    Ok(())
}

/// Removes the stored login; `Ok(false)` when there was none.
pub fn remove(path: &Path) -> std::io::Result<bool> {
    let _ = std::fs::remove_file(path.with_extension("lock"));
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// rmcp's credential store over the login file: the manager loads and
/// saves tokens (a refresh included) through it, and the rest of the file
/// is kept as it is.
#[derive(Debug, Clone)]
pub struct FileStore {
    pub path: PathBuf,
    pub url: String,
}

impl FileStore {
    fn store_error(&self, e: impl std::fmt::Display) -> AuthError {
        AuthError::CredentialStoreError(format!("{}: {e}", self.path.display()))
    }
}

#[async_trait::async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(read_for(&self.path, &self.url).and_then(|f| f.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let mut file = read_for(&self.path, &self.url).unwrap_or_else(|| TokenFile {
            url: self.url.clone(),
            metadata: None,
            client_secret: None,
            redirect_uri: None,
            credentials: None,
            step_up: None,
        });
        file.credentials = Some(credentials);
        write(&self.path, &file).map_err(|e| self.store_error(e))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        if let Some(mut file) = read_for(&self.path, &self.url) {
            file.credentials = None;
            write(&self.path, &file).map_err(|e| self.store_error(e))?;
        }
        Ok(())
    }

    /// Two warden processes refreshing the same login (a gateway and a
    /// `warden call`, say) take turns: an exclusive `flock` of `NAME.lock`
    /// beside the login, held by rmcp from loading the old tokens to saving
    /// the new ones, so the second one reads what the first saved instead
    /// of spending a refresh token the server has already rotated.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let lock_path = self.path.with_extension("lock");
        let held = tokio::task::spawn_blocking(move || lock_exclusive(&lock_path))
            .await
            .map_err(|e| self.store_error(e))?
            .map_err(|e| self.store_error(e))?;
        Ok(Some(CredentialRefreshGuard::new(held)))
    }
}

fn lock_exclusive(path: &Path) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)?;
    // Bounded like every lock warden takes: a refresh stuck in another
    // process fails this one (the caller sees a login error) instead of
    // hanging the session.
    warden_audit::flock::lock_within(file, true, warden_audit::flock::LOCK_WAIT).map_err(|(_, e)| e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(dir: &Path) -> PathBuf {
        let path = dir.join("oauth").join("srv.json");
        let file: TokenFile = serde_json::from_value(serde_json::json!({
            "url": "http://127.0.0.1:9/mcp",
            "metadata": {"authorization_endpoint": "http://a/authorize", "token_endpoint": "http://a/token"},
            "client_secret": "client-secret-value",
            "credentials": {
                "client_id": "c",
                "token_response": {"access_token": "access-value", "token_type": "bearer",
                                   "expires_in": 60, "refresh_token": "refresh-value"},
                "token_received_at": 1
            }
        }))
        .expect("a token file");
        write(&path, &file).expect("write");
        path
    }

    #[test]
    fn secrets_state_and_modes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = sample(dir.path());
        let mut secrets = stored_secrets(&path);
        secrets.sort();
        assert_eq!(
            secrets,
            ["access-value", "client-secret-value", "refresh-value"]
        );
        assert_eq!(
            state(&path, "http://127.0.0.1:9/mcp"),
            LoginState::Refreshable
        );
        assert_eq!(
            state(&path, "http://127.0.0.1:9/other"),
            LoginState::Missing
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert!(remove(&path).unwrap());
        assert!(!remove(&path).unwrap());
    }
}
