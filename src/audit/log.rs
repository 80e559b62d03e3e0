//! The writer: [`AuditLog`].

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use serde_json::{Map, Value};

use super::chain::{Hasher, Tail, read_tail};
use super::scrub::Scrubber;
use super::{AuditError, Event, HashMode, RECORD_VERSION, ZERO_HASH};
use crate::config::FsyncMode;
use crate::digest::canonical_json;

/// `batch`: the longest a written record waits for its `fdatasync`.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(50);
/// `batch`: this many unsynced records trigger an `fdatasync` at once.
pub const BATCH_MAX_RECORDS: usize = 256;

/// How a session writes its log.
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// The session id written in every record.
    pub session: String,
    pub fsync: FsyncMode,
    /// HMAC key ([`super::load_key`]); `None`: plain SHA-256.
    pub key: Option<Vec<u8>>,
    /// JSON pointers into tool arguments replaced by `"[REDACTED]"`.
    pub redact: Vec<String>,
    /// Values of `env`, `env_from` and `headers`: scrubbed from every string
    /// of every record, whatever the pointers say.
    pub secrets: Vec<String>,
}

/// An open audit log. `append` takes `&self` and is safe to call from many
/// threads or tokio tasks (it blocks briefly on a mutex and the file lock,
/// and for the `fdatasync` in `every_record` mode).
pub struct AuditLog {
    inner: Arc<Inner>,
    flusher: Option<JoinHandle<()>>,
}

struct Inner {
    path: PathBuf,
    file: File,
    session: String,
    fsync: FsyncMode,
    hasher: Hasher,
    scrubber: Scrubber,
    state: Mutex<State>,
    /// Wakes the batch flusher.
    wake: Condvar,
}

struct State {
    /// `seq` and `hash` of the last record in the file, as far as we know.
    seq: u64,
    prev: String,
    /// File size right after our last write (or read of the tail): a
    /// different size under the lock means another process appended.
    end: u64,
    /// `batch`: records written since the flusher's last `fdatasync` began.
    pending: usize,
    pending_since: Option<Instant>,
    shutdown: bool,
    /// A failed `fdatasync` makes the log unusable (the kernel may have
    /// dropped the dirty pages; retrying would claim durability falsely).
    failed: Option<String>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.inner.path)
            .field("session", &self.inner.session)
            .field("fsync", &self.inner.fsync)
            .field("mode", &self.inner.hasher.mode())
            .finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Opens (creating it and its folder, mode 0600) the log at `path` and
    /// continues its chain. Refused: a torn final line, a last record that
    /// is not a record, or one that does not verify with `opts.key` (other
    /// key or other mode).
    pub fn open(path: &Path, opts: AuditOptions) -> Result<AuditLog, AuditError> {
        let hasher = Hasher::new(opts.key.as_deref())?;
        let scrubber = Scrubber::new(&opts.redact, &opts.secrets)?;
        let io_err = |action, source| AuditError::Io {
            path: path.to_path_buf(),
            action,
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| io_err("create its folder", e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| io_err("open", e))?;
        let session = scrubber.scrub_str(&opts.session).unwrap_or(opts.session);

        let (seq, prev, end) = {
            let _lock = FileLock::exclusive(&file, path)?;
            let size = file.metadata().map_err(|e| io_err("stat", e))?.len();
            match read_tail(&file, path, size, &hasher)? {
                Tail::Empty => (0, ZERO_HASH.to_string(), size),
                Tail::Last { seq, hash } => (seq, hash, size),
            }
        };
        tracing::debug!(path = %path.display(), next_seq = seq + 1, mode = %hasher.mode(), "audit log opened");

        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            file,
            session,
            fsync: opts.fsync,
            hasher,
            scrubber,
            state: Mutex::new(State {
                seq,
                prev,
                end,
                pending: 0,
                pending_since: None,
                shutdown: false,
                failed: None,
            }),
            wake: Condvar::new(),
        });
        let flusher = if opts.fsync == FsyncMode::Batch {
            let inner = Arc::clone(&inner);
            Some(
                std::thread::Builder::new()
                    .name("audit-fsync".into())
                    .spawn(move || flusher(&inner))
                    .map_err(|e| io_err("start the batch fsync thread", e))?,
            )
        } else {
            None
        };
        Ok(AuditLog { inner, flusher })
    }

    /// Appends one record: scrubs and redacts it, chains it, writes it in
    /// one `write(2)` under the file lock, and syncs as `fsync` says.
    pub fn append(&self, event: Event) -> Result<(), AuditError> {
        let inner = &*self.inner;
        let is_call = matches!(event, Event::ToolCall(_));
        let mut body = match serde_json::to_value(&event)? {
            Value::Object(map) => map,
            other => {
                let mut map = Map::new();
                map.insert("event".into(), other);
                map
            }
        };
        drop(event);
        if is_call && let Some(args) = body.get_mut("arguments") {
            inner.scrubber.redact_pointers(args);
        }
        inner.scrubber.scrub_map(&mut body, Some("event"));

        let mut st = inner.lock_state();
        if let Some(detail) = &st.failed {
            return Err(AuditError::Failed {
                path: inner.path.clone(),
                detail: detail.clone(),
            });
        }
        let _lock = FileLock::exclusive(&inner.file, &inner.path)?;
        let size = inner
            .file
            .metadata()
            .map_err(|e| inner.io_err("stat", e))?
            .len();
        if size != st.end {
            // Another writer appended (or the file was cut): continue from
            // whatever its last record is now.
            match read_tail(&inner.file, &inner.path, size, &inner.hasher)? {
                Tail::Empty => {
                    st.seq = 0;
                    st.prev = ZERO_HASH.to_string();
                }
                Tail::Last { seq, hash } => {
                    st.seq = seq;
                    st.prev = hash;
                }
            }
            if size < st.end {
                tracing::warn!(path = %inner.path.display(), "audit log shrank since this session's last write");
            }
            st.end = size;
        }

        let seq = st.seq + 1;
        body.insert("v".into(), RECORD_VERSION.into());
        body.insert("seq".into(), seq.into());
        body.insert(
            "ts".into(),
            Utc::now()
                .to_rfc3339_opts(SecondsFormat::Micros, true)
                .into(),
        );
        body.insert("session".into(), inner.session.clone().into());
        body.insert("alg".into(), inner.hasher.mode().as_str().into());
        body.insert("prev".into(), st.prev.clone().into());
        let (hash, line) = chain_line(&body, &inner.hasher);

        if let Err(e) = (&inner.file).write_all(line.as_bytes()) {
            // Never leave a partial line behind: cut back to where it began.
            if let Err(cut) = inner.file.set_len(size) {
                st.failed = Some(format!("a failed write could not be undone: {cut}"));
            }
            return Err(inner.io_err("write", e));
        }
        st.seq = seq;
        st.prev = hash;
        st.end = size + line.len() as u64;

        match inner.fsync {
            FsyncMode::EveryRecord => {
                if let Err(e) = inner.file.sync_data() {
                    st.failed = Some(format!("fdatasync failed: {e}"));
                    return Err(inner.io_err("fdatasync", e));
                }
            }
            FsyncMode::Batch => {
                st.pending += 1;
                if st.pending == 1 {
                    st.pending_since = Some(Instant::now());
                    inner.wake.notify_one();
                } else if st.pending == BATCH_MAX_RECORDS {
                    inner.wake.notify_one();
                }
            }
            FsyncMode::Never => {}
        }
        Ok(())
    }

    /// The arguments as they would be recorded: `redact` pointers replaced
    /// and secrets scrubbed.
    pub fn redact_arguments(&self, args: &Value) -> Value {
        let mut out = args.clone();
        self.inner.scrubber.redact_pointers(&mut out);
        self.inner.scrubber.scrub(&mut out);
        out
    }

    /// `seq` and `hash` of the last record this log knows of (its own last
    /// write, or the tail it read).
    pub fn last(&self) -> (u64, String) {
        let st = self.inner.lock_state();
        (st.seq, st.prev.clone())
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn mode(&self) -> HashMode {
        self.inner.hasher.mode()
    }

    /// Flushes (`batch`: a final `fdatasync`) and closes the log. Dropping
    /// does the same but can only log a failure.
    pub fn close(mut self) -> Result<(), AuditError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), AuditError> {
        if let Some(handle) = self.flusher.take() {
            {
                let mut st = self.inner.lock_state();
                st.shutdown = true;
                self.inner.wake.notify_one();
            }
            if handle.join().is_err() {
                return Err(AuditError::Failed {
                    path: self.inner.path.clone(),
                    detail: "the batch fsync thread panicked".into(),
                });
            }
        }
        match &self.inner.lock_state().failed {
            Some(detail) => Err(AuditError::Failed {
                path: self.inner.path.clone(),
                detail: detail.clone(),
            }),
            None => Ok(()),
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!("{e}");
        }
    }
}

impl Inner {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn io_err(&self, action: &'static str, source: std::io::Error) -> AuditError {
        AuditError::Io {
            path: self.path.clone(),
            action,
            source,
        }
    }
}

/// The record's `hash` and its line: the canonical JSON of `body` plus
/// `hash`, and `\n`. Each member is canonicalised once and the two
/// serialisations (without `hash`, to hash it; with it, to write it) are
/// joined from the same pieces, keys in canonical (bytewise) order.
fn chain_line(body: &Map<String, Value>, hasher: &Hasher) -> (String, String) {
    let mut members: Vec<(&String, String)> =
        body.iter().map(|(k, v)| (k, canonical_json(v))).collect();
    members.sort_by(|a, b| a.0.cmp(b.0));
    let join = |extra: Option<&str>| {
        let mut out = String::with_capacity(
            members
                .iter()
                .map(|(k, v)| k.len() + v.len() + 4)
                .sum::<usize>()
                + 80,
        );
        out.push('{');
        let mut first = true;
        let mut push = |out: &mut String, key: &str, value: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            // Serialising a string cannot fail; keys are escaped as
            // `canonical_json` escapes them.
            out.push_str(&serde_json::to_string(key).unwrap_or_default());
            out.push(':');
            out.push_str(value);
        };
        let mut pending = extra;
        for (k, v) in &members {
            if let Some(hash) = pending
                && k.as_str() > "hash"
            {
                push(&mut out, "hash", hash);
                pending = None;
            }
            push(&mut out, k, v);
        }
        if let Some(hash) = pending {
            push(&mut out, "hash", hash);
        }
        out.push('}');
        out
    };
    let hash = hasher.hash(join(None).as_bytes());
    let mut line = join(Some(&format!("\"{hash}\"")));
    line.push('\n');
    (hash, line)
}

/// `batch` mode: `fdatasync` at most [`BATCH_INTERVAL`] after the first
/// unsynced record, at once when [`BATCH_MAX_RECORDS`] are pending, and a
/// last time on shutdown. Appends go on while it syncs.
fn flusher(inner: &Inner) {
    let mut st = inner.lock_state();
    loop {
        while st.pending == 0 && !st.shutdown {
            st = inner.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        if st.pending == 0 {
            break; // shutdown with nothing left to sync
        }
        let since = st.pending_since.unwrap_or_else(Instant::now);
        while !st.shutdown && st.pending < BATCH_MAX_RECORDS {
            let Some(left) = BATCH_INTERVAL.checked_sub(since.elapsed()) else {
                break;
            };
            st = inner
                .wake
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        st.pending = 0;
        st.pending_since = None;
        drop(st);
        let result = inner.file.sync_data();
        st = inner.lock_state();
        if let Err(e) = result {
            tracing::error!(path = %inner.path.display(), error = %e, "audit log fdatasync failed");
            st.failed = Some(format!("fdatasync failed: {e}"));
        }
    }
}

/// An exclusive `flock(2)` on the log, released on drop.
struct FileLock<'a> {
    file: &'a File,
}

impl<'a> FileLock<'a> {
    fn exclusive(file: &'a File, path: &Path) -> Result<Self, AuditError> {
        loop {
            // SAFETY: flock only reads the descriptor number, which `file`
            // keeps open for the guard's lifetime; no memory is shared.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(FileLock { file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(AuditError::Io {
                    path: path.to_path_buf(),
                    action: "lock",
                    source: e,
                });
            }
        }
    }
}

impl Drop for FileLock<'_> {
    fn drop(&mut self) {
        // SAFETY: as above; unlocking a lock we hold.
        let _ = unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}
