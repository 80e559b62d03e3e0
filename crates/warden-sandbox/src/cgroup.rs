//! Per-server cgroups on cgroup v1, v2 or a mix of both (one hierarchy per
//! controller), for the limits that must hold for the whole sandbox:
//! processes + threads (`pids`), memory (`memory`) and total CPU time
//! (accounting: v1 `cpuacct.usage`, v2 `cpu.stat` `usage_usec`, which is
//! core on v2 and needs no controller; the helper kills the sandbox at the
//! limit, since `cpu.max` is only a rate).
//!
//! Lifecycle:
//! - [`discover`] (in `prepare`, no side effect): `/proc/self/cgroup` and
//!   `/proc/self/mountinfo` → per controller the hierarchy that offers it
//!   and a writable parent folder (v1: warden's own cgroup in that
//!   hierarchy, so the host's limits stay above ours; v2: an operator's
//!   delegated folder (`WARDEN_CGROUP_PARENT`) or the root when warden runs
//!   in it).
//! - the helper [`sweep`]s stale `warden-<dead pid>-*` folders, then
//!   [`create`]s `warden-<helper pid>-<server>` in each hierarchy and writes
//!   the limits, before any namespace exists (host credentials).
//! - init joins: v1 by writing `"0"` to each `tasks` file (moves only the
//!   calling thread of a single-threaded process, so the kernel skips the
//!   global threadgroup rwsem: 0.06 ms instead of an RCU grace period after
//!   idle, 6–44 ms here, which is what a `cgroup.procs` write costs); v2
//!   through `clone3(CLONE_INTO_CGROUP)`, no migration at all.
//! - the helper reads the CPU counter while the server runs, then removes
//!   the folders after init was reaped. A helper killed with SIGKILL leaves
//!   an empty folder for the next helper's sweep.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys;

/// Prefix of every per-server cgroup folder: `warden-<helper pid>-<name>`.
const PREFIX: &str = "warden-";

/// A controller the sandbox uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Controller {
    Pids,
    Memory,
    /// CPU time accounting (v1 `cpuacct`, v2 core `cpu.stat`).
    Cpu,
}

impl Controller {
    pub(crate) const ALL: [Controller; 3] = [Controller::Pids, Controller::Memory, Controller::Cpu];

    /// The limit this controller enforces, for messages.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Controller::Pids => "processes",
            Controller::Memory => "memory_mb",
            Controller::Cpu => "cpu_seconds",
        }
    }

    fn v1_name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
            Controller::Cpu => "cpuacct",
        }
    }

    fn v2_name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
            Controller::Cpu => "cpu",
        }
    }
}

/// What this host offers this process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HostCgroups {
    /// v2: mount point and our own cgroup path in it.
    pub v2: Option<(PathBuf, String)>,
    /// v1: controller → (mount point, our own path).
    pub v1: Vec<(String, PathBuf, String)>,
}

/// Reads `/proc/self/cgroup` and `/proc/self/mountinfo`.
pub(crate) fn host() -> HostCgroups {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse_host(&own, &mounts)
}

pub(crate) fn parse_host(own: &str, mountinfo: &str) -> HostCgroups {
    let mut h = HostCgroups::default();
    // "id parent maj:min root mountpoint opts [optional…] - fstype src superopts"
    let mut v2_mount = None;
    let mut v1_mounts: Vec<(Vec<String>, PathBuf)> = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let f: Vec<&str> = pre.split(' ').collect();
        let p: Vec<&str> = post.split(' ').collect();
        // Only mounts of a hierarchy's root (a bind of a sub-folder would
        // make our own path relative to something else).
        let (Some(&"/"), Some(mp), Some(fstype), Some(opts)) =
            (f.get(3), f.get(4), p.first(), p.get(2))
        else {
            continue;
        };
        let mp = PathBuf::from(unescape_mount_path(mp));
        match *fstype {
            "cgroup2" => v2_mount = Some(mp),
            "cgroup" => v1_mounts.push((opts.split(',').map(str::to_string).collect(), mp)),
            _ => {}
        }
    }
    for line in own.lines() {
        let mut it = line.splitn(3, ':');
        let (Some(_id), Some(ctrls), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if ctrls.is_empty() {
            if let Some(m) = &v2_mount {
                h.v2 = Some((m.clone(), path.to_string()));
            }
            continue;
        }
        for c in ctrls.split(',') {
            if let Some((_, mp)) = v1_mounts.iter().find(|(o, _)| o.iter().any(|x| x == c)) {
                h.v1.push((c.to_string(), mp.clone(), path.to_string()));
            }
        }
    }
    h
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_path(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'\\'
            && let Some(oct) = b.get(i + 1..i + 4)
            && let Ok(v) = u8::from_str_radix(std::str::from_utf8(oct).unwrap_or("x"), 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(c);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn writable(p: &Path) -> bool {
    nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
}

fn below(mount: &Path, own: &str) -> PathBuf {
    match own.trim_matches('/') {
        "" => mount.to_path_buf(),
        rel => mount.join(rel),
    }
}

/// Which hierarchy enforces which limit (decided in `prepare`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CgroupPlan {
    /// v2: the parent folder in which the per-server cgroup is made.
    pub v2_parent: Option<PathBuf>,
    /// v2 controllers used (Cpu needs none: accounting is core).
    pub v2: Vec<Controller>,
    /// v1: controller → parent folder, e.g. (Pids, /sys/fs/cgroup/pids).
    pub v1: Vec<(Controller, PathBuf)>,
}

impl CgroupPlan {
    /// Where `c` is enforced: "cgroup v2", "cgroup v1", or `None`.
    pub(crate) fn version_of(&self, c: Controller) -> Option<&'static str> {
        if self.v2.contains(&c) {
            Some("cgroup v2")
        } else if self.v1.iter().any(|(x, _)| *x == c) {
            Some("cgroup v1")
        } else {
            None
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.v2.is_empty() && self.v1.is_empty()
    }

    /// The parent folders, for reports.
    pub(crate) fn parents(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.v2_parent.iter().cloned().collect();
        for (_, p) in &self.v1 {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

/// Chooses, for each wanted controller, the hierarchy that will enforce
/// it. `v2_parent_override`: a delegated v2 folder given by the operator
/// (then v2 is preferred for whatever it offers). Returns the plan and,
/// for each wanted controller no writable hierarchy offers, why.
pub(crate) fn discover(
    h: &HostCgroups,
    wanted: &[Controller],
    v2_parent_override: Option<&Path>,
) -> (CgroupPlan, Vec<(Controller, String)>) {
    let mut plan = CgroupPlan::default();
    let mut missing = Vec::new();
    let v2_parent = match v2_parent_override {
        Some(p) => Some(p.to_path_buf()),
        // Only the root cgroup may hold processes *and* enable controllers
        // for its children; anywhere else warden would first have to move
        // itself into a leaf ("no internal processes").
        None => {
            h.v2.as_ref()
                .and_then(|(mount, own)| (own == "/").then(|| mount.clone()))
        }
    };
    let mut v2_offers: Vec<Controller> = Vec::new();
    if let Some(parent) = v2_parent.as_ref().filter(|p| writable(p)) {
        let avail = std::fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
        for c in Controller::ALL {
            if c == Controller::Cpu || avail.split_whitespace().any(|a| a == c.v2_name()) {
                v2_offers.push(c);
            }
        }
    }
    // On a hybrid host (v1 controllers, an almost empty v2 tree like this
    // VM's) keep CPU accounting on v1 unless the operator chose a v2 parent
    // or v2 offers a real controller: one hierarchy fewer to create.
    let v2_real = v2_parent_override.is_some() || v2_offers.iter().any(|c| *c != Controller::Cpu);
    for &c in wanted {
        let on_v1 = h.v1.iter().find(|(n, _, _)| n == c.v1_name());
        if v2_offers.contains(&c) && (c != Controller::Cpu || v2_real || on_v1.is_none()) {
            plan.v2.push(c);
            continue;
        }
        match on_v1 {
            Some((_, mount, own)) => {
                let parent = below(mount, own);
                if writable(&parent) {
                    plan.v1.push((c, parent));
                } else {
                    missing.push((
                        c,
                        format!(
                            "the {} cgroup {} is not writable by this user",
                            c.v1_name(),
                            parent.display()
                        ),
                    ));
                }
            }
            None => missing.push((
                c,
                match &v2_parent {
                    Some(p) if !writable(p) => format!(
                        "the cgroup v2 folder {} is not writable by this user \
                         (delegate one and set WARDEN_CGROUP_PARENT)",
                        p.display()
                    ),
                    Some(p) => format!(
                        "the cgroup v2 folder {} does not offer the {} controller",
                        p.display(),
                        c.v2_name()
                    ),
                    None => "warden is not in the root of the cgroup v2 tree and no delegated \
                             folder was given (WARDEN_CGROUP_PARENT)"
                        .to_string(),
                },
            )),
        }
    }
    if !plan.v2.is_empty() {
        plan.v2_parent = v2_parent;
    }
    (plan, missing)
}

/// The limits written into a new cgroup.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CgroupLimits {
    /// `pids.max`.
    pub pids_max: Option<u64>,
    pub memory_bytes: Option<u64>,
}

/// A created per-server cgroup (in one or more hierarchies).
#[derive(Debug, Default)]
pub(crate) struct Cgroup {
    dirs: Vec<PathBuf>,
    /// v1 `tasks` files: init writes "0" into each to join.
    v1_tasks: Vec<OwnedFd>,
    /// v2 folder, for CLONE_INTO_CGROUP.
    pub v2_dir: Option<OwnedFd>,
    v2_kill: Option<PathBuf>,
    /// CPU usage counter: (fd, true = v2 `cpu.stat` in µs, false = v1 ns).
    cpu_usage: Option<(OwnedFd, bool)>,
}

fn write_file(p: &Path, v: &str) -> sys::Result<()> {
    std::fs::write(p, v).map_err(|e| sys::err_from(format!("write {v} to {}", p.display()), e))
}

fn open(p: &Path, flags: nix::fcntl::OFlag) -> sys::Result<OwnedFd> {
    nix::fcntl::open(
        p,
        flags | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| sys::errno_from(format!("open {}", p.display()), e))
}

/// Creates `name` in each planned hierarchy and writes the limits. Called
/// by the helper before the clone of init. On failure nothing is left.
pub(crate) fn create(plan: &CgroupPlan, name: &str, limits: CgroupLimits) -> sys::Result<Cgroup> {
    use nix::fcntl::OFlag;
    let mut cg = Cgroup::default();
    let res = (|| {
        if let Some(parent) = &plan.v2_parent {
            let wanted: Vec<&str> = plan
                .v2
                .iter()
                .filter(|c| **c != Controller::Cpu)
                .map(|c| c.v2_name())
                .collect();
            if !wanted.is_empty() {
                let sc = std::fs::read_to_string(parent.join("cgroup.subtree_control"))
                    .unwrap_or_default();
                let add: Vec<String> = wanted
                    .iter()
                    .filter(|c| !sc.split_whitespace().any(|x| x == **c))
                    .map(|c| format!("+{c}"))
                    .collect();
                if !add.is_empty() {
                    write_file(&parent.join("cgroup.subtree_control"), &add.join(" "))?;
                }
            }
            let dir = parent.join(name);
            mkdir(&dir)?;
            cg.dirs.push(dir.clone());
            for c in &plan.v2 {
                match c {
                    Controller::Pids => {
                        if let Some(n) = limits.pids_max {
                            write_file(&dir.join("pids.max"), &n.to_string())?;
                        }
                    }
                    Controller::Memory => {
                        if let Some(b) = limits.memory_bytes {
                            write_file(&dir.join("memory.max"), &b.to_string())?;
                            // No swap to dodge into; kill the whole group
                            // rather than one process at random.
                            let _ = write_file(&dir.join("memory.swap.max"), "0");
                            let _ = write_file(&dir.join("memory.oom.group"), "1");
                        }
                    }
                    Controller::Cpu => {
                        cg.cpu_usage = Some((open(&dir.join("cpu.stat"), OFlag::O_RDONLY)?, true));
                    }
                }
            }
            cg.v2_kill = Some(dir.join("cgroup.kill"));
            cg.v2_dir = Some(open(&dir, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?);
        }
        for (c, parent) in &plan.v1 {
            let dir = parent.join(name);
            mkdir(&dir)?;
            cg.dirs.push(dir.clone());
            match c {
                Controller::Pids => {
                    if let Some(n) = limits.pids_max {
                        write_file(&dir.join("pids.max"), &n.to_string())?;
                    }
                }
                Controller::Memory => {
                    if let Some(b) = limits.memory_bytes {
                        let (memory, tcp) = v1_memory_split(b);
                        // v1 charges TCP buffers to no counter at all
                        // unless the group has a TCP limit (cgroup v2
                        // charges them to memory.max): without one, send
                        // queues of a few MB per connection took host
                        // memory and the host's whole TCP budget
                        // (`tcp_mem`) past `memory_mb`. Their share is
                        // taken out of the memory limit so that the two
                        // together stay within `memory_mb`.
                        let tcp_file = dir.join("memory.kmem.tcp.limit_in_bytes");
                        let memory = if tcp_file.exists() {
                            write_file(&tcp_file, &tcp.to_string())?;
                            memory
                        } else {
                            b
                        };
                        let memory = memory.to_string();
                        write_file(&dir.join("memory.limit_in_bytes"), &memory)?;
                        // With swap accounting, memory+swap gets the same
                        // cap; without, keep the group out of swap.
                        let memsw = dir.join("memory.memsw.limit_in_bytes");
                        if memsw.exists() {
                            write_file(&memsw, &memory)?;
                        } else {
                            let _ = write_file(&dir.join("memory.swappiness"), "0");
                        }
                    }
                }
                Controller::Cpu => {
                    cg.cpu_usage =
                        Some((open(&dir.join("cpuacct.usage"), OFlag::O_RDONLY)?, false));
                }
            }
            cg.v1_tasks.push(open(&dir.join("tasks"), OFlag::O_WRONLY)?);
        }
        Ok(())
    })();
    match res {
        Ok(()) => Ok(cg),
        Err(e) => {
            cg.remove();
            Err(e)
        }
    }
}

/// A v1 memory limit of `bytes` split into (memory, TCP buffers): an
/// eighth for TCP, so that memory + TCP never exceed `bytes`.
pub(crate) fn v1_memory_split(bytes: u64) -> (u64, u64) {
    let tcp = bytes / 8;
    (bytes - tcp, tcp)
}

fn mkdir(dir: &Path) -> sys::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        // A leftover of a dead helper that had our pid: reuse it if empty.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            if procs.trim().is_empty() {
                Ok(())
            } else {
                Err(sys::err_from(format!("cgroup {} in use", dir.display()), e))
            }
        }
        Err(e) => Err(sys::err_from(format!("mkdir {}", dir.display()), e)),
    }
}

impl Cgroup {
    /// Called by init (single-threaded) right after the clone: joins every
    /// v1 hierarchy by writing "0" to `tasks`. init then closes every
    /// inherited descriptor and leaves with `_exit`, so its copy of this
    /// value is never dropped (the folders belong to the helper).
    pub(crate) fn join_v1(&self) -> sys::Result<()> {
        for fd in &self.v1_tasks {
            sys::write_all(fd.as_fd(), b"0")
                .map_err(|e| sys::err_from("join cgroup (tasks)", e))?;
        }
        Ok(())
    }

    /// The helper no longer needs the join handles once init has joined.
    pub(crate) fn close_join_handles(&mut self) {
        self.v1_tasks.clear();
        self.v2_dir = None;
    }

    pub(crate) fn counts_cpu(&self) -> bool {
        self.cpu_usage.is_some()
    }

    /// Total CPU time used so far by everything in the sandbox, in ns
    /// (dead and auto-reaped processes included).
    pub(crate) fn cpu_ns(&self) -> Option<u64> {
        let (fd, v2) = self.cpu_usage.as_ref()?;
        let s = sys::pread_string(fd.as_fd()).ok()?;
        if *v2 {
            s.lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|us| us.saturating_mul(1000))
        } else {
            s.trim().parse().ok()
        }
    }

    /// v2: kills every process in the cgroup at once.
    pub(crate) fn kill_all(&self) {
        if let Some(k) = &self.v2_kill {
            let _ = std::fs::write(k, "1");
        }
    }

    /// Removes the folders (after init was reaped), retrying for up to
    /// 200 ms while the last tasks of the torn-down namespace exit.
    pub(crate) fn remove(&mut self) {
        self.close_join_handles();
        self.cpu_usage = None;
        for d in self.dirs.drain(..).rev() {
            for i in 0..100 {
                match std::fs::remove_dir(&d) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(_) if i < 99 => std::thread::sleep(std::time::Duration::from_millis(2)),
                    Err(e) => {
                        eprintln!(
                            "warden sandbox: could not remove cgroup {}: {e}",
                            d.display()
                        )
                    }
                }
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if !self.dirs.is_empty() {
            self.remove();
        }
    }
}

/// Removes stale per-server cgroups under `parent`: `warden-<pid>-…`
/// folders whose helper pid no longer exists (`rmdir` fails harmlessly on
/// one that still holds a process). Returns how many were removed.
pub(crate) fn sweep(parent: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if std::fs::remove_dir(e.path()).is_ok() {
            n += 1;
        }
    }
    n
}

/// The per-server cgroup name: `warden-<helper pid>-<name>`.
pub(crate) fn name_for(server: &str) -> String {
    let safe: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{PREFIX}{}-{safe}", std::process::id())
}

/// The operator's delegated cgroup v2 folder, if any.
pub(crate) fn v2_parent_from_env() -> Option<PathBuf> {
    std::env::var_os("WARDEN_CGROUP_PARENT")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const OWN: &str = "8:pids:/\n4:memory:/a/b\n2:cpuacct:/\n0::/\n";

    #[test]
    fn parses_a_hybrid_host() {
        let h = parse_host(OWN, MOUNTINFO);
        assert_eq!(
            h.v2,
            Some((PathBuf::from("/sys/fs/cgroup/unified"), "/".to_string()))
        );
        assert!(h.v1.iter().any(|(c, m, o)| c == "memory"
            && m == Path::new("/sys/fs/cgroup/memory")
            && o == "/a/b"));
        assert_eq!(h.v1.len(), 3);
    }

    #[test]
    fn parses_a_pure_v2_host() {
        let mi = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let h = parse_host("0::/user.slice/x.scope\n", mi);
        assert_eq!(
            h.v2,
            Some((
                PathBuf::from("/sys/fs/cgroup"),
                "/user.slice/x.scope".to_string()
            ))
        );
        assert!(h.v1.is_empty());
    }

    #[test]
    fn pure_v2_outside_the_root_without_delegation_offers_nothing() {
        let mi = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let h = parse_host("0::/user.slice/x.scope\n", mi);
        let (plan, missing) = discover(&h, &Controller::ALL, None);
        assert!(plan.is_empty());
        assert_eq!(missing.len(), 3);
        assert!(missing[0].1.contains("WARDEN_CGROUP_PARENT"), "{missing:?}");
    }

    #[test]
    fn names_are_safe_and_carry_the_pid() {
        let n = name_for("a b/../c");
        assert!(n.starts_with(&format!("warden-{}-", std::process::id())));
        assert!(!n.contains('/') && !n.contains(' '));
    }

    #[test]
    fn v1_memory_and_tcp_together_stay_within_the_limit() {
        for b in [0u64, 7, 128 << 20, 1 << 30, u64::MAX] {
            let (m, t) = v1_memory_split(b);
            assert_eq!(m + t, b);
            assert_eq!(t, b / 8);
        }
    }

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path(r"/a\040b"), "/a b");
    }
}
