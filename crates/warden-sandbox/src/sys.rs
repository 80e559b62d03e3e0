//! The raw system calls the sandbox needs that neither `nix` nor `libc`
//! wraps safely: the new mount API (`open_tree`, `mount_setattr`,
//! `move_mount`; Linux ≥ 5.12 for `mount_setattr`), `clone3` (≥ 5.3;
//! `CLONE_INTO_CGROUP` ≥ 5.7), pidfds (`pidfd_open` ≥ 5.3, `pidfd_getfd`
//! ≥ 5.6, `pidfd_send_signal` ≥ 5.1) and `close_range`. Each returns
//! owned descriptors; every `unsafe` block says why it is sound.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An error of one step, naming it: "open_tree /usr: Permission denied".
#[derive(Debug)]
pub(crate) struct SysError {
    pub what: String,
    pub err: io::Error,
}

impl std::fmt::Display for SysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.err)
    }
}

impl std::error::Error for SysError {}

pub(crate) type Result<T> = std::result::Result<T, SysError>;

pub(crate) fn err_from(what: impl Into<String>, err: io::Error) -> SysError {
    SysError {
        what: what.into(),
        err,
    }
}

pub(crate) fn errno_from(what: impl Into<String>, e: nix::errno::Errno) -> SysError {
    err_from(what, io::Error::from(e))
}

/// `Err(errno)` for a negative syscall return, else the value.
fn check(rc: libc::c_long, what: impl FnOnce() -> String) -> Result<libc::c_long> {
    if rc < 0 {
        Err(err_from(what(), io::Error::last_os_error()))
    } else {
        Ok(rc)
    }
}

/// Takes ownership of a descriptor a syscall just returned.
fn owned(rc: libc::c_long, what: impl FnOnce() -> String) -> Result<OwnedFd> {
    let rc = check(rc, what)?;
    let fd = RawFd::try_from(rc).map_err(|_| err_from("fd", io::Error::other("out of range")))?;
    // SAFETY: the kernel just returned this new descriptor to us and nothing
    // else refers to it, so the OwnedFd is its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        err_from(
            format!("path {}", p.display()),
            io::Error::new(io::ErrorKind::InvalidInput, "contains a NUL byte"),
        )
    })
}

// --- new mount API ---

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;
pub(crate) const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// `struct mount_attr` (linux/mount.h).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// A detached, recursive copy of the mount tree at `path` (following a
/// final symlink), not yet attached anywhere.
pub(crate) fn open_tree_clone(path: &Path) -> Result<OwnedFd> {
    let c = cpath(path)?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // the other arguments are plain integers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        )
    };
    owned(rc, || format!("open_tree {}", path.display()))
}

/// Like [`open_tree_clone`], of the object an `O_PATH` handle refers to.
pub(crate) fn open_tree_clone_fd(fd: BorrowedFd<'_>, what: &Path) -> Result<OwnedFd> {
    // SAFETY: the empty path is a valid C string; `fd` is a live
    // descriptor for the call's duration; the rest are plain integers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            fd.as_raw_fd(),
            c"".as_ptr(),
            OPEN_TREE_CLONE
                | libc::O_CLOEXEC as libc::c_uint
                | AT_RECURSIVE
                | libc::AT_EMPTY_PATH as libc::c_uint,
        )
    };
    owned(rc, || format!("open_tree {}", what.display()))
}

/// An `O_PATH` handle of `path` (following symlinks): names an object
/// without opening it for reading.
pub(crate) fn open_path(path: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| err_from(format!("open {}", path.display()), e))
}

/// Opens `path` (following symlinks) as an `O_PATH` handle that must lie
/// under `root`, judged by the path the kernel reports for the handle
/// itself (`/proc/self/fd`). Whatever uses the handle afterwards (a bind,
/// a Landlock rule) then uses the object that was checked, however the
/// path's symlinks change in between.
pub(crate) fn open_confined(path: &Path, root: &Path) -> Result<OwnedFd> {
    let what = || format!("grant {}", path.display());
    let fd = open_path(path)?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|e| err_from(what(), e))?;
    if real.is_absolute() && real.starts_with(root) {
        Ok(fd)
    } else {
        Err(err_from(
            what(),
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "leads to {}, outside {} (a symbolic link changed after the launch was checked)",
                    real.display(),
                    root.display()
                ),
            ),
        ))
    }
}

/// Sets `set` on every mount of the detached tree `fd` (sub-mounts too)
/// and makes them private.
pub(crate) fn mount_setattr_tree(fd: BorrowedFd<'_>, set: u64, what: &Path) -> Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: libc::MS_PRIVATE,
        userns_fd: 0,
    };
    // SAFETY: `attr` is a valid `struct mount_attr` of the size passed and
    // outlives the call; the empty path is a valid C string.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(rc, || format!("mount_setattr {}", what.display())).map(|_| ())
}

/// Attaches the detached tree `fd` at `to`.
pub(crate) fn move_mount_to(fd: BorrowedFd<'_>, to: &Path) -> Result<()> {
    let c = cpath(to)?;
    // SAFETY: both paths are valid C strings that outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(rc, || format!("move_mount to {}", to.display())).map(|_| ())
}

// --- clone3 and pidfds ---

/// `struct clone_args` (linux/sched.h, version 2: with `cgroup`).
#[repr(C)]
#[derive(Default)]
pub(crate) struct CloneArgs {
    pub flags: u64,
    pub pidfd: u64,
    pub child_tid: u64,
    pub parent_tid: u64,
    pub exit_signal: u64,
    pub stack: u64,
    pub stack_size: u64,
    pub tls: u64,
    pub set_tid: u64,
    pub set_tid_size: u64,
    pub cgroup: u64,
}

pub(crate) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The result of [`clone3_fork`].
pub(crate) enum Cloned {
    Child,
    Parent { pid: libc::pid_t, pidfd: OwnedFd },
}

/// `clone3` used like `fork` (same stack, copy-on-write memory) with
/// namespace flags, `CLONE_PIDFD` and optionally `CLONE_INTO_CGROUP`.
///
/// # Safety
///
/// The calling process must be single-threaded (the helper is: it is
/// exec'd fresh and starts no thread). In the child, glibc's cached thread
/// id is stale, so it must not rely on pthread ownership (robust or
/// error-checking mutexes); std's futex-based locks, raise()/abort() (which
/// ask the kernel for the tid) and a later `fork()` (which resets the
/// cache) are fine.
pub(crate) unsafe fn clone3_fork(flags: u64, cgroup: Option<BorrowedFd<'_>>) -> Result<Cloned> {
    let mut pidfd: libc::c_int = -1;
    let mut args = CloneArgs {
        flags: flags | libc::CLONE_PIDFD as u64,
        pidfd: &mut pidfd as *mut libc::c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = u64::try_from(fd.as_raw_fd()).unwrap_or(u64::MAX);
    }
    // SAFETY: `args` is a valid `struct clone_args` of the size passed, its
    // `pidfd` points to a live c_int; no new stack is given, so the child
    // continues on a copy of ours like after fork(); the caller guarantees
    // the process is single-threaded.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    let pid = check(rc, || "clone3".into())?;
    if pid == 0 {
        return Ok(Cloned::Child);
    }
    // SAFETY: with CLONE_PIDFD the kernel stored a new descriptor in
    // `pidfd`; it belongs to us alone.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(Cloned::Parent {
        pid: libc::pid_t::try_from(pid).unwrap_or(-1),
        pidfd,
    })
}

pub(crate) fn pidfd_open(pid: libc::pid_t) -> Result<OwnedFd> {
    pidfd_open_flags(pid, 0)
}

/// `PIDFD_THREAD` (Linux ≥ 6.9): a pidfd of one thread, not only of a
/// thread-group leader.
pub(crate) const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

pub(crate) fn pidfd_open_flags(pid: libc::pid_t, flags: libc::c_uint) -> Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags by value, no pointer.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    owned(rc, || format!("pidfd_open {pid}"))
}

/// A duplicate of descriptor `fd` of the process behind `pidfd`.
pub(crate) fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: plain integers, no pointer.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    owned(rc, || "pidfd_getfd".into())
}

pub(crate) fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> Result<()> {
    // SAFETY: a null siginfo is allowed (the kernel fills a default one).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    check(rc, || "pidfd_send_signal".into()).map(|_| ())
}

/// Marks every descriptor above stderr close-on-exec (not closed: std and
/// our own pipes rely on them until exec).
pub(crate) fn cloexec_from_3() {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC takes no pointer and only
    // sets a flag on descriptors; it closes nothing.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc < 0 {
        for fd in 3..1024 {
            // SAFETY: F_SETFD takes no pointer; on a descriptor that is not
            // open it fails with EBADF and changes nothing.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
}

/// Closes every descriptor above stderr except `keep` (for init, which
/// never execs: close-on-exec alone would leave them open behind
/// `/proc/1/fd`).
pub(crate) fn close_all_but(keep: &[RawFd]) {
    let Ok(rd) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<RawFd> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    for fd in fds {
        if fd > 2 && !keep.contains(&fd) {
            // SAFETY: closing a descriptor number of our own process that
            // nothing in this single-threaded process uses any more (the
            // read_dir handle above is already closed); a stale number
            // gives EBADF and changes nothing.
            unsafe { libc::close(fd) };
        }
    }
}

/// Overwrites this process's last command-line argument (the helper's
/// plan) with zeros where the kernel keeps it, so that `/proc/PID/cmdline`
/// of the helper and of init (pid 1, a copy of the helper's memory) no
/// longer shows it: the plan names every grant's host path, the hidden
/// files and the cgroup folders, and the server may read init's
/// `cmdline` (a world-readable file). The other arguments stay, so the
/// process is still named by its program. Call it once the plan was
/// parsed and before any other thread or process exists.
pub(crate) fn blank_last_arg() -> Result<()> {
    let bad = |why: &str| {
        err_from(
            "/proc/self/stat",
            io::Error::new(io::ErrorKind::InvalidData, why.to_owned()),
        )
    };
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| err_from("read /proc/self/stat", e))?;
    // The name (field 2) may hold spaces and parentheses: count the
    // fields after its closing one, which is field 3.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| bad("no name"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Result<usize> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| bad("no argument range"))
    };
    let (start, end) = (field(48)?, field(49)?);
    if start == 0 || end <= start {
        return Err(bad("empty argument range"));
    }
    // SAFETY: [arg_start, arg_end) is where the kernel copied this
    // process's argument strings at exec, on the initial stack: mapped,
    // writable and initialised for the process's whole life, and ours
    // alone (single-threaded, no other process shares this memory). std
    // keeps only a raw pointer to the C `argv` (for `std::env::args`,
    // which copies out when called, and was called before this); no Rust
    // reference into it is alive, so this one is unique while it lives.
    let args = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    // The last byte is the last argument's terminating NUL; the argument
    // starts after the NUL before it. Both stay, so the file still reads
    // as the arguments (the last one empty), not as a rewritten title.
    let Some((_, body)) = args.split_last_mut() else {
        return Ok(());
    };
    let from = body.iter().rposition(|&b| b == 0).map_or(0, |i| i + 1);
    if let Some(last) = body.get_mut(from..) {
        last.fill(0);
    }
    Ok(())
}

/// Writes all of `data` to `fd` (a pipe or a cgroup file).
pub(crate) fn write_all(fd: BorrowedFd<'_>, data: &[u8]) -> io::Result<()> {
    let mut off = 0;
    while let Some(rest) = data.get(off..).filter(|r| !r.is_empty()) {
        match nix::unistd::write(fd, rest) {
            Ok(n) => off += n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io::Error::from(e)),
        }
    }
    Ok(())
}

/// Reads a small counter file from offset 0 (cgroup accounting).
pub(crate) fn pread_string(fd: BorrowedFd<'_>) -> io::Result<String> {
    let mut buf = [0u8; 4096];
    let n = nix::sys::uio::pread(fd, &mut buf, 0).map_err(io::Error::from)?;
    Ok(String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned())
}

/// The number of CPUs this process may run on.
pub(crate) fn ncpus() -> u64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn open_confined_judges_the_object_reached_not_the_name() {
        let ws = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = ws.path().canonicalize().expect("canonical");
        std::fs::create_dir(ws.path().join("real")).expect("mkdir");
        symlink("real", ws.path().join("inside")).expect("symlink");
        symlink(outside.path(), ws.path().join("away")).expect("symlink");
        assert!(open_confined(&ws.path().join("inside"), &root).is_ok());
        assert!(open_confined(&ws.path().join("real"), &root).is_ok());
        let e = open_confined(&ws.path().join("away"), &root).expect_err("leads outside");
        assert_eq!(e.err.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("outside"), "{e}");
        // A root that is only a prefix of the name, not of the path.
        let sibling = PathBuf::from(format!("{}-x", root.display()));
        std::fs::create_dir(&sibling).expect("mkdir");
        let r = open_confined(&sibling, &root);
        std::fs::remove_dir(&sibling).expect("rmdir");
        assert!(
            r.is_err(),
            "{} is not under {}",
            sibling.display(),
            root.display()
        );
    }
}
