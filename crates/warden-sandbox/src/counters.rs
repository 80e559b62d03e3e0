//! Kernel counters kept per user across user namespaces: a user
//! namespace's processes are charged to its creator's uid at every level
//! up to the host's, so a sandbox could take all of the person's inotify
//! instances and watches (128 instances on most hosts) and leave their
//! editor, file watchers and other servers with none (`EMFILE`/`ENOSPC`)
//! for as long as it runs. Each new user namespace starts with no limit of
//! its own (only its parents'); init, which holds every capability in it,
//! sets one: a share of the host's. Queued signals, locked shared memory
//! and message queue bytes are capped the same way by the server's
//! `RLIMIT_SIGPENDING`, `RLIMIT_MEMLOCK` and `RLIMIT_MSGQUEUE`, which the
//! kernel checks against the count in the sandbox's namespace
//! (`helper::set_rlimits`).

use std::io;

/// The part of the host's per-user allowance one sandbox may hold.
pub(crate) const SHARE: u64 = 8;

/// (host limit, the sandbox's own limit) for each counter.
const INOTIFY: [(&str, &str); 2] = [
    (
        "/proc/sys/fs/inotify/max_user_instances",
        "/proc/sys/user/max_inotify_instances",
    ),
    (
        "/proc/sys/fs/inotify/max_user_watches",
        "/proc/sys/user/max_inotify_watches",
    ),
];

/// Sets the current user namespace's inotify limits to a [`SHARE`] of the
/// host's (`fs.inotify.*` are the initial namespace's values). Must run in
/// the new user namespace, with CAP_SYS_RESOURCE there, while the host's
/// `/proc` is still mounted.
pub(crate) fn cap_inotify() -> io::Result<()> {
    for (host, ours) in INOTIFY {
        let max: u64 = std::fs::read_to_string(host)?
            .trim()
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        std::fs::write(ours, (max / SHARE).max(1).to_string())?;
    }
    Ok(())
}
