//! What the sandbox grants and creates on the host:
//! - the install prefix widens only to a recognised self-contained folder,
//!   never to one holding credentials (`~/.cargo`, a project with `.env`);
//! - a runtime folder is ours and 0700: a symlinked or foreign one is
//!   refused, never reused; `exec-*` folders a killed warden left behind
//!   are swept;
//! - `/proc` is the sandbox's own, or a read-only snapshot where a fresh
//!   one is refused (masked /proc paths, as in containers);
//! - a delegated cgroup v2 folder (`WARDEN_CGROUP_PARENT`) carries the CPU
//!   time limit (the path CI hosts with pure cgroup v2 take).

mod sandbox_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use sandbox_support::*;

fn exec(fx: &Fixture, home: &Path, args: &[&str]) -> Output {
    Command::new(WARDEN)
        .args(["sandbox", "exec"])
        .args(args)
        .env("HOME", home)
        .env("TMPDIR", fx.runtime.path())
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(fx.workspace.path())
        .output()
        .expect("run warden")
}

fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, body).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A tool installed as `~/.cargo/bin/x` or `~/proj/bin/server` reads the
/// credentials beside its install folder without the sandbox; sandboxed,
/// only the executable itself is granted.
#[test]
fn the_install_prefix_never_widens_to_a_folder_with_credentials() {
    let fx = Fixture::new();
    let home = fx.workspace.path().join("home");
    let cargo_tool = home.join(".cargo/bin/x");
    script(
        &cargo_tool,
        "#!/bin/sh\ncat \"$(dirname \"$0\")/../credentials.toml\"\n",
    );
    std::fs::write(home.join(".cargo/credentials.toml"), &fx.token).expect("write");
    let project_tool = home.join("proj/bin/server");
    script(
        &project_tool,
        "#!/bin/sh\ncat \"$(dirname \"$0\")/../.env\"\n",
    );
    std::fs::write(home.join("proj/.env"), format!("TOKEN={}", fx.token)).expect("write");
    for tool in [&cargo_tool, &project_tool] {
        let plain = Command::new(tool).output().expect("run");
        assert!(
            String::from_utf8_lossy(&plain.stdout).contains(&fx.token),
            "baseline must read the credentials of {}",
            tool.display()
        );
        let t = tool.display().to_string();
        let o = exec(&fx, &home, &["--", &t]);
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            !stdout.contains(&fx.token),
            "{} read its folder's credentials: {stdout}",
            tool.display()
        );
        assert_ne!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The tool itself did run (it is granted, alone).
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("No such file"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// `warden sandbox exec` with a profile that needs host folders (a trusted
/// `false` profile) uses `$TMPDIR/warden-<uid>`: ours is narrowed to 0700
/// and used; a symlink or another user's folder is refused and left
/// untouched; stale `exec-*` folders of dead pids are swept.
#[test]
fn the_runtime_folder_is_ours_or_refused() {
    let fx = Fixture::new();
    let off = fx.workspace.path().join("off.json");
    std::fs::write(&off, "false").expect("profile");
    let off_s = off.display().to_string();
    let uid = nix::unistd::geteuid().as_raw();
    let rt = fx.runtime.path().join(format!("warden-{uid}"));
    let home = fx.workspace.path();

    // Ours but wide open, with a stale folder of a dead warden in it.
    std::fs::create_dir(&rt).expect("mkdir");
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let stale = rt.join("exec-4194399-0");
    std::fs::create_dir(&stale).expect("mkdir");
    let o = exec(
        &fx,
        home,
        &["--profile", &off_s, "--", "/bin/sh", "-c", "echo $HOME"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).starts_with(&rt.display().to_string()));
    assert_eq!(std::fs::metadata(&rt).expect("meta").mode() & 0o777, 0o700);
    assert!(!stale.exists(), "the stale exec folder was not swept");
    std::fs::remove_dir_all(&rt).expect("cleanup");

    // A symlink to a folder someone else could read.
    let elsewhere = fx.workspace.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    std::os::unix::fs::symlink(&elsewhere, &rt).expect("symlink");
    let o = exec(&fx, home, &["--profile", &off_s, "--", "/bin/true"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("symbolic link"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_dir(&elsewhere).expect("ls").count(), 0);
    // The sandboxed default needs no host folder at all.
    let o = exec(&fx, home, &["--", "/bin/true"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_dir(&elsewhere).expect("ls").count(), 0);
    std::fs::remove_file(&rt).expect("cleanup");

    // Another user's folder, open to everyone.
    if !is_root() {
        skipped(
            "the_runtime_folder_is_ours_or_refused (foreign folder)",
            "making a folder owned by another user needs root",
        );
        return;
    }
    std::fs::create_dir(&rt).expect("mkdir");
    std::fs::set_permissions(&rt, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::os::unix::fs::chown(&rt, Some(65534), Some(65534)).expect("chown");
    let o = exec(&fx, home, &["--profile", &off_s, "--", "/bin/true"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("belongs to uid 65534"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read_dir(&rt).expect("ls").count(), 0);
    assert_eq!(std::fs::metadata(&rt).expect("meta").mode() & 0o777, 0o777);
    std::fs::remove_dir(&rt).expect("cleanup");
}

/// Where the host's /proc has a path masked by a mount (as containers do),
/// the kernel refuses a fresh proc in a user namespace; the sandbox then
/// mounts a read-only snapshot (CPU and memory counts still visible), never
/// the host's /proc.
#[test]
fn proc_falls_back_to_a_snapshot_where_a_fresh_proc_is_refused() {
    let fx = Fixture::new();
    let probe = "grep -c ^processor /proc/cpuinfo; test -e /proc/self && echo SELF; \
                 test -e /proc/1/environ && echo ENVIRON; true";
    let fresh = exec(&fx, fx.workspace.path(), &["--", "/bin/sh", "-c", probe]);
    let out = String::from_utf8_lossy(&fresh.stdout).to_string();
    assert_eq!(
        fresh.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&fresh.stderr)
    );
    assert!(out.contains("SELF"), "fresh proc expected: {out}");

    // A private mount namespace (root), or a user + mount namespace of our
    // own where we are root (anyone: mount(8) wants uid 0), with
    // /proc/timer_list masked like a container's.
    let mut cmd = Command::new("unshare");
    if is_root() {
        cmd.args(["--mount", "--propagation", "private"]);
    } else {
        cmd.args(["--user", "--map-root-user", "--mount"]);
    }
    let o = cmd
        .args(["--", "/bin/sh", "-c"])
        .arg("mount --bind /dev/null /proc/timer_list && exec \"$@\"")
        .args([
            "sh", WARDEN, "sandbox", "exec", "--", "/bin/sh", "-c", probe,
        ])
        .env("TMPDIR", fx.runtime.path())
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir(fx.workspace.path())
        .output()
        .expect("unshare");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("snapshot"), "{stderr}");
    let cpus: u32 = stdout
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    assert!(cpus >= 1, "no CPUs in the snapshot: {stdout}");
    assert!(
        !stdout.contains("SELF") && !stdout.contains("ENVIRON"),
        "{stdout}"
    );
}

/// The CPU-time limit through a delegated cgroup v2 folder (clone3 with
/// CLONE_INTO_CGROUP, `cpu.stat` accounting, `cgroup.kill`): four busy
/// loops under `cpu_seconds: 2` (each far below a per-process limit when
/// the sandbox reaches 2 s) are ended; without the sandbox they run on.
#[test]
fn cpu_seconds_holds_through_a_delegated_cgroup_v2_folder() {
    let Some(v2_root) = v2_root() else {
        skipped(
            "cpu_seconds_holds_through_a_delegated_cgroup_v2_folder",
            "no cgroup v2 hierarchy mounted",
        );
        return;
    };
    let parent = v2_root.join(format!("warden-test-{}", uuid::Uuid::new_v4().simple()));
    let _cleanup = RemoveCgroup(parent.clone());
    if std::fs::create_dir(&parent).is_err() {
        skipped(
            "cpu_seconds_holds_through_a_delegated_cgroup_v2_folder",
            &format!("cannot create a cgroup under {}", v2_root.display()),
        );
        return;
    }
    let fx = Fixture::new();
    let profile = fx.workspace.path().join("cpu.json");
    std::fs::write(&profile, r#"{"limits": {"cpu_seconds": 2}}"#).expect("profile");
    let burn = "for i in 1 2 3; do (while :; do :; done) & done; while :; do :; done";
    // Baseline: in a process group of its own, stopped after 3 s.
    let baseline = Command::new("timeout")
        .args(["-s", "KILL", "3", "/bin/sh", "-c"])
        .arg(burn)
        .status()
        .expect("timeout");
    // timeout(1) kills its whole process group, itself included.
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        baseline.signal(),
        Some(9),
        "baseline must run until stopped"
    );
    let started = std::time::Instant::now();
    let o = Command::new(WARDEN)
        .args(["sandbox", "exec", "--profile"])
        .arg(&profile)
        .args(["--", "/bin/sh", "-c", burn])
        .env("WARDEN_CGROUP_PARENT", &parent)
        .env("TMPDIR", fx.runtime.path())
        .env_remove("XDG_RUNTIME_DIR")
        .current_dir(fx.workspace.path())
        .output()
        .expect("run");
    let wall = started.elapsed();
    let left: Vec<_> = std::fs::read_dir(&parent)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(137), "{stderr}");
    assert!(stderr.contains("cpu_seconds"), "{stderr}");
    assert!(wall.as_secs() < 20, "ended late: {wall:?}");
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

/// Removes a test's cgroup folder (and anything left in it) even when the
/// test fails.
struct RemoveCgroup(std::path::PathBuf);

impl Drop for RemoveCgroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if let Ok(rd) = std::fs::read_dir(&self.0) {
                for e in rd.flatten().filter(|e| e.path().is_dir()) {
                    let _ = std::fs::remove_dir(e.path());
                }
            }
            match std::fs::remove_dir(&self.0) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                _ => return,
            }
        }
    }
}

/// The mount point of the cgroup v2 hierarchy, if any.
fn v2_root() -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        post.starts_with("cgroup2 ")
            .then(|| pre.split(' ').nth(4).map(std::path::PathBuf::from))
            .flatten()
    })
}
