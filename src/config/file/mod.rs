//! One configuration file → validated, resolved pieces (CONTRACT §3).
//!
//! The file is walked by hand over a position-keeping tree instead of serde
//! derive so every error can name the exact key path and line, so duplicate
//! keys are caught, and so the trust boundary for project files is checked
//! at the key that crosses it.

mod oauth;
mod sandbox;
mod sections;
mod server;
mod server_mediation;
mod shape;
mod trust;

use shape::{get, short};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use warden_core::path::{absolutize, normalize};
use warden_policy::{DataSource, PolicySource, RuleEffect, RuleSource};

use super::error::{ConfigError, ErrorKind};
use super::expand::{self, EnvLookup, ExpandError};
use super::json::{self, Kind, Member, Node, Pos, push_index, push_key};
use super::{
    AuditConfig, FsyncMode, Limits, NetworkSpec, OnFailure, RemoteConfig, SandboxSpec, Scope,
    Secret, ServerConfig, StdioConfig, TransportConfig, Trust,
};

const TOP_KEYS: &[&str] = &[
    "$schema",
    "mcpServers",
    "permissions",
    "policy",
    "policy_data",
    "audit",
];
const SERVER_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "env_from",
    "cwd",
    "timeout",
    "disabled",
    "trust",
    "sandbox",
    "url",
    "headers",
    "protocol",
    "sampling",
    "elicitation",
    "oauth",
];
const STDIO_ONLY: &[&str] = &["command", "args", "env", "env_from", "cwd", "sandbox"];
const REMOTE_ONLY: &[&str] = &["url", "headers", "oauth"];
const SANDBOX_KEYS: &[&str] = &["read", "write", "network", "env", "limits", "best_effort"];
const LIMIT_KEYS: &[&str] = &[
    "memory_mb",
    "processes",
    "open_files",
    "cpu_seconds",
    "file_size_mb",
    "private_mb",
    SAMPLING_TOKENS,
];
/// `sandbox.limits.sampling_tokens`: CONTRACT §8's name for the server's
/// sampling `maxTokens` cap (`sampling.max_tokens`).
const SAMPLING_TOKENS: &str = "sampling_tokens";
const PERMISSION_KEYS: &[&str] = &["allow", "ask", "deny"];
const AUDIT_KEYS: &[&str] = &["path", "redact", "fsync", "on_failure", "max_value_bytes"];
/// Upper bound of `audit.max_value_bytes` (16 MiB, rmcp's own line limit).
const MAX_VALUE_BYTES: u64 = 16 << 20;

/// Largest value accepted for any sandbox limit.
pub const MAX_LIMIT: u64 = 1 << 32;

pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
pub const MIN_TIMEOUT_SECS: f64 = 0.05;
pub const MAX_TIMEOUT_SECS: f64 = 600.0;

/// What one file contributed, before merging.
#[derive(Debug)]
pub struct FileConfig {
    pub servers: Vec<ServerConfig>,
    pub rules: Vec<RuleSource>,
    /// `None` when the file has no `policy` key.
    pub policy: Option<Vec<PolicySource>>,
    /// `policy_data`: JSON documents loaded as Rego data.
    pub policy_data: Vec<DataSource>,
    pub audit: Option<AuditConfig>,
    /// `(NAME, value)` this file expanded from the host environment (in
    /// your own files, not the variables naming a place): the values are
    /// secrets, scrubbed from every output.
    pub secrets: Vec<(String, String)>,
}

pub struct Ctx<'a> {
    pub file: &'a Path,
    /// The folder holding the file: relative commands and policies start here.
    pub dir: PathBuf,
    pub scope: Scope,
    /// Absolute, canonical workspace root.
    pub workspace: &'a Path,
    pub env: EnvLookup<'a>,
    /// Every `(NAME, value)` expanded from the host environment so far
    /// (in your own files, not the variables naming a place): the values
    /// are secrets (errors show `${NAME}`).
    pub expanded: std::cell::RefCell<Vec<(String, String)>>,
}

type Result<T> = std::result::Result<T, ConfigError>;

/// Reads, parses and validates one file.
pub fn load_file(
    path: &Path,
    scope: Scope,
    workspace: &Path,
    env: EnvLookup<'_>,
) -> Result<FileConfig> {
    let root = read_tree(path)?;
    let ctx = Ctx {
        file: path,
        dir: path
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf),
        scope,
        workspace,
        env,
        expanded: Default::default(),
    };
    ctx.file_config(&root)
}

/// Reads and parses a file into the position-keeping tree.
pub fn read_tree(path: &Path) -> Result<Node> {
    use std::io::Read;
    let read_err = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    // Read at most one byte past the limit, so a huge (or endless, e.g. a
    // FIFO) file shipped by a repository cannot exhaust memory.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(json::MAX_LEN as u64 + 1).read_to_end(&mut bytes))
        .map_err(read_err)?;
    if bytes.len() > json::MAX_LEN {
        return Err(read_err(std::io::Error::other(format!(
            "larger than {} MiB; a configuration file is a few KiB",
            json::MAX_LEN >> 20
        ))));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        read_err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        ))
    })?;
    json::parse(&text).map_err(|e| match e {
        json::JsonError::Syntax { pos, message } => ConfigError::at(
            ErrorKind::Syntax,
            path,
            "",
            Some(pos),
            format!("not valid JSON: {message}"),
            None,
        ),
        json::JsonError::Duplicate {
            path: key,
            pos,
            first,
        } => ConfigError::at(
            ErrorKind::DuplicateKey,
            path,
            key,
            Some(pos),
            format!(
                "duplicate key (first defined at line {}, column {})",
                first.line, first.column
            ),
            Some(
                "JSON parsers silently keep only one of two equal keys; remove or rename one"
                    .into(),
            ),
        ),
    })
}

/// The raw `mcpServers.NAME` entry of a file, exactly as written.
pub fn raw_server(root: &Node, name: &str) -> Option<Value> {
    let Kind::Object(top) = &root.kind else {
        return None;
    };
    let servers = get(top, "mcpServers")?;
    let Kind::Object(entries) = &servers.value.kind else {
        return None;
    };
    get(entries, name).map(|m| m.value.to_value())
}

/// What pins are recorded against: the entry as written (before `${VAR}`
/// expansion, so expanded secrets never enter it) and the executable it
/// resolved to, so the same text finding a different binary is a
/// different server.
pub fn server_digest(name: &str, raw: &Value, program: Option<&Path>) -> String {
    warden_core::digest::sha256_json(&json!({
        "name": name,
        "config": raw,
        "program": program.map(|p| p.to_string_lossy().into_owned()),
    }))
}

/// What approvals are recorded against: [`server_digest`] and the content
/// of what runs from the workspace or repository (the executable, an
/// interpreter's script), so changing the script asks again. Equal to
/// [`server_digest`] when nothing runs from there.
pub fn approval_digest(digest: &str, content: &BTreeMap<PathBuf, String>) -> String {
    if content.is_empty() {
        return digest.to_string();
    }
    warden_core::digest::sha256_json(&json!({
        "config": digest,
        "content": content
            .iter()
            .map(|(p, h)| (p.to_string_lossy().into_owned(), Value::from(h.as_str())))
            .collect::<serde_json::Map<String, Value>>(),
    }))
}

impl Ctx<'_> {
    pub fn file_config(&self, root: &Node) -> Result<FileConfig> {
        let top = self.object(root, "", "a JSON object at the top level")?;
        self.check_keys(top, "", TOP_KEYS)?;
        if let Some(m) = get(top, "$schema") {
            self.string(&m.value, "$schema")?;
        }
        let mut servers = Vec::new();
        if let Some(m) = get(top, "mcpServers") {
            let entries = self.object(&m.value, "mcpServers", "an object of servers by name")?;
            for entry in entries {
                servers.push(self.server(entry)?);
            }
        }
        let rules = match get(top, "permissions") {
            Some(m) => self.permissions(&m.value)?,
            None => Vec::new(),
        };
        let policy = match get(top, "policy") {
            Some(m) => Some(self.policy(&m.value)?),
            None => None,
        };
        let policy_data = match get(top, "policy_data") {
            Some(m) => self.policy_data(&m.value)?,
            None => Vec::new(),
        };
        let audit = match get(top, "audit") {
            Some(m) if self.scope == Scope::Project => {
                return Err(self.boundary(
                    "audit",
                    m.key_pos,
                    "configure the audit log (a repository must not choose where, or whether, your calls are recorded)",
                ));
            }
            Some(m) => Some(self.audit(&m.value)?),
            None => None,
        };
        let secrets = self.expanded.borrow().clone();
        Ok(FileConfig {
            servers,
            rules,
            policy,
            policy_data,
            audit,
            secrets,
        })
    }
}
