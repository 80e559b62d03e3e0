//! Chaining and writing records: [`Inner::write_records`], shared by every
//! mode, and the direct write of `every_record` / `never`.

use std::fs::File;
use std::io::Write;
use std::sync::{MutexGuard, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::{BATCH_MAX_RECORDS, Chain, Inner, State};
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
        self.advance_head(written.0, &written.1);
        Ok(())
    }

    /// `batch`: `n` records were written, the last being `seq` / `hash`;
    /// the writer thread syncs them. It is woken only when it must act
    /// sooner than it planned: when these are the first unsynced records
    /// (it waits without a deadline while nothing is unsynced) or when
    /// [`BATCH_MAX_RECORDS`] are unsynced. Otherwise it already waits for
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
        if (first || st.unsynced >= BATCH_MAX_RECORDS) && std::mem::take(&mut st.writer_idle) {
            self.wake.notify_one();
        }
    }

    /// Moves the head file to a record that is in the file (and synced,
    /// where the mode syncs). A failure weakens truncation detection but
    /// loses no record: it is reported once, not returned.
    pub(super) fn advance_head(&self, seq: u64, hash: &str) {
        let Some(head_file) = &self.head_file else {
            return;
        };
        if let Err(error) = head_file.advance(seq, hash) {
            let mut st = self.lock_state();
            if !std::mem::replace(&mut st.head_failed, true) {
                tracing::error!(%error, "the audit head file could not be updated; truncation of the log's end may go unnoticed");
            }
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
        for (ts, event) in events {
            seq += 1;
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
        chain.prev.clear();
        chain
            .prev
            .push_str(std::str::from_utf8(&prev).unwrap_or(ZERO_HASH));
        chain.end = size + chain.buf.len() as u64;
        // A burst's buffer is not kept for the rest of the session.
        if chain.buf.capacity() > 1 << 20 {
            chain.buf = Vec::new();
        }
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
