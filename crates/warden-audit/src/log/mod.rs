//! The writer: [`AuditLog`].

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};

use crate::chain::{Hasher, Tail, read_tail};
use crate::head::HeadWriter;
use crate::scrub::Scrubber;
use crate::{AuditError, Event, FsyncMode, HashMode, RECORD_VERSION, ZERO_HASH};
use warden_core::digest::canonical_json;

/// `batch`: the longest a written record waits for its `fdatasync`.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(50);
/// `batch`: this many written, unsynced records trigger an `fdatasync`.
pub const BATCH_MAX_RECORDS: usize = 256;
/// `batch`: appends wait when this many records are queued (a stalled disk
/// slows callers down instead of growing memory without bound).
pub const BATCH_QUEUE_CAP: usize = 16_384;
/// Default of [`AuditOptions::max_value_bytes`] (`audit.max_value_bytes`).
pub const DEFAULT_MAX_VALUE_BYTES: usize = 4096;

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
///   returns at once; a writer thread chains and writes everything queued
///   with one `write(2)` under one file lock, and `fdatasync`s at most
///   [`BATCH_INTERVAL`] after the first unsynced record or at
///   [`BATCH_MAX_RECORDS`]. Close/drop writes and syncs what is left. A
///   write or sync failure is returned by the next `append` and by
///   `close`. `kill -9` can lose the records queued in the last moments
///   (the writer drains the queue as soon as it is woken).
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
    scrubber: Scrubber,
    max_value_bytes: usize,
    /// `FILE.head`; `None` for a log that is not a regular file
    /// (`/dev/full`, a pipe).
    head_file: Option<HeadWriter>,
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
/// knows.
#[derive(Clone)]
struct Chain {
    seq: u64,
    prev: String,
    /// File size right after our last write (or read of the tail): a
    /// different size under the lock means another process appended.
    end: u64,
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
    /// failed batch) makes the log unusable: the kernel may have dropped
    /// the dirty pages, and retrying would claim durability falsely.
    failed: Option<String>,
    /// The head file could not be updated (reported once).
    head_failed: bool,
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
    /// continues its chain, keeping its head file `FILE.head` (created when
    /// missing). Refused: a torn final line, a last record that is not a
    /// record, or one that does not verify with `opts.key` (other key or
    /// other mode); a head file that does not verify, names the other
    /// mode, or is ahead of the log (records were cut off).
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
        let regular = file
            .metadata()
            .map_err(|e| io_err("stat", e))?
            .file_type()
            .is_file();
        let head_file = if regular {
            Some(HeadWriter::open(path, hasher.clone())?)
        } else {
            None
        };

        let chain = {
            let _lock = FileLock::exclusive(&file, path)?;
            let size = file.metadata().map_err(|e| io_err("stat", e))?.len();
            let chain = match read_tail(&file, path, size, &hasher)? {
                Tail::Empty => Chain {
                    seq: 0,
                    prev: ZERO_HASH.to_string(),
                    end: size,
                },
                Tail::Last { seq, hash } => Chain {
                    seq,
                    prev: hash,
                    end: size,
                },
            };
            if let Some(head_file) = &head_file {
                check_head(path, head_file, &chain, hasher.mode())?;
            }
            chain
        };
        tracing::debug!(path = %path.display(), next_seq = chain.seq + 1, mode = %hasher.mode(), "audit log opened");

        let inner = Arc::new(Inner {
            path: path.to_path_buf(),
            file,
            session,
            fsync: opts.fsync,
            hasher,
            scrubber,
            max_value_bytes: opts.max_value_bytes.max(1),
            head_file,
            chain: Mutex::new(chain),
            state: Mutex::new(State {
                queue: Vec::new(),
                writer_idle: false,
                unsynced: 0,
                unsynced_since: None,
                written: None,
                shutdown: false,
                failed: None,
                head_failed: false,
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
        let wake = std::mem::take(&mut st.writer_idle);
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
        let mut chain = inner.lock_chain();
        let mut st = inner.lock_state();
        inner.check_failed(&st)?;
        let queued = std::mem::take(&mut st.queue);
        inner.space.notify_all();
        drop(st);
        let had_queued = !queued.is_empty();
        let result = queued
            .into_iter()
            .map(|(ts, event)| inner.prepare(ts, event))
            .chain(std::iter::once(inner.prepare(ts, event)))
            .collect::<Result<Vec<_>, _>>()
            .and_then(|bodies| inner.write_records(&mut chain, bodies));
        let written = (chain.seq, chain.prev.clone());
        drop(chain);
        let mut st = inner.lock_state();
        match result {
            Ok(n) => {
                inner.note_written(&mut st, n, written);
                Ok(())
            }
            Err(e) => {
                // Records queued by `append` were in this write: they are
                // lost, so the log stops, as when the writer thread fails.
                if had_queued || matches!(e, AuditError::Failed { .. }) {
                    st.failed.get_or_insert_with(|| e.to_string());
                }
                Err(e)
            }
        }
    }

    /// The arguments as they would be recorded: `redact` pointers
    /// replaced, long strings shortened, secrets scrubbed.
    pub fn redact_arguments(&self, args: &Value) -> Value {
        let mut out = args.clone();
        self.inner.clean_arguments(&mut out);
        self.inner.scrubber.scrub(&mut out);
        out
    }

    /// `seq` and `hash` of the last record this log knows of (its own last
    /// write, or the tail it read); in `batch` mode, of the last record
    /// written so far.
    pub fn last(&self) -> (u64, String) {
        let chain = self.inner.lock_chain();
        (chain.seq, chain.prev.clone())
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The head file kept beside the log (`None` when the log is not a
    /// regular file).
    pub fn head_path(&self) -> Option<&Path> {
        self.inner.head_file.as_ref().map(HeadWriter::path)
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
        self.inner.check_failed(&st)
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!("{e}");
        }
    }
}

/// `open`'s check of the head file against the log's tail (under the log's
/// lock): a head in the other mode, one ahead of the log, or one naming
/// another last record is refused; a missing head is created.
fn check_head(
    path: &Path,
    head_file: &HeadWriter,
    chain: &Chain,
    mode: HashMode,
) -> Result<(), AuditError> {
    match head_file.read()? {
        None => head_file.advance(chain.seq, &chain.prev),
        Some(head) if head.mode != mode => Err(AuditError::HeadMode {
            path: path.to_path_buf(),
            head_mode: head.mode,
            ours: mode,
        }),
        Some(head) if head.seq > chain.seq => Err(AuditError::Truncated {
            path: path.to_path_buf(),
            head_seq: head.seq,
            log_seq: chain.seq,
        }),
        Some(head) if head.seq == chain.seq && head.hash != chain.prev => {
            Err(AuditError::HeadMismatch {
                path: path.to_path_buf(),
                seq: head.seq,
            })
        }
        Some(_) => head_file.advance(chain.seq, &chain.prev),
    }
}

impl Inner {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_chain(&self) -> MutexGuard<'_, Chain> {
        self.chain.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_failed(&self, st: &State) -> Result<(), AuditError> {
        match &st.failed {
            Some(detail) => Err(AuditError::Failed {
                path: self.path.clone(),
                detail: detail.clone(),
            }),
            None => Ok(()),
        }
    }

    /// `every_record` and `never`: chain and write on this thread, then
    /// sync (`every_record`) and move the head file.
    fn write_now(&self, event: Event) -> Result<(), AuditError> {
        let mut chain = self.lock_chain();
        self.check_failed(&self.lock_state())?;
        let body = self.prepare(Utc::now(), event)?;
        let result = self.write_records(&mut chain, std::iter::once(body));
        let written = (chain.seq, chain.prev.clone());
        drop(chain);
        if let Err(e) = result {
            if let AuditError::Failed { detail, .. } = &e {
                self.lock_state().failed = Some(detail.clone());
            }
            return Err(e);
        }
        if self.fsync == FsyncMode::EveryRecord
            && let Err(e) = self.file.sync_data()
        {
            self.lock_state().failed = Some(format!("fdatasync failed: {e}"));
            return Err(self.io_err("fdatasync", e));
        }
        self.advance_head(&written);
        Ok(())
    }

    /// `batch`: `n` records were written up to `written`; the writer
    /// thread syncs them (woken if it waits for work).
    fn note_written(&self, st: &mut State, n: usize, written: (u64, String)) {
        if n == 0 {
            return;
        }
        if st.unsynced == 0 {
            st.unsynced_since = Some(Instant::now());
        }
        st.unsynced += n;
        st.written = Some(written);
        if std::mem::take(&mut st.writer_idle) {
            self.wake.notify_one();
        }
    }

    /// Moves the head file to a record that is in the file (and synced,
    /// where the mode syncs). A failure weakens truncation detection but
    /// loses no record: it is reported once, not returned.
    fn advance_head(&self, (seq, hash): &(u64, String)) {
        let Some(head_file) = &self.head_file else {
            return;
        };
        if let Err(error) = head_file.advance(*seq, hash) {
            let mut st = self.lock_state();
            if !std::mem::replace(&mut st.head_failed, true) {
                tracing::error!(%error, "the audit head file could not be updated; truncation of the log's end may go unnoticed");
            }
        }
    }

    /// `redact` pointers and long strings, for recorded arguments.
    fn clean_arguments(&self, args: &mut Value) {
        self.scrubber.redact_pointers(args);
        self.scrubber
            .shorten_long_strings(args, self.max_value_bytes);
    }

    /// The event as a record body: serialised, `redact` pointers applied
    /// and long strings shortened in call arguments, secrets scrubbed,
    /// credentials in URLs masked outside the arguments
    /// ([`warden_core::redact`]), time-stamped.
    fn prepare(&self, ts: DateTime<Utc>, event: Event) -> Result<Map<String, Value>, AuditError> {
        let has_arguments = matches!(event, Event::ToolCall(_) | Event::Request(_));
        let mut body = match serde_json::to_value(&event)? {
            Value::Object(map) => map,
            other => {
                let mut map = Map::new();
                map.insert("event".into(), other);
                map
            }
        };
        drop(event);
        if has_arguments && let Some(args) = body.get_mut("arguments") {
            self.clean_arguments(args);
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

    /// Chains `bodies` (stamped, scrubbed events) onto `chain` and writes
    /// them with one `write(2)` under the exclusive file lock, first
    /// re-reading the tail if another process appended since `chain`.
    /// Returns [`AuditError::Failed`] only when the file may now hold a
    /// partial line.
    fn write_records(
        &self,
        chain: &mut Chain,
        bodies: impl IntoIterator<Item = Map<String, Value>>,
    ) -> Result<usize, AuditError> {
        let _lock = FileLock::exclusive(&self.file, &self.path)?;
        let size = self
            .file
            .metadata()
            .map_err(|e| self.io_err("stat", e))?
            .len();
        if size != chain.end {
            // Another writer appended (or the file was cut): continue from
            // whatever its last record is now.
            match read_tail(&self.file, &self.path, size, &self.hasher)? {
                Tail::Empty => {
                    chain.seq = 0;
                    chain.prev = ZERO_HASH.to_string();
                }
                Tail::Last { seq, hash } => {
                    chain.seq = seq;
                    chain.prev = hash;
                }
            }
            if size < chain.end {
                tracing::warn!(path = %self.path.display(), "audit log shrank since this session's last write");
            }
            chain.end = size;
        }
        let mut seq = chain.seq;
        let mut prev = chain.prev.clone();
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
        if let Err((written, e)) = write_all_counted(&self.file, &buf) {
            // Never leave a partial line behind: cut back to where it began
            // (nothing to cut when nothing was written, e.g. `/dev/full`).
            if written == 0 {
                return Err(self.io_err("write", e));
            }
            return Err(match self.file.set_len(size) {
                Ok(()) => self.io_err("write", e),
                Err(cut) => AuditError::Failed {
                    path: self.path.clone(),
                    detail: format!("a failed write ({e}) could not be undone: {cut}"),
                },
            });
        }
        chain.seq = seq;
        chain.prev = prev;
        chain.end = size + buf.len() as u64;
        Ok(count)
    }
}

/// `write_all`, telling how many bytes were written when it fails.
fn write_all_counted(mut file: &File, buf: &[u8]) -> Result<(), (usize, std::io::Error)> {
    let mut written = 0;
    while written < buf.len() {
        match file.write(&buf[written..]) {
            Ok(0) => {
                return Err((
                    written,
                    std::io::Error::new(std::io::ErrorKind::WriteZero, "wrote nothing"),
                ));
            }
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((written, e)),
        }
    }
    Ok(())
}

/// `batch` mode: drains the queue as soon as there is work, writing each
/// batch with one `write(2)`; `fdatasync`s at most [`BATCH_INTERVAL`] after
/// the first unsynced record (its own or a [`AuditLog::write_ahead`]'s) or
/// once [`BATCH_MAX_RECORDS`] are unsynced, and a last time on shutdown,
/// moving the head file after each sync.
fn batch_writer(inner: &Inner) {
    loop {
        // Wait for records, a due sync, or shutdown.
        {
            let mut st = inner.lock_state();
            while st.queue.is_empty() && !st.shutdown {
                let due = st
                    .unsynced_since
                    .map(|since| BATCH_INTERVAL.saturating_sub(since.elapsed()));
                st.writer_idle = true;
                st = match due {
                    Some(left) if left.is_zero() => break,
                    Some(left) => {
                        inner
                            .wake
                            .wait_timeout(st, left)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                    None => inner.wake.wait(st).unwrap_or_else(PoisonError::into_inner),
                };
            }
            st.writer_idle = false;
        }
        // Write what is queued, holding the chain so that a `write_ahead`
        // cannot overtake records queued before it.
        {
            let mut chain = inner.lock_chain();
            let mut st = inner.lock_state();
            let batch = std::mem::take(&mut st.queue);
            inner.space.notify_all();
            if !batch.is_empty() && st.failed.is_none() {
                drop(st);
                let result = batch
                    .into_iter()
                    .map(|(ts, event)| inner.prepare(ts, event))
                    .collect::<Result<Vec<_>, _>>()
                    .and_then(|bodies| inner.write_records(&mut chain, bodies));
                let written = (chain.seq, chain.prev.clone());
                drop(chain);
                let mut st = inner.lock_state();
                match result {
                    Ok(n) => {
                        inner.note_written(&mut st, n, written);
                        st.writer_idle = false;
                    }
                    Err(e) => {
                        tracing::error!("{e}");
                        st.failed = Some(e.to_string());
                    }
                }
            }
        }
        let mut st = inner.lock_state();
        let finishing = st.shutdown && st.queue.is_empty();
        let due = st
            .unsynced_since
            .is_some_and(|since| since.elapsed() >= BATCH_INTERVAL);
        if st.unsynced > 0 && (finishing || due || st.unsynced >= BATCH_MAX_RECORDS) {
            st.unsynced = 0;
            st.unsynced_since = None;
            let synced = st.written.clone();
            drop(st);
            let result = inner.file.sync_data();
            match result {
                Ok(()) => {
                    if let Some(synced) = &synced {
                        inner.advance_head(synced);
                    }
                }
                Err(e) => {
                    tracing::error!(path = %inner.path.display(), error = %e, "audit log fdatasync failed");
                    inner.lock_state().failed = Some(format!("fdatasync failed: {e}"));
                }
            }
            st = inner.lock_state();
        }
        if finishing && st.unsynced == 0 {
            break;
        }
    }
}

/// Whether `serde_json::Map` iterates in sorted key order, as it does
/// unless some crate in the build enables serde_json's `preserve_order`.
/// Then `serde_json::to_writer` already writes canonical JSON (compact,
/// keys sorted bytewise, the same escapes and numbers), in one pass; else
/// [`canonical_json`] sorts explicitly. `verify` always uses
/// [`canonical_json`], so the two are checked against each other.
fn maps_are_sorted() -> bool {
    static SORTED: OnceLock<bool> = OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut map = Map::new();
        map.insert("b".into(), Value::Null);
        map.insert("a".into(), Value::Null);
        map.insert("B".into(), Value::Null);
        map.keys().map(String::as_str).eq(["B", "a", "b"])
    })
}

fn write_canonical(out: &mut Vec<u8>, value: &Value) {
    if maps_are_sorted() && serde_json::to_writer(&mut *out, value).is_ok() {
        return;
    }
    out.extend_from_slice(canonical_json(value).as_bytes());
}

/// The record's `hash` and its line: the canonical JSON of `body` (which
/// has no `hash`) is hashed, then `"hash":"…"` is spliced in at its sorted
/// place and `\n` added, so the record is serialised once.
fn chain_line(body: &Map<String, Value>, hasher: &Hasher) -> (String, Vec<u8>) {
    let mut keys: Vec<&String> = body.keys().collect();
    if !maps_are_sorted() {
        keys.sort();
    }
    let mut buf = Vec::with_capacity(1024);
    buf.push(b'{');
    // Where `"hash":…` goes, and whether a comma goes before (it follows a
    // member) or after it (it precedes one).
    let mut splice: Option<(usize, bool, bool)> = None;
    for (i, key) in keys.iter().enumerate() {
        if splice.is_none() && key.as_str() > "hash" {
            splice = Some((buf.len(), i > 0, i == 0));
        }
        if i > 0 {
            buf.push(b',');
        }
        if serde_json::to_writer(&mut buf, key.as_str()).is_err() {
            buf.extend_from_slice(canonical_json(&Value::String((*key).clone())).as_bytes());
        }
        buf.push(b':');
        write_canonical(&mut buf, &body[key.as_str()]);
    }
    buf.push(b'}');
    let hash = hasher.hash(&buf);

    let (at, comma_before, comma_after) =
        splice.unwrap_or((buf.len() - 1, !keys.is_empty(), false));
    let member = format!("\"hash\":\"{hash}\"");
    let mut line = Vec::with_capacity(buf.len() + member.len() + 2);
    line.extend_from_slice(&buf[..at]);
    if comma_before {
        line.push(b',');
    }
    line.extend_from_slice(member.as_bytes());
    if comma_after {
        line.push(b',');
    }
    line.extend_from_slice(&buf[at..]);
    line.push(b'\n');
    (hash, line)
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
    use serde_json::json;

    #[test]
    fn audit_log_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AuditLog>();
    }

    #[test]
    fn chain_line_is_the_canonical_record_with_its_hash() {
        for key in [None, Some(b"k".as_slice())] {
            let hasher = Hasher::new(key).unwrap();
            for body in [
                json!({}),
                json!({"a": 1}),
                json!({"z": "\u{1}é\"", "hasg": null, "hasi": [1.5, -0.0, 1e300]}),
                json!({"b": {"y": 1, "x": [{"d": 1, "c": 2}]}, "a": "x", "seq": 7, "v": 1}),
            ] {
                let Value::Object(map) = body else {
                    unreachable!()
                };
                let (hash, line) = chain_line(&map, &hasher);
                assert_eq!(
                    hash,
                    hasher.hash(canonical_json(&Value::Object(map.clone())).as_bytes())
                );
                let mut with = map.clone();
                with.insert("hash".into(), hash.into());
                let expected = canonical_json(&Value::Object(with)) + "\n";
                assert_eq!(String::from_utf8(line).unwrap(), expected);
            }
        }
    }
}
