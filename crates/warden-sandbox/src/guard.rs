//! Owns what a launched server leaves on the host: its process group and,
//! when it has no mount namespace view, its private HOME/TMPDIR folder.
//! Dropping the guard kills the group and removes the folder. (With the
//! view, HOME and TMPDIR are a tmpfs that dies with the namespace, and
//! the helper removes the server's cgroups itself.)

use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

pub struct ProcessGuard {
    /// `exec-<pid>-<n>` in the runtime folder, with `home/` and `tmp/`.
    dir: Option<PathBuf>,
    pgid: Option<i32>,
}

impl ProcessGuard {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        ProcessGuard { dir, pgid: None }
    }

    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Hands the folder to someone else to remove (the helper, when warden
    /// replaces itself with it).
    pub(crate) fn release_dir(&mut self) -> Option<PathBuf> {
        self.dir.take()
    }

    /// Records the spawned leader; its pid is the group id.
    pub fn attach(&mut self, pid: u32) {
        self.pgid = i32::try_from(pid).ok();
    }

    /// Kills every process in the server's group. With the sandbox the
    /// leader is the helper; killing it ends the pid namespace, so a
    /// process that left the group with `setsid()` dies too.
    pub fn kill_group(&self) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        self.kill_group();
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
