//! Chaining and writing records: [`Inner::write_records`], shared by every
//! mode, and the direct write of `every_record` / `never`.

use std::fs::File;
use std::io::Write;
use std::sync::{MutexGuard, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::{BATCH_SYNC_RECORDS, Chain, Inner, State};
use crate::chain::{Tail, read_tail};
use crate::{AuditError, Event, FsyncMode, ZERO_HASH};

impl Inner {
    pub(super) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn lock_chain(&self) -> MutexGuard<'_, Chain> {
        self.chain.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn check_failed(&self, st: &State) -> Result<(), AuditError> {
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
    pub(super) fn write_now(&self, event: Event) -> Result<(), AuditError> {
        let mut chain = self.lock_chain();
        self.check_failed(&self.lock_state())?;
        let mut event = event;
        self.clean_arguments_of(&mut event);
        let result = self.write_records(&mut chain, std::iter::once((Utc::now(), event)));
        let written = (chain.seq, chain.prev.clone());
        drop(chain);
        if let Err(e) = result {
            self.note_failure(&e);
            return Err(e);
        }
        if self.fsync == FsyncMode::EveryRecord
            && let Err(e) = self.file.sync_data()
        {
            self.lock_state().failed = Some(format!("fdatasync failed: {e}"));
            return Err(self.io_err("fdatasync", e));
        }
        self.advance_head(written.0, &written.1);
        Ok(())
    }

    /// `batch`: `n` records were written, the last being `seq` / `hash`;
    /// the writer thread syncs them. It is woken only when it must act
    /// sooner than it planned: when these are the first unsynced records
    /// (it waits without a deadline while nothing is unsynced) or when
    /// [`BATCH_SYNC_RECORDS`] are unsynced. Otherwise it already waits for
    /// the sync's deadline, and waking it would cost a task switch per
    /// record for nothing.
    pub(super) fn note_written(&self, st: &mut State, n: usize, seq: u64, hash: &str) {
        if n == 0 {
            return;
        }
        let first = st.unsynced == 0;
        if first {
            st.unsynced_since = Some(Instant::now());
        }
        st.unsynced += n;
        match &mut st.written {
            Some((written_seq, written_hash)) => {
                *written_seq = seq;
                written_hash.clear();
                written_hash.push_str(hash);
            }
            None => st.written = Some((seq, hash.to_string())),
        }
        if (first || st.unsynced >= BATCH_SYNC_RECORDS) && std::mem::take(&mut st.writer_idle) {
            self.wake.notify_one();
        }
    }

    /// After `e`, does the log take more records? Not after a permanent
    /// failure ([`AuditError::is_permanent`]): every later append gets
    /// this error.
    pub(super) fn note_failure(&self, e: &AuditError) {
        if e.is_permanent() {
            let mut st = self.lock_state();
            if st.failed.is_none() {
                tracing::error!(error = %e, "the audit log takes no more records");
                st.failed = Some(e.to_string());
            }
        }
    }

    /// Moves the head file to a record that is in the file (and synced,
    /// where the mode syncs). A head that names a record the log no longer
    /// has is not moved past (it keeps the evidence) and the log takes no
    /// more records. Any other failure loses no record but leaves the head
    /// behind: a cut of what follows would go unnoticed. It is kept
    /// ([`crate::AuditLog::head_failure`]) for the session to refuse the
    /// calls that follow, and reported when it begins. A failed write (a
    /// full disk, a size limit) is tried again at the next update, and
    /// once the head is current again the calls go through; a head whose
    /// path was replaced, or whose lock someone else holds, is not tried
    /// again (each try could wait [`crate::flock::LOCK_WAIT`], per record).
    pub(super) fn advance_head(&self, seq: u64, hash: &str) {
        if self
            .lock_state()
            .head_failed
            .as_ref()
            .is_some_and(|f| f.for_good)
        {
            return;
        }
        let result = self.head_file.advance(seq, hash, |at| {
            let size = self
                .file
                .metadata()
                .map_err(|e| self.io_err("stat", e))?
                .len();
            crate::chain::hash_at(&self.file, size, at)
                .map_err(|e| self.io_err("read the record its head names", e))
        });
        match result {
            Ok(()) => {
                let mut st = self.lock_state();
                // Only a failure at or before this record is over (a
                // retry of an older one may finish after a newer failed).
                if st.head_failed.as_ref().is_some_and(|f| f.at.0 <= seq) {
                    st.head_failed = None;
                    tracing::warn!("the audit head file is current again");
                }
            }
            Err(error) if error.is_permanent() => self.note_failure(&error),
            Err(error) => {
                let for_good = matches!(&error, AuditError::HeadMoved { .. })
                    || matches!(
                        &error,
                        AuditError::Io { source, .. } if source.kind() == std::io::ErrorKind::TimedOut
                    );
                let mut st = self.lock_state();
                if st.head_failed.is_none() {
                    tracing::error!(%error, "the audit head file could not be updated; truncation of the log's end may go unnoticed");
                }
                st.head_failed = Some(super::HeadFailure {
                    why: error.to_string(),
                    for_good,
                    at: (seq, hash.to_string()),
                });
            }
        }
    }

    /// Tries again to move a head that fell behind because a write failed
    /// (not one whose path was replaced or whose lock is held) to the
    /// record it failed at: the session asks before each call, since while
    /// the head is behind it sends none, and so writes nothing that would
    /// move it.
    pub(super) fn retry_head(&self) {
        let at = self
            .lock_state()
            .head_failed
            .as_ref()
            .filter(|f| !f.for_good)
            .map(|f| f.at.clone());
        if let Some((seq, hash)) = at {
            self.advance_head(seq, &hash);
        }
    }

    pub(super) fn io_err(&self, action: &'static str, source: std::io::Error) -> AuditError {
        AuditError::Io {
            path: self.path.clone(),
            action,
            source,
        }
    }

    /// Chains `events` (stamped, their arguments cleaned by
    /// [`Inner::clean_arguments_of`]) onto `chain` and writes them with one
    /// `write(2)` under the exclusive file lock, first re-reading the tail
    /// if another process appended since `chain`. Returns how many were
    /// written; [`AuditError::Failed`] only when the file may now hold a
    /// partial line.
    pub(super) fn write_records(
        &self,
        chain: &mut Chain,
        events: impl IntoIterator<Item = (DateTime<Utc>, Event)>,
    ) -> Result<usize, AuditError> {
        let held = chain.lock.exclusive(&self.file, &self.path)?;
        let result = self.write_locked(chain, events.into_iter());
        chain.lock.release(held);
        result
    }

    fn write_locked(
        &self,
        chain: &mut Chain,
        events: impl Iterator<Item = (DateTime<Utc>, Event)>,
    ) -> Result<usize, AuditError> {
        let size = self.size_if_path_names_the_file()?;
        if size < chain.end {
            // Only someone outside warden shortens a log (a writer's
            // failed write is cut back to where it began, after our end):
            // chaining on from the cut would write over the evidence.
            return Err(AuditError::Cut {
                path: self.path.clone(),
                detail: format!(
                    "it is {size} bytes, but this session's last record (seq {}) ended at byte {}",
                    chain.seq, chain.end
                ),
            });
        }
        if size > chain.end {
            // Another writer appended: continue from its last record, once
            // sure our own last record is still where we wrote it (a cut
            // followed by writes that made the file longer again is a cut
            // too). Equal sizes need no read: the chain goes on from our
            // own last hash, so an edit before it breaks the chain.
            if chain.seq > 0
                && !crate::chain::line_is(
                    &self.file,
                    chain.last_start,
                    chain.end,
                    chain.seq,
                    &chain.prev,
                )
                .map_err(|e| self.io_err("read the last record written", e))?
            {
                return Err(AuditError::Cut {
                    path: self.path.clone(),
                    detail: format!(
                        "this session's last record (seq {}, bytes {} to {}) is no longer there",
                        chain.seq, chain.last_start, chain.end
                    ),
                });
            }
            match read_tail(&self.file, &self.path, size, &self.hasher)? {
                Tail::Empty => {
                    chain.seq = 0;
                    chain.prev = ZERO_HASH.to_string();
                    chain.last_start = 0;
                }
                Tail::Last { seq, hash, start } => {
                    chain.seq = seq;
                    chain.prev = hash;
                    chain.last_start = start;
                }
            }
            chain.end = size;
        }
        let mut seq = chain.seq;
        // `prev` is ours, or a hash `read_tail` recomputed: 64 hex digits.
        let Ok(mut prev) = <[u8; 64]>::try_from(chain.prev.as_bytes()) else {
            return Err(AuditError::Failed {
                path: self.path.clone(),
                detail: format!(
                    "the chain's last hash {:?} is not 64 hex digits",
                    chain.prev
                ),
            });
        };
        chain.buf.clear();
        let mut count = 0;
        let mut last_offset = 0;
        for (ts, event) in events {
            seq += 1;
            last_offset = chain.buf.len();
            let prev_text = std::str::from_utf8(&prev).unwrap_or(ZERO_HASH);
            prev = self.record_line(
                &mut chain.encoder,
                &mut chain.buf,
                ts,
                &event,
                seq,
                prev_text,
            )?;
            count += 1;
        }
        if let Err((written, e)) = write_all_counted(&self.file, &chain.buf) {
            // Never leave a partial line behind: cut back to where it began
            // (nothing to cut when nothing was written, e.g. a full disk).
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
        chain.prev.clear();
        chain
            .prev
            .push_str(std::str::from_utf8(&prev).unwrap_or(ZERO_HASH));
        if count > 0 {
            chain.last_start = size + last_offset as u64;
        }
        chain.end = size + chain.buf.len() as u64;
        // A burst's buffer is not kept for the rest of the session.
        if chain.buf.capacity() > 1 << 20 {
            chain.buf = Vec::new();
        }
        Ok(count)
    }
}

impl Inner {
    /// Before a write, under the lock: the log's path must still name the
    /// file this log writes (same device and inode; symlinks followed, as
    /// `open` followed them). A log renamed, removed or replaced while
    /// warden runs would otherwise take records in a file no one sees.
    /// Returns the file's size: the `stat(2)` of the path replaces the
    /// `fstat(2)` of the descriptor a write needs anyway (once the path is
    /// known to name it, both describe one inode), so the check costs the
    /// path's lookup, not a second call (BENCHMARKS.md).
    fn size_if_path_names_the_file(&self) -> Result<u64, AuditError> {
        use std::os::unix::fs::MetadataExt;
        let moved = || AuditError::Moved {
            path: self.path.clone(),
        };
        match std::fs::metadata(&self.path) {
            Ok(now) if (now.dev(), now.ino()) == self.identity => Ok(now.len()),
            Ok(_) => Err(moved()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(moved()),
            Err(e) => Err(self.io_err("stat its path", e)),
        }
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
