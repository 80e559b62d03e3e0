//! The writer: [`AuditLog`].
//!
//! * this file: the log's API, its state, opening;
//! * `writer`: chaining and writing records under the file lock;
//! * `line`: a record's line (`encode`: the one-pass canonical encoder);
//! * `batch`: `batch` mode's writer thread;
//! * `lock`: the `flock` around each write.

mod accept;
mod batch;
mod encode;
mod line;
mod lock;
mod writer;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::chain::{Hasher, Tail, read_tail};
use crate::head::HeadWriter;
use crate::scrub::Scrubber;
use crate::{AuditError, Event, FsyncMode, HashMode, ZERO_HASH};
pub use accept::{AcceptedHead, accept_head};
use batch::batch_writer;
use encode::Encoder;
use lock::FileLock;

/// `batch`: the longest a written record waits for its `fdatasync`.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(50);
/// `batch`: this many queued records are written by the writer thread at
/// once, without waiting for the next `write_ahead` or the sync's deadline.
pub const BATCH_MAX_RECORDS: usize = 256;
/// `batch`: this many written, unsynced records trigger an `fdatasync`
/// before [`BATCH_INTERVAL`] is up. High enough that under load the
/// interval decides: an `fdatasync` costs the writer thread about a
/// millisecond of CPU whatever it syncs, and at 256 records a gateway
/// answering 12,500 calls/s (two records each) synced 100 times a second:
/// those syncs, and the writes they slowed, were a quarter of warden's CPU
/// per call (67 → 51 µs; BENCHMARKS.md, "Eighteenth pass"). What a power
/// loss can take is bounded by the interval either way.
pub const BATCH_SYNC_RECORDS: usize = 4096;
/// `batch`: appends wait when this many records are queued (a stalled disk
/// slows callers down instead of growing memory without bound).
pub const BATCH_QUEUE_CAP: usize = 16_384;
/// Default of [`AuditOptions::max_value_bytes`] (`audit.max_value_bytes`).
pub const DEFAULT_MAX_VALUE_BYTES: usize = 4096;
/// Recorded arguments that would take more than this many bytes even with
/// their long strings shortened (many keys or values: 6000 strings of 4000
/// bytes made a 24 MB record) are recorded as `{"omitted", "bytes",
/// "sha256"}` only, so that every record stays bounded.
pub const MAX_ARGUMENTS_BYTES: usize = 256 * 1024;
/// A free-text field of a record (an `error`, a decision's reason, a name
/// as the caller gave it, a server's exit reason) longer than this is
/// recorded as its first [`TEXT_KEPT`] bytes and `… [N bytes, sha256 H]`:
/// a server's error message is the server's to size, not the log's.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;
/// What is kept of a free-text field longer than [`MAX_TEXT_BYTES`].
pub const TEXT_KEPT: usize = 4 * 1024;
/// A decision with more reasons than this keeps the first ones and one
/// saying how many more there were (and their digest).
pub const MAX_REASONS: usize = 32;
/// The longest line a reader of the log takes in (16 MiB, without its
/// `\n`). Every record warden writes is bounded well under 1 MiB (the
/// limits above), so a longer line is not one of its records: `verify`
/// reports it, `show` skips it and a session refuses to extend the log,
/// each without reading it whole (a 1 GB line, written by whoever can
/// write the file, took four times its size in memory to check).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How a session writes its log.
#[derive(Debug, Clone)]
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
    /// A string inside recorded arguments longer than this many bytes is
    /// stored as `{"prefix", "bytes", "sha256"}`.
    pub max_value_bytes: usize,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            session: String::new(),
            fsync: FsyncMode::default(),
            key: None,
            redact: Vec::new(),
            secrets: Vec::new(),
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
        }
    }
}

/// An open audit log. `append` and `write_ahead` take `&self` and may be
/// called from many threads or tokio tasks at once.
///
/// * `every_record`: `append` writes the record and `fdatasync`s before it
///   returns (blocking for the sync: from async code prefer
///   `spawn_blocking`, or `batch`).
/// * `never`: `append` writes the record before it returns; no sync.
/// * `batch` (group commit): `append` stamps and queues the record and
///   returns at once; the queue is chained and written with one `write(2)`
///   under one file lock by the next [`AuditLog::write_ahead`] (on its
///   caller's thread) or by a writer thread, which `fdatasync`s at most
///   [`BATCH_INTERVAL`] after the first unsynced record or at
///   [`BATCH_SYNC_RECORDS`] and writes the queue at the latest then. Close/
///   drop writes and syncs what is left. A write or sync failure is
///   returned by the next `append` and by `close`. `kill -9` can lose the
///   records appended in the last [`BATCH_INTERVAL`], as a power loss can.
///
/// [`AuditLog::write_ahead`] is `append` for a record that must be in the
/// file before the caller acts on it (the pending record of a call): in
/// `batch` it writes on the caller's thread, after whatever was queued
/// before it, and leaves the `fdatasync` to the writer thread.
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
    /// Replaced, never changed, when secrets are added during the session
    /// ([`AuditLog::add_secrets`]); a write uses the one it started with.
    scrubber: RwLock<Arc<Scrubber>>,
    max_value_bytes: usize,
    /// `FILE.head`.
    head_file: HeadWriter,
    /// Device and inode of `file`: before each write the path must still
    /// name it (a log renamed or removed while warden runs would take
    /// records no one sees).
    identity: (u64, u64),
    /// Held while records are chained and written, so records reach the
    /// file in the order they were chained. Lock order: `chain`, then
    /// `state`.
    chain: Mutex<Chain>,
    state: Mutex<State>,
    /// Wakes the batch writer.
    wake: Condvar,
    /// Wakes appends waiting for queue space.
    space: Condvar,
}

/// Where the chain stands: the last record in the file, as far as this log
/// knows; and what writing needs, reused from record to record.
struct Chain {
    seq: u64,
    prev: String,
    /// File size right after our last write (or read of the tail): a
    /// larger size under the lock means another process appended; a
    /// smaller one, that the log was cut.
    end: u64,
    /// Where the line of record `seq` starts (it ends at `end` until
    /// another process appends): checked to be still there before the
    /// chain is continued from a tail someone else wrote.
    last_start: u64,
    lock: FileLock,
    encoder: Encoder,
    /// The lines of the records being written (one `write(2)`).
    buf: Vec<u8>,
}

struct State {
    /// `batch`: events and their time stamps, waiting for the writer.
    queue: Vec<(DateTime<Utc>, Event)>,
    /// `batch`: the writer is waiting for work (so an append must wake it).
    writer_idle: bool,
    /// `batch`: records written since the last `fdatasync`, and since when.
    unsynced: usize,
    unsynced_since: Option<Instant>,
    /// `seq` and `hash` of the last record this process wrote: where the
    /// head file moves once it is synced.
    written: Option<(u64, String)>,
    shutdown: bool,
    /// A failed `fdatasync` (or a write that could not be undone, or a
    /// permanent failure: the log cut, moved or replaced) makes the log
    /// unusable: the kernel may have dropped the dirty pages, and retrying
    /// would claim durability falsely.
    failed: Option<String>,
    /// `batch`: queued records a failed write took with it (the file left
    /// as it was: a full disk, a size limit). The next write that succeeds
    /// starts with an `audit_gap` record counting them.
    dropped: Option<Dropped>,
    /// Why the head file is behind the log (`Inner::advance_head`).
    head_failed: Option<HeadFailure>,
}

/// Why the head file could not be updated.
#[derive(Debug, Clone)]
struct HeadFailure {
    why: String,
    /// Its path replaced or its lock held: not tried again. Otherwise (a
    /// failed write) the next update tries again.
    for_good: bool,
    /// The record (seq, hash) the head was to be moved to.
    at: (u64, String),
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
    /// continues its chain, keeping its head file `FILE.head` (created with
    /// a new, empty log). Refused: a path that is not a regular file once
    /// symlinks are followed ([`AuditError::NotRegular`]); a torn final
    /// line, a last record that is not a record, or one that does not
    /// verify with `opts.key` (other key or other mode); a log with records
    /// but no head file, or an empty one ([`AuditError::NoHead`]); a head
    /// file that does not verify, names the other mode, is ahead of the log
    /// (records were cut off) or names a record the log no longer has.
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
        // Symlinks are followed (a log may be a link to where it is kept);
        // what they lead to must be a regular file, checked on the opened
        // descriptor. A missing log is never created through a link
        // (`crate::create`). Non-blocking so that opening a FIFO or a
        // device in its place cannot hang (no effect on a regular file).
        let file = crate::create::open_or_create(
            path,
            OpenOptions::new()
                .read(true)
                .append(true)
                .mode(0o600)
                .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY),
        )
        .map_err(|e| io_err("open", e))?;
        let session = scrubber.scrub_str(&opts.session).unwrap_or(opts.session);
        let meta = file.metadata().map_err(|e| io_err("stat", e))?;
        if !meta.file_type().is_file() {
            // `/dev/null` would take every record and keep none, a pipe
            // would keep no head: either way a session would run
            // unaudited while it looks audited.
            return Err(AuditError::NotRegular {
                path: path.to_path_buf(),
                kind: file_kind(&meta),
            });
        }
        let identity = (meta.dev(), meta.ino());

        let mut lock = FileLock::new();
        let held = lock.exclusive(&file, path)?;
        let size = file.metadata().map_err(|e| io_err("stat", e))?.len();
        let (seq, prev, last_start) = match read_tail(&file, path, size, &hasher)? {
            Tail::Empty => (0, ZERO_HASH.to_string(), 0),
            Tail::Last { seq, hash, start } => (seq, hash, start),
        };
        let head_file = open_head(path, &file, &hasher, size, seq, &prev)?;
        lock.release(held);
        let chain = Chain {
            seq,
            prev,
            end: size,
            last_start,
            lock,
            encoder: Encoder::default(),
            buf: Vec::new(),
        };
        tracing::debug!(path = %path.display(), next_seq = chain.seq + 1, mode = %hasher.mode(), "audit log opened");

        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            file,
            session,
            fsync: opts.fsync,
            hasher,
            scrubber: RwLock::new(Arc::new(scrubber)),
            max_value_bytes: opts.max_value_bytes.max(1),
            head_file,
            identity,
            chain: Mutex::new(chain),
            state: Mutex::new(State {
                queue: Vec::new(),
                writer_idle: false,
                unsynced: 0,
                unsynced_since: None,
                written: None,
                shutdown: false,
                failed: None,
                dropped: None,
                head_failed: None,
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
        if inner.fsync != FsyncMode::Batch {
            return inner.write_now(event);
        }
        // Cheap on purpose: stamp and queue; the writer thread does the
        // serialising, scrubbing, hashing and writing.
        let mut st = inner.lock_state();
        while st.queue.len() >= BATCH_QUEUE_CAP && st.failed.is_none() && !st.shutdown {
            st = inner.space.wait(st).unwrap_or_else(PoisonError::into_inner);
        }
        inner.check_failed(&st)?;
        st.queue.push((Utc::now(), event));
        // Wake the writer only if nothing else will write this record
        // soon. While records are unsynced the writer already waits for
        // the sync, at most BATCH_INTERVAL away, and writes the queue then;
        // the next `write_ahead` writes it sooner, on its own thread. A
        // wake-up per call was a thread switch per call (issue 15).
        let wake = (st.unsynced == 0 || st.queue.len() >= BATCH_MAX_RECORDS)
            && std::mem::take(&mut st.writer_idle);
        drop(st);
        if wake {
            inner.wake.notify_one();
        }
        Ok(())
    }

    /// Appends a record that must be in the file when this returns: the
    /// write-ahead (`pending`) record of a call, written before the call is
    /// sent. What else holds when it returns depends on `fsync`:
    ///
    /// * `every_record`: the record is written and `fdatasync`ed (it
    ///   survives a crash of warden and a power loss);
    /// * `batch`: the record, and every record queued before it, is written
    ///   with one `write(2)` on the caller's thread; the writer thread
    ///   `fdatasync`s it within [`BATCH_INTERVAL`] (it survives `kill -9` of
    ///   warden at once, a power loss after at most that interval);
    /// * `never`: the record is written (it survives `kill -9` of warden,
    ///   not a power loss).
    ///
    /// An error means the record is not in the file (a failed write is cut
    /// back off it): the caller must not act as if it were.
    pub fn write_ahead(&self, event: Event) -> Result<(), AuditError> {
        let inner = &*self.inner;
        if inner.fsync != FsyncMode::Batch {
            return inner.write_now(event);
        }
        let ts = Utc::now();
        let mut event = event;
        let mut chain = inner.lock_chain();
        let mut st = inner.lock_state();
        inner.check_failed(&st)?;
        let mut queued = std::mem::take(&mut st.queue);
        if queued.len() >= BATCH_QUEUE_CAP {
            // Only then can appends be waiting for space.
            inner.space.notify_all();
        }
        let gap = st.dropped.take();
        drop(st);
        let carried = Dropped::count(&queued);
        for (_, queued) in &mut queued {
            inner.clean_arguments_of(queued);
        }
        inner.clean_arguments_of(&mut event);
        let result = inner.write_records(
            &mut chain,
            gap.as_ref()
                .map(Dropped::record)
                .into_iter()
                .chain(queued)
                .chain(std::iter::once((ts, event))),
        );
        let mut st = inner.lock_state();
        match result {
            Ok(n) => {
                inner.note_written(&mut st, n, chain.seq, &chain.prev);
                Ok(())
            }
            Err(e) => {
                // The pending record is the caller's to count; the records
                // queued by `append` were in this write too.
                note_dropped(&mut st, gap, carried, &e);
                Err(e)
            }
        }
    }

    /// The arguments as they would be recorded: `redact` pointers
    /// replaced, long strings shortened, secrets scrubbed.
    pub fn redact_arguments(&self, args: &Value) -> Value {
        let mut out = args.clone();
        self.inner
            .clean_arguments(&mut out, || crate::args_digest(args));
        self.inner.scrubber().scrub(&mut out);
        out
    }

    /// `seq` and `hash` of the last record this log knows of (its own last
    /// write, or the tail it read); in `batch` mode, of the last record
    /// written so far.
    pub fn last(&self) -> (u64, String) {
        let chain = self.inner.lock_chain();
        (chain.seq, chain.prev.clone())
    }

    /// Adds secret values to remove from every record written from now
    /// on: values that become known during the session (an OAuth access
    /// token refreshed mid-session) are scrubbed like the configured ones.
    pub fn add_secrets(&self, secrets: &[String]) {
        let mut scrubber = self
            .inner
            .scrubber
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(extended) = scrubber.with_more_secrets(secrets) {
            *scrubber = Arc::new(extended);
        }
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The head file kept beside the log (`Some` always: a log that is
    /// not a regular file, and so could have no head, is refused).
    pub fn head_path(&self) -> Option<&Path> {
        Some(self.inner.head_file.path())
    }

    /// Why the head file is behind the log, while it is (a head that fell
    /// behind because a write failed is tried again first): records after
    /// it could be cut from the log's end without `verify` noticing, so a
    /// fail-closed session sends no calls meanwhile (CONTRACT §6).
    pub fn head_failure(&self) -> Option<String> {
        self.inner.retry_head();
        self.inner
            .lock_state()
            .head_failed
            .as_ref()
            .map(|f| f.why.clone())
    }

    pub fn mode(&self) -> HashMode {
        self.inner.hasher.mode()
    }

    pub fn fsync(&self) -> FsyncMode {
        self.inner.fsync
    }

    /// Writes and syncs what is queued (`batch`), brings the head file up
    /// to date and closes the log, returning any write or sync failure.
    /// Dropping does the same but can only log a failure.
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
        let st = self.inner.lock_state();
        self.inner.check_failed(&st)?;
        // Records a failed write took with it, and no later write to say
        // so in the log: the caller must hear it.
        match &st.dropped {
            Some(gap) => Err(AuditError::Failed {
                path: self.inner.path.clone(),
                detail: format!(
                    "{} record(s) since {} could not be written: {}",
                    gap.lost, gap.since, gap.error
                ),
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

/// `open`'s head file, checked against the log's tail (under the log's
/// lock): a head in the other mode, one ahead of the log, or one naming a
/// record the log no longer has is refused. A new (empty) log gets a
/// head; a log with records and no head, or an empty head file, is
/// refused: creating a head for it would vouch for an end no one checked
/// (a cut tail plus a removed head would pass `verify`).
fn open_head(
    path: &Path,
    file: &File,
    hasher: &Hasher,
    size: u64,
    seq: u64,
    prev: &str,
) -> Result<HeadWriter, AuditError> {
    let no_head = |why: &str| AuditError::NoHead {
        path: path.to_path_buf(),
        why: format!("{why} ({})", crate::head_path(path).display()),
    };
    let Some(head_file) = HeadWriter::open(path, hasher.clone(), seq == 0)? else {
        return Err(no_head("no head file"));
    };
    let mode = hasher.mode();
    match head_file.read()? {
        None if seq > 0 => return Err(no_head("an empty head file")),
        None => {}
        Some(head) if head.mode != mode => {
            return Err(AuditError::HeadMode {
                path: path.to_path_buf(),
                head_mode: head.mode,
                ours: mode,
            });
        }
        Some(head) if head.seq > seq => {
            return Err(AuditError::Truncated {
                path: path.to_path_buf(),
                head_seq: head.seq,
                log_seq: seq,
            });
        }
        Some(_) => {}
    }
    // Moving the head to the tail also checks that the log still has the
    // record the head names (when it lags behind the tail).
    head_file.advance(seq, prev, |at| {
        crate::chain::hash_at(file, size, at).map_err(|source| AuditError::Io {
            path: path.to_path_buf(),
            action: "read the record its head names",
            source,
        })
    })?;
    Ok(head_file)
}

/// What a file that is not a regular file is, for messages.
pub(crate) fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        "a folder"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Queued records a failed `batch` write took with it (see
/// [`State::dropped`]).
#[derive(Debug, Clone)]
struct Dropped {
    lost: u64,
    since: String,
    error: String,
}

impl Dropped {
    /// How many records `batch` stands for: an `audit_gap` queued by the
    /// session (it counts calls that went unrecorded) for its `lost`, any
    /// other record for one.
    fn count(batch: &[(DateTime<Utc>, Event)]) -> u64 {
        batch
            .iter()
            .map(|(_, event)| match event {
                Event::AuditGap { lost, .. } => *lost,
                _ => 1,
            })
            .sum()
    }

    /// The `audit_gap` record that says so, first in the next write.
    fn record(&self) -> (DateTime<Utc>, Event) {
        (
            Utc::now(),
            Event::AuditGap {
                lost: self.lost,
                since: self.since.clone(),
                error: self.error.clone(),
            },
        )
    }
}

/// After a failed `batch` write of `carried` queued records (and `gap`,
/// the `audit_gap` record it began with, if any): a permanent failure
/// stops the log; otherwise the file is as it was before the write (a
/// failed write is cut back), the chain goes on from its last record, and
/// the records are counted for the next `audit_gap`. Stopping here lost
/// every later record of the session too, with nothing in the log saying
/// so, once the disk had room again.
fn note_dropped(st: &mut State, gap: Option<Dropped>, carried: u64, e: &AuditError) {
    if e.is_permanent() {
        st.failed.get_or_insert_with(|| e.to_string());
        return;
    }
    if carried == 0 && gap.is_none() {
        return;
    }
    let mut gap = gap.unwrap_or_else(|| Dropped {
        lost: 0,
        since: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        error: e.to_string(),
    });
    gap.lost += carried;
    st.dropped = Some(gap);
}

#[cfg(test)]
mod tests {
    use super::AuditLog;

    #[test]
    fn audit_log_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AuditLog>();
    }
}
