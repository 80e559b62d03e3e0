//! Approvals of project-scope servers (CONTRACT §3), stored in
//! `$WARDEN_CONFIG_DIR/approvals.json`.
//!
//! An approval names the server, the file that defined it and the digest of
//! its exact configuration: if the repository changes the entry (or the
//! command now resolves to another binary), the digest differs and the
//! server needs approval again. The same text in another repository is a
//! different source file, so approving `github` in one checkout does not
//! approve it in all of them.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ConfigError, ServerConfig};

const FILE_NAME: &str = "approvals.json";
const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub name: String,
    /// [`ServerConfig::approval_digest`] at the time of approval.
    pub digest: String,
    /// [`ServerConfig::content`] at the time of approval: what ran from the
    /// workspace or repository, to say which file changed since.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub files: std::collections::BTreeMap<PathBuf, String>,
    /// The `.mcp.json` that defined the server.
    pub source: PathBuf,
    /// RFC 3339, UTC.
    pub approved_at: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    version: u32,
    approvals: Vec<Approval>,
}

#[derive(Debug, Clone)]
pub struct Approvals {
    path: PathBuf,
    entries: Vec<Approval>,
}

impl Approvals {
    /// Reads `config_dir/approvals.json`; a missing file means no approvals.
    /// A file that cannot be parsed, or that other users could have written,
    /// is an error rather than "no approvals" or "all approved".
    pub fn load(config_dir: &Path) -> Result<Self, ConfigError> {
        let path = config_dir.join(FILE_NAME);
        let fail = |message: String| ConfigError::Approvals {
            path: path.clone(),
            message,
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Approvals {
                    path,
                    entries: Vec::new(),
                });
            }
            Err(e) => return Err(fail(format!("cannot read: {e}"))),
        };
        check_not_shared(&path).map_err(fail)?;
        let parsed: FileFormat = serde_json::from_str(&text)
            .map_err(|e| fail(format!("not a valid approvals file: {e}; fix or delete it")))?;
        if parsed.version != VERSION {
            return Err(fail(format!(
                "unsupported version {} (this warden writes {VERSION})",
                parsed.version
            )));
        }
        Ok(Approvals {
            path,
            entries: parsed.approvals,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[Approval] {
        &self.entries
    }

    /// True for servers that need no approval (user or `--config` scope),
    /// and for project servers approved with this exact name, source file
    /// and digest.
    pub fn is_approved(&self, server: &ServerConfig) -> bool {
        !server.needs_approval()
            || self.entries.iter().any(|a| {
                a.name == server.name
                    && a.digest == server.approval_digest
                    && a.source == server.source
            })
    }

    /// Why `server` needs approval (for `mcp status`): never approved, its
    /// configuration changed, or a file that runs from the workspace or
    /// repository changed since it was approved (named).
    pub fn why_pending(&self, server: &ServerConfig) -> String {
        let Some(old) = self
            .entries
            .iter()
            .find(|a| a.name == server.name && a.source == server.source)
        else {
            return "a project server that was never approved; run `warden mcp approve NAME`"
                .replace("NAME", &server.name);
        };
        let changed: Vec<String> = server
            .content
            .iter()
            .filter(|(p, h)| old.files.get(*p) != Some(*h))
            .map(|(p, _)| p.display().to_string())
            .chain(
                old.files
                    .keys()
                    .filter(|p| !server.content.contains_key(*p))
                    .map(|p| p.display().to_string()),
            )
            .collect();
        let what = if !changed.is_empty() && approval_config_matches(old, server) {
            format!(
                "{} changed since you approved the server",
                changed.join(", ")
            )
        } else {
            "its configuration changed since you approved it".to_string()
        };
        format!(
            "needs approval again: {what}; run `warden mcp approve {}`",
            server.name
        )
    }

    /// Records approval of `server`'s exact configuration (replacing an older
    /// approval of the same name from the same file) and saves the file.
    /// A server that needs no approval is not recorded.
    pub fn approve(&mut self, server: &ServerConfig) -> Result<(), ConfigError> {
        if !server.needs_approval() {
            return Ok(());
        }
        let _lock = self.lock()?;
        self.refresh()?;
        self.entries
            .retain(|a| !(a.name == server.name && a.source == server.source));
        self.entries.push(Approval {
            name: server.name.clone(),
            digest: server.approval_digest.clone(),
            files: server.content.clone(),
            source: server.source.clone(),
            approved_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        });
        self.save()?;
        tracing::info!(server = %server.name, source = %server.source.display(), "server approved");
        Ok(())
    }

    /// Removes every approval of `name` (from any file). Returns whether
    /// there was one; saves only when something changed.
    pub fn revoke(&mut self, name: &str) -> Result<bool, ConfigError> {
        let _lock = self.lock()?;
        self.refresh()?;
        let before = self.entries.len();
        self.entries.retain(|a| a.name != name);
        if self.entries.len() == before {
            return Ok(false);
        }
        self.save()?;
        tracing::info!(server = %name, "approval revoked");
        Ok(true)
    }

    /// Re-reads the file before a change, so a long-lived session (repl)
    /// does not overwrite approvals another warden recorded meanwhile.
    fn refresh(&mut self) -> Result<(), ConfigError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        self.entries = Approvals::load(dir)?.entries;
        Ok(())
    }

    /// Atomic replace: a crash mid-write leaves the old file, never half a
    /// file (which would fail closed but lose every approval).
    /// An exclusive lock on `approvals.json.lock`, held from the re-read to
    /// the write, so two warden processes approving at once lose nothing.
    /// The wait is bounded (`warden_audit::flock`), like every lock warden
    /// takes: a process stuck holding it fails the approval, it does not
    /// freeze `warden approve` or a session for good.
    fn lock(&self) -> Result<nix::fcntl::Flock<std::fs::File>, ConfigError> {
        self.lock_within(warden_audit::flock::LOCK_WAIT)
    }

    fn lock_within(
        &self,
        wait: std::time::Duration,
    ) -> Result<nix::fcntl::Flock<std::fs::File>, ConfigError> {
        let fail = |e: std::io::Error| ConfigError::Approvals {
            path: self.path.clone(),
            message: format!("cannot lock: {e}"),
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(fail)?;
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(fail)?;
        warden_audit::flock::lock_within(file, true, wait).map_err(|(_, e)| fail(e))
    }

    fn save(&self) -> Result<(), ConfigError> {
        let fail = |what: &str, e: std::io::Error| ConfigError::Approvals {
            path: self.path.clone(),
            message: format!("{what}: {e}"),
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        create_private_dir(dir).map_err(|e| fail("cannot create the directory", e))?;
        let body = serde_json::to_string_pretty(&FileFormat {
            version: VERSION,
            approvals: self.entries.clone(),
        })
        .map_err(|e| fail("cannot serialise", std::io::Error::other(e)))?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| fail("cannot create a temporary file", e))?;
        set_mode(tmp.as_file(), 0o600).map_err(|e| fail("cannot set permissions", e))?;
        tmp.write_all(body.as_bytes())
            .and_then(|()| tmp.write_all(b"\n"))
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| fail("cannot write", e))?;
        tmp.persist(&self.path)
            .map_err(|e| fail("cannot replace the file", e.error))?;
        // Make the rename itself durable; failure here only risks losing
        // the latest change on power loss, so it is not an error.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// Whether the approval's recorded files give its digest with the
/// server's configuration: then only the files changed.
fn approval_config_matches(old: &Approval, server: &ServerConfig) -> bool {
    super::file::approval_digest(&server.digest, &old.files) == old.digest
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(unix)]
fn set_mode(file: &std::fs::File, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_file: &std::fs::File, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// An approvals file others can write lets them approve servers for you.
#[cfg(unix)]
fn check_not_shared(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| format!("cannot read: {e}"))?
        .permissions()
        .mode();
    if mode & 0o022 != 0 {
        return Err(format!(
            "writable by other users (mode {:o}); run `chmod 600 {}`",
            mode & 0o777,
            path.display()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_not_shared(_path: &Path) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whoever holds `approvals.json.lock` (a stuck warden, or any process
    /// of the user's) delays an approval for a bounded time, then fails it
    /// with a message that names the file, instead of blocking forever.
    #[test]
    fn a_held_lock_fails_the_approval_after_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let approvals = Approvals::load(dir.path()).unwrap();
        let held = approvals.lock().unwrap();
        let wait = std::time::Duration::from_millis(200);
        let started = std::time::Instant::now();
        let err = approvals.lock_within(wait).unwrap_err().to_string();
        assert!(started.elapsed() >= wait, "gave up early");
        assert!(err.contains("approvals.json"), "{err}");
        assert!(err.contains("held its lock"), "{err}");
        drop(held);
        assert!(approvals.lock_within(wait).is_ok(), "lock free again");
    }
}
