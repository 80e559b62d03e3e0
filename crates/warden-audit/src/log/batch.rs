//! `batch` mode's writer thread.

use std::sync::PoisonError;

use super::{BATCH_INTERVAL, BATCH_QUEUE_CAP, BATCH_SYNC_RECORDS, Dropped, Inner, note_dropped};

/// `batch` mode: drains the queue whenever it wakes (an `append` wakes it
/// only when no sync is pending or the queue holds a batch; a pending
/// sync's deadline, or the next `write_ahead`, writes the others), writing
/// each batch with one `write(2)`; `fdatasync`s at most [`BATCH_INTERVAL`] after
/// the first unsynced record (its own or a [`AuditLog::write_ahead`]'s) or
/// once [`BATCH_SYNC_RECORDS`] are unsynced, and a last time on shutdown,
/// moving the head file after each sync.
pub(super) fn batch_writer(inner: &Inner) {
    loop {
        // Wait for records, a due sync, or shutdown.
        let queued = {
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
            !st.queue.is_empty()
        };
        // Write what is queued, holding the chain so that a `write_ahead`
        // cannot overtake records queued before it. (Not when only a sync
        // is due: the chain lock is the callers' `write_ahead` path.)
        if queued {
            let mut chain = inner.lock_chain();
            let mut st = inner.lock_state();
            let mut batch = std::mem::take(&mut st.queue);
            if batch.len() >= BATCH_QUEUE_CAP {
                // Only then can appends be waiting for space.
                inner.space.notify_all();
            }
            if !batch.is_empty() && st.failed.is_none() {
                let gap = st.dropped.take();
                drop(st);
                let carried = Dropped::count(&batch);
                for (_, event) in &mut batch {
                    inner.clean_arguments_of(event);
                }
                let result = inner.write_records(
                    &mut chain,
                    gap.as_ref().map(Dropped::record).into_iter().chain(batch),
                );
                let mut st = inner.lock_state();
                match result {
                    Ok(n) => {
                        inner.note_written(&mut st, n, chain.seq, &chain.prev);
                        st.writer_idle = false;
                    }
                    Err(e) => {
                        tracing::error!("{e}");
                        note_dropped(&mut st, gap, carried, &e);
                    }
                }
            }
        }
        let mut st = inner.lock_state();
        let finishing = st.shutdown && st.queue.is_empty();
        let due = st
            .unsynced_since
            .is_some_and(|since| since.elapsed() >= BATCH_INTERVAL);
        if st.unsynced > 0 && (finishing || due || st.unsynced >= BATCH_SYNC_RECORDS) {
            st.unsynced = 0;
            st.unsynced_since = None;
            let synced = st.written.clone();
            drop(st);
            let result = inner.file.sync_data();
            match result {
                Ok(()) => {
                    if let Some((seq, hash)) = &synced {
                        inner.advance_head(*seq, hash);
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
