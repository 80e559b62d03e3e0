//! `warden import claude|codex|cursor [FILE…]`: another MCP client's
//! configuration as warden's user-scope configuration (CONTRACT §3 shape).
//!
//! Each reader (`claude`, `codex`, `cursor`) walks its own format and fills
//! one [`Import`]: servers as warden JSON entries, permission rules, and a
//! [`Note`] for every setting warden has no equivalent for. What this module
//! guarantees for all three:
//!
//! - every server is `untrusted` (so it runs in the strict default sandbox);
//! - a literal value that looks like a credential (an `env` value, a header)
//!   is never copied: it becomes `env_from` or a `${VAR}` placeholder, and a
//!   note names the variable to set;
//! - an input warden cannot read is one error naming the file and the key
//!   (or line and column), exit 2; nothing is written.

mod claude;
mod codex;
mod cursor;
mod entry;
mod rules;
mod secrets;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{CliError, GlobalArgs, exit, json as cli_json, session};
pub(crate) use entry::{Ctx, absolute_from, json_server, parse_json, type_name};

/// Which client's configuration to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json`, `~/.claude.json`, `.claude/settings.json`.
    Claude,
    /// OpenAI Codex CLI: `config.toml` `[mcp_servers.NAME]`.
    Codex,
    /// Cursor: `mcp.json`.
    Cursor,
}

/// An input warden could not read: always names the file, and the key or
/// line where one is known.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("{}: {key}: {message}", path.display())]
    Shape {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("{0}")]
    NotFound(String),
}

/// A setting with no exact warden equivalent, and what was done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub file: PathBuf,
    pub key: String,
    pub message: String,
}

/// What the readers build: warden's configuration, and the notes.
#[derive(Debug, Default)]
pub struct Import {
    pub servers: BTreeMap<String, Map<String, Value>>,
    /// The file each server came from (for collision notes).
    origin: BTreeMap<String, String>,
    /// Names given to renamed servers → the name they had in the input.
    renamed: BTreeMap<String, String>,
    /// Rules as read, decided once every server is known ([`Import::add_rule`]).
    rules: Vec<rules::Pending>,
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
    pub notes: Vec<Note>,
}

impl Import {
    pub fn note(&mut self, file: &Path, key: &str, message: impl Into<String>) {
        self.notes.push(Note {
            file: file.to_path_buf(),
            key: key.to_string(),
            message: message.into(),
        });
    }

    /// Adds a server under a name warden accepts (renamed, with a note,
    /// when needed). A second server of the same name is kept only when it
    /// is the same; otherwise it is left out, with a note.
    pub fn add_server(
        &mut self,
        file: &Path,
        key: &str,
        name: &str,
        mut entry: Map<String, Value>,
    ) {
        if is_warden_gateway(&entry) {
            self.note(
                file,
                key,
                format!(
                    "`{name}` is warden's own gateway (the client already reaches its servers \
                     through warden): not imported, which would put warden behind itself"
                ),
            );
            return;
        }
        let valid = valid_name(name);
        if valid != name {
            self.note(
                file,
                key,
                format!("server name `{name}` is not a valid warden name: imported as `{valid}`"),
            );
        }
        entry.insert("trust".into(), json!("untrusted"));
        // A server the input names exactly `valid` owns that name: the
        // input's rules for `mcp__valid__…` were written for it, so one
        // renamed into the name must not take it (and its allow rules),
        // whichever came first.
        if valid == name
            && let Some(original) = self.renamed.get(&valid).cloned()
            && self.servers.get(&valid).is_some_and(|e| *e != entry)
        {
            let first = self.origin.get(&valid).cloned().unwrap_or_default();
            self.note(
                file,
                key,
                format!(
                    "`{original}` ({first}) was to be imported as `{valid}`, but this server \
                     is named `{valid}`: this one is kept (rules for `{valid}` are its) and \
                     `{original}` is left out; add it by hand under another name"
                ),
            );
            self.renamed.remove(&valid);
            self.origin
                .insert(valid.clone(), format!("{}: {key}", file.display()));
            self.servers.insert(valid, entry);
            return;
        }
        if let Some(existing) = self.servers.get(&valid) {
            if *existing != entry {
                let first = self.origin.get(&valid).cloned().unwrap_or_default();
                self.note(
                    file,
                    key,
                    format!(
                        "another server named `{valid}` was imported already (from {first}): \
                         this one is left out; add it by hand under another name"
                    ),
                );
            }
            return;
        }
        if valid != name {
            self.renamed.insert(valid.clone(), name.to_string());
        }
        self.origin
            .insert(valid.clone(), format!("{}: {key}", file.display()));
        self.servers.insert(valid, entry);
    }

    /// warden's user-scope configuration.
    pub fn config(&self) -> Value {
        let mut top = Map::new();
        let servers: Map<String, Value> = self
            .servers
            .iter()
            .map(|(k, v)| (k.clone(), Value::Object(v.clone())))
            .collect();
        top.insert("mcpServers".into(), Value::Object(servers));
        if !(self.allow.is_empty() && self.ask.is_empty() && self.deny.is_empty()) {
            let mut permissions = Map::new();
            for (name, list) in [
                ("allow", &self.allow),
                ("ask", &self.ask),
                ("deny", &self.deny),
            ] {
                if !list.is_empty() {
                    permissions.insert(name.into(), json!(list));
                }
            }
            top.insert("permissions".into(), Value::Object(permissions));
        }
        Value::Object(top)
    }
}

/// An entry that starts `warden … gateway …`: what README's client
/// sections register, so a client set up for warden already has it.
fn is_warden_gateway(entry: &Map<String, Value>) -> bool {
    let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
    let is_warden = Path::new(command)
        .file_name()
        .is_some_and(|n| n == "warden");
    let args = entry.get("args").and_then(Value::as_array);
    is_warden && args.is_some_and(|a| a.iter().any(|v| v == "gateway"))
}

/// `[A-Za-z0-9_-]`, no `__`, no `_` at the end, not empty.
fn valid_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            c
        } else {
            '-'
        };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    // Nor ends with `_` (see config validation: it would run into the
    // `__` after it in tool names).
    while out.ends_with('_') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str("server");
    }
    out
}

/// The files read when none is given (documented in `--help`).
fn default_files(client: Client) -> Result<Vec<PathBuf>, ImportError> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let home = env("HOME")
        .ok_or_else(|| ImportError::NotFound("HOME is not set: give the FILE to import".into()))?;
    let candidates = match client {
        Client::Claude => vec![
            home.join(".claude.json"),
            home.join(".claude").join("settings.json"),
        ],
        Client::Codex => vec![
            env("CODEX_HOME")
                .unwrap_or_else(|| home.join(".codex"))
                .join("config.toml"),
        ],
        Client::Cursor => vec![home.join(".cursor").join("mcp.json")],
    };
    let found: Vec<PathBuf> = candidates.iter().filter(|p| p.is_file()).cloned().collect();
    if found.is_empty() {
        let names: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        return Err(ImportError::NotFound(format!(
            "no configuration found (looked for {}): give the FILE to import",
            names.join(", ")
        )));
    }
    Ok(found)
}

pub fn read(path: &Path) -> Result<String, ImportError> {
    std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads `files` (or the client's default files) into one [`Import`].
pub fn import(client: Client, files: &[PathBuf]) -> Result<Import, ImportError> {
    let explicit = !files.is_empty();
    let files = if explicit {
        files.to_vec()
    } else {
        default_files(client)?
    };
    let mut out = Import::default();
    for file in &files {
        let text = read(file)?;
        match client {
            Client::Claude => claude::import(file, &text, &mut out, explicit)?,
            Client::Codex => codex::import(file, &text, &mut out)?,
            Client::Cursor => cursor::import(file, &text, &mut out)?,
        }
    }
    out.finish_rules();
    if out.servers.values().any(|s| s.contains_key("command")) {
        out.note(
            &files[0],
            "mcpServers",
            "stdio servers run in warden's strict default sandbox: they see no workspace \
             files and have no network until you grant `sandbox.read`/`write`/`network`",
        );
    }
    Ok(out)
}

pub struct ImportArgs {
    pub client: Client,
    pub files: Vec<PathBuf>,
    pub write: bool,
    pub force: bool,
}

pub fn run(global: &GlobalArgs, args: ImportArgs) -> anyhow::Result<u8> {
    let imported = import(args.client, &args.files).map_err(|e| CliError::config(e.to_string()))?;
    let config = imported.config();
    let written = if args.write {
        let path = session::config_dir()?.join("config.json");
        write_config(&path, &config, args.force)?;
        Some(path)
    } else {
        None
    };
    for note in &imported.notes {
        // Keys and messages quote names from the file: one neutralised line.
        let line = format!("{}: {}: {}", note.file.display(), note.key, note.message);
        eprintln!("note: {}", warden_core::display::line(&line));
    }
    if global.json {
        let notes: Vec<Value> = imported
            .notes
            .iter()
            .map(|n| json!({"file": n.file, "key": n.key, "message": n.message}))
            .collect();
        cli_json::print(
            "import",
            json!({"config": config, "notes": notes, "written": written}),
        )?;
    } else if let Some(path) = &written {
        eprintln!(
            "warden: wrote {} ({} servers)",
            path.display(),
            imported.servers.len()
        );
    } else {
        let mut text = serde_json::to_string_pretty(&config)?;
        text.push('\n');
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()?;
    }
    Ok(exit::OK)
}

/// Writes the configuration atomically with mode 0600; an existing file is
/// replaced only with `force`.
fn write_config(path: &Path, config: &Value, force: bool) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if path.exists() && !force {
        return Err(CliError::usage(format!(
            "{} exists: not overwritten (pass --force to replace it, or print the \
             configuration without --write and merge it by hand)",
            path.display()
        )));
    }
    let dir = path
        .parent()
        .ok_or_else(|| CliError::usage(format!("{}: no parent folder", path.display())))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::config(format!("cannot create {}: {e}", dir.display())))?;
    let fail = |what: &str, e: std::io::Error| {
        CliError::config(format!("cannot write {}: {what}: {e}", path.display()))
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail("temporary file", e))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| fail("permissions", e))?;
    let mut text = serde_json::to_string_pretty(config)?;
    text.push('\n');
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| fail("write", e))?;
    if force {
        tmp.persist(path).map_err(|e| fail("rename", e.error))?;
    } else {
        // Never replaces a file created since the check above.
        tmp.persist_noclobber(path)
            .map_err(|e| fail("rename", e.error))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    /// An imported name is one warden's config accepts: a trailing `_`
    /// would run into the `__` of `mcp__S__T` and let a rule for `a` cover
    /// the tools of `a_`.
    #[test]
    fn imported_names_never_end_in_an_underscore() {
        assert_eq!(valid_name("github_"), "github");
        assert_eq!(valid_name("my.server__"), "my-server");
        assert_eq!(valid_name("a__b"), "a_b");
        assert_eq!(valid_name("___"), "server");
    }
}
