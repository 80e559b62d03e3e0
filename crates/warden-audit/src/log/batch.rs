//! The writer thread of `batch` mode (group commit).

use std::sync::PoisonError;
use std::time::Instant;

use super::Inner;
use crate::{BATCH_INTERVAL, BATCH_MAX_RECORDS};

/// `batch` mode: drains the queue as soon as there is work, writing each
/// batch with one `write(2)`; `fdatasync`s at most [`BATCH_INTERVAL`] after
/// the first unsynced record or once [`BATCH_MAX_RECORDS`] are unsynced,
/// and a last time on shutdown.
pub(super) fn batch_writer(inner: &Inner) {
    let mut st = inner.lock_state();
    loop {
        // Wait for records, a due sync, or shutdown.
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
        let batch = std::mem::take(&mut st.queue);
        inner.space.notify_all();
        if !batch.is_empty() && st.failed.is_none() {
            let mut head = st.head.clone();
            drop(st);
            let result = batch
                .into_iter()
                .map(|(ts, event)| inner.prepare(ts, event))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|bodies| inner.write_records(&mut head, bodies));
            st = inner.lock_state();
            st.head = head;
            match result {
                Ok(n) => {
                    if st.unsynced == 0 {
                        st.unsynced_since = Some(Instant::now());
                    }
                    st.unsynced += n;
                }
                Err(e) => {
                    tracing::error!("{e}");
                    st.failed = Some(e.to_string());
                }
            }
        }
        let finishing = st.shutdown && st.queue.is_empty();
        let due = st
            .unsynced_since
            .is_some_and(|since| since.elapsed() >= BATCH_INTERVAL);
        if st.unsynced > 0 && (finishing || due || st.unsynced >= BATCH_MAX_RECORDS) {
            st.unsynced = 0;
            st.unsynced_since = None;
            drop(st);
            let result = inner.file.sync_data();
            st = inner.lock_state();
            if let Err(e) = result {
                tracing::error!(path = %inner.path.display(), error = %e, "audit log fdatasync failed");
                st.failed = Some(format!("fdatasync failed: {e}"));
            }
        }
        if finishing && st.unsynced == 0 {
            break;
        }
    }
}
