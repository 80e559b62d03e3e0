//! Configuration: the user file, the nearest project `.mcp.json`, or one
//! `--config FILE` (CONTRACT §3), validated strictly and resolved into the
//! types below. Nothing downstream ever sees unvalidated configuration.
//!
//! Secrets (values of `env`, `env_from` and `headers`) are held as
//! [`Secret`], whose `Debug` never prints the value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where a piece of configuration came from; decides what it may grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `$WARDEN_CONFIG_DIR/config.json`: the user's own file.
    User,
    /// A `.mcp.json` found in the workspace: shipped by a repository, so it
    /// may only restrict (add servers that need approval, `ask`, `deny`).
    Project,
    /// `--config FILE`: the operator's file, fully trusted, used alone.
    Explicit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Annotations are believed; the sandbox may be relaxed.
    Trusted,
    /// The default: annotations ignored, strict sandbox.
    #[default]
    Untrusted,
    /// Never started; every call denied.
    Blocked,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
            Trust::Blocked => "blocked",
        }
    }
}

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

#[derive(Debug, Clone)]
pub struct RemoteConfig {
    pub url: String,
    pub headers: BTreeMap<String, Secret>,
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
    pub fn kind(&self) -> &'static str {
        match self {
            TransportConfig::Stdio(_) => "stdio",
            TransportConfig::Http(_) => "http",
            TransportConfig::Sse(_) => "sse",
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub memory_mb: u64,
    pub processes: u64,
    pub open_files: u64,
    pub cpu_seconds: u64,
    pub file_size_mb: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mb: 1024,
            processes: 64,
            open_files: 256,
            cpu_seconds: 600,
            file_size_mb: 64,
        }
    }
}

/// The sandbox a stdio server asks for, after expansion and the trust
/// boundary have been applied. Turned into an enforceable profile by
/// [`crate::sandbox`].
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
    pub disabled: bool,
    pub trust: Trust,
    pub sandbox: SandboxSpec,
    pub scope: Scope,
    /// The file that defined this server.
    pub source: PathBuf,
    /// SHA-256 of the server's exact configuration: what approvals and pins
    /// are recorded against. Secret values enter only as written (before
    /// `${VAR}` expansion), never expanded.
    pub digest: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleEffect {
    Allow,
    Ask,
    Deny,
}

/// One permission rule as written, with where it came from. Parsed and
/// checked by [`crate::policy::rules`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSource {
    pub effect: RuleEffect,
    /// The rule text, `${VAR}`/`${WORKSPACE}` already expanded.
    pub text: String,
    pub scope: Scope,
    pub file: PathBuf,
    /// Index in its list, for error messages (`permissions.allow[2]`).
    pub index: usize,
}

/// A Rego policy file or folder to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySource {
    pub path: PathBuf,
    pub scope: Scope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncMode {
    #[default]
    EveryRecord,
    Batch,
    Never,
}

#[derive(Debug, Clone, Default)]
pub struct AuditConfig {
    /// `None`: no audit file unless `--audit` gives one.
    pub path: Option<PathBuf>,
    /// JSON pointers into tool arguments replaced by `"[REDACTED]"`.
    pub redact: Vec<String>,
    pub fsync: FsyncMode,
}

/// The merged, validated configuration a session runs with.
#[derive(Debug, Clone)]
pub struct Config {
    pub workspace: PathBuf,
    /// Files read, in order of precedence (user, project) or the one `--config`.
    pub sources: Vec<PathBuf>,
    pub servers: BTreeMap<String, ServerConfig>,
    pub rules: Vec<RuleSource>,
    /// `None`: no `policy` key anywhere, the shipped default applies.
    /// `Some(vec![])`: `"policy": []`, no Rego stage.
    pub policies: Option<Vec<PolicySource>>,
    pub audit: AuditConfig,
    /// SHA-256 over the canonical merged configuration (for `session_start`).
    pub digest: String,
}
