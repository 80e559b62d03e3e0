//! `flock(2)` with a deadline: the locks warden takes on files another
//! process can open (the audit log and its head, the pin file's lock).
//!
//! A blocking `flock` waits for as long as the holder likes. Other wardens
//! hold these locks for one write (microseconds to one `fdatasync`), but a
//! process that can merely *read* the file can take the same exclusive
//! lock and keep it: a server whose read grant covers the audit log froze
//! every later call of the session, and every other session on the log,
//! for as long as it slept. With a deadline the wait ends in an error, and
//! the callers fail closed (a call whose record cannot be written is not
//! made).

use std::fs::File;
use std::io;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// How long a lock is waited for before the wait is an error.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// First pause between tries once the lock is found held; doubled up to
/// [`MAX_PAUSE`], so a lock held for one write is retaken within about
/// as long as it was held, and one held for seconds costs a few tries a
/// second.
const FIRST_PAUSE: Duration = Duration::from_micros(50);
const MAX_PAUSE: Duration = Duration::from_millis(20);

/// Locks `file` (`exclusive`, else shared), waiting at most `wait`. A
/// lock that is free costs one `flock` call, as a blocking lock would.
/// On failure the file is handed back with the error, so a caller that
/// keeps a duplicate descriptor between locks keeps it.
pub fn lock_within(
    file: File,
    exclusive: bool,
    wait: Duration,
) -> Result<Flock<File>, (File, io::Error)> {
    let how = if exclusive {
        FlockArg::LockExclusiveNonblock
    } else {
        FlockArg::LockSharedNonblock
    };
    let deadline = Instant::now() + wait;
    let mut pause = FIRST_PAUSE;
    let mut file = file;
    loop {
        match Flock::lock(file, how) {
            Ok(held) => return Ok(held),
            Err((back, Errno::EINTR)) => file = back,
            Err((back, Errno::EWOULDBLOCK)) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err((
                        back,
                        io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "another process has held its lock for more than {} s (another \
                                 warden stuck mid-write, or a process that opened the file to \
                                 block warden)",
                                wait.as_secs()
                            ),
                        ),
                    ));
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(MAX_PAUSE);
                file = back;
            }
            Err((back, errno)) => return Err((back, errno.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &std::path::Path) -> File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("open")
    }

    #[test]
    fn a_free_lock_is_taken_and_a_held_one_times_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        // Two open file descriptions: flock treats them as two holders,
        // as it would two processes.
        let held = lock_within(open(&path), true, LOCK_WAIT).expect("free lock");
        let started = Instant::now();
        let (_, err) = lock_within(open(&path), true, Duration::from_millis(200))
            .expect_err("a held lock must time out");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(started.elapsed() >= Duration::from_millis(200));
        // A shared lock waits for an exclusive one too.
        assert!(lock_within(open(&path), false, Duration::from_millis(50)).is_err());
        drop(held);
        let shared = lock_within(open(&path), false, LOCK_WAIT).expect("shared");
        let _also = lock_within(open(&path), false, LOCK_WAIT).expect("shared twice");
        drop(shared);
    }

    #[test]
    fn a_lock_released_meanwhile_is_taken() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let held = lock_within(open(&path), true, LOCK_WAIT).expect("free lock");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        lock_within(open(&path), true, LOCK_WAIT).expect("taken once released");
        releaser.join().expect("join");
    }
}
