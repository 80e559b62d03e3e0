//! One configuration file → validated, resolved pieces (CONTRACT §3).
//!
//! The file is walked by hand over a position-keeping tree instead of serde
//! derive so every error can name the exact key path and line, so duplicate
//! keys are caught, and so the trust boundary for project files is checked
//! at the key that crosses it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use warden_core::path::{absolutize, normalize};
use warden_policy::{PolicySource, RuleEffect, RuleSource};

use super::error::{ConfigError, ErrorKind};
use super::expand::{self, EnvLookup, ExpandError};
use super::json::{self, Kind, Member, Node, Pos, push_index, push_key};
use super::{
    AuditConfig, FsyncMode, Limits, NetworkSpec, OnFailure, RemoteConfig, SandboxSpec, Scope,
    Secret, ServerConfig, StdioConfig, TransportConfig, Trust,
};

const TOP_KEYS: &[&str] = &["$schema", "mcpServers", "permissions", "policy", "audit"];
const SERVER_KEYS: &[&str] = &[
    "type", "command", "args", "env", "env_from", "cwd", "timeout", "disabled", "trust", "sandbox",
    "url", "headers",
];
const STDIO_ONLY: &[&str] = &["command", "args", "env", "env_from", "cwd", "sandbox"];
const REMOTE_ONLY: &[&str] = &["url", "headers"];
const SANDBOX_KEYS: &[&str] = &["read", "write", "network", "env", "limits", "best_effort"];
const LIMIT_KEYS: &[&str] = &[
    "memory_mb",
    "processes",
    "open_files",
    "cpu_seconds",
    "file_size_mb",
];
const PERMISSION_KEYS: &[&str] = &["allow", "ask", "deny"];
/// Upper bound of `audit.max_value_bytes` (16 MiB, rmcp's own line limit).
const MAX_VALUE_BYTES: u64 = 16 << 20;
const AUDIT_KEYS: &[&str] = &["path", "redact", "fsync", "on_failure", "max_value_bytes"];

/// Largest value accepted for any sandbox limit.
pub const MAX_LIMIT: u64 = 1 << 32;

pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
pub const MIN_TIMEOUT_SECS: f64 = 0.05;
pub const MAX_TIMEOUT_SECS: f64 = 600.0;

/// Why project files are limited; appended to every trust-boundary error.
const PROJECT_WHY: &str = "a project `.mcp.json` is shipped by the repository, so it may only add \
servers (which need your approval), `ask`/`deny` rules and restrictive policies; put this in your \
own config file ($WARDEN_CONFIG_DIR/config.json) or pass --config";

/// What one file contributed, before merging.
#[derive(Debug)]
pub struct FileConfig {
    pub servers: Vec<ServerConfig>,
    pub rules: Vec<RuleSource>,
    /// `None` when the file has no `policy` key.
    pub policy: Option<Vec<PolicySource>>,
    pub audit: Option<AuditConfig>,
}

pub struct Ctx<'a> {
    pub file: &'a Path,
    /// The folder holding the file: relative commands and policies start here.
    pub dir: PathBuf,
    pub scope: Scope,
    /// Absolute, canonical workspace root.
    pub workspace: &'a Path,
    pub env: EnvLookup<'a>,
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

/// What approvals and pins are recorded against: the entry as written
/// (before `${VAR}` expansion, so expanded secrets never enter it) and the
/// executable it resolved to, so the same text finding a different binary
/// is a different server.
pub fn server_digest(name: &str, raw: &Value, program: Option<&Path>) -> String {
    warden_core::digest::sha256_json(&json!({
        "name": name,
        "config": raw,
        "program": program.map(|p| p.to_string_lossy().into_owned()),
    }))
}

fn get<'n>(members: &'n [Member], key: &str) -> Option<&'n Member> {
    members.iter().find(|m| m.key == key)
}

/// The closest allowed key, for "did you mean" hints on typos.
fn suggest<'k>(key: &str, allowed: &[&'k str]) -> Option<&'k str> {
    allowed
        .iter()
        .map(|a| (edit_distance(&key.to_lowercase(), &a.to_lowercase()), *a))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, a)| a)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn short(s: &str) -> String {
    // Echoed enum-like values are capped: a long string is likely not what
    // the user meant to type there anyway.
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.to_string()
    }
}

impl Ctx<'_> {
    fn err(
        &self,
        kind: ErrorKind,
        key: &str,
        pos: Pos,
        message: impl Into<String>,
        help: Option<String>,
    ) -> ConfigError {
        ConfigError::at(kind, self.file, key, Some(pos), message, help)
    }

    fn boundary(&self, key: &str, pos: Pos, what: &str) -> ConfigError {
        self.err(
            ErrorKind::TrustBoundary,
            key,
            pos,
            format!("a project-scope file may not {what}"),
            Some(PROJECT_WHY.to_string()),
        )
    }

    fn wrong_type(&self, node: &Node, key: &str, expected: &str) -> ConfigError {
        self.err(
            ErrorKind::WrongType,
            key,
            node.pos,
            format!("expected {expected}, found {}", node.type_name()),
            None,
        )
    }

    fn object<'n>(&self, node: &'n Node, key: &str, expected: &str) -> Result<&'n [Member]> {
        match &node.kind {
            Kind::Object(m) => Ok(m),
            _ => Err(self.wrong_type(node, key, expected)),
        }
    }

    fn check_keys(&self, members: &[Member], key: &str, allowed: &[&str]) -> Result<()> {
        for m in members {
            if !allowed.contains(&m.key.as_str()) {
                let help = match suggest(&m.key, allowed) {
                    Some(s) => format!("did you mean `{s}`?"),
                    None => format!("allowed keys here: {}", allowed.join(", ")),
                };
                return Err(self.err(
                    ErrorKind::UnknownKey,
                    &push_key(key, &m.key),
                    m.key_pos,
                    "unknown key",
                    Some(help),
                ));
            }
        }
        Ok(())
    }

    fn string<'n>(&self, node: &'n Node, key: &str) -> Result<&'n str> {
        match &node.kind {
            Kind::String(s) => Ok(s),
            _ => Err(self.wrong_type(node, key, "a string")),
        }
    }

    fn boolean(&self, node: &Node, key: &str) -> Result<bool> {
        match &node.kind {
            Kind::Bool(b) => Ok(*b),
            _ => Err(self.wrong_type(node, key, "true or false")),
        }
    }

    /// `[ "a", "b" ]` → each string with its key path and position.
    fn strings<'n>(&self, node: &'n Node, key: &str) -> Result<Vec<(&'n str, String, Pos)>> {
        let Kind::Array(items) = &node.kind else {
            return Err(self.wrong_type(node, key, "an array of strings"));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let k = push_index(key, i);
                self.string(item, &k).map(|s| (s, k, item.pos))
            })
            .collect()
    }

    /// `{ "K": "v" }` → each entry; values must be strings.
    fn string_map<'n>(
        &self,
        node: &'n Node,
        key: &str,
    ) -> Result<Vec<(&'n Member, &'n str, String)>> {
        let members = self.object(node, key, "an object of string values")?;
        members
            .iter()
            .map(|m| {
                let k = push_key(key, &m.key);
                self.string(&m.value, &k).map(|s| (m, s, k))
            })
            .collect()
    }

    /// Expands `${…}`; the result may not contain NUL, which no program
    /// argument, environment value or path can hold. (The value is not
    /// echoed: it may be an expanded secret.)
    fn expand(&self, text: &str, key: &str, pos: Pos) -> Result<String> {
        let out = self.expand_raw(text, key, pos)?;
        if out.contains('\0') {
            return Err(self.err(
                ErrorKind::InvalidValue,
                key,
                pos,
                "contains a NUL character (value not shown: it may be secret)",
                None,
            ));
        }
        Ok(out)
    }

    fn expand_raw(&self, text: &str, key: &str, pos: Pos) -> Result<String> {
        expand::expand(text, self.workspace, self.env).map_err(|e| match e {
            ExpandError::Unset(name) => self.err(
                ErrorKind::UnsetVariable,
                key,
                pos,
                format!("`${{{name}}}` is not set in the environment"),
                Some(format!(
                    "set {name}, or give a default with `${{{name}:-default}}`"
                )),
            ),
            ExpandError::Malformed(why) => self.err(
                ErrorKind::InvalidValue,
                key,
                pos,
                why,
                Some("write variables as `${NAME}` or `${NAME:-default}`".into()),
            ),
        })
    }

    fn var_names(&self, node: &Node, key: &str) -> Result<Vec<String>> {
        self.strings(node, key)?
            .into_iter()
            .map(|(s, k, pos)| {
                if expand::is_var_name(s) {
                    Ok(s.to_string())
                } else {
                    Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        pos,
                        format!("`{}` is not an environment variable name", short(s)),
                        Some("names are letters, digits and `_`, not starting with a digit".into()),
                    ))
                }
            })
            .collect()
    }

    /// Whether `path` (absolute, normalised) stays inside the workspace, also
    /// after resolving symlinks: a repository can ship `link -> /home/me`,
    /// and the sandbox would grant what the link points to.
    fn inside_workspace(&self, path: &Path) -> bool {
        self.inside(path, self.workspace)
    }

    /// Whether `path` is under `root`, lexically and after resolving symlinks.
    fn inside(&self, path: &Path, root: &Path) -> bool {
        let Ok(root) = std::fs::canonicalize(root) else {
            return false;
        };
        if !path.starts_with(&root) {
            return false;
        }
        let mut probe = path;
        loop {
            if let Ok(real) = std::fs::canonicalize(probe) {
                return real.starts_with(&root);
            }
            match probe.parent() {
                Some(parent) => probe = parent,
                None => return false,
            }
        }
    }

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
        Ok(FileConfig {
            servers,
            rules,
            policy,
            audit,
        })
    }

    fn server(&self, entry: &Member) -> Result<ServerConfig> {
        let name = entry.key.as_str();
        let key = push_key("mcpServers", name);
        if let Some(why) = invalid_server_name(name) {
            return Err(self.err(
                ErrorKind::InvalidServerName,
                &key,
                entry.key_pos,
                format!("invalid server name: {why}"),
                Some(
                    "use letters, digits, `_` and `-` only, without `__` (tools are named mcp__SERVER__TOOL)"
                        .into(),
                ),
            ));
        }
        let node = &entry.value;
        let fields = self.object(node, &key, "an object describing the server")?;
        self.check_keys(fields, &key, SERVER_KEYS)?;
        let field = |k: &str| get(fields, k);
        let sub = |k: &str| push_key(&key, k);

        let kind = match field("type") {
            None => "stdio",
            Some(m) => match self.string(&m.value, &sub("type"))? {
                t @ ("stdio" | "http" | "sse") => t,
                other => {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &sub("type"),
                        m.value.pos,
                        format!("unknown server type `{}`", short(other)),
                        Some("use \"stdio\" (the default), \"http\" (streamable HTTP) or \"sse\" (legacy HTTP+SSE)".into()),
                    ));
                }
            },
        };
        let disabled = match field("disabled") {
            Some(m) => self.boolean(&m.value, &sub("disabled"))?,
            None => false,
        };
        let trust = match field("trust") {
            None => Trust::Untrusted,
            Some(m) => {
                let k = sub("trust");
                let t = match self.string(&m.value, &k)? {
                    "trusted" => Trust::Trusted,
                    "untrusted" => Trust::Untrusted,
                    "blocked" => Trust::Blocked,
                    other => {
                        return Err(self.err(
                            ErrorKind::InvalidValue,
                            &k,
                            m.value.pos,
                            format!("unknown trust level `{}`", short(other)),
                            Some(
                                "use \"trusted\", \"untrusted\" (the default) or \"blocked\""
                                    .into(),
                            ),
                        ));
                    }
                };
                if t == Trust::Trusted && self.scope == Scope::Project {
                    return Err(self.boundary(&k, m.value.pos, "mark a server `trusted`"));
                }
                t
            }
        };
        let timeout = match field("timeout") {
            None => Duration::from_secs_f64(DEFAULT_TIMEOUT_SECS),
            Some(m) => {
                let k = sub("timeout");
                let secs = match &m.value.kind {
                    Kind::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                    _ => return Err(self.wrong_type(&m.value, &k, "a number of seconds")),
                };
                if !(MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(&secs) {
                    return Err(self.err(
                        ErrorKind::TimeoutOutOfRange,
                        &k,
                        m.value.pos,
                        format!("timeout {secs} s is outside 0.05–600 seconds"),
                        Some("give the per-request timeout in seconds, e.g. \"timeout\": 30 (default 60)".into()),
                    ));
                }
                Duration::from_secs_f64(secs)
            }
        };

        let (transport, sandbox, program) = if kind == "stdio" {
            for k in REMOTE_ONLY {
                if let Some(m) = field(k) {
                    return Err(self.err(
                        ErrorKind::UnknownKey,
                        &sub(k),
                        m.key_pos,
                        format!("`{k}` is only for remote servers, and this one is stdio"),
                        Some("add \"type\": \"http\" (or \"sse\") for a remote server, or remove the key".into()),
                    ));
                }
            }
            let stdio = self.stdio(&key, node.pos, fields, disabled)?;
            let sandbox = match field("sandbox") {
                Some(m) => self.sandbox(&sub("sandbox"), &m.value, trust)?,
                None => SandboxSpec::default(),
            };
            let program = stdio.program.clone();
            (TransportConfig::Stdio(stdio), sandbox, Some(program))
        } else {
            for k in STDIO_ONLY {
                if let Some(m) = field(k) {
                    return Err(self.err(
                        ErrorKind::UnknownKey,
                        &sub(k),
                        m.key_pos,
                        format!("`{k}` is only for stdio servers, and this one is `{kind}`"),
                        Some("remove the key, or drop \"type\" for a local stdio server".into()),
                    ));
                }
            }
            let remote = self.remote(&key, node.pos, fields)?;
            let t = if kind == "http" {
                TransportConfig::Http(remote)
            } else {
                TransportConfig::Sse(remote)
            };
            (t, SandboxSpec::default(), None)
        };

        let digest = server_digest(name, &node.to_value(), program.as_deref());
        Ok(ServerConfig {
            name: name.to_string(),
            transport,
            timeout,
            disabled,
            trust,
            sandbox,
            scope: self.scope,
            source: self.file.to_path_buf(),
            digest,
        })
    }

    fn stdio(&self, key: &str, pos: Pos, fields: &[Member], disabled: bool) -> Result<StdioConfig> {
        let sub = |k: &str| push_key(key, k);
        let Some(cmd) = get(fields, "command") else {
            return Err(self.err(
                ErrorKind::MissingKey,
                key,
                pos,
                "missing `command` (a stdio server needs the program to start)",
                Some("add \"command\": \"…\", or \"type\": \"http\" and a \"url\" for a remote server".into()),
            ));
        };
        let ck = sub("command");
        let command = self.expand(self.string(&cmd.value, &ck)?, &ck, cmd.value.pos)?;
        if command.trim().is_empty() {
            return Err(self.err(
                ErrorKind::InvalidValue,
                &ck,
                cmd.value.pos,
                "empty command",
                None,
            ));
        }
        let program = match self.resolve_program(&command) {
            Ok(p) => p,
            // A disabled server is not started, so a program that is not
            // installed (yet) must not stop the others.
            Err(_) if disabled => PathBuf::from(&command),
            Err(why) => {
                return Err(self.err(
                    ErrorKind::MissingExecutable,
                    &ck,
                    cmd.value.pos,
                    why,
                    Some(if command.contains('/') {
                        format!(
                            "a command containing `/` is relative to the config file's folder ({})",
                            self.dir.display()
                        )
                    } else {
                        "install it, add its folder to PATH, or give an absolute path".into()
                    }),
                ));
            }
        };
        let mut args = Vec::new();
        if let Some(m) = get(fields, "args") {
            for (s, k, p) in self.strings(&m.value, &sub("args"))? {
                args.push(self.expand(s, &k, p)?);
            }
        }
        let mut env = BTreeMap::new();
        if let Some(m) = get(fields, "env") {
            for (member, value, k) in self.string_map(&m.value, &sub("env"))? {
                if member.key.is_empty() || member.key.contains(['=', '\0']) {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        member.key_pos,
                        "invalid environment variable name (empty, or contains `=` or NUL)",
                        None,
                    ));
                }
                let value = self.expand(value, &k, member.value.pos)?;
                env.insert(member.key.clone(), Secret::new(value));
            }
        }
        let env_from = match get(fields, "env_from") {
            Some(m) => self.var_names(&m.value, &sub("env_from"))?,
            None => Vec::new(),
        };
        let cwd = match get(fields, "cwd") {
            None => None,
            Some(m) => {
                let k = sub("cwd");
                let raw = self.expand(self.string(&m.value, &k)?, &k, m.value.pos)?;
                let dir = absolutize(self.workspace, Path::new(&raw));
                if !dir.is_dir() {
                    return Err(self.err(
                        ErrorKind::MissingCwd,
                        &k,
                        m.value.pos,
                        format!("working directory {} does not exist", dir.display()),
                        Some("a relative `cwd` is relative to the workspace root".into()),
                    ));
                }
                Some(dir)
            }
        };
        Ok(StdioConfig {
            command,
            program,
            args,
            env,
            env_from,
            cwd,
        })
    }

    /// Absolute path of the executable, symlinks not followed (the sandbox
    /// resolves them when granting the install prefix).
    fn resolve_program(&self, command: &str) -> std::result::Result<PathBuf, String> {
        if command.contains('/') {
            let path = absolutize(&self.dir, Path::new(command));
            return match std::fs::metadata(&path) {
                Ok(md) if md.is_file() && is_executable(&md) => Ok(path),
                Ok(md) if md.is_file() => Err(format!("{} is not executable", path.display())),
                Ok(_) => Err(format!("{} is not a file", path.display())),
                Err(_) => Err(format!("executable {} does not exist", path.display())),
            };
        }
        let Some(path_var) = (self.env)("PATH") else {
            return Err(format!("cannot find `{command}`: PATH is not set"));
        };
        // Relative PATH entries (`.`, `node_modules/.bin`) would resolve
        // inside whatever directory warden runs in, i.e. a repository's
        // files: only absolute ones are searched.
        let dirs: Vec<&str> = path_var.split(':').filter(|d| d.starts_with('/')).collect();
        which::which_in(command, Some(dirs.join(":")), "/")
            .map(|p| normalize(&p))
            .map_err(|_| format!("`{command}` was not found on PATH"))
    }

    fn remote(&self, key: &str, pos: Pos, fields: &[Member]) -> Result<RemoteConfig> {
        let sub = |k: &str| push_key(key, k);
        let Some(u) = get(fields, "url") else {
            return Err(self.err(
                ErrorKind::MissingKey,
                key,
                pos,
                "missing `url` (an http or sse server needs the address to connect to)",
                Some("add \"url\": \"https://…\"".into()),
            ));
        };
        let uk = sub("url");
        let url = self.expand(self.string(&u.value, &uk)?, &uk, u.value.pos)?;
        // The URL is not echoed: after expansion it may carry a token.
        match url::Url::parse(&url) {
            Ok(parsed)
                if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {}
            Ok(parsed) => {
                return Err(self.err(
                    ErrorKind::InvalidUrl,
                    &uk,
                    u.value.pos,
                    if matches!(parsed.scheme(), "http" | "https") {
                        "invalid URL: no host".to_string()
                    } else {
                        format!(
                            "invalid URL: scheme `{}` is not supported; use http or https",
                            short(parsed.scheme())
                        )
                    },
                    Some("write a full address such as \"https://example.com/mcp\"".into()),
                ));
            }
            Err(e) => {
                return Err(self.err(
                    ErrorKind::InvalidUrl,
                    &uk,
                    u.value.pos,
                    format!("invalid URL: {e}"),
                    Some("write a full address such as \"https://example.com/mcp\"".into()),
                ));
            }
        }
        let mut headers = BTreeMap::new();
        if let Some(m) = get(fields, "headers") {
            for (member, value, k) in self.string_map(&m.value, &sub("headers"))? {
                let valid_name = !member.key.is_empty()
                    && member
                        .key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !valid_name {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        member.key_pos,
                        "invalid HTTP header name",
                        None,
                    ));
                }
                let value = self.expand(value, &k, member.value.pos)?;
                if value.contains(['\r', '\n', '\0']) {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        member.value.pos,
                        "header value contains a line break or NUL (value not shown: it may be secret)",
                        None,
                    ));
                }
                headers.insert(member.key.clone(), Secret::new(value));
            }
        }
        Ok(RemoteConfig { url, headers })
    }

    fn sandbox(&self, key: &str, node: &Node, trust: Trust) -> Result<SandboxSpec> {
        let sub = |k: &str| push_key(key, k);
        let fields = match &node.kind {
            Kind::Bool(true) => return Ok(SandboxSpec::default()),
            Kind::Bool(false) => {
                if self.scope == Scope::Project {
                    return Err(self.boundary(key, node.pos, "turn the sandbox off"));
                }
                if trust != Trust::Trusted {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        key,
                        node.pos,
                        "only a `trusted` server may run without a sandbox",
                        Some("add \"trust\": \"trusted\" if this server may do anything your user can, or remove \"sandbox\": false".into()),
                    ));
                }
                return Ok(SandboxSpec {
                    enabled: false,
                    ..SandboxSpec::default()
                });
            }
            Kind::Object(m) => m,
            _ => return Err(self.wrong_type(node, key, "false or an object")),
        };
        self.check_keys(fields, key, SANDBOX_KEYS)?;
        let mut spec = SandboxSpec::default();
        for (which, out) in [("read", &mut spec.read), ("write", &mut spec.write)] {
            let Some(m) = get(fields, which) else {
                continue;
            };
            for (s, k, pos) in self.strings(&m.value, &sub(which))? {
                let raw = self.expand(s, &k, pos)?;
                if raw.starts_with('~') {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        pos,
                        "`~` is not expanded",
                        Some("write `${HOME}/…` instead".into()),
                    ));
                }
                let path = absolutize(self.workspace, Path::new(&raw));
                if self.scope == Scope::Project && !self.inside_workspace(&path) {
                    return Err(self.boundary(
                        &k,
                        pos,
                        &format!(
                            "grant `{which}` access outside the workspace ({} resolves outside {})",
                            path.display(),
                            self.workspace.display()
                        ),
                    ));
                }
                if !path.exists() {
                    // Not an error: a missing path grants nothing (fails
                    // closed), and may be created later. But a typo is
                    // otherwise invisible, so say it.
                    tracing::warn!(file = %self.file.display(), key = %k, path = %path.display(), "sandbox path does not exist; it grants nothing");
                }
                out.push(path);
            }
        }
        if let Some(m) = get(fields, "network") {
            spec.network = self.network(&sub("network"), &m.value, trust)?;
        }
        if let Some(m) = get(fields, "env") {
            spec.env = self.var_names(&m.value, &sub("env"))?;
        }
        if let Some(m) = get(fields, "limits") {
            spec.limits = self.limits(&sub("limits"), &m.value)?;
        }
        if let Some(m) = get(fields, "best_effort") {
            spec.best_effort = self.boolean(&m.value, &sub("best_effort"))?;
            if spec.best_effort && self.scope == Scope::Project {
                return Err(self.boundary(
                    &sub("best_effort"),
                    m.value.pos,
                    "set `best_effort` (starting with a weaker sandbox than configured)",
                ));
            }
        }
        Ok(spec)
    }

    fn network(&self, key: &str, node: &Node, trust: Trust) -> Result<NetworkSpec> {
        let help = "use \"none\" (the default), \"host\" (trusted servers only) or {\"connect_tcp\": [443], \"bind_tcp\": []}";
        match &node.kind {
            Kind::String(s) if s == "none" => Ok(NetworkSpec::None),
            Kind::String(s) if s == "host" => {
                if self.scope == Scope::Project {
                    return Err(self.boundary(key, node.pos, "grant `network: \"host\"`"));
                }
                if trust != Trust::Trusted {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        key,
                        node.pos,
                        "only a `trusted` server may have unrestricted network",
                        Some(help.into()),
                    ));
                }
                Ok(NetworkSpec::Host)
            }
            Kind::String(s) => Err(self.err(
                ErrorKind::InvalidValue,
                key,
                node.pos,
                format!("unknown network setting `{}`", short(s)),
                Some(help.into()),
            )),
            Kind::Object(fields) => {
                self.check_keys(fields, key, &["connect_tcp", "bind_tcp"])?;
                let mut lists = [Vec::new(), Vec::new()];
                for (i, which) in ["connect_tcp", "bind_tcp"].iter().enumerate() {
                    let Some(m) = get(fields, which) else {
                        continue;
                    };
                    let k = push_key(key, which);
                    let Kind::Array(items) = &m.value.kind else {
                        return Err(self.wrong_type(&m.value, &k, "an array of port numbers"));
                    };
                    for (j, item) in items.iter().enumerate() {
                        let ik = push_index(&k, j);
                        let port = match &item.kind {
                            Kind::Number(n) => n.as_u64().and_then(|p| u16::try_from(p).ok()),
                            _ => return Err(self.wrong_type(item, &ik, "a port number")),
                        };
                        match port {
                            Some(p) if p > 0 => lists[i].push(p),
                            _ => {
                                return Err(self.err(
                                    ErrorKind::InvalidValue,
                                    &ik,
                                    item.pos,
                                    "port out of range",
                                    Some("TCP ports are whole numbers from 1 to 65535".into()),
                                ));
                            }
                        }
                    }
                    if !lists[i].is_empty() && self.scope == Scope::Project {
                        return Err(self.boundary(&k, m.value.pos, "grant network ports"));
                    }
                }
                let [connect_tcp, bind_tcp] = lists;
                if connect_tcp.is_empty() && bind_tcp.is_empty() {
                    Ok(NetworkSpec::None)
                } else {
                    Ok(NetworkSpec::Ports {
                        connect_tcp,
                        bind_tcp,
                    })
                }
            }
            _ => Err(self.wrong_type(node, key, "\"none\", \"host\" or an object of ports")),
        }
    }

    fn limits(&self, key: &str, node: &Node) -> Result<Limits> {
        let fields = self.object(node, key, "an object of limits")?;
        self.check_keys(fields, key, LIMIT_KEYS)?;
        let defaults = Limits::default();
        let mut limits = defaults;
        for m in fields {
            let k = push_key(key, &m.key);
            let value = match &m.value.kind {
                Kind::Number(n) => n.as_u64(),
                _ => return Err(self.wrong_type(&m.value, &k, "a whole number")),
            };
            // The upper cap keeps `memory_mb << 20` and friends from
            // overflowing where the sandbox turns them into bytes.
            let Some(value) = value.filter(|v| (1..=MAX_LIMIT).contains(v)) else {
                return Err(self.err(
                    ErrorKind::InvalidValue,
                    &k,
                    m.value.pos,
                    format!("a limit must be a whole number from 1 to {MAX_LIMIT}"),
                    Some("remove the key to get the default".into()),
                ));
            };
            let (slot, default) = match m.key.as_str() {
                "memory_mb" => (&mut limits.memory_mb, defaults.memory_mb),
                "processes" => (&mut limits.processes, defaults.processes),
                "open_files" => (&mut limits.open_files, defaults.open_files),
                "cpu_seconds" => (&mut limits.cpu_seconds, defaults.cpu_seconds),
                _ => (&mut limits.file_size_mb, defaults.file_size_mb),
            };
            if value > default && self.scope == Scope::Project {
                return Err(self.boundary(
                    &k,
                    m.value.pos,
                    &format!("raise a limit above its default ({default})"),
                ));
            }
            *slot = value;
        }
        Ok(limits)
    }

    fn permissions(&self, node: &Node) -> Result<Vec<RuleSource>> {
        let fields = self.object(node, "permissions", "an object with allow/ask/deny lists")?;
        self.check_keys(fields, "permissions", PERMISSION_KEYS)?;
        let mut rules = Vec::new();
        for (name, effect) in [
            ("allow", RuleEffect::Allow),
            ("ask", RuleEffect::Ask),
            ("deny", RuleEffect::Deny),
        ] {
            let Some(m) = get(fields, name) else { continue };
            let key = push_key("permissions", name);
            let items = self.strings(&m.value, &key)?;
            if effect == RuleEffect::Allow && self.scope == Scope::Project && !items.is_empty() {
                return Err(self.boundary(&key, m.value.pos, "add `allow` rules"));
            }
            for (index, (text, k, pos)) in items.into_iter().enumerate() {
                let text = self.expand(text, &k, pos)?;
                if text.trim().is_empty() {
                    return Err(self.err(ErrorKind::InvalidValue, &k, pos, "empty rule", None));
                }
                rules.push(RuleSource {
                    effect,
                    text,
                    scope: self.scope,
                    file: self.file.to_path_buf(),
                    index,
                });
            }
        }
        Ok(rules)
    }

    fn policy(&self, node: &Node) -> Result<Vec<PolicySource>> {
        let mut out = Vec::new();
        for (s, k, pos) in self.strings(node, "policy")? {
            let raw = self.expand(s, &k, pos)?;
            let path = absolutize(&self.dir, Path::new(&raw));
            if !path.exists() {
                return Err(self.err(
                    ErrorKind::MissingPath,
                    &k,
                    pos,
                    format!("policy {} does not exist", path.display()),
                    Some("policy paths are relative to the file that names them".into()),
                ));
            }
            // A repository's policies live next to its `.mcp.json` (often the
            // repository root, above a workspace subfolder) or in the workspace.
            if self.scope == Scope::Project
                && !self.inside(&path, &self.dir)
                && !self.inside(&path, self.workspace)
            {
                return Err(self.boundary(
                    &k,
                    pos,
                    "load a policy from outside the repository (the project file's folder or the workspace)",
                ));
            }
            out.push(PolicySource {
                path,
                scope: self.scope,
            });
        }
        Ok(out)
    }

    fn audit(&self, node: &Node) -> Result<AuditConfig> {
        let fields = self.object(node, "audit", "an object")?;
        self.check_keys(fields, "audit", AUDIT_KEYS)?;
        let mut audit = AuditConfig::default();
        if let Some(m) = get(fields, "path") {
            let raw = self.expand(
                self.string(&m.value, "audit.path")?,
                "audit.path",
                m.value.pos,
            )?;
            audit.path = Some(absolutize(self.workspace, Path::new(&raw)));
        }
        if let Some(m) = get(fields, "redact") {
            for (s, k, pos) in self.strings(&m.value, "audit.redact")? {
                if !(s.is_empty() || s.starts_with('/')) {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        &k,
                        pos,
                        format!("`{}` is not a JSON pointer", short(s)),
                        Some(
                            "JSON pointers start with `/`, e.g. \"/password\" or \"/auth/token\""
                                .into(),
                        ),
                    ));
                }
                audit.redact.push(s.to_string());
            }
        }
        if let Some(m) = get(fields, "fsync") {
            audit.fsync = match self.string(&m.value, "audit.fsync")? {
                "every_record" => FsyncMode::EveryRecord,
                "batch" => FsyncMode::Batch,
                "never" => FsyncMode::Never,
                other => {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        "audit.fsync",
                        m.value.pos,
                        format!("unknown fsync mode `{}`", short(other)),
                        Some("use \"every_record\" (default), \"batch\" or \"never\"".into()),
                    ));
                }
            };
        }
        if let Some(m) = get(fields, "on_failure") {
            audit.on_failure = match self.string(&m.value, "audit.on_failure")? {
                "fail_closed" => OnFailure::FailClosed,
                "continue" => OnFailure::Continue,
                other => {
                    return Err(self.err(
                        ErrorKind::InvalidValue,
                        "audit.on_failure",
                        m.value.pos,
                        format!("unknown on_failure mode `{}`", short(other)),
                        Some(
                            "use \"fail_closed\" (default: a call that cannot be recorded is not \
                             sent) or \"continue\" (run unaudited when the log fails)"
                                .into(),
                        ),
                    ));
                }
            };
        }
        if let Some(m) = get(fields, "max_value_bytes") {
            let value = match &m.value.kind {
                Kind::Number(n) => n.as_u64(),
                _ => {
                    return Err(self.wrong_type(
                        &m.value,
                        "audit.max_value_bytes",
                        "a whole number",
                    ));
                }
            };
            audit.max_value_bytes = value
                .filter(|v| (16..=MAX_VALUE_BYTES).contains(v))
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| {
                    self.err(
                        ErrorKind::InvalidValue,
                        "audit.max_value_bytes",
                        m.value.pos,
                        format!("must be a whole number from 16 to {MAX_VALUE_BYTES}"),
                        Some("remove the key to get the default (4096)".into()),
                    )
                })?;
        }
        Ok(audit)
    }
}

/// Why `name` cannot be a server name, if it cannot.
pub fn invalid_server_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Some("only A-Z, a-z, 0-9, `_` and `-` are allowed")
    } else if name.contains("__") {
        Some("`__` separates server and tool in tool names")
    } else {
        None
    }
}

#[cfg(unix)]
fn is_executable(md: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    md.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_md: &std::fs::Metadata) -> bool {
    true
}
