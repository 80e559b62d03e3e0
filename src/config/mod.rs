//! Configuration: the user file, the nearest project `.mcp.json`, or one
//! `--config FILE` (CONTRACT §3), validated strictly and resolved into the
//! types below. Nothing downstream ever sees unvalidated configuration.
//!
//! Secrets (values of `env`, `env_from` and `headers`) are held as
//! [`Secret`], whose `Debug` never prints the value.
//!
//! Entry points: [`load`] (or [`load_with_env`] with an explicit
//! environment), [`Approvals`] for project servers. The pieces:
//!
//! - `json`: a strict JSON reader keeping line:column for every value and
//!   rejecting duplicate keys (serde keeps the last of two silently).
//! - `file`: one file → validated, resolved servers, rules, policies, audit;
//!   the project trust boundary is enforced here, at the key that crosses it.
//! - `load`: finding the files (user, nearest `.mcp.json`, or `--config`)
//!   and merging them (user definitions win).
//! - `expand`: `${VAR}`, `${VAR:-default}`, `${WORKSPACE}`; lexical paths.
//! - `approvals`: `approvals.json`, written atomically with mode 0600.
//!
//! Invariants: an error returns nothing partial; error messages never echo
//! `env`/`header` values or URLs (they may carry expanded secrets), only key
//! paths, JSON types and paths;
//! [`ServerConfig::digest`] is computed from the entry as written, so secret
//! values never enter it and a changed entry never inherits an approval.

mod approvals;
mod error;
mod expand;
mod file;
mod json;
mod load;

pub use approvals::{Approval, Approvals};
pub use error::{ConfigError, Diagnostic, ErrorKind};
pub use expand::{EnvLookup, referenced_vars};
#[cfg(feature = "fuzzing")]
pub(crate) use load::load_file_unregistered;
pub use load::{LoadOptions, default_config_dir, load, load_with_env};
use warden_audit::{FsyncMode, OnFailure};
pub use warden_core::{Scope, TransportKind, Trust};
use warden_policy::{PolicySource, RuleSource};

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A value that must never reach logs, the audit log or error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    /// The only way to read the value: call sites are easy to audit.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

#[derive(Debug, Clone)]
pub struct StdioConfig {
    /// As written (after `${VAR}` expansion); resolution to an absolute
    /// executable happens at validation and is kept in `program`.
    pub command: String,
    /// The resolved executable (absolute, symlinks not followed).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Literal `env` entries from the config.
    pub env: BTreeMap<String, Secret>,
    /// Host variables passed through by name (missing on host = error at start).
    pub env_from: Vec<String>,
    /// Absolute working directory, checked to exist.
    pub cwd: Option<PathBuf>,
}

#[derive(Clone)]
pub struct RemoteConfig {
    /// As written, expanded: it may carry credentials (userinfo, query
    /// values), which `Debug` masks.
    pub url: String,
    pub headers: BTreeMap<String, Secret>,
    /// `oauth` (streamable HTTP only).
    pub oauth: OAuthSettings,
    /// Where this server's OAuth login is stored
    /// (`$WARDEN_CONFIG_DIR/oauth/NAME.json`), set when the files are
    /// merged; `None` for `sse`.
    pub oauth_store: Option<PathBuf>,
}

impl fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("url", &warden_core::redact::url(&self.url))
            .field("headers", &self.headers)
            .field("oauth", &self.oauth)
            .finish()
    }
}

/// Whether warden speaks OAuth 2.1 to a streamable-HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OAuthMode {
    /// No `oauth` key: a stored login is used; a 401 with a Bearer
    /// challenge says to run `warden mcp login NAME`.
    #[default]
    Discover,
    /// `"oauth": true` or an object: a login is needed before connecting.
    Required,
    /// `"oauth": false`: never (a 401 is an ordinary connection error).
    Off,
}

/// `mcpServers.NAME.oauth` (README, "Remote servers behind OAuth").
#[derive(Debug, Clone, Default)]
pub struct OAuthSettings {
    pub mode: OAuthMode,
    /// A client registered with the authorization server beforehand;
    /// without one, warden registers itself dynamically (RFC 7591).
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    /// Scopes to ask for instead of the server's challenge or metadata.
    pub scopes: Vec<String>,
    /// Fixed port of the loopback redirect URI (default: a random one).
    pub redirect_port: Option<u16>,
    /// An https URL of a client ID metadata document the user hosts: the
    /// client ID when the authorization server supports such documents
    /// (used before dynamic registration, after a pre-registered client).
    pub client_metadata_url: Option<String>,
    /// Let discovered metadata URLs resolve to private (RFC 1918)
    /// addresses. Loopback is allowed only for a loopback server URL.
    pub allow_private_addresses: bool,
}

#[derive(Debug, Clone)]
pub enum TransportConfig {
    Stdio(StdioConfig),
    /// Streamable HTTP.
    Http(RemoteConfig),
    /// Legacy HTTP+SSE.
    Sse(RemoteConfig),
}

impl TransportConfig {
    pub fn kind(&self) -> TransportKind {
        match self {
            TransportConfig::Stdio(_) => TransportKind::Stdio,
            TransportConfig::Http(_) => TransportKind::Http,
            TransportConfig::Sse(_) => TransportKind::Sse,
        }
    }
}

/// Network access for a sandboxed server (CONTRACT §7).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NetworkSpec {
    /// No network of any kind: TCP, UDP, raw, abstract unix sockets.
    #[default]
    None,
    /// Only the listed TCP ports.
    Ports {
        connect_tcp: Vec<u16>,
        bind_tcp: Vec<u16>,
    },
    /// No restriction; only for `trusted` servers.
    Host,
}

/// `sandbox.limits` is the sandbox's own [`Limits`] (with which keys the
/// configuration wrote in [`ExplicitLimits`]): one definition, so what is
/// validated is what is enforced. What each means and how exactly it is
/// enforced on a host: README, "The sandbox"; `warden sandbox check` says
/// per host.
pub use warden_sandbox::{ExplicitLimits, Limits};

/// The sandbox a stdio server asks for, after expansion and the trust
/// boundary have been applied. Turned into an enforceable profile by
/// `warden-sandbox` (through [`crate::launch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSpec {
    /// `false` only for a trusted server with `"sandbox": false`.
    pub enabled: bool,
    /// Extra read-only paths (absolute, lexically normalised).
    pub read: Vec<PathBuf>,
    /// Extra read-write paths (absolute, lexically normalised).
    pub write: Vec<PathBuf>,
    pub network: NetworkSpec,
    /// Host variables passed through by name.
    pub env: Vec<String>,
    pub limits: Limits,
    /// Start even when the kernel lacks a protection; the gap is logged and audited.
    pub best_effort: bool,
}

impl Default for SandboxSpec {
    fn default() -> Self {
        SandboxSpec {
            enabled: true,
            read: Vec::new(),
            write: Vec::new(),
            network: NetworkSpec::None,
            env: Vec::new(),
            limits: Limits::default(),
            best_effort: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub transport: TransportConfig,
    /// Per-request timeout (0.05–600 s).
    pub timeout: Duration,
    /// The protocol revision asked for (`protocol`, default 2025-11-25).
    pub protocol: ProtocolChoice,
    /// Limits on the server's `sampling/createMessage` (`sampling`).
    pub sampling: SamplingLimits,
    /// Limits on the server's `elicitation/create` (`elicitation`).
    pub elicitation: ElicitationLimits,
    pub disabled: bool,
    pub trust: Trust,
    pub sandbox: SandboxSpec,
    pub scope: Scope,
    /// The file that defined this server.
    pub source: PathBuf,
    /// SHA-256 of the server's exact configuration: what pins are recorded
    /// against. Secret values enter only as written (before `${VAR}`
    /// expansion), never expanded.
    pub digest: String,
    /// What runs from the workspace or the repository (the executable;
    /// for an interpreter, the script and other files its arguments name),
    /// with the SHA-256 of each file's content when the configuration
    /// loaded.
    pub content: BTreeMap<PathBuf, String>,
    /// What approvals are recorded against: `digest` and `content`, so a
    /// changed script needs approval again.
    pub approval_digest: String,
}

/// Which protocol revision warden asks a server for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProtocolChoice {
    /// `initialize` with 2025-11-25 (default): the server may send its own
    /// requests (elicitation, sampling, roots) and takes
    /// `resources/subscribe`.
    #[default]
    Session,
    /// `server/discover` for 2026-07-28 first (rmcp then refuses the
    /// server's own requests), falling back to 2025-11-25.
    Stateless,
}

/// A server's sampling limits (`"sampling": {"max_tokens", "max_requests"}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplingLimits {
    /// `maxTokens` above this is refused (default 4096).
    pub max_tokens: u32,
    /// At most this many sampling requests per session (default 20).
    pub max_requests: u32,
}

/// A server's elicitation limit (`"elicitation": {"max_requests"}`): how
/// many questions it may put to the person (or the client) in a session,
/// so a server cannot ask again and again until someone says yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElicitationLimits {
    /// At most this many elicitations passed on per session (default 20).
    pub max_requests: u32,
}

impl Default for ElicitationLimits {
    fn default() -> Self {
        ElicitationLimits { max_requests: 20 }
    }
}

impl Default for SamplingLimits {
    fn default() -> Self {
        SamplingLimits {
            max_tokens: 4096,
            max_requests: 20,
        }
    }
}

/// The audit log of a configuration without `audit.path`, in the config dir.
pub const DEFAULT_AUDIT_FILE: &str = "audit.jsonl";

#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// The log. Without `audit.path` in any file, the merged configuration
    /// names `$WARDEN_CONFIG_DIR/audit.jsonl` ([`DEFAULT_AUDIT_FILE`]):
    /// every session is audited (CONTRACT §6), `--audit` overrides it.
    pub path: Option<PathBuf>,
    /// JSON pointers into tool arguments replaced by `"[REDACTED]"`.
    pub redact: Vec<String>,
    pub fsync: FsyncMode,
    /// `audit.fsync` was given (else the default log is synced in batches).
    pub fsync_explicit: bool,
    /// `fail_closed` (default) or `continue` (CONTRACT §6).
    pub on_failure: OnFailure,
    /// Longer argument strings are recorded as `{"prefix", "bytes", "sha256"}`.
    pub max_value_bytes: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            path: None,
            redact: Vec::new(),
            fsync: FsyncMode::default(),
            fsync_explicit: false,
            on_failure: OnFailure::default(),
            max_value_bytes: warden_audit::DEFAULT_MAX_VALUE_BYTES,
        }
    }
}

/// The merged, validated configuration a session runs with.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub workspace: PathBuf,
    /// Files read, in order of precedence (user, project) or the one `--config`.
    pub sources: Vec<PathBuf>,
    pub servers: BTreeMap<String, ServerConfig>,
    pub rules: Vec<RuleSource>,
    /// `None`: no `policy` key anywhere, the shipped default applies.
    /// `Some(vec![])`: `"policy": []`, no Rego stage.
    pub policies: Option<Vec<PolicySource>>,
    /// `policy_data`: the only JSON documents loaded as Rego data.
    pub policy_data: Vec<warden_policy::DataSource>,
    pub audit: AuditConfig,
    /// SHA-256 over the canonical merged configuration (for `session_start`).
    pub digest: String,
    /// Whether the shipped `policies/default.rego` applies in addition to
    /// `policies`: true unless the user's own (or `--config`) file has a
    /// `policy` key. A project file's `policy` adds to the default and can
    /// never switch it off (`"policy": []` in a project file changes nothing).
    pub default_policy: bool,
    /// The directory holding `config.json`, `approvals.json` and `pins.json`.
    pub config_dir: PathBuf,
    /// Every `(NAME, value)` a file expanded from the host environment
    /// (`${NAME}`; in your own files not the variables naming a place,
    /// such as `HOME`): the values are secrets, scrubbed from every output
    /// ([`secrets_of`]) and shown as `${NAME}` ([`Config::hide`]).
    pub expanded_secrets: Vec<(String, Secret)>,
}

impl Config {
    /// `text` with every value a project file expanded from the host
    /// environment written back as `${NAME}` (for showing a project
    /// server before approval).
    pub fn hide(&self, text: &str) -> String {
        let mut out = text.to_string();
        let mut secrets: Vec<&(String, Secret)> = self.expanded_secrets.iter().collect();
        secrets.sort_by_key(|(_, v)| std::cmp::Reverse(v.expose().len()));
        for (name, value) in secrets {
            if value.expose().len() >= 2 {
                out = out.replace(value.expose(), &format!("${{{name}}}"));
            }
        }
        out
    }
}

impl ServerConfig {
    /// Whether this server must be approved before it starts: only servers a
    /// repository shipped (project scope) do.
    pub fn needs_approval(&self) -> bool {
        self.scope == Scope::Project
    }
}

/// Returns the exact `mcpServers.NAME` entry of `source` as written (secrets
/// as written, `${VAR}` unexpanded), after checking that it is still the
/// configuration `server` was loaded from (same digest). Used to show a
/// server in full before approving it.
pub fn raw_server_entry(server: &ServerConfig) -> Result<serde_json::Value, ConfigError> {
    let root = file::read_tree(&server.source)?;
    let changed = || ConfigError::Approvals {
        path: server.source.clone(),
        message: format!(
            "server `{}` changed in the file since it was loaded; run the command again",
            server.name
        ),
    };
    let raw = file::raw_server(&root, &server.name).ok_or_else(changed)?;
    let program = match &server.transport {
        TransportConfig::Stdio(s) => Some(s.program.as_path()),
        _ => None,
    };
    if file::server_digest(&server.name, &raw, program) != server.digest {
        return Err(changed());
    }
    Ok(raw)
}

/// The values the audit log must never contain, from a configuration: every
/// server's `env` values, the host values of its `env_from` variables, its
/// `headers` values (for `Scheme credential` headers also the credential
/// alone), and every value a file expanded from the host environment
/// (see [`Config::expanded_secrets`]). A project file's literal `env` and `headers` values are
/// not secrets: the repository that ships them has published them. Feed them to
/// [`warden_audit::AuditOptions::secrets`].
pub fn secrets_of(config: &Config) -> Vec<String> {
    let mut out: Vec<String> = config
        .expanded_secrets
        .iter()
        .map(|(_, s)| s.expose().to_string())
        .collect();
    for server in config.servers.values() {
        // A project file's own literal values are public (committed to the
        // repository), and scrubbing them let a repository blank whatever
        // text it liked in the user's records; the host values it expanded
        // are secrets (`expanded_secrets`, above).
        let literal_values_are_secrets = server.scope != Scope::Project;
        match &server.transport {
            TransportConfig::Stdio(stdio) => {
                if literal_values_are_secrets {
                    out.extend(stdio.env.values().map(|s| s.expose().to_string()));
                }
                // `sandbox.env` passes host variables through like `env_from`.
                for name in stdio.env_from.iter().chain(&server.sandbox.env) {
                    if let Some(value) = std::env::var_os(name) {
                        out.push(value.to_string_lossy().into_owned());
                    }
                }
            }
            TransportConfig::Http(remote) | TransportConfig::Sse(remote) => {
                if let Some(secret) = &remote.oauth.client_secret {
                    out.push(secret.expose().to_string());
                }
                // A stored login's tokens and client secret: never shown,
                // never in the audit log, even when a server echoes them.
                if let Some(path) = &remote.oauth_store {
                    out.extend(crate::mcp::oauth::stored_secrets(path));
                }
                for value in remote
                    .headers
                    .values()
                    .filter(|_| literal_values_are_secrets)
                {
                    let value = value.expose();
                    out.push(value.to_string());
                    if let Some((_, credential)) = value.trim().split_once(' ') {
                        out.push(credential.trim().to_string());
                    }
                }
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzz/config_load (input `{"mcpServers": {"h": {"type":
    /// "http", "url": "https://user:${FUZZ_TOKEN}@example.com/mcp", …}}}`):
    /// `Debug` of a loaded configuration showed the credential expanded
    /// into the URL. Debug output reaches logs and panics.
    #[test]
    fn debug_of_a_loaded_http_server_masks_url_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let file = root.join("warden.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {"h": {"type": "http",
                "url": "https://user:${FUZZ_TOKEN}@example.com/mcp?key=${FUZZ_TOKEN}",
                "headers": {"Authorization": "Bearer ${FUZZ_TOKEN}"}}}}"#,
        )
        .unwrap();
        let env = |name: &str| (name == "FUZZ_TOKEN").then(|| "fuzz-canary-value-7f3a".to_string());
        let config = load_with_env(
            &LoadOptions {
                config_file: Some(file),
                workspace: root.clone(),
                config_dir: root.join("cfg"),
            },
            &env,
        )
        .expect("loads");
        let shown = format!("{config:?}");
        assert!(!shown.contains("fuzz-canary-value-7f3a"), "{shown}");
        assert!(shown.contains("example.com/mcp"), "{shown}");
    }
}
