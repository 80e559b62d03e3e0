//! Wider stdio pipes between warden and its peers.
//!
//! A Linux pipe holds 64 KiB. A message larger than that (a 100 KB tool
//! argument or result) crosses it in turns: the writer fills the pipe and
//! sleeps, the reader wakes, drains it, the writer wakes again. Through
//! warden a message crosses two pipes, so each large call paid four such
//! turns more than a direct connection (11.3 context switches per 100 KB
//! call in the gateway process against 4.9 at 16 B, BENCHMARKS.md). A
//! pipe's capacity costs nothing until it is filled (its pages are
//! allocated as data is written), but counts against the user's
//! `pipe-user-pages-soft` (64 MiB by default) once widened, so warden asks
//! for [`STDIO_PIPE_BYTES`] (256 KiB: 64 pages), not the 1 MiB maximum.

use std::os::fd::AsFd;

/// The capacity warden asks for on each stdio pipe it reads or writes.
pub const STDIO_PIPE_BYTES: usize = 256 * 1024;

/// Widens the pipe `fd` is an end of to at least `bytes` (rounded up by
/// the kernel to a power of two pages); returns the capacity it has. A
/// descriptor that is not a pipe, or a kernel or user limit that refuses,
/// leaves the pipe as it was: an error, which callers may ignore (the
/// pipe still works, only in smaller turns).
pub fn widen_pipe(fd: impl AsFd, bytes: usize) -> std::io::Result<usize> {
    use nix::fcntl::{FcntlArg, fcntl};
    let fd = fd.as_fd();
    let current = fcntl(fd, FcntlArg::F_GETPIPE_SZ)?;
    let current = usize::try_from(current).unwrap_or(0);
    if current >= bytes {
        return Ok(current);
    }
    let wanted = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let now = fcntl(fd, FcntlArg::F_SETPIPE_SZ(wanted))?;
    Ok(usize::try_from(now).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_widened_and_a_file_is_refused() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let before = nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_GETPIPE_SZ).unwrap();
        assert_eq!(before, 65536);
        assert!(widen_pipe(&write, STDIO_PIPE_BYTES).unwrap() >= STDIO_PIPE_BYTES);
        // Both ends are the one pipe.
        let after = nix::fcntl::fcntl(&read, nix::fcntl::FcntlArg::F_GETPIPE_SZ).unwrap();
        assert!(usize::try_from(after).unwrap() >= STDIO_PIPE_BYTES);
        // A pipe wide enough already is left alone.
        assert_eq!(
            widen_pipe(&read, 4096).unwrap(),
            usize::try_from(after).unwrap()
        );
        let file = tempfile::tempfile().unwrap();
        assert!(widen_pipe(&file, STDIO_PIPE_BYTES).is_err());
    }
}
