//! Special files a server plants in a configured `write` grant (the
//! workspace) for host programs to trip over later: a FIFO where a host
//! tool expects a file (`grep -r`, an editor, a build tool reading a
//! config file the server replaced) blocks that tool forever on open, and
//! a pathname unix socket bound in the workspace answers a host tool that
//! looks for its daemon's socket in the project. Each is tried as the
//! attack (mkfifo, mknod S_IFIFO, bind of a stream and a seqpacket unix
//! socket) and seen to work outside the sandbox as an unprivileged user,
//! then to fail in a write grant under `/tmp` and in one outside it (the
//! two layouts of the private tmpfs). The server's private HOME, TMPDIR
//! and `/dev/shm` keep FIFOs and sockets (servers use them between their
//! own processes), and what is made there cannot be renamed or linked
//! into a grant.

mod sandbox_support;

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;

use sandbox_support::*;

/// In folder argv[1]: each way of making a FIFO or a pathname socket,
/// and an ordinary file; prints each call's errno (0: done).
const PLANT: &str = r#"
import os, socket, stat, sys
d = sys.argv[1]
def attempt(name, f):
    try:
        f()
        print(name, 0, flush=True)
    except OSError as e:
        print(name, e.errno, flush=True)
def bind(kind, name):
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind(os.path.join(d, name))
    s.listen(1)
attempt("mkfifo", lambda: os.mkfifo(os.path.join(d, "fifo")))
attempt("mknod-fifo", lambda: os.mknod(os.path.join(d, "nodfifo"), stat.S_IFIFO | 0o600))
attempt("bind-stream", lambda: bind(socket.SOCK_STREAM, "sock"))
attempt("bind-seqpacket", lambda: bind(socket.SOCK_SEQPACKET, "seqsock"))
attempt("file", lambda: open(os.path.join(d, "file"), "w").close())
"#;

/// Makes a FIFO and a socket in argv[1] (private) for each try to move
/// or link one into argv[2] (a grant): link, rename, renameat2 with
/// RENAME_NOREPLACE and with RENAME_EXCHANGE over a file of the grant.
const MOVE_IN: &str = r#"
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
src, dst = sys.argv[1], sys.argv[2]
keep = []
def make(kind, name):
    p = os.path.join(src, name)
    if kind == "fifo":
        os.mkfifo(p)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(p)
        s.listen(1)
        keep.append(s)
    return p
def renameat2(a, b, flags):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
def exchange(a, b):
    open(b, "w").close()
    renameat2(a, b, 2)
hows = {
    "link": os.link,
    "rename": os.rename,
    "noreplace": lambda a, b: renameat2(a, b, 1),
    "exchange": exchange,
}
for kind in ("fifo", "sock"):
    for how, f in hows.items():
        name = how + "-" + kind
        a = make(kind, name)
        try:
            f(a, os.path.join(dst, name))
            print(name, 0, flush=True)
        except OSError as e:
            print(name, e.errno, flush=True)
"#;

/// In TMPDIR, HOME and /dev/shm (the same folder as TMPDIR when the
/// whole private tmpfs is TMPDIR): a FIFO and a listening socket.
const PRIVATE: &str = r#"
import os, socket
def attempt(name, f):
    try:
        f()
        print(name, 0, flush=True)
    except OSError as e:
        print(name, e.errno, flush=True)
def bind(p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(p)
    s.listen(1)
for name, d in (("tmp", os.environ["TMPDIR"]), ("home", os.environ["HOME"]), ("shm", "/dev/shm")):
    attempt("mkfifo-" + name, lambda: os.mkfifo(os.path.join(d, "fifo-" + name)))
    attempt("bind-" + name, lambda: bind(os.path.join(d, "sock-" + name)))
"#;

fn sandboxed(fx: &Fixture, grant: &Path, argv: &[&str]) -> Command {
    let profile = fx.runtime.path().join("profile.json");
    std::fs::write(&profile, serde_json::json!({"write": [grant]}).to_string()).expect("profile");
    let mut c = Command::new(WARDEN);
    c.args(["sandbox", "exec", "--profile"])
        .arg(&profile)
        .arg("--")
        .args(argv)
        .env("HOME", fx.workspace.path())
        .env("TMPDIR", fx.runtime.path())
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(grant);
    c
}

fn output(mut c: Command) -> String {
    let out = c.output().expect("run");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn errno_of(report: &str, what: &str) -> i32 {
    report
        .lines()
        .find_map(|l| {
            let (name, errno) = l.split_once(' ')?;
            (name == what).then(|| errno.trim().parse().ok())?
        })
        .unwrap_or_else(|| panic!("no {what} in: {report}"))
}

/// FIFOs and sockets anywhere under `dir`, as the host sees them.
fn planted(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_fifo() || t.is_socket() {
            found.push(e.path().display().to_string());
        } else if t.is_dir() {
            found.extend(planted(&e.path()));
        }
    }
    found
}

/// A folder for a write grant outside `/tmp` (where the private tmpfs is
/// mounted in the view): the build's own temporary folder, else (run as
/// another user than the build's, scripts/test-unprivileged.sh) one of the
/// host's shared temporary folders that are not `/tmp`.
fn outside_tmp() -> tempfile::TempDir {
    [env!("CARGO_TARGET_TMPDIR"), "/var/tmp", "/dev/shm"]
        .into_iter()
        .filter(|d| !Path::new(d).starts_with("/tmp"))
        .find_map(|d| {
            tempfile::Builder::new()
                .prefix("wsb-grant-")
                .tempdir_in(d)
                .ok()
        })
        .expect("a writable folder outside /tmp")
}

/// Where the unsandboxed baselines make their folders: a short path, since
/// a unix socket's path is at most 107 bytes (a scratch TMPDIR several
/// folders deep left too few).
const SHORT: &str = "/tmp";

const ATTACKS: [&str; 4] = ["mkfifo", "mknod-fifo", "bind-stream", "bind-seqpacket"];

#[test]
fn no_fifo_or_socket_is_planted_in_a_write_grant() {
    let fx = Fixture::new();
    // Baseline: an unprivileged user makes each in a folder of its own.
    let plain = tempfile::Builder::new()
        .prefix("wsb-plain-")
        .tempdir_in(SHORT)
        .expect("tempdir");
    if is_root() {
        std::os::unix::fs::chown(plain.path(), Some(65534), Some(65534)).expect("chown");
    }
    let dir = plain.path().to_str().expect("utf-8");
    let report = output(unprivileged(&["/usr/bin/python3", "-c", PLANT, dir]));
    for what in ATTACKS {
        assert_eq!(errno_of(&report, what), 0, "baseline {what}: {report}");
    }
    assert_eq!(planted(plain.path()).len(), 4, "baseline: {report}");

    let outside = outside_tmp();
    for grant in [fx.workspace.path(), outside.path()] {
        let dir = grant.to_str().expect("utf-8");
        let report = output(sandboxed(
            &fx,
            grant,
            &["/usr/bin/python3", "-c", PLANT, dir],
        ));
        for what in ATTACKS {
            assert_eq!(
                errno_of(&report, what),
                nix::libc::EACCES,
                "{what} in {dir}: {report}"
            );
        }
        // The grant is still writable for ordinary files.
        assert_eq!(errno_of(&report, "file"), 0, "{dir}: {report}");
        assert!(grant.join("file").is_file(), "{dir}: {report}");
        let left = planted(grant);
        assert!(left.is_empty(), "planted in {dir}: {left:?}; {report}");
    }
    // With a write grant under /tmp, the view's /tmp keeps that grant's
    // rule (a rule there covers the grant): files, but no FIFO or socket.
    let report = output(sandboxed(
        &fx,
        fx.workspace.path(),
        &["/usr/bin/python3", "-c", PLANT, "/tmp"],
    ));
    for what in ATTACKS {
        assert_eq!(
            errno_of(&report, what),
            nix::libc::EACCES,
            "{what}: {report}"
        );
    }
    assert_eq!(errno_of(&report, "file"), 0, "{report}");
}

#[test]
fn private_home_tmpdir_and_shm_keep_fifos_and_sockets() {
    let fx = Fixture::new();
    let outside = outside_tmp();
    // Both layouts: a grant under /tmp (HOME and TMPDIR folders of their
    // own) and none (the whole private tmpfs).
    for grant in [fx.workspace.path(), outside.path()] {
        let report = output(sandboxed(&fx, grant, &["/usr/bin/python3", "-c", PRIVATE]));
        for what in [
            "mkfifo-tmp",
            "bind-tmp",
            "mkfifo-home",
            "bind-home",
            "mkfifo-shm",
            "bind-shm",
        ] {
            assert_eq!(errno_of(&report, what), 0, "{what}: {report}");
        }
        let left = planted(grant);
        assert!(left.is_empty(), "planted in {}: {left:?}", grant.display());
    }
}

#[test]
fn fifos_and_sockets_made_privately_are_not_moved_or_linked_into_a_grant() {
    let fx = Fixture::new();
    // Baseline: on one file system an unprivileged user moves and links
    // each from one folder into another.
    let plain = tempfile::Builder::new()
        .prefix("wsb-plain-")
        .tempdir_in(SHORT)
        .expect("tempdir");
    for sub in ["src", "dst"] {
        std::fs::create_dir(plain.path().join(sub)).expect("mkdir");
    }
    if is_root() {
        for p in [
            plain.path().to_path_buf(),
            plain.path().join("src"),
            plain.path().join("dst"),
        ] {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).expect("chown");
        }
    }
    let (src, dst) = (plain.path().join("src"), plain.path().join("dst"));
    let report = output(unprivileged(&[
        "/usr/bin/python3",
        "-c",
        MOVE_IN,
        src.to_str().expect("utf-8"),
        dst.to_str().expect("utf-8"),
    ]));
    for n in ["fifo", "sock"] {
        for how in ["link", "rename", "noreplace", "exchange"] {
            let what = format!("{how}-{n}");
            assert_eq!(errno_of(&report, &what), 0, "baseline {what}: {report}");
        }
    }
    assert!(!planted(&dst).is_empty(), "baseline: {report}");

    let outside = outside_tmp();
    for grant in [fx.workspace.path(), outside.path()] {
        let dir = grant.to_str().expect("utf-8");
        let report = output(sandboxed(
            &fx,
            grant,
            &[
                "/bin/sh",
                "-c",
                "exec /usr/bin/python3 -c \"$0\" \"$TMPDIR\" \"$1\"",
                MOVE_IN,
                dir,
            ],
        ));
        for n in ["fifo", "sock"] {
            for how in ["link", "noreplace", "exchange", "rename"] {
                let what = format!("{how}-{n}");
                assert_ne!(errno_of(&report, &what), 0, "{what} into {dir}: {report}");
            }
            // The file the exchange aimed at is still the grant's own.
            assert!(
                grant.join(format!("exchange-{n}")).is_file(),
                "{dir}: {report}"
            );
        }
        let left = planted(grant);
        assert!(left.is_empty(), "moved into {dir}: {left:?}; {report}");
    }
}
