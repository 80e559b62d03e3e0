//! The root-only files of the server's fresh `/proc`, covered when the
//! server runs as root.
//!
//! A server started by root runs as uid 0 in its user namespace, mapped to
//! the host's uid 0, with no capability. Files of `/proc` that are global
//! to the kernel and readable by their owner only (mode 0400/0600, owner
//! root) need no capability, only that uid, so such a server read what no
//! other user of the host can: the physical page flags and counts of all
//! memory (`kpageflags`, `kpagecount`, `kpagecgroup`: the map Rowhammer
//! and page-cache attacks steer by), the kernel's slab and vmalloc state
//! (`slabinfo`, `vmallocinfo`, `pagetypeinfo`), timers and, in ports mode
//! (the host's network namespace), the host's TCP Fast Open key and IPv6
//! `stable_secret`s. Each is covered like a hidden file of a grant
//! (`/dev/null` on a read-only `nodev` mount: any open fails with
//! `EACCES`, as for every other user), a folder only its owner may read
//! (`/proc/tty/driver`) by an empty read-only tmpfs. Found by walking the
//! mounted `/proc` rather than from a list, so a kernel's own additions
//! are covered too; the processes' folders (the sandbox's own) are not
//! walked.
//!
//! The walk reads about 1,700 entries (8 ms on one thread, more than a
//! sandboxed start), so warden makes it once per process over its own
//! `/proc` ([`host_root_only`], begun early by [`begin_proc_walk`]) and
//! every launch's helper covers that list in its fresh `/proc`: the global
//! part of the two is the same kernel's, and a fresh network namespace's
//! `sys/net` has a subset of the host's (only `lo`, no `init_net`-only
//! file): the helper covers what exists. Where the list could not be made
//! the helper walks its own `/proc`.

use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::mount::{MsFlags, mount};

use crate::sys::{self, Result};

/// Deeper than any global file of `/proc` (`sys/net/ipv6/conf/IF/x` is 5).
const MAX_DEPTH: usize = 8;

/// One owner-only entry of `/proc`: its path relative to `/proc`, and
/// whether it is a folder.
pub(crate) type RootOnly = (PathBuf, bool);

/// The owner-only entries of this process's `/proc`, walked once per
/// process: `sys/net` (two thirds of the entries) on a thread of its own
/// beside the rest (measured, the two overlap little: the kernel's
/// dentry lookups of `/proc/sys` take most of the time). `None` when
/// `/proc` cannot be listed (the helper then walks its own).
pub(crate) fn host_root_only() -> Option<Vec<RootOnly>> {
    static LIST: OnceLock<Option<Vec<RootOnly>>> = OnceLock::new();
    LIST.get_or_init(|| {
        let proc = Path::new("/proc");
        let walk_net = move || walk_relative(proc, &proc.join(NET_PART), 2, false);
        // Without a thread to spare, one after the other.
        let net = std::thread::Builder::new().spawn(walk_net);
        let mut list = walk_relative(proc, proc, 0, true)?;
        // A walk that could not run leaves nothing uncovered: the helper
        // then walks its own `/proc` whole.
        list.extend(match net {
            Ok(thread) => thread.join().ok()??,
            Err(_) => walk_net()?,
        });
        Some(list)
    })
    .clone()
}

/// Starts [`host_root_only`]'s walk on a thread of its own, so that a
/// short-lived command's first launch finds it made (or under way).
pub fn begin_proc_walk() {
    if nix::unistd::geteuid().is_root() {
        // Without a thread, the first launch walks.
        let _ = std::thread::Builder::new().spawn(host_root_only);
    }
}

/// The network namespace's part of `/proc`, relative to it.
const NET_PART: &str = "sys/net";

fn walk_relative(proc: &Path, from: &Path, depth: usize, skip_net: bool) -> Option<Vec<RootOnly>> {
    std::fs::read_dir(from).ok()?;
    let mut found = Vec::new();
    walk(proc, from, depth, skip_net, &mut found);
    Some(
        found
            .into_iter()
            .filter_map(|(p, d)| Some((p.strip_prefix(proc).ok()?.to_path_buf(), d)))
            .collect(),
    )
}

/// Covers every regular file not readable by others and every folder not
/// searchable by others below `proc` (a fresh proc, still mounted where
/// init built it): those of `listed` (relative to `proc`, from
/// [`host_root_only`]) that exist here, or, without a list, those a walk
/// finds. Returns how many it covered.
pub(crate) fn mask_root_only(proc: &Path, listed: Option<&[RootOnly]>) -> Result<usize> {
    let mut found = Vec::new();
    match listed {
        Some(list) => {
            for (rel, _) in list {
                let path = proc.join(rel);
                // What is there decides the cover: an entry of the host's
                // list this namespace lacks has nothing to cover.
                if let Ok(meta) = std::fs::symlink_metadata(&path) {
                    found.push((path, meta.is_dir()));
                }
            }
        }
        None => walk(proc, proc, 0, false, &mut found),
    }
    // The first file is covered by a fresh copy of `/dev/null` with the
    // cover's flags; every other file by a plain bind of that first cover,
    // which carries its flags (read-only, nosuid, nodev, noexec): one
    // syscall per file instead of three, most of a root start's covers.
    let mut template: Option<&Path> = None;
    for (path, is_dir) in &found {
        match (is_dir, template) {
            (true, _) => cover_folder(path)?,
            (false, Some(first)) => bind_cover(first, path)?,
            (false, None) => {
                cover_file(path)?;
                template = Some(path);
            }
        }
    }
    Ok(found.len())
}

fn cover_folder(path: &Path) -> Result<()> {
    mount(
        Some("tmpfs"),
        path,
        Some("tmpfs"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("size=4k,nr_inodes=1,mode=0000"),
    )
    .map_err(|e| sys::errno_from(format!("cover {}", path.display()), e))
}

fn cover_file(path: &Path) -> Result<()> {
    let fd = sys::open_tree_clone(Path::new("/dev/null"))?;
    sys::mount_setattr_tree(fd.as_fd(), COVER_ATTRS, path)?;
    sys::move_mount_to(fd.as_fd(), path)
}

/// The flags every file cover has.
const COVER_ATTRS: u64 = sys::MOUNT_ATTR_RDONLY
    | sys::MOUNT_ATTR_NOSUID
    | sys::MOUNT_ATTR_NODEV
    | sys::MOUNT_ATTR_NOEXEC;

/// Covers `path` by a bind of the cover at `first`: a bind copies the
/// source mount's flags (the sandbox tests read them back from
/// `mountinfo`).
fn bind_cover(first: &Path, path: &Path) -> Result<()> {
    mount(
        Some(first),
        path,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| sys::errno_from(format!("cover {}", path.display()), e))
}

/// Whether a top-level entry of `/proc` is a process's folder (or the
/// links to one), which belongs to the sandbox and is not walked.
fn is_process(name: &str) -> bool {
    name == "self" || name == "thread-self" || name.bytes().all(|b| b.is_ascii_digit())
}

fn walk(root: &Path, dir: &Path, depth: usize, skip_net: bool, found: &mut Vec<(PathBuf, bool)>) {
    // A folder that cannot be listed (root's, with its mode) is covered
    // by its parent's check; one that vanished has nothing to cover.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if dir == root && entry.file_name().to_str().is_some_and(is_process) {
            continue;
        }
        // Walked on its own, when it is the host's (`host_root_only`).
        if skip_net && depth == 1 && entry.path() == root.join(NET_PART) {
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let mode = meta.mode();
        if meta.is_dir() {
            if mode & 0o005 != 0o005 {
                found.push((entry.path(), true));
            } else if depth < MAX_DEPTH {
                walk(root, &entry.path(), depth + 1, skip_net, found);
            }
        } else if meta.is_file() && mode & 0o004 == 0 && mode & 0o400 != 0 {
            found.push((entry.path(), false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_finds_the_network_part_too() {
        if !nix::unistd::geteuid().is_root() {
            return; // the list is made for root only
        }
        let list = host_root_only().unwrap_or_default();
        let has = |p: &str| list.iter().any(|(r, _)| r == Path::new(p));
        assert!(has("sys/net/ipv4/tcp_fastopen_key"), "{list:?}");
        assert!(has("kpageflags"), "{list:?}");
        assert!(
            !list
                .iter()
                .any(|(r, _)| r.starts_with("self") || r.starts_with("1"))
        );
    }

    #[test]
    fn process_folders_are_not_walked() {
        assert!(is_process("1"));
        assert!(is_process("4242"));
        assert!(is_process("self"));
        assert!(is_process("thread-self"));
        assert!(!is_process("sys"));
        assert!(!is_process("kpageflags"));
        assert!(!is_process("1x"));
    }
}
