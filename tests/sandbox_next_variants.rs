//! Next variants of attacks closed before, each tried as the attack and
//! seen to fail:
//! - host leaks through `/proc` for a server started by root: it runs as
//!   uid 0 (the host's, through the identity map) with no capability, and
//!   the kernel's global owner-only files need no capability, only that
//!   uid. It read the physical page flags and counts of all memory
//!   (`/proc/kpageflags`, `kpagecount`), slab and vmalloc state, and in
//!   ports mode the host's TCP Fast Open key: what no other user of the
//!   host may read (the baseline below, as `nobody`, is refused).
//! - core dumps reaching a root handler on the host: with a pipe
//!   `core_pattern` (systemd-coredump, apport) the kernel ignores
//!   RLIMIT_CORE except the value 1, so a server with 0 (what it had) had
//!   its crash handed to a handler the host starts as root. It now has 1,
//!   and cannot lower it (setrlimit(0, 0) and prlimit64 of itself
//!   succeeded before).
//! - the helper's plan in `/proc/1/cmdline`: init is a copy of the helper,
//!   and the world-readable `cmdline` showed the server the whole plan
//!   (every grant's host path, the hidden files, the cgroup folders).
//! - the host's credentials in a read grant for a server started by
//!   root: `/etc/security/opasswd` in an `/etc/security` grant and the TLS
//!   private keys of the view's own `/etc/ssl` (`/etc/ssl/private`) were
//!   read; an `/etc` grant did not start at all (its `/etc/os-release`
//!   symlink), and now starts with `/etc/shadow`, `/etc/gshadow`, their
//!   backups and sudo's rules hidden.

mod sandbox_support;

use std::path::Path;

use sandbox_support::*;
use warden::config::{SandboxSpec, Trust};

/// Walks the global part of `/proc` (not the processes' folders) and
/// prints `READ path` for each regular file that others may not read but
/// this process did, `LISTED path` for each folder that others may not
/// search but this process listed; then `DONE`.
const OWNER_ONLY: &str = r#"
import os, stat
def walk(d, depth):
    try:
        entries = list(os.scandir(d))
    except OSError:
        return
    for e in entries:
        if d == "/proc" and (e.name.isdigit() or e.name in ("self", "thread-self")):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if st.st_mode & 0o005 != 0o005:
                try:
                    os.listdir(e.path)
                    print("LISTED", e.path, flush=True)
                except OSError:
                    pass
            elif depth < 8:
                walk(e.path, depth + 1)
        elif stat.S_ISREG(st.st_mode) and st.st_mode & 0o004 == 0 and st.st_mode & 0o400:
            try:
                with open(e.path, "rb") as f:
                    f.read(16)
                print("READ", e.path, flush=True)
            except OSError:
                pass
walk("/proc", 0)
print("DONE", flush=True)
"#;

fn run(mut c: std::process::Command) -> String {
    let out = c.output().expect("run");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn leaks(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|l| l.starts_with("READ ") || l.starts_with("LISTED "))
        .collect()
}

#[test]
fn root_reads_no_owner_only_kernel_file_of_proc() {
    if !is_root() {
        // The owner of these files is the host's root: another user's
        // server maps to its own uid and is refused by the kernel.
        skipped(
            "root_reads_no_owner_only_kernel_file_of_proc",
            "the leak needs a server started by root",
        );
        return;
    }
    // Baseline: the host gives these files to root alone; `nobody` reads
    // none of them (what the sandbox's root, without capabilities, should
    // get too).
    let nobody = run(unprivileged(&["/usr/bin/python3", "-c", OWNER_ONLY]));
    assert!(nobody.contains("DONE"), "baseline: {nobody}");
    assert!(leaks(&nobody).is_empty(), "baseline: {nobody}");
    assert!(
        std::fs::metadata("/proc/kpageflags").is_ok(),
        "this kernel has /proc/kpageflags"
    );

    let fx = Fixture::new();
    for profile in [
        serde_json::json!({"network": "none"}),
        // The host's network namespace: its /proc/sys/net is the host's
        // (tcp_fastopen_key, stable_secret).
        serde_json::json!({"network": {"connect_tcp": [9]}}),
    ] {
        let report = run(sandbox_exec(
            &fx,
            &profile,
            &["/usr/bin/python3", "-c", OWNER_ONLY],
        ));
        assert!(report.contains("DONE"), "{profile}: {report}");
        assert!(
            leaks(&report).is_empty(),
            "{profile}: a root-started server read the host's owner-only /proc files:\n{report}"
        );
        // Named ones, refused as for any other user.
        let direct = run(sandbox_exec(
            &fx,
            &profile,
            &[
                "/usr/bin/python3",
                "-c",
                "import sys\n\
                 for p in sys.argv[1:]:\n\
                 \x20   try:\n\
                 \x20       open(p, 'rb').read(8); print('READ', p)\n\
                 \x20   except OSError as e: print('REFUSED', p, e.errno)\n",
                "/proc/kpageflags",
                "/proc/kpagecount",
                "/proc/slabinfo",
                "/proc/sys/net/ipv4/tcp_fastopen_key",
            ],
        ));
        assert_eq!(direct.matches("REFUSED").count(), 4, "{profile}: {direct}");
        assert!(
            direct
                .lines()
                .all(|l| !l.starts_with("REFUSED") || l.ends_with(" 13")),
            "EACCES, as for any other user: {direct}"
        );
    }
}

#[test]
fn the_rest_of_proc_stays_readable_for_root() {
    // What runtimes read (CPU count, memory, their own process) is world
    // readable and stays so: covering only owner-only files breaks none.
    let fx = Fixture::new();
    let report = run(sandbox_exec(
        &fx,
        &serde_json::json!({"network": "none"}),
        &[
            "/usr/bin/python3",
            "-c",
            "import os\n\
             for p in ('/proc/cpuinfo', '/proc/meminfo', '/proc/self/status', '/proc/sys/kernel/pid_max'):\n\
             \x20   assert open(p).read(), p\n\
             print('OK', os.cpu_count())\n",
        ],
    ));
    assert!(report.starts_with("OK "), "{report}");
}

/// Tries to change RLIMIT_CORE every way a process can and prints what
/// happened: `CORE soft hard`, then `NAME rc errno` per attempt, then the
/// limit again.
const CORE_LIMIT: &str = r#"
import ctypes, platform, resource
libc = ctypes.CDLL(None, use_errno=True)
class RL(ctypes.Structure):
    _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]
def show(name, rc):
    print(name, rc, ctypes.get_errno() if rc != 0 else 0, flush=True)
print("CORE", *resource.getrlimit(resource.RLIMIT_CORE), flush=True)
for soft, hard in [(0, 1), (0, 0), (1, 1)]:
    ctypes.set_errno(0)
    show(f"setrlimit_{soft}_{hard}", libc.setrlimit(resource.RLIMIT_CORE, ctypes.byref(RL(soft, hard))))
old = RL()
nr = {"x86_64": (302, 160), "aarch64": (261, 164)}[platform.machine()]
ctypes.set_errno(0)
show("prlimit_self_set", libc.syscall(nr[0], 0, resource.RLIMIT_CORE, ctypes.byref(RL(0, 0)), ctypes.byref(old)))
ctypes.set_errno(0)
show("sys_setrlimit", libc.syscall(nr[1], resource.RLIMIT_CORE, ctypes.byref(RL(0, 0))))
ctypes.set_errno(0)
show("prlimit_self_get", libc.syscall(nr[0], 0, resource.RLIMIT_CORE, None, ctypes.byref(old)))
print("AFTER", *resource.getrlimit(resource.RLIMIT_CORE), flush=True)
"#;

/// `(rc, errno)` of the line `NAME rc errno` of a report.
fn outcome(report: &str, name: &str) -> Option<(i64, i32)> {
    report.lines().find_map(|l| {
        let mut parts = l.split_whitespace();
        if parts.next() != Some(name) {
            return None;
        }
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    })
}

/// warden's own hard RLIMIT_CORE, which the server's cannot exceed
/// unless the helper may raise it.
fn host_hard_core_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_CORE)
        .map(|(_, hard)| hard)
        .unwrap_or(0)
}

#[test]
fn the_core_limit_is_one_and_the_server_cannot_change_it() {
    if host_hard_core_limit() == 0 {
        skipped(
            "the_core_limit_is_one_and_the_server_cannot_change_it",
            "warden's own hard RLIMIT_CORE is 0 here, below the 1 the sandbox sets",
        );
        return;
    }
    let fx = Fixture::new();
    for profile in [
        serde_json::json!({"network": "none"}),
        serde_json::json!({"network": {"connect_tcp": [9]}}),
    ] {
        let report = run(sandbox_exec(
            &fx,
            &profile,
            &["/usr/bin/python3", "-c", CORE_LIMIT],
        ));
        // 1, not 0: a pipe core_pattern's handler is skipped only for 1,
        // and a file dump needs a page.
        assert!(report.contains("CORE 1 1\n"), "{profile}: {report}");
        for name in [
            // Lowering the soft limit to 0 re-enables pipe dumps.
            "setrlimit_0_1",
            "setrlimit_0_0",
            "setrlimit_1_1",
            "prlimit_self_set",
            "sys_setrlimit",
        ] {
            assert_eq!(
                outcome(&report, name),
                Some((-1, nix::libc::EPERM)),
                "{profile}: {name}: {report}"
            );
        }
        // Reading it stays.
        assert_eq!(
            outcome(&report, "prlimit_self_get"),
            Some((0, 0)),
            "{report}"
        );
        assert!(report.contains("AFTER 1 1\n"), "{profile}: {report}");
    }
}

#[test]
fn a_crash_in_a_write_grant_leaves_no_core_file() {
    let fx = Fixture::new();
    let out_dir = fx.workspace.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = sandbox_exec(
        &fx,
        &serde_json::json!({"network": "none", "write": [out_dir]}),
        &[
            "/usr/bin/python3",
            "-c",
            "import os, sys\nos.chdir(sys.argv[1])\nprint('CRASH', flush=True)\nos.abort()\n",
            out_dir.to_str().expect("utf-8"),
        ],
    )
    .output()
    .expect("run");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("CRASH"), "{report}");
    assert_eq!(out.status.code(), Some(128 + 6), "SIGABRT: {out:?}");
    let left: Vec<_> = std::fs::read_dir(&out_dir)
        .expect("read")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "a crash left {left:?} in the write grant");
}

/// Prints each argument of init's command line (`/proc/1/cmdline`),
/// escaped, one per line after `ARG`.
const INIT_CMDLINE: &str = r#"
raw = open("/proc/1/cmdline", "rb").read()
print("LEN", len(raw), flush=True)
for a in raw.split(b"\0"):
    if a:
        print("ARG", a, flush=True)
print("DONE", flush=True)
"#;

#[test]
fn the_server_reads_no_plan_in_init_cmdline() {
    let fx = Fixture::new();
    // A grant whose host path would name the plan.
    let grant = fx.workspace.path().join("grant-CMDLINE-CANARY");
    std::fs::create_dir(&grant).expect("mkdir");
    // `warden sandbox exec`: the helper binary beside warden.
    let standalone = run(sandbox_exec(
        &fx,
        &serde_json::json!({"network": "none", "read": [grant]}),
        &["/usr/bin/python3", "-c", INIT_CMDLINE],
    ));
    // The fallback: `warden __sandbox-exec PLAN` (no helper binary).
    let cfg = server_config(
        Path::new("/usr/bin/python3"),
        &["-c", INIT_CMDLINE],
        SandboxSpec {
            read: vec![grant.clone()],
            ..SandboxSpec::default()
        },
        Trust::Untrusted,
    );
    let mut ctx = fx.ctx();
    ctx.helper = Some(warden_sandbox::Helper::Reexec(WARDEN.into()));
    let out = run_prepared(prepare(&cfg, &ctx).expect("prepare"));
    let reexec = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (report, args) in [
        (&standalone, vec![HELPER]),
        (&reexec, vec![WARDEN, "__sandbox-exec"]),
    ] {
        assert!(report.contains("DONE"), "{report}");
        assert!(
            !report.contains("CMDLINE-CANARY") && !report.contains("program"),
            "init's command line shows the plan:\n{report}"
        );
        let shown: Vec<&str> = report
            .lines()
            .filter_map(|l| l.strip_prefix("ARG "))
            .collect();
        let want: Vec<String> = args.iter().map(|a| format!("b'{a}'")).collect();
        assert_eq!(shown, want, "{report}");
    }
}

/// Reads each path named (a folder: lists it) and prints `READ path`,
/// `LISTED path N` or `REFUSED path errno`.
const READ_EACH: &str = r#"
import os, sys
for p in sys.argv[1:]:
    try:
        if os.path.isdir(p):
            print("LISTED", p, len(os.listdir(p)), flush=True)
        else:
            open(p, "rb").read(16)
            print("READ", p, flush=True)
    except OSError as e:
        print("REFUSED", p, e.errno, flush=True)
print("DONE", flush=True)
"#;

/// The host's credentials that exist here.
fn host_credentials() -> Vec<&'static str> {
    [
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow",
        "/etc/gshadow-",
        "/etc/sudoers",
        "/etc/security/opasswd",
        "/var/backups/shadow.bak",
        "/var/backups/gshadow.bak",
    ]
    .into_iter()
    .filter(|p| Path::new(p).exists())
    .collect()
}

#[test]
fn a_read_grant_of_etc_starts_and_hides_the_hosts_credentials() {
    let fx = Fixture::new();
    let secrets = host_credentials();
    assert!(
        secrets.contains(&"/etc/shadow"),
        "this host has /etc/shadow"
    );
    for (grant, names) in [
        // An /etc grant did not start at all before (its os-release
        // symlink could not be bound again inside it).
        (
            "/etc",
            secrets
                .iter()
                .copied()
                .filter(|p| p.starts_with("/etc/"))
                .collect::<Vec<_>>(),
        ),
        // A narrower grant started, and root read opasswd in it.
        (
            "/etc/security",
            secrets
                .iter()
                .copied()
                .filter(|p| p.starts_with("/etc/security/"))
                .collect(),
        ),
        // Debian's daily copies of the hashes.
        (
            "/var/backups",
            secrets
                .iter()
                .copied()
                .filter(|p| p.starts_with("/var/backups/"))
                .collect(),
        ),
    ] {
        if !Path::new(grant).is_dir() {
            continue;
        }
        let mut argv = vec!["/usr/bin/python3", "-c", READ_EACH, "/etc/hostname"];
        argv.extend(&names);
        let report = run(sandbox_exec(
            &fx,
            &serde_json::json!({"network": "none", "read": [grant]}),
            &argv,
        ));
        assert!(report.contains("DONE"), "{grant}: {report}");
        if grant == "/etc" && Path::new("/etc/hostname").exists() {
            assert!(
                report.contains("READ /etc/hostname"),
                "the grant works: {report}"
            );
        }
        for name in &names {
            assert!(
                report.contains(&format!("REFUSED {name} 13")),
                "{grant}: {name} was not refused (EACCES):\n{report}"
            );
        }
    }
}

#[test]
fn root_reads_no_tls_private_key_of_the_views_own_etc_ssl() {
    let private = Path::new("/etc/ssl/private");
    let keys: Vec<String> = std::fs::read_dir(private)
        .map(|d| {
            d.flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    if !private.is_dir() {
        skipped(
            "root_reads_no_tls_private_key_of_the_views_own_etc_ssl",
            "this host has no /etc/ssl/private",
        );
        return;
    }
    let fx = Fixture::new();
    let mut argv = vec!["/usr/bin/python3", "-c", READ_EACH, "/etc/ssl/private"];
    argv.extend(keys.iter().map(String::as_str));
    let report = run(sandbox_exec(&fx, &serde_json::json!({}), &argv));
    assert!(report.contains("DONE"), "{report}");
    // An empty folder in its place (for any user); nothing of it is read.
    assert!(report.contains("LISTED /etc/ssl/private 0"), "{report}");
    assert!(!report.contains("READ /etc/ssl/private/"), "{report}");
}

/// Calls the i386 `setrlimit(RLIMIT_CORE, NULL)` through `int 0x80` (the
/// compat entry, whose numbers no x86_64 rule names) and prints what it
/// returned: -14 (EFAULT) when it reached the kernel.
#[cfg(target_arch = "x86_64")]
const I386_SETRLIMIT: &str = r#"
import ctypes, mmap
code = bytes([0xb8, 75, 0, 0, 0, 0xbb, 4, 0, 0, 0, 0x31, 0xc9, 0xcd, 0x80, 0xc3])
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print("I386", f(), flush=True)
"#;

#[cfg(target_arch = "x86_64")]
#[test]
fn the_i386_entry_cannot_reach_setrlimit() {
    // Baseline: the compat call reaches the kernel (EFAULT for the NULL
    // limit, nothing changed).
    let baseline = unprivileged(&["/usr/bin/python3", "-c", I386_SETRLIMIT])
        .output()
        .expect("run");
    let said = String::from_utf8_lossy(&baseline.stdout);
    if !said.contains("I386 -14") {
        skipped(
            "the_i386_entry_cannot_reach_setrlimit",
            "this kernel has no i386 compat entry (IA32_EMULATION off)",
        );
        return;
    }
    let fx = Fixture::new();
    let out = sandbox_exec(
        &fx,
        &serde_json::json!({"network": "none"}),
        &["/usr/bin/python3", "-c", I386_SETRLIMIT],
    )
    .output()
    .expect("run");
    // seccomp's architecture check ends the process (SIGSYS) first.
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("I386"),
        "{out:?}"
    );
    assert_eq!(out.status.code(), Some(128 + 31), "{out:?}");
}
