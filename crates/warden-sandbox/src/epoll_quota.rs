//! A per-sandbox share of the person's epoll watches, kept by init.
//!
//! `fs.epoll.max_user_watches` is counted per user across every
//! namespace (no per-namespace limit exists, unlike inotify's), and
//! watches are cheap (~200 bytes): a server held 500 000 in 128 MB, and
//! with the default `memory_mb` one server could take all of the person's
//! (root's too), after which every `epoll_ctl(ADD)` of that user on the
//! host fails with ENOSPC. The server's `epoll_ctl(EPOLL_CTL_ADD)` goes to
//! init by seccomp user notification; init lets it continue while the
//! sandbox holds less than an eighth of the host's limit, counting the
//! watches exactly (the `tfd:` lines of every epoll descriptor in the
//! pid namespace's `/proc`) only when the adds since the last count could
//! have reached it, so an ordinary server pays one round trip per add.

use std::path::Path;

/// The share of `max_user_watches` one sandbox may hold.
const SHARE: u64 = 8;

#[derive(Debug)]
pub(crate) struct EpollQuota {
    budget: u64,
    /// Watches at the last exact count, plus adds let through since.
    upper_bound: u64,
}

impl EpollQuota {
    /// Reads the host's limit from `proc` (the sandbox's own /proc; the
    /// sysctl is global). Unreadable: no quota (the kernel's own limit).
    pub(crate) fn new(proc: &Path) -> Self {
        let max = std::fs::read_to_string(proc.join("sys/fs/epoll/max_user_watches"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        EpollQuota {
            budget: max.map_or(u64::MAX, |m| (m / SHARE).max(1)),
            upper_bound: 0,
        }
    }

    /// Whether one more watch may be added; `count` gives the exact
    /// number held now and is called only when the bound is reached.
    pub(crate) fn admit_with(&mut self, count: impl FnOnce() -> u64) -> bool {
        if self.upper_bound >= self.budget {
            self.upper_bound = count();
            if self.upper_bound >= self.budget {
                return false;
            }
        }
        self.upper_bound += 1;
        true
    }

    pub(crate) fn admit(&mut self, proc: &Path) -> bool {
        self.admit_with(|| count_watches(proc))
    }
}

/// Watches held by every epoll descriptor of every process in `proc`
/// (an epoll descriptor shared by two processes counts twice: the count
/// errs on the side of the person's budget).
pub(crate) fn count_watches(proc: &Path) -> u64 {
    let Ok(procs) = std::fs::read_dir(proc) else {
        return 0;
    };
    let mut n = 0u64;
    for p in procs.flatten() {
        if !p
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(info) = std::fs::read_to_string(fd.path()) {
                n += info.lines().filter(|l| l.starts_with("tfd:")).count() as u64;
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_exactly_only_at_the_bound_and_refuses_past_it() {
        let mut q = EpollQuota {
            budget: 3,
            upper_bound: 0,
        };
        let mut counted = 0;
        for _ in 0..3 {
            assert!(q.admit_with(|| {
                counted += 1;
                0
            }));
        }
        assert_eq!(counted, 0, "no count below the bound");
        // At the bound: the real count says 3 → refused.
        assert!(!q.admit_with(|| 3));
        // Watches went away (closed descriptors): admitted again.
        assert!(q.admit_with(|| 1));
    }

    #[test]
    fn counts_tfd_lines_of_every_process_folder() {
        let d = tempfile::tempdir().expect("tempdir");
        let write = |rel: &str, body: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, body).expect("write");
        };
        write("1/fdinfo/0", "pos:\t0\nflags:\t02\n");
        write(
            "12/fdinfo/4",
            "pos:\t0\ntfd:        5 events:       19 data: 5\ntfd:        6 events: 19 data: 6\n",
        );
        write("12/fdinfo/7", "tfd:        9 events:       19 data: 9\n");
        // Not a process folder: ignored.
        write("self/fdinfo/4", "tfd: 1\ntfd: 2\n");
        assert_eq!(count_watches(d.path()), 3);
    }
}
