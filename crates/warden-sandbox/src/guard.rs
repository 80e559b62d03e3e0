//! Owns what a launched server leaves on the host: its process group and its
//! private HOME/TMPDIR. Dropping the guard kills the group and removes them.

use std::io;
use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

pub struct ProcessGuard {
    dir: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    pgid: Option<i32>,
}

impl ProcessGuard {
    pub(crate) fn new(server: &str, runtime_dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(runtime_dir)?;
        let dir = tempfile::Builder::new()
            .prefix(&format!("{server}-"))
            .tempdir_in(runtime_dir)?;
        let home = dir.path().join("home");
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&home)?;
        std::fs::create_dir(&tmp)?;
        Ok(ProcessGuard {
            dir,
            home,
            tmp,
            pgid: None,
        })
    }

    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    pub(crate) fn tmp(&self) -> &Path {
        &self.tmp
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
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
    }
}
