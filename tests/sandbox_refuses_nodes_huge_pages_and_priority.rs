//! Four ways a server reached past its grants and limits, each tried as
//! the attack and seen to fail, and seen to work outside the sandbox as an
//! unprivileged user (`nobody` when the tests run as root):
//! - device nodes in a write grant: `renameat2(RENAME_WHITEOUT)` leaves a
//!   0:0 character device where the source was (no privilege needed since
//!   Linux 5.8, and not checked by Landlock's MakeChar right), and
//!   `mknod` of a 0:0 character device is a whiteout too;
//! - huge pages (`mmap` MAP_HUGETLB, `memfd_create` MFD_HUGETLB, `shmget`
//!   SHM_HUGETLB) are charged to neither the memory cgroup nor
//!   RLIMIT_DATA, so they escaped `memory_mb`;
//! - real-time scheduling and a lower nice value, allowed by a host's
//!   RLIMIT_RTPRIO/RLIMIT_NICE (root's raised limits, a real-time group),
//!   let a server starve the person's processes of the CPU;
//! - a `sandbox exec` profile granting port 0, "any port": the kernel
//!   then picks a port (auto-bind) that no grant names.

mod sandbox_support;

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::Command;

use sandbox_support::*;

/// A folder an unprivileged baseline may write: `nobody`'s when root.
fn writable_dir(parent: &Path, name: &str) -> std::path::PathBuf {
    let d = parent.join(name);
    std::fs::create_dir(&d).expect("mkdir");
    if is_root() {
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).expect("chown");
        // The path down to it must be searchable by nobody.
        let mut p = d.parent();
        while let Some(dir) = p {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(m) = std::fs::metadata(dir) {
                let mode = m.permissions().mode();
                if mode & 0o001 == 0 {
                    let _ = std::fs::set_permissions(
                        dir,
                        std::fs::Permissions::from_mode(mode | 0o001),
                    );
                }
            }
            if dir == Path::new("/tmp") || dir == Path::new("/") {
                break;
            }
            p = dir.parent();
        }
    }
    d
}

fn output(mut c: Command) -> String {
    let out = c.output().expect("run");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// In folder argv[1]: a rename with RENAME_WHITEOUT, mknod of a 0:0
/// character device and of a 1:3 one; prints each call's errno (0: done).
const NODES: &str = r#"
import ctypes, os, stat, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]
open(os.path.join(d, "a"), "w").close()
rc = libc.renameat2(-100, os.path.join(d, "a").encode(), -100, os.path.join(d, "b").encode(), 4)
print("whiteout", 0 if rc == 0 else ctypes.get_errno(), flush=True)
for name, dev in (("wh", 0), ("null", os.makedev(1, 3))):
    try:
        os.mknod(os.path.join(d, name), stat.S_IFCHR | 0o600, dev)
        print("mknod-" + name, 0, flush=True)
    except OSError as e:
        print("mknod-" + name, e.errno, flush=True)
"#;

fn errno_of(report: &str, what: &str) -> i32 {
    report
        .lines()
        .find_map(|l| l.strip_prefix(what)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {what} in: {report}"))
}

fn is_char_device(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_char_device())
}

#[test]
fn no_device_node_or_whiteout_is_planted_in_a_write_grant() {
    let fx = Fixture::new();
    let plain = writable_dir(fx.workspace.path(), "plain");
    let report = output(unprivileged(&[
        "/usr/bin/python3",
        "-c",
        NODES,
        plain.to_str().expect("utf-8"),
    ]));
    // Baseline: the whiteout needs no privilege (Linux >= 5.8), a real
    // device does.
    assert_eq!(errno_of(&report, "whiteout"), 0, "baseline: {report}");
    let a = std::fs::symlink_metadata(plain.join("a")).expect("the whiteout");
    assert!(
        a.file_type().is_char_device() && a.rdev() == 0,
        "baseline: {report}"
    );
    assert_eq!(errno_of(&report, "mknod-wh"), 0, "baseline: {report}");

    // The server's own folder (root's when the tests run as root).
    let out = fx.workspace.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let report = output(sandbox_exec(
        &fx,
        &serde_json::json!({"write": [out]}),
        &[
            "/usr/bin/python3",
            "-c",
            NODES,
            out.to_str().expect("utf-8"),
        ],
    ));
    for what in ["whiteout", "mknod-wh", "mknod-null"] {
        assert_ne!(errno_of(&report, what), 0, "{what}: {report}");
    }
    for name in ["a", "wh", "null"] {
        assert!(!is_char_device(&out.join(name)), "{name}: {report}");
    }
    assert_eq!(errno_of(&report, "whiteout"), nix::libc::EPERM, "{report}");
    // The rename itself (no flag) still works in the grant.
    assert!(out.join("a").is_file(), "{report}");
}

/// Each way of asking for huge pages; prints each errno (0: got them).
const HUGE: &str = r#"
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
size = 2 * 1024 * 1024
p = libc.mmap(None, size, 3, 0x22 | 0x40000, -1, 0)  # PRIVATE|ANONYMOUS|HUGETLB
print("mmap", 0 if p not in (None, ctypes.c_void_p(-1).value) else ctypes.get_errno(), flush=True)
fd = libc.memfd_create(b"h", 4)  # MFD_HUGETLB
print("memfd", 0 if fd >= 0 else ctypes.get_errno(), flush=True)
sid = libc.shmget(0, size, 0o1000 | 0o4000 | 0o600)  # IPC_CREAT|SHM_HUGETLB
print("shm", 0 if sid >= 0 else ctypes.get_errno(), flush=True)
if sid >= 0:
    libc.shmctl(sid, 0, None)  # IPC_RMID
"#;

/// Raises `vm.nr_overcommit_hugepages` while it lives (root only), so
/// huge pages can be had on a host that reserved none; puts it back.
struct OvercommitHugePages(Option<String>);

impl OvercommitHugePages {
    const FILE: &'static str = "/proc/sys/vm/nr_overcommit_hugepages";

    fn raise(to: u64) -> Self {
        let before = std::fs::read_to_string(Self::FILE).ok();
        let raised = before.as_deref().and_then(|b| {
            let now: u64 = b.trim().parse().ok()?;
            (now < to)
                .then(|| std::fs::write(Self::FILE, to.to_string()).ok())
                .flatten()
        });
        OvercommitHugePages(raised.and(before))
    }
}

impl Drop for OvercommitHugePages {
    fn drop(&mut self) {
        if let Some(before) = &self.0 {
            let _ = std::fs::write(Self::FILE, before.trim());
        }
    }
}

#[test]
fn huge_pages_are_refused_inside_the_sandbox() {
    let fx = Fixture::new();
    let _raised = is_root().then(|| OvercommitHugePages::raise(8));
    let report = output(unprivileged(&["/usr/bin/python3", "-c", HUGE]));
    if errno_of(&report, "mmap") == 0 {
        assert_eq!(errno_of(&report, "memfd"), 0, "baseline: {report}");
    } else {
        skipped(
            "huge_pages_are_refused_inside_the_sandbox (baseline)",
            &format!("no huge pages to be had on this host: {report}"),
        );
    }

    let report = output(sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", HUGE],
    ));
    for what in ["mmap", "memfd", "shm"] {
        assert_eq!(
            errno_of(&report, what),
            nix::libc::ENOMEM,
            "{what}: {report}"
        );
    }
}

/// Asks for SCHED_FIFO and a nice value of -5; prints each errno.
const PRIORITY: &str = r#"
import os
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    print("fifo", 0, flush=True)
except OSError as e:
    print("fifo", e.errno, flush=True)
try:
    os.setpriority(os.PRIO_PROCESS, 0, -5)
    print("nice", 0, flush=True)
except OSError as e:
    print("nice", e.errno, flush=True)
"#;

/// RLIMIT_RTPRIO and RLIMIT_NICE as a permissive host gives them (root
/// raises them, when it holds CAP_SYS_RESOURCE; another user gets its
/// hard limits), or None when the host allows neither.
fn permissive_limits() -> Option<[String; 2]> {
    use nix::sys::resource::{Resource, getrlimit};
    let raised = ["--rtprio=99:99".to_string(), "--nice=40:40".to_string()];
    if is_root()
        && Command::new("/usr/bin/prlimit")
            .args(&raised)
            .arg("/bin/true")
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    {
        return Some(raised);
    }
    let hard = |r| getrlimit(r).map_or(0, |(_, h)| h);
    let (rt, nice) = (hard(Resource::RLIMIT_RTPRIO), hard(Resource::RLIMIT_NICE));
    (rt > 0 || nice > 0).then(|| {
        [
            format!("--rtprio={rt}:{rt}"),
            format!("--nice={nice}:{nice}"),
        ]
    })
}

#[test]
fn no_real_time_priority_or_lower_nice_value_inside_the_sandbox() {
    let fx = Fixture::new();
    let limits = permissive_limits();
    match &limits {
        Some(limits) => {
            // Baseline: under those limits (prlimit raises them first, as
            // root), an unprivileged process gets what they allow.
            let mut c = Command::new("/usr/bin/prlimit");
            c.args(limits).arg("--");
            if is_root() {
                c.args([
                    "/usr/bin/setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--inh-caps=-all",
                ]);
            }
            c.args(["/usr/bin/python3", "-c", PRIORITY]);
            let report = output(c);
            let got = [errno_of(&report, "fifo"), errno_of(&report, "nice")];
            assert!(got.contains(&0), "baseline: {report}");
        }
        None => skipped(
            "no_real_time_priority_or_lower_nice_value_inside_the_sandbox (baseline)",
            "RLIMIT_RTPRIO and RLIMIT_NICE are 0 here and cannot be raised (no \
             CAP_SYS_RESOURCE): the host holds both back already; the sandbox's refusal is \
             still checked",
        ),
    }

    // warden started under the same limits: its server gets neither.
    let inner = sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", PRIORITY],
    );
    let mut c = Command::new("/usr/bin/prlimit");
    c.args(limits.iter().flatten())
        .arg("--")
        .arg(WARDEN)
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(fx.workspace.path());
    let report = output(c);
    assert_eq!(errno_of(&report, "fifo"), nix::libc::EPERM, "{report}");
    assert_eq!(errno_of(&report, "nice"), nix::libc::EACCES, "{report}");
}

/// Binds port 0 (the kernel picks one) and listens; prints the port.
const ANY_PORT: &str = r#"
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print("listening on", s.getsockname()[1], flush=True)
"#;

#[test]
fn a_profile_cannot_grant_port_zero() {
    let fx = Fixture::new();
    for key in ["bind_tcp", "connect_tcp"] {
        let out = sandbox_exec(
            &fx,
            &serde_json::json!({"network": {key: [0]}}),
            &["/usr/bin/python3", "-c", ANY_PORT],
        )
        .output()
        .expect("run warden");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{key}: {err}");
        assert!(
            err.contains(&format!("network.{key}: port out of range")),
            "{key}: {err}"
        );
        assert!(out.stdout.is_empty(), "{key}: the command ran");
    }
}
