//! Host folders a launch may need: the runtime folder given by the caller
//! (`$XDG_RUNTIME_DIR/warden`, `/tmp/warden-<uid>`, or a session folder),
//! and in it one `exec-<pid>-<n>` folder per launch that has no mount
//! namespace view (a trusted server with `"sandbox": false`, or the
//! `best_effort` fallback): its private HOME and TMPDIR.
//!
//! The runtime folder is created 0700; an existing one must be a real
//! folder (not a symlink) owned by us. A foreign or linked one is refused,
//! never reused or "fixed"; one of ours that is wider is narrowed to 0700
//! (and re-checked to be the same folder). `exec-*` folders whose pid is
//! gone (warden killed with SIGKILL) are swept by the next launch.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a runtime folder was refused.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeDirError {
    #[error("{0} is a symbolic link; refusing it as warden's runtime folder")]
    Symlink(PathBuf),
    #[error("{0} is not a folder")]
    NotDir(PathBuf),
    #[error(
        "{path} belongs to uid {owner}, not to uid {me}; refusing it as warden's runtime folder \
         (remove it, or set XDG_RUNTIME_DIR or TMPDIR elsewhere)"
    )]
    Foreign { path: PathBuf, owner: u32, me: u32 },
    #[error("{0}: {1}")]
    Io(PathBuf, io::Error),
}

/// Checks an existing folder without following a final symlink.
fn checked(path: &Path, uid: u32) -> Result<std::fs::Metadata, RuntimeDirError> {
    let m = std::fs::symlink_metadata(path).map_err(|e| RuntimeDirError::Io(path.into(), e))?;
    if m.file_type().is_symlink() {
        return Err(RuntimeDirError::Symlink(path.into()));
    }
    if !m.is_dir() {
        return Err(RuntimeDirError::NotDir(path.into()));
    }
    if m.uid() != uid {
        return Err(RuntimeDirError::Foreign {
            path: path.into(),
            owner: m.uid(),
            me: uid,
        });
    }
    Ok(m)
}

/// Creates (0700, parents as needed) or validates the runtime folder of
/// user `uid`.
pub fn ensure_runtime_dir(path: &Path, uid: u32) -> Result<(), RuntimeDirError> {
    if let Some(parent) = path.parent()
        && !parent.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| RuntimeDirError::Io(parent.into(), e))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(RuntimeDirError::Io(path.into(), e)),
    }
    let m = checked(path, uid)?;
    if m.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| RuntimeDirError::Io(path.into(), e))?;
        // The path must still be the same folder after the chmod.
        let m2 = checked(path, uid)?;
        if m2.ino() != m.ino() || m2.dev() != m.dev() || m2.mode() & 0o777 != 0o700 {
            return Err(RuntimeDirError::NotDir(path.into()));
        }
    }
    Ok(())
}

/// Creates the private folder `path`, mode 0700 whatever the process's
/// umask is at this moment (a library may have it at 0o177 for a moment,
/// which would leave the folder without its search bit: crate::umask).
pub(crate) fn make_private_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

/// A fresh per-launch folder `exec-<pid>-<n>` (0700) inside `runtime`.
pub(crate) fn make_exec_dir(runtime: &Path) -> Result<PathBuf, RuntimeDirError> {
    let pid = std::process::id();
    for n in 0..10_000u32 {
        let p = runtime.join(format!("exec-{pid}-{n}"));
        match make_private_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(RuntimeDirError::Io(p, e)),
        }
    }
    Err(RuntimeDirError::Io(
        runtime.into(),
        io::Error::other("no free exec-* name"),
    ))
}

/// Removes `exec-<pid>-<n>` folders of `runtime` whose pid is gone. Never
/// follows a symlink. Returns how many were removed.
pub fn sweep_runtime_dir(runtime: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(runtime) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|s| s.strip_prefix("exec-"))
            .and_then(|s| s.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_dir()) && std::fs::remove_dir_all(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    #[test]
    fn creates_0700_and_exec_folders_0700() {
        let d = tempfile::tempdir().expect("tempdir");
        let rt = d.path().join("a/warden-x");
        ensure_runtime_dir(&rt, me()).expect("ensure");
        let m = std::fs::metadata(&rt).expect("meta");
        assert_eq!(m.mode() & 0o777, 0o700);
        let e = make_exec_dir(&rt).expect("exec dir");
        assert_eq!(std::fs::metadata(&e).expect("meta").mode() & 0o777, 0o700);
    }

    #[test]
    fn narrows_our_own_wide_folder() {
        let d = tempfile::tempdir().expect("tempdir");
        let rt = d.path().join("warden-x");
        std::fs::create_dir(&rt).expect("mkdir");
        std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        ensure_runtime_dir(&rt, me()).expect("ensure");
        assert_eq!(std::fs::metadata(&rt).expect("meta").mode() & 0o777, 0o700);
    }

    #[test]
    fn refuses_symlinks_files_and_foreign_folders() {
        let d = tempfile::tempdir().expect("tempdir");
        let target = d.path().join("elsewhere");
        std::fs::create_dir(&target).expect("mkdir");
        let link = d.path().join("warden-link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(matches!(
            ensure_runtime_dir(&link, me()),
            Err(RuntimeDirError::Symlink(_))
        ));
        // Ours, so foreign to any other uid.
        let foreign = d.path().join("warden-foreign");
        std::fs::create_dir(&foreign).expect("mkdir");
        assert!(matches!(
            ensure_runtime_dir(&foreign, me().wrapping_add(1)),
            Err(RuntimeDirError::Foreign { .. })
        ));
        let file = d.path().join("warden-file");
        std::fs::write(&file, "").expect("write");
        assert!(matches!(
            ensure_runtime_dir(&file, me()),
            Err(RuntimeDirError::NotDir(_))
        ));
    }

    #[test]
    fn sweeps_exec_folders_of_dead_pids_only() {
        let d = tempfile::tempdir().expect("tempdir");
        // Above the largest pid_max (2^22).
        let dead = d.path().join("exec-4194399-0");
        std::fs::create_dir(&dead).expect("mkdir");
        std::fs::write(dead.join("f"), "x").expect("write");
        let live = d.path().join(format!("exec-{}-0", std::process::id()));
        std::fs::create_dir(&live).expect("mkdir");
        let other = d.path().join("notes.txt");
        std::fs::write(&other, "").expect("write");
        let linked = d.path().join("exec-4194398-0");
        std::os::unix::fs::symlink(&live, &linked).expect("symlink");
        assert_eq!(sweep_runtime_dir(d.path()), 1);
        assert!(!dead.exists() && live.exists() && other.exists());
        assert!(
            linked.symlink_metadata().is_ok(),
            "a symlink is never followed"
        );
    }
}
