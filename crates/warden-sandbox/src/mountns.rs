//! The server's view of the filesystem: built by init (pid 1, in the new
//! user and mount namespaces) before the server is forked.
//!
//! The only view of the host is the list of binds, each a detached
//! *recursive* copy (`open_tree(OPEN_TREE_CLONE|AT_RECURSIVE)`) whose every
//! mount gets its flags with one `mount_setattr(AT_RECURSIVE)` (sub-mounts
//! too, which `MS_BIND|MS_REC` + `MS_REMOUNT|MS_RDONLY` only does for the
//! top mount). The copies are taken *before* anything is mounted, so the
//! new root can be built over any folder. Then:
//!
//! ```text
//! /            tmpfs, read-only after setup (mount points only)
//! /usr …       ro,nosuid,nodev binds (system folders, install prefix, `read`
//!              grants); top-level system symlinks (/bin -> usr/bin) recreated
//! /etc/…       ro,nosuid,nodev,noexec binds of single files and folders
//! <write>      rw,nosuid,nodev,noexec binds (warden's own files inside
//!              them bound read-only again; its credential folders covered
//!              by an empty read-only tmpfs)
//! /tmp         private tmpfs: size=private_mb, 0700, nosuid,nodev,noexec (TMPDIR)
//! /tmp/home    HOME (inside the same tmpfs: one byte budget)
//! /dev         tmpfs (ro) with binds of null zero full random urandom, shm -> /tmp
//! /proc        a fresh proc of the server's pid namespace, read-only (for
//!              root, its owner-only kernel files covered: `proc_mask`); where
//!              that is refused (containers with masked /proc paths) a
//!              read-only tmpfs with copies of cpuinfo, stat, meminfo,
//!              loadavg, uptime. Never the host's /proc.
//! <cwd>        created empty when not inside a grant
//! ```
//!
//! then `pivot_root(".", ".")` and a lazy unmount of the old root. Nothing
//! mounted here propagates to the host: `/` is made recursively private
//! first (needed when root runs without a user namespace).

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

use crate::plan::{Bind, BindKind, View};
use crate::sys::{self, Result};

/// How `/proc` was provided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProcKind {
    Fresh,
    /// A snapshot, because a fresh proc was refused (the reason).
    Snapshot(String),
}

enum Entry {
    Tree {
        dst: PathBuf,
        fd: OwnedFd,
        is_dir: bool,
    },
    Symlink {
        dst: PathBuf,
        target: PathBuf,
    },
    Private(PathBuf),
    /// An empty read-only folder over one of warden's credential folders.
    Empty(PathBuf),
    Dev,
    Proc,
    Dir(PathBuf),
}

impl Entry {
    fn path(&self) -> &Path {
        match self {
            Entry::Tree { dst, .. }
            | Entry::Symlink { dst, .. }
            | Entry::Dir(dst)
            | Entry::Empty(dst)
            | Entry::Private(dst) => dst,
            Entry::Dev => Path::new("/dev"),
            Entry::Proc => Path::new("/proc"),
        }
    }
}

fn attrs(kind: BindKind) -> u64 {
    use sys::{MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};
    match kind {
        BindKind::ReadExec => MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        BindKind::Read => {
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC
        }
        BindKind::Write => MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        // A hidden file's device node: read-only, and `nodev` so that it
        // cannot be opened at all. (A hidden folder is a tmpfs instead.)
        BindKind::Hidden => {
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC
        }
    }
}

/// Device nodes bound from the host's /dev (nosuid, noexec, *not* nodev).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom"];

/// Files copied into the /proc snapshot.
const PROC_SNAPSHOT: &[&str] = &["cpuinfo", "stat", "meminfo", "loadavg", "uptime"];

fn do_mount(
    src: &str,
    target: &Path,
    fstype: &str,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<()> {
    mount(Some(src), target, Some(fstype), flags, data)
        .map_err(|e| sys::errno_from(format!("mount {fstype} on {}", target.display()), e))
}

fn remount(target: &Path, flags: MsFlags) -> Result<()> {
    mount(None::<&str>, target, None::<&str>, flags, None::<&str>)
        .map_err(|e| sys::errno_from(format!("remount {}", target.display()), e))
}

/// Builds the view and pivots into it. `uid`/`gid`: the ids inside (the
/// owner of the private tmpfs). `cwd`: created empty when not granted.
pub(crate) fn build(view: &View, cwd: &Path, uid: u32, gid: u32) -> Result<ProcKind> {
    // 1. Nothing mounted below may propagate back to the host.
    remount(Path::new("/"), MsFlags::MS_REC | MsFlags::MS_PRIVATE)?;

    // 2. Detached copies of every grant, taken while the host view is intact.
    let mut entries: Vec<Entry> = Vec::new();
    for Bind {
        src,
        kind,
        optional,
        confine,
    } in &view.binds
    {
        if *kind == BindKind::Hidden {
            if src.is_dir() {
                entries.push(Entry::Empty(src.clone()));
            } else {
                // A file: /dev/null on a `nodev` mount over it, so that any
                // open of it fails (EACCES) and nothing of it shows.
                let fd = sys::open_tree_clone(Path::new("/dev/null"))?;
                sys::mount_setattr_tree(fd.as_fd(), attrs(*kind), src)?;
                entries.push(Entry::Tree {
                    dst: src.clone(),
                    fd,
                    is_dir: false,
                });
            }
            continue;
        }
        let (fd, is_dir) = match confine {
            // A configured grant inside the workspace: bind exactly the
            // object checked to lie inside it.
            Some(root) => {
                let handle = sys::open_confined(src, root)?;
                let fd = sys::open_tree_clone_fd(handle.as_fd(), src)?;
                (fd, File::from(handle).metadata().is_ok_and(|m| m.is_dir()))
            }
            None => {
                let meta = match std::fs::symlink_metadata(src) {
                    Ok(m) => m,
                    Err(_) if *optional => continue,
                    Err(e) => return Err(sys::err_from(format!("grant {}", src.display()), e)),
                };
                // A top-level system symlink (/bin -> usr/bin): recreate it.
                if meta.file_type().is_symlink() && src.parent() == Some(Path::new("/")) {
                    let target = std::fs::read_link(src)
                        .map_err(|e| sys::err_from(format!("readlink {}", src.display()), e))?;
                    entries.push(Entry::Symlink {
                        dst: src.clone(),
                        target,
                    });
                    continue;
                }
                let fd = match sys::open_tree_clone(src) {
                    Ok(fd) => fd,
                    Err(e) if *optional && e.err.kind() == std::io::ErrorKind::NotFound => {
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                (fd, std::fs::metadata(src).is_ok_and(|m| m.is_dir()))
            }
        };
        sys::mount_setattr_tree(fd.as_fd(), attrs(*kind), src)?;
        entries.push(Entry::Tree {
            dst: src.clone(),
            fd,
            is_dir,
        });
    }
    // The host /proc files for a snapshot, read now while still visible
    // (only used if a fresh proc is refused).
    entries.push(Entry::Private(view.private_dir.clone()));
    entries.push(Entry::Dev);
    entries.push(Entry::Proc);
    entries.push(Entry::Dir(cwd.to_path_buf()));
    // Parents before children (a write grant under /tmp goes onto the
    // private tmpfs); a stable sort keeps the plan's order otherwise.
    entries.sort_by_key(|e| e.path().components().count());

    // 3. The new root: a small tmpfs over /tmp of *this* namespace (the
    //    grants were captured above, so hiding /tmp here loses nothing).
    let root = PathBuf::from("/tmp");
    do_mount(
        "tmpfs",
        &root,
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=1m,nr_inodes=4096"),
    )?;
    let inside = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    let mut proc_kind = ProcKind::Fresh;
    for e in &entries {
        let dst = inside(e.path());
        match e {
            Entry::Tree { fd, is_dir, .. } => {
                if *is_dir {
                    mkdir_p(&dst)?;
                } else {
                    if let Some(parent) = dst.parent() {
                        mkdir_p(parent)?;
                    }
                    touch(&dst)?;
                }
                sys::move_mount_to(fd.as_fd(), &dst)?;
            }
            Entry::Symlink { target, .. } => {
                std::os::unix::fs::symlink(target, &dst)
                    .map_err(|e| sys::err_from(format!("symlink {}", dst.display()), e))?;
            }
            Entry::Dir(_) => mkdir_p(&dst)?,
            Entry::Empty(_) => {
                mkdir_p(&dst)?;
                do_mount(
                    "tmpfs",
                    &dst,
                    "tmpfs",
                    MsFlags::MS_RDONLY
                        | MsFlags::MS_NOSUID
                        | MsFlags::MS_NODEV
                        | MsFlags::MS_NOEXEC,
                    Some("size=4k,nr_inodes=1,mode=0555"),
                )?;
            }
            Entry::Private(_) => {
                mkdir_p(&dst)?;
                let mb = view.private_mb.max(1);
                // Inodes cost memory too: cap them with the bytes.
                let inodes = mb.saturating_mul(64).max(1024);
                do_mount(
                    "tmpfs",
                    &dst,
                    "tmpfs",
                    MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                    Some(&format!(
                        "size={mb}m,nr_inodes={inodes},mode=0700,uid={uid},gid={gid}"
                    )),
                )?;
            }
            Entry::Dev => dev(&dst, &view.tmp)?,
            Entry::Proc => {
                proc_kind = proc(&dst)?;
                // uid 0 inside is the host's root (the map is the
                // identity): its owner-only kernel files are not its to read.
                if uid == 0 && proc_kind == ProcKind::Fresh {
                    crate::proc_mask::mask_root_only(&dst, view.proc_root_only.as_deref())?;
                }
            }
        }
    }
    // HOME (and TMPDIR, when it is a folder of its own) inside the
    // private tmpfs, owned by the user.
    mkdir_p(&inside(&view.home))?;
    mkdir_p(&inside(&view.tmp))?;

    // 4. Root read-only. Flags a user namespace locked (nosuid, nodev)
    //    must be repeated or the remount is refused.
    remount(
        &root,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
    )?;

    // 5. Pivot: the old root ends up under the new one, then is detached.
    std::env::set_current_dir(&root).map_err(|e| sys::err_from("chdir new root", e))?;
    nix::unistd::pivot_root(".", ".").map_err(|e| sys::errno_from("pivot_root", e))?;
    umount2(".", MntFlags::MNT_DETACH).map_err(|e| sys::errno_from("umount old root", e))?;
    std::env::set_current_dir("/").map_err(|e| sys::err_from("chdir /", e))?;
    Ok(proc_kind)
}

/// `/dev`: a read-only tmpfs with binds of the harmless device nodes, the
/// fd symlinks, and `shm` pointing into the private tmpfs.
fn dev(dst: &Path, private_dir: &Path) -> Result<()> {
    mkdir_p(dst)?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    do_mount(
        "tmpfs",
        dst,
        "tmpfs",
        flags,
        Some("mode=0755,size=64k,nr_inodes=64"),
    )?;
    for n in DEVICES {
        let src = Path::new("/dev").join(n);
        let node = dst.join(n);
        touch(&node)?;
        let fd = sys::open_tree_clone(&src)?;
        // Read-only: these are the host's own device inodes, owned by
        // root, and an owner needs no capability to chmod, chown to
        // itself, set times or ACLs on them (a root-started server made
        // the host's /dev/full 0600). Reading and writing a character
        // device is not a write to the mount, so /dev/null still takes
        // writes.
        sys::mount_setattr_tree(
            fd.as_fd(),
            sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
            &src,
        )?;
        sys::move_mount_to(fd.as_fd(), &node)?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        symlink(Path::new(target), &dst.join(name))?;
    }
    // POSIX shared memory and semaphores count against the private budget.
    symlink(private_dir, &dst.join("shm"))?;
    remount(
        dst,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | flags,
    )
}

/// `/proc`: fresh for the new pid namespace, else a snapshot.
fn proc(dst: &Path) -> Result<ProcKind> {
    mkdir_p(dst)?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    match do_mount("proc", dst, "proc", flags | MsFlags::MS_RDONLY, None) {
        Ok(()) => Ok(ProcKind::Fresh),
        Err(e) => {
            // Refused where the host /proc has masked paths (containers):
            // plain, `subset=pid` and `hidepid=` mounts alike. The host
            // /proc is still visible here (the old root is detached only
            // after the pivot); copy what runtimes read for CPU and memory.
            let copies: Vec<(&str, Vec<u8>)> = PROC_SNAPSHOT
                .iter()
                .map(|f| (*f, std::fs::read(format!("/proc/{f}")).unwrap_or_default()))
                .collect();
            do_mount(
                "tmpfs",
                dst,
                "tmpfs",
                flags,
                Some("mode=0555,size=1m,nr_inodes=32"),
            )?;
            for (f, data) in &copies {
                std::fs::write(dst.join(f), data)
                    .map_err(|e| sys::err_from(format!("/proc snapshot {f}"), e))?;
            }
            remount(
                dst,
                MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | flags,
            )?;
            Ok(ProcKind::Snapshot(e.to_string()))
        }
    }
}

fn mkdir_p(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).map_err(|e| sys::err_from(format!("mkdir {}", p.display()), e))
}

fn touch(p: &Path) -> Result<()> {
    // A file inside a read-only grant exists already and cannot be opened
    // for writing: a mount point needs nothing more.
    if p.symlink_metadata().is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .map(drop)
        .map_err(|e| sys::err_from(format!("create {}", p.display()), e))
}

fn symlink(target: &Path, at: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, at)
        .map_err(|e| sys::err_from(format!("symlink {}", at.display()), e))
}
