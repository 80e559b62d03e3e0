//! Tool pinning (CONTRACT §5, stage 3), the storage side: the first listing
//! of a server's tools under a given server configuration records a digest
//! of the canonical JSON of each tool's whole definition (name, title,
//! description, input and output schema, annotations); a later listing
//! that differs is a "rug pull" and is reported with what changed. The
//! pipeline sees only the resulting [`PinState`].
//!
//! File format (`$WARDEN_CONFIG_DIR/pins.json` or `--lock FILE`):
//! `{"version": 1, "servers": {SERVER: {CONFIG_DIGEST: {TOOL: {"sha256",
//! "definition", "pinned_at"}}}}}`. Rewritten in place under an exclusive
//! lock on `FILE.lock` (readers take it shared), never renamed over: the
//! sandbox protects the file from servers by a bind of its inode.

mod diff;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use warden_core::digest::sha256_json;
use warden_policy::PinState;

use crate::mcp::Tool;
use diff::diff_definitions;

/// Fields of a tool definition that are pinned.
pub(crate) const PINNED_FIELDS: &[&str] = &[
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("pin file {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("pin file {path} is not valid: {message}")]
    Format { path: PathBuf, message: String },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PinRecord {
    pub sha256: String,
    /// The pinned fields, kept to explain what changed.
    pub definition: Value,
    pub pinned_at: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct PinFile {
    version: u32,
    /// server → server config digest → tool name → record.
    servers: BTreeMap<String, BTreeMap<String, BTreeMap<String, PinRecord>>>,
}

/// One row of `warden pin list`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PinEntry {
    pub server: String,
    pub config_digest: String,
    pub tool: String,
    pub sha256: String,
    pub pinned_at: String,
}

#[derive(Debug)]
pub struct PinStore {
    path: PathBuf,
    file: PinFile,
    /// Changes since the last save, replayed onto the file as it is on disk
    /// at save time, so two warden processes never lose each other's pins.
    pending: Vec<PinOp>,
}

#[derive(Debug)]
enum PinOp {
    Insert {
        server: String,
        digest: String,
        tool: String,
        record: PinRecord,
        /// `accept` replaces a pin; a first listing never overwrites a pin
        /// another process recorded meanwhile (first pin wins).
        replace: bool,
    },
    Reset(Option<String>),
}

impl PinOp {
    fn apply(&self, file: &mut PinFile) {
        match self {
            PinOp::Insert {
                server,
                digest,
                tool,
                record,
                replace,
            } => {
                let tools = file
                    .servers
                    .entry(server.clone())
                    .or_default()
                    .entry(digest.clone())
                    .or_default();
                if *replace || !tools.contains_key(tool) {
                    tools.insert(tool.clone(), record.clone());
                }
            }
            PinOp::Reset(Some(server)) => {
                file.servers.remove(server);
            }
            PinOp::Reset(None) => file.servers.clear(),
        }
    }
}

/// The pinned part of a tool definition.
fn pinned_definition(tool: &Tool) -> Value {
    let full = serde_json::to_value(tool).unwrap_or(Value::Null);
    let mut out = Map::new();
    for field in PINNED_FIELDS {
        if let Some(v) = full.get(*field)
            && !v.is_null()
        {
            out.insert((*field).to_string(), v.clone());
        }
    }
    Value::Object(out)
}

impl PinStore {
    /// Opens a pin file; a missing file is an empty store.
    pub fn open(path: impl Into<PathBuf>) -> Result<PinStore, PinError> {
        let path = path.into();
        let file = read_pin_file_shared(&path)?;
        Ok(PinStore {
            path,
            file,
            pending: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks one listed tool. Unknown under this server config: pinned now
    /// (or `Unpinned` when `locked`). Known and different: `Changed` with a
    /// human diff; the pin is *not* updated (use [`PinStore::accept`] once
    /// a person approved the change).
    pub fn check(
        &mut self,
        server: &str,
        config_digest: &str,
        tool: &Tool,
        locked: bool,
    ) -> PinState {
        let definition = pinned_definition(tool);
        let sha = sha256_json(&definition);
        let existing = self
            .file
            .servers
            .get(server)
            .and_then(|c| c.get(config_digest))
            .and_then(|t| t.get(tool.name.as_ref()));
        match existing {
            Some(rec) if rec.sha256 == sha => PinState::Pinned,
            Some(rec) => PinState::Changed {
                changes: diff_definitions(&rec.definition, &definition),
            },
            None if locked => PinState::Unpinned,
            None => {
                self.insert(
                    server,
                    config_digest,
                    tool.name.as_ref(),
                    definition,
                    sha,
                    false,
                );
                PinState::Pinned
            }
        }
    }

    /// `tool` as it was pinned under this server configuration: the
    /// pinned fields (name, title, description, input and output schema,
    /// annotations) as the pin has them, the others (icons, `_meta`, which
    /// pinning never covers) as the server lists them now. `None` without
    /// a pin, or when the pin does not make a tool definition.
    pub fn as_pinned(&self, server: &str, config_digest: &str, tool: &Tool) -> Option<Tool> {
        let record = self
            .file
            .servers
            .get(server)?
            .get(config_digest)?
            .get(tool.name.as_ref())?;
        let pinned = record.definition.as_object()?;
        let mut now = serde_json::to_value(tool).ok()?;
        let fields = now.as_object_mut()?;
        for field in PINNED_FIELDS {
            fields.remove(*field);
        }
        for (field, value) in pinned {
            if PINNED_FIELDS.contains(&field.as_str()) {
                fields.insert(field.clone(), value.clone());
            }
        }
        serde_json::from_value(now).ok()
    }

    /// Checks every tool of one listing and saves once if anything was pinned.
    pub fn check_all(
        &mut self,
        server: &str,
        config_digest: &str,
        tools: &[Tool],
        locked: bool,
    ) -> Result<Vec<PinState>, PinError> {
        let states = tools
            .iter()
            .map(|t| self.check(server, config_digest, t, locked))
            .collect();
        self.save()?;
        Ok(states)
    }

    /// Records the current definition as approved (after a person allowed
    /// a changed tool).
    pub fn accept(&mut self, server: &str, config_digest: &str, tool: &Tool) {
        let definition = pinned_definition(tool);
        let sha = sha256_json(&definition);
        self.insert(
            server,
            config_digest,
            tool.name.as_ref(),
            definition,
            sha,
            true,
        );
    }

    fn insert(
        &mut self,
        server: &str,
        digest: &str,
        tool: &str,
        definition: Value,
        sha: String,
        replace: bool,
    ) {
        let op = PinOp::Insert {
            server: server.to_string(),
            digest: digest.to_string(),
            tool: tool.to_string(),
            record: PinRecord {
                sha256: sha,
                definition,
                pinned_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            },
            replace,
        };
        op.apply(&mut self.file);
        self.pending.push(op);
    }

    pub fn list(&self) -> Vec<PinEntry> {
        let mut out = Vec::new();
        for (server, configs) in &self.file.servers {
            for (digest, tools) in configs {
                for (tool, rec) in tools {
                    out.push(PinEntry {
                        server: server.clone(),
                        config_digest: digest.clone(),
                        tool: tool.clone(),
                        sha256: rec.sha256.clone(),
                        pinned_at: rec.pinned_at.clone(),
                    });
                }
            }
        }
        out
    }

    /// `(server, tool)` of every pin recorded in memory but not yet saved
    /// (after a failed [`PinStore::save`]: those tools have no baseline on
    /// disk; the next save tries again).
    pub fn unsaved_tools(&self) -> Vec<(String, String)> {
        self.pending
            .iter()
            .filter_map(|op| match op {
                PinOp::Insert { server, tool, .. } => Some((server.clone(), tool.clone())),
                PinOp::Reset(_) => None,
            })
            .collect()
    }

    /// Forgets the pins of one server, or all; returns how many tool pins
    /// were removed. Call [`PinStore::save`] after.
    pub fn reset(&mut self, server: Option<&str>) -> usize {
        let count = |c: &BTreeMap<String, BTreeMap<String, PinRecord>>| {
            c.values().map(BTreeMap::len).sum::<usize>()
        };
        let removed = match server {
            Some(s) => self.file.servers.remove(s).map_or(0, |c| count(&c)),
            None => {
                let n = self.file.servers.values().map(count).sum();
                self.file.servers.clear();
                n
            }
        };
        if removed > 0 {
            self.pending.push(PinOp::Reset(server.map(str::to_string)));
        }
        removed
    }

    /// Writes the changes since the last save: under an exclusive lock on
    /// `FILE.lock`, re-reads the file, replays them onto it, and replaces it
    /// atomically (temp file in the same folder, fsync, rename).
    pub fn save(&mut self) -> Result<(), PinError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let merged = self.locked_rewrite(|merged, pending| {
            for op in pending {
                op.apply(merged);
            }
        })?;
        self.file = merged;
        self.pending.clear();
        Ok(())
    }

    /// Creates the pin file (empty) and its `FILE.lock` when they do not
    /// exist yet. A session does this before any server starts, so that the
    /// sandbox protects them from every server's write grant; a file created
    /// later would be writable to a server already running (which could
    /// plant pins for the next session).
    pub fn create_if_missing(&mut self) -> Result<(), PinError> {
        if self.path.exists() {
            return Ok(());
        }
        self.locked_rewrite(|_, _| {})?;
        Ok(())
    }

    fn lock_path(&self) -> PathBuf {
        let [_, lock] = files_of(&self.path);
        lock
    }

    /// Under an exclusive lock on `FILE.lock` ([`lock_pin_file`]), re-reads the
    /// file, lets `change` edit it, and replaces it atomically (temp file in
    /// the same folder, fsync, rename). Returns what was written.
    fn locked_rewrite(
        &self,
        change: impl FnOnce(&mut PinFile, &[PinOp]),
    ) -> Result<PinFile, PinError> {
        use std::os::unix::fs::OpenOptionsExt;
        let io = |e: std::io::Error| PinError::Io {
            path: self.path.clone(),
            message: e.to_string(),
        };
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let _lock = lock_pin_file(&self.lock_path(), true).map_err(io)?;
        let mut merged = read_pin_file(&self.path)?;
        change(&mut merged, &self.pending);
        let mut text = serde_json::to_string_pretty(&merged).map_err(|e| PinError::Format {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        text.push('\n');
        // In place, not a temp file renamed over it: a rename would detach
        // the read-only bind that protects this file inside the sandboxes
        // of servers already running (README, "The sandbox"). Readers take
        // the shared lock ([`PinStore::open`]), so none sees it half
        // written; a crash in between leaves a file that fails to parse,
        // which stops the next session with the file's name (never a
        // silently emptier pin set).
        // A missing pin file is never created through a link in its place.
        let mut file = warden_audit::create::open_or_create(
            &self.path,
            std::fs::OpenOptions::new()
                .write(true)
                .truncate(false)
                .mode(0o600),
        )
        .map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        file.set_len(text.len() as u64).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(merged)
    }
}

/// Where the pin file is: `--lock FILE`, else `pins.json` in the
/// configuration folder.
pub fn path_for(lock: Option<&Path>, config_dir: &Path) -> PathBuf {
    lock.map_or_else(|| config_dir.join("pins.json"), Path::to_path_buf)
}

/// The files of the pin file at `path`: itself and its `FILE.lock` (what
/// a session protects from its servers).
pub fn files_of(path: &Path) -> [PathBuf; 2] {
    let mut lock = path.as_os_str().to_os_string();
    lock.push(".lock");
    [path.to_path_buf(), PathBuf::from(lock)]
}

/// [`read_pin_file`] under a shared lock on `FILE.lock`, when one exists
/// (a writer rewrites the file in place under the exclusive lock). Without
/// one, no warden has written the file.
fn read_pin_file_shared(path: &Path) -> Result<PinFile, PinError> {
    let [_, lock_path] = files_of(path);
    let lock = match lock_pin_file(&lock_path, false) {
        Ok(lock) => Some(lock),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(PinError::Io {
                path: lock_path,
                message: e.to_string(),
            });
        }
    };
    let file = read_pin_file(path);
    drop(lock);
    file
}

/// Takes a lock (shared to read, exclusive to `write`) on the pin file's
/// `FILE.lock`, created only by a writer, and never opened through a link:
/// warden creates no file where a link points.
fn lock_pin_file(
    lock_path: &Path,
    write: bool,
) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .create(write)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(lock_path)?;
    // Bounded: the lock file may lie where a server can open it.
    warden_audit::flock::lock_within(file, write, warden_audit::flock::LOCK_WAIT)
        .map_err(|(_, e)| e)
}

/// Reads a pin file; a missing file is an empty one.
fn read_pin_file(path: &Path) -> Result<PinFile, PinError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let file: PinFile = serde_json::from_str(&text).map_err(|e| PinError::Format {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            if file.version != 1 {
                return Err(PinError::Format {
                    path: path.to_path_buf(),
                    message: format!("unsupported version {}", file.version),
                });
            }
            Ok(file)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PinFile {
            version: 1,
            servers: BTreeMap::new(),
        }),
        Err(e) => Err(PinError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(name: &str, description: &str) -> Tool {
        let schema: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"type": "object"})).unwrap_or_default();
        Tool::new(name.to_string(), description.to_string(), Arc::new(schema))
    }

    #[test]
    fn an_empty_pin_file_is_created_once_and_a_linked_lock_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("warden.lock");
        let mut store = PinStore::open(&path).unwrap();
        store.create_if_missing().unwrap();
        assert!(PinStore::open(&path).unwrap().list().is_empty());
        let [_, lock] = files_of(&path);
        assert!(lock.exists());
        // Created once: an existing file is left as it is.
        store.check("s", "d", &tool("t", "one"), false);
        store.save().unwrap();
        store.create_if_missing().unwrap();
        assert_eq!(PinStore::open(&path).unwrap().list().len(), 1);

        // A link put where the lock goes: warden opens no file through it.
        let other = dir.path().join("other.lock");
        let target = dir.path().join("created-through-the-link");
        std::os::unix::fs::symlink(&target, files_of(&other)[1].clone()).unwrap();
        assert!(
            PinStore::open(&other).is_err(),
            "read through a linked lock"
        );
        let mut store = PinStore {
            path: other.clone(),
            file: read_pin_file(&other).unwrap(),
            pending: Vec::new(),
        };
        assert!(store.create_if_missing().is_err());
        assert!(!target.exists());
    }

    /// A link to nothing left where the pin file goes: warden creates no
    /// file through it (it would be the link's target, say a shell start-up
    /// file, holding the pins as text).
    #[test]
    fn no_pin_file_is_created_where_a_link_points() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pins.json");
        let target = dir.path().join("profile");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let mut store = PinStore::open(&path).unwrap();
        store.check("s", "d", &tool("t", "one"), false);
        let error = store.save().unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        assert!(!target.exists(), "created through the link");
    }

    #[test]
    fn two_stores_on_one_file_keep_each_others_pins() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pins.json");
        let mut a = PinStore::open(&path).unwrap();
        let mut b = PinStore::open(&path).unwrap();
        assert_eq!(
            a.check("s", "d", &tool("one", "x"), false),
            PinState::Pinned
        );
        assert_eq!(
            b.check("s", "d", &tool("two", "y"), false),
            PinState::Pinned
        );
        // b pins `one` differently after a did: the first pin must win.
        assert_eq!(
            b.check("s", "d", &tool("one", "changed"), false),
            PinState::Pinned
        );
        a.save().unwrap();
        b.save().unwrap();
        let mut fresh = PinStore::open(&path).unwrap();
        let names: Vec<String> = fresh.list().into_iter().map(|e| e.tool).collect();
        assert_eq!(names, ["one", "two"]);
        assert!(matches!(
            fresh.check("s", "d", &tool("one", "changed"), false),
            PinState::Changed { .. }
        ));
        // A reset is replayed too.
        fresh.reset(Some("s"));
        fresh.save().unwrap();
        assert!(PinStore::open(&path).unwrap().list().is_empty());
    }
}
