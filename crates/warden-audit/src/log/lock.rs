//! The exclusive `flock(2)` taken on the log around every write.

use std::fs::File;
use std::path::Path;

use nix::fcntl::Flock;

use crate::AuditError;

/// Takes the log's `flock` through a duplicate of its descriptor (a flock
/// belongs to the open file description, which the duplicate shares),
/// kept from one write to the next: a record costs the `flock` and the
/// unlock, not also a `dup` and a `close`.
///
/// The lock is held per write, not for the session: other processes
/// appending to the same log must get their turn between our records
/// (tests/audit_processes.rs has two writers wait for each other's
/// records halfway through).
pub(super) struct FileLock {
    /// The duplicate, while unlocked; `None` before the first lock and
    /// after an unlock that failed (then the next lock duplicates again).
    spare: Option<File>,
}

/// The lock, held until [`FileLock::release`] (or drop, on an error path).
pub(super) struct Held(Flock<File>);

impl FileLock {
    pub(super) fn new() -> FileLock {
        FileLock { spare: None }
    }

    pub(super) fn exclusive(&mut self, file: &File, path: &Path) -> Result<Held, AuditError> {
        let io = |source| AuditError::Io {
            path: path.to_path_buf(),
            action: "lock",
            source,
        };
        let dup = match self.spare.take() {
            Some(dup) => dup,
            None => file.try_clone().map_err(io)?,
        };
        match crate::flock::lock_within(dup, true, crate::flock::LOCK_WAIT) {
            Ok(held) => Ok(Held(held)),
            Err((back, e)) => {
                self.spare = Some(back);
                Err(io(e))
            }
        }
    }

    /// Unlocks, keeping the duplicate for the next lock.
    pub(super) fn release(&mut self, held: Held) {
        // A failed unlock drops the `Flock`, which unlocks again (errors
        // ignored, as a plain drop would) and closes the duplicate.
        self.spare = held.0.unlock().ok();
    }
}
