//! A per-sandbox share of the person's epoll watches, kept by init.
//!
//! `fs.epoll.max_user_watches` is counted per user across every
//! namespace (no per-namespace limit exists, unlike inotify's), and
//! watches are cheap (~200 bytes): a server held 500 000 in 128 MB, and
//! with the default `memory_mb` one server could take all of the person's
//! (root's too), after which every `epoll_ctl(ADD)` of that user on the
//! host fails with ENOSPC. The server's `epoll_ctl(EPOLL_CTL_ADD)` goes to
//! init by seccomp user notification; init lets it continue while the
//! sandbox holds less than an eighth of the host's limit.
//!
//! What is counted: init keeps its own duplicate of every epoll instance
//! the sandbox adds a watch to (taken with `pidfd_getfd` the first time
//! it is named, told apart from the ones it holds by `kcmp(KCMP_FILE)`),
//! and counts the `tfd:` lines of *its own* descriptors. An instance the
//! server sent over a unix socket and closed (in flight, in no process's
//! table) still counts, as does one whose processes share a descriptor
//! table or that several processes hold (counted once). The exact count
//! is made only when the adds since the last one could have reached the
//! share, so an ordinary server pays one round trip and one lookup per add.
//!
//! Releasing the duplicates: init cannot tell an instance only it still
//! holds from one in flight, so it never lets go of one with watches
//! (that would hide the in-flight ones). It drops a duplicate whose
//! instance has no watch left — which costs the share nothing, and a later
//! add to it is seen again — at every exact count, done at the bound and
//! whenever the number held doubles. A server that creates and closes
//! instances over time is never refused for it: an instance it closed
//! keeps its watches only while the files it watched stay open (the
//! kernel removes a watch when its file is closed), exactly as it would
//! without init's duplicate, so it is counted exactly as long as it holds
//! watches.
//!
//! Fails closed: an exact count that cannot read init's own `fdinfo`, a
//! `kcmp` that fails, refuse the add (ENOSPC) rather than admit it.
//!
//! Not closed: the add continues in the kernel after init looked at the
//! descriptor number. A thread that puts another instance under that
//! number in between adds the watch to an instance init never saw (one
//! watch per won race; it counts from the first add that names it). init
//! making the call itself on its duplicates would close it, but a watch
//! on a signalfd is woken by the signals of the process that added it.

use std::cmp::Ordering;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The share of `max_user_watches` one sandbox may hold.
const SHARE: u64 = 8;
/// Duplicates held before the first sweep of empty instances.
const FIRST_SWEEP: usize = 64;

#[derive(Debug)]
pub(crate) struct EpollQuota {
    budget: u64,
    /// Watches at the last exact count, plus adds let through since.
    upper_bound: u64,
    /// One duplicate of each instance added to, sorted in `kcmp` order.
    held: Vec<OwnedFd>,
    /// Sweep the empty instances when this many are held.
    sweep_at: usize,
    /// Where the last add's instance is in `held`: a server adds to the
    /// same instance over and over, and one `kcmp` (several µs) confirms
    /// it where a search would make log2(held) of them.
    last: Option<usize>,
    /// init's own `/proc/self` (`fd/` to tell an epoll, `fdinfo/` to count).
    proc_self: PathBuf,
}

impl EpollQuota {
    /// Reads the host's limit from `proc` (the sandbox's own /proc; the
    /// sysctl is global). Unreadable: no quota (the kernel's own limit).
    pub(crate) fn new(proc: &Path) -> Self {
        let max = std::fs::read_to_string(proc.join("sys/fs/epoll/max_user_watches"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        Self::with_budget(
            max.map_or(u64::MAX, |m| (m / SHARE).max(1)),
            proc.join("self"),
        )
    }

    fn with_budget(budget: u64, proc_self: PathBuf) -> Self {
        EpollQuota {
            budget,
            upper_bound: 0,
            held: Vec::new(),
            sweep_at: FIRST_SWEEP,
            last: None,
            proc_self,
        }
    }

    /// Whether one more watch may be added to `instance` (init's
    /// duplicate of the caller's `epfd`): Ok, or the errno to answer —
    /// EINVAL when it is not an epoll instance (as the kernel says),
    /// ENOSPC past the share or when init cannot count.
    pub(crate) fn admit(&mut self, instance: OwnedFd) -> Result<(), i32> {
        // Count before taking the instance in: a sweep drops the empty
        // ones, and the instance about to get its first watch is one.
        if self.upper_bound >= self.budget {
            self.upper_bound = self.sweep().map_err(|_| libc::ENOSPC)?;
            if self.upper_bound >= self.budget {
                return Err(libc::ENOSPC);
            }
        }
        self.hold(instance)?;
        self.upper_bound += 1;
        Ok(())
    }

    /// Keeps `fd` unless an instance already held is the same one (any
    /// sweep happens before it is inserted, never after).
    fn hold(&mut self, fd: OwnedFd) -> Result<(), i32> {
        if let Some(i) = self.last
            && let Some(held) = self.held.get(i)
            && kcmp_file(held.as_fd(), fd.as_fd())? == Ordering::Equal
        {
            return Ok(());
        }
        let mut at = match self.find(fd.as_fd())? {
            Ok(i) => {
                self.last = Some(i);
                return Ok(());
            }
            Err(at) => at,
        };
        if !self.is_epoll(fd.as_fd())? {
            return Err(libc::EINVAL);
        }
        if self.held.len() >= self.sweep_at {
            self.upper_bound = self.sweep().map_err(|_| libc::ENOSPC)?;
            self.sweep_at = FIRST_SWEEP.max(self.held.len().saturating_mul(2));
            // A sweep only lets instances go, so `fd`'s is still not held:
            // only the place it goes may have moved.
            at = self.find(fd.as_fd())?.unwrap_or_else(|at| at);
        }
        self.held.insert(at, fd);
        self.last = Some(at);
        Ok(())
    }

    /// Binary search of `fd`'s instance among the held ones.
    fn find(&self, fd: BorrowedFd<'_>) -> Result<Result<usize, usize>, i32> {
        let (mut lo, mut hi) = (0, self.held.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match kcmp_file(self.held[mid].as_fd(), fd)? {
                Ordering::Equal => return Ok(Ok(mid)),
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
            }
        }
        Ok(Err(lo))
    }

    fn is_epoll(&self, fd: BorrowedFd<'_>) -> Result<bool, i32> {
        let link = std::fs::read_link(self.proc_self.join(format!("fd/{}", fd.as_raw_fd())))
            .map_err(|_| libc::ENOSPC)?;
        Ok(link.as_os_str() == "anon_inode:[eventpoll]")
    }

    /// The exact number of watches held, dropping the instances that have
    /// none. An unreadable count changes nothing and is an error.
    fn sweep(&mut self) -> std::io::Result<u64> {
        let counts = self
            .held
            .iter()
            .map(|fd| self.watches(fd.as_fd()))
            .collect::<std::io::Result<Vec<u64>>>()?;
        let held = std::mem::take(&mut self.held);
        self.last = None;
        self.held = held
            .into_iter()
            .zip(&counts)
            .filter(|(_, n)| **n > 0)
            .map(|(fd, _)| fd)
            .collect();
        Ok(counts.iter().sum())
    }

    /// The `tfd:` lines of one descriptor's fdinfo, read a line at a time:
    /// an instance with the whole share has ~60 MB of them, which init
    /// (inside the sandbox's memory limit) should not hold at once.
    fn watches(&self, fd: BorrowedFd<'_>) -> std::io::Result<u64> {
        use std::io::BufRead;
        let file = std::fs::File::open(self.proc_self.join(format!("fdinfo/{}", fd.as_raw_fd())))?;
        let mut n = 0u64;
        for line in std::io::BufReader::new(file).split(b'\n') {
            n += u64::from(line?.starts_with(b"tfd:"));
        }
        Ok(n)
    }
}

/// The order `kcmp(KCMP_FILE)` gives two open files of this process
/// (a per-boot obfuscation of their addresses: a total order, equal for
/// the same open file description). An error is ENOSPC (fail closed).
fn kcmp_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> Result<Ordering, i32> {
    const KCMP_FILE: libc::c_int = 0;
    let me = std::process::id();
    // SAFETY: kcmp takes plain integers, no pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            me,
            me,
            KCMP_FILE,
            a.as_raw_fd(),
            b.as_raw_fd(),
        )
    };
    match rc {
        0 => Ok(Ordering::Equal),
        1 => Ok(Ordering::Less),
        2 => Ok(Ordering::Greater),
        _ => Err(libc::ENOSPC),
    }
}

/// Whether `kcmp(KCMP_FILE)` works here (`CONFIG_KCMP`): the quota needs
/// it to tell instances apart.
pub(crate) fn kcmp_available() -> bool {
    let Ok(f) = std::fs::File::open("/dev/null") else {
        return false;
    };
    matches!(kcmp_file(f.as_fd(), f.as_fd()), Ok(Ordering::Equal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    fn epoll() -> OwnedFd {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(fd >= 0, "epoll_create1");
        // SAFETY: fresh descriptor owned by nothing else.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    fn eventfd() -> OwnedFd {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "eventfd");
        // SAFETY: fresh descriptor owned by nothing else.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    fn watch(ep: &OwnedFd, target: &OwnedFd) {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        // SAFETY: both descriptors are open; `ev` outlives the call.
        let rc = unsafe {
            libc::epoll_ctl(
                ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                target.as_raw_fd(),
                &mut ev,
            )
        };
        assert_eq!(rc, 0, "epoll_ctl");
    }

    fn dup(fd: &OwnedFd) -> OwnedFd {
        fd.try_clone().expect("dup")
    }

    fn quota(budget: u64) -> EpollQuota {
        EpollQuota::with_budget(budget, PathBuf::from("/proc/self"))
    }

    #[test]
    fn an_instance_closed_by_its_process_still_counts_through_inits_duplicate() {
        let mut q = quota(3);
        let targets: Vec<OwnedFd> = (0..4).map(|_| eventfd()).collect();
        // The "server" makes an instance, adds three watches (init sees
        // each add), then lets go of it (sent away over a socket).
        let ep = epoll();
        for t in &targets[..3] {
            assert_eq!(q.admit(dup(&ep)), Ok(()));
            watch(&ep, t);
        }
        drop(ep);
        // Another instance: the share is used up by the first one.
        let other = epoll();
        assert_eq!(q.admit(dup(&other)), Err(libc::ENOSPC));
        assert_eq!(q.held.len(), 1, "the refused one is not held");
    }

    #[test]
    fn the_same_instance_under_many_descriptors_is_held_and_counted_once() {
        let mut q = quota(100);
        let ep = epoll();
        let t = eventfd();
        assert_eq!(q.admit(dup(&ep)), Ok(()));
        watch(&ep, &t);
        for _ in 0..10 {
            assert_eq!(q.admit(dup(&ep)), Ok(()));
        }
        assert_eq!(q.held.len(), 1);
        assert_eq!(q.sweep().expect("count"), 1);
    }

    #[test]
    fn empty_instances_are_let_go_and_a_server_that_closes_them_is_never_refused() {
        // Budget 4: a server that makes and closes an instance with one
        // watch 1000 times (its watched file closed with it) always fits.
        let mut q = quota(4);
        for i in 0..1000 {
            let ep = epoll();
            let t = eventfd();
            assert_eq!(q.admit(dup(&ep)), Ok(()), "add {i}");
            watch(&ep, &t);
        }
        assert!(q.held.len() <= 2 * FIRST_SWEEP, "held {}", q.held.len());
    }

    #[test]
    fn a_descriptor_that_is_not_an_epoll_is_einval() {
        let mut q = quota(10);
        assert_eq!(q.admit(eventfd()), Err(libc::EINVAL));
        assert!(q.held.is_empty());
    }

    #[test]
    fn a_count_that_cannot_read_refuses_the_add() {
        let mut q = quota(1);
        let ep = epoll();
        let t = eventfd();
        assert_eq!(q.admit(dup(&ep)), Ok(()));
        watch(&ep, &t);
        // init's fdinfo unreadable (e.g. its descriptor limit lowered, or
        // /proc gone): at the bound the add is refused, never admitted.
        q.proc_self = PathBuf::from("/nonexistent/self");
        assert_eq!(q.admit(dup(&ep)), Err(libc::ENOSPC));
    }

    #[test]
    fn kcmp_works_here() {
        assert!(kcmp_available());
    }
}
