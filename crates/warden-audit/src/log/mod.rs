//! The writer: [`AuditLog`].

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};

mod batch;
mod line;

use batch::batch_writer;
use line::chain_line;

use crate::chain::{Hasher, Tail, read_tail};
use crate::scrub::Scrubber;
use crate::{AuditError, Event, FsyncMode, HashMode, RECORD_VERSION, ZERO_HASH};

/// `batch`: the longest a written record waits for its `fdatasync`.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(50);
/// `batch`: this many written, unsynced records trigger an `fdatasync`.
pub const BATCH_MAX_RECORDS: usize = 256;
/// `batch`: appends wait when this many records are queued (a stalled disk
/// slows callers down instead of growing memory without bound).
pub const BATCH_QUEUE_CAP: usize = 16_384;

/// How a session writes its log.
#[derive(Debug, Clone, Default)]
pub struct AuditOptions {
    /// The session id written in every record.
    pub session: String,
    pub fsync: FsyncMode,
    /// HMAC key ([`crate::load_key`]); `None`: plain SHA-256.
    pub key: Option<Vec<u8>>,
    /// JSON pointers into tool arguments replaced by `"[REDACTED]"`.
    pub redact: Vec<String>,
    /// Values of `env`, `env_from` and `headers` (warden collects them from its configuration):
    /// scrubbed from every string of every record, whatever the pointers say.
    pub secrets: Vec<String>,
}

/// An open audit log. `append` takes `&self` and may be called from many
/// threads or tokio tasks at once.
///
/// * `every_record`: `append` writes the record and `fdatasync`s before it
///   returns (blocking for the sync: from async code prefer
///   `spawn_blocking`, or `batch`).
/// * `never`: `append` writes the record before it returns; no sync.
/// * `batch` (group commit): `append` stamps and queues the record and
///   returns at once; a writer thread chains and writes everything queued
///   with one `write(2)` under one file lock, and `fdatasync`s at most
///   [`BATCH_INTERVAL`] after the first unsynced record or at
///   [`BATCH_MAX_RECORDS`]. Close/drop writes and syncs what is left. A
///   write or sync failure is returned by the next `append` and by
///   `close`. `kill -9` can lose the records queued in the last moments
///   (the writer drains the queue as soon as it is woken).
pub struct AuditLog {
    inner: Arc<Inner>,
    writer: Option<JoinHandle<()>>,
}

struct Inner {
    path: PathBuf,
    file: File,
    session: String,
    fsync: FsyncMode,
    hasher: Hasher,
    scrubber: Scrubber,
    state: Mutex<State>,
    /// Wakes the batch writer.
    wake: Condvar,
    /// Wakes appends waiting for queue space.
    space: Condvar,
}

/// The chain head: the last record in the file, as far as this log knows.
#[derive(Clone)]
struct Head {
    seq: u64,
    prev: String,
    /// File size right after our last write (or read of the tail): a
    /// different size under the lock means another process appended.
    end: u64,
}

struct State {
    /// Only the batch writer thread changes it in `batch` mode.
    head: Head,
    /// `batch`: events and their time stamps, waiting for the writer.
    queue: Vec<(DateTime<Utc>, Event)>,
    /// `batch`: the writer is waiting for work (so an append must wake it).
    writer_idle: bool,
    /// `batch`: records written since the last `fdatasync`, and since when.
    unsynced: usize,
    unsynced_since: Option<Instant>,
    shutdown: bool,
    /// A failed `fdatasync` (or a write that could not be undone) makes
    /// the log unusable: the kernel may have dropped the dirty pages, and
    /// retrying would claim durability falsely.
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

        let head = {
            let _lock = FileLock::exclusive(&file, path)?;
            let size = file.metadata().map_err(|e| io_err("stat", e))?.len();
            match read_tail(&file, path, size, &hasher)? {
                Tail::Empty => Head {
                    seq: 0,
                    prev: ZERO_HASH.to_string(),
                    end: size,
                },
                Tail::Last { seq, hash } => Head {
                    seq,
                    prev: hash,
                    end: size,
                },
            }
        };
        tracing::debug!(path = %path.display(), next_seq = head.seq + 1, mode = %hasher.mode(), "audit log opened");

        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            file,
            session,
            fsync: opts.fsync,
            hasher,
            scrubber,
            state: Mutex::new(State {
                head,
                queue: Vec::new(),
                writer_idle: false,
                unsynced: 0,
                unsynced_since: None,
                shutdown: false,
                failed: None,
            }),
            wake: Condvar::new(),
            space: Condvar::new(),
        });
        let writer = if opts.fsync == FsyncMode::Batch {
            let inner = Arc::clone(&inner);
            Some(
                std::thread::Builder::new()
                    .name("audit-writer".into())
                    .spawn(move || batch_writer(&inner))
                    .map_err(|e| io_err("start the batch writer thread", e))?,
            )
        } else {
            None
        };
        Ok(AuditLog { inner, writer })
    }

    /// Appends one record: redacts and scrubs it, then (see [`AuditLog`])
    /// chains and writes it in one `write(2)` under the file lock, or
    /// queues it for the batch writer.
    pub fn append(&self, event: Event) -> Result<(), AuditError> {
        let inner = &*self.inner;
        if inner.fsync == FsyncMode::Batch {
            // Cheap on purpose: stamp and queue; the writer thread does the
            // serialising, scrubbing, hashing and writing.
            let mut st = inner.lock_state();
            while st.queue.len() >= BATCH_QUEUE_CAP && st.failed.is_none() && !st.shutdown {
                st = inner.space.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            if let Some(detail) = &st.failed {
                return Err(AuditError::Failed {
                    path: inner.path.clone(),
                    detail: detail.clone(),
                });
            }
            st.queue.push((Utc::now(), event));
            let wake = std::mem::take(&mut st.writer_idle);
            drop(st);
            if wake {
                inner.wake.notify_one();
            }
            return Ok(());
        }

        let mut st = inner.lock_state();
        if let Some(detail) = &st.failed {
            return Err(AuditError::Failed {
                path: inner.path.clone(),
                detail: detail.clone(),
            });
        }
        let body = inner.prepare(Utc::now(), event)?;
        let mut head = st.head.clone();
        let result = inner.write_records(&mut head, std::iter::once(body));
        st.head = head;
        if let Err(e) = result {
            if let AuditError::Failed { detail, .. } = &e {
                st.failed = Some(detail.clone());
            }
            return Err(e);
        }
        if inner.fsync == FsyncMode::EveryRecord
            && let Err(e) = inner.file.sync_data()
        {
            st.failed = Some(format!("fdatasync failed: {e}"));
            return Err(inner.io_err("fdatasync", e));
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
    /// write, or the tail it read); in `batch` mode, of the last record
    /// written so far.
    pub fn last(&self) -> (u64, String) {
        let st = self.inner.lock_state();
        (st.head.seq, st.head.prev.clone())
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub fn mode(&self) -> HashMode {
        self.inner.hasher.mode()
    }

    /// Writes and syncs what is queued (`batch`) and closes the log,
    /// returning any write or sync failure. Dropping does the same but can
    /// only log a failure.
    pub fn close(mut self) -> Result<(), AuditError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), AuditError> {
        if let Some(handle) = self.writer.take() {
            {
                let mut st = self.inner.lock_state();
                st.shutdown = true;
                self.inner.wake.notify_one();
                self.inner.space.notify_all();
            }
            if handle.join().is_err() {
                return Err(AuditError::Failed {
                    path: self.inner.path.clone(),
                    detail: "the batch writer thread panicked".into(),
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

    /// The event as a record body: serialised, `redact` pointers applied to
    /// tool-call arguments, secrets scrubbed, credentials in URLs masked
    /// outside the arguments ([`warden_core::redact`]), time-stamped.
    fn prepare(&self, ts: DateTime<Utc>, event: Event) -> Result<Map<String, Value>, AuditError> {
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
            self.scrubber.redact_pointers(args);
        }
        self.scrubber.scrub_map(&mut body, Some("event"));
        // Credentials in URLs (userinfo, query values, fragments) in any
        // text but the call's arguments, which are recorded as sent.
        for (key, value) in body.iter_mut() {
            if key != "arguments" && key != "event" {
                crate::scrub::redact_urls(value);
            }
        }
        debug_assert!(!body.contains_key("hash"));
        body.insert(
            "ts".into(),
            ts.to_rfc3339_opts(SecondsFormat::Micros, true).into(),
        );
        Ok(body)
    }

    fn io_err(&self, action: &'static str, source: std::io::Error) -> AuditError {
        AuditError::Io {
            path: self.path.clone(),
            action,
            source,
        }
    }

    /// Chains `bodies` (stamped, scrubbed events) onto `head` and writes
    /// them with one `write(2)` under the exclusive file lock, first
    /// re-reading the tail if another process appended since `head`.
    /// Returns [`AuditError::Failed`] only when the file may now hold a
    /// partial line.
    fn write_records(
        &self,
        head: &mut Head,
        bodies: impl IntoIterator<Item = Map<String, Value>>,
    ) -> Result<usize, AuditError> {
        let _lock = FileLock::exclusive(&self.file, &self.path)?;
        let size = self
            .file
            .metadata()
            .map_err(|e| self.io_err("stat", e))?
            .len();
        if size != head.end {
            // Another writer appended (or the file was cut): continue from
            // whatever its last record is now.
            match read_tail(&self.file, &self.path, size, &self.hasher)? {
                Tail::Empty => {
                    head.seq = 0;
                    head.prev = ZERO_HASH.to_string();
                }
                Tail::Last { seq, hash } => {
                    head.seq = seq;
                    head.prev = hash;
                }
            }
            if size < head.end {
                tracing::warn!(path = %self.path.display(), "audit log shrank since this session's last write");
            }
            head.end = size;
        }
        let mut seq = head.seq;
        let mut prev = head.prev.clone();
        let mut buf: Vec<u8> = Vec::new();
        let mut count = 0;
        for mut body in bodies {
            seq += 1;
            body.insert("v".into(), RECORD_VERSION.into());
            body.insert("seq".into(), seq.into());
            body.insert("session".into(), self.session.clone().into());
            body.insert("alg".into(), self.hasher.mode().as_str().into());
            body.insert("prev".into(), prev.into());
            let (hash, line) = chain_line(&body, &self.hasher);
            buf.extend_from_slice(&line);
            prev = hash;
            count += 1;
        }
        if let Err(e) = (&self.file).write_all(&buf) {
            // Never leave a partial line behind: cut back to where it began.
            return Err(match self.file.set_len(size) {
                Ok(()) => self.io_err("write", e),
                Err(cut) => AuditError::Failed {
                    path: self.path.clone(),
                    detail: format!("a failed write ({e}) could not be undone: {cut}"),
                },
            });
        }
        head.seq = seq;
        head.prev = prev;
        head.end = size + buf.len() as u64;
        Ok(count)
    }
}

/// An exclusive `flock(2)` on the log, released on drop. Taken through a
/// duplicate of the descriptor: a flock belongs to the open file
/// description, which the duplicate shares.
struct FileLock {
    _held: Flock<File>,
}

impl FileLock {
    fn exclusive(file: &File, path: &Path) -> Result<Self, AuditError> {
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            action: "lock",
            source,
        };
        let mut dup = file.try_clone().map_err(io)?;
        loop {
            match Flock::lock(dup, FlockArg::LockExclusive) {
                Ok(held) => return Ok(FileLock { _held: held }),
                Err((back, Errno::EINTR)) => dup = back,
                Err((_, errno)) => return Err(io(errno.into())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_log_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AuditLog>();
    }
}
