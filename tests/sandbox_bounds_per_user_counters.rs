//! Some kernel counters are kept per user, across user namespaces: a
//! server's inotify instances count against the person's own (128 on most
//! hosts), so a server that takes them all leaves the person's editor,
//! file watchers and other servers without any (`EMFILE`) for as long as
//! it runs; queued signals likewise (`RLIMIT_SIGPENDING`: the person's
//! `sigqueue` and POSIX timers fail with `EAGAIN`), and locked shared
//! memory (`RLIMIT_MEMLOCK`: the person's `SHM_LOCK` fails with `ENOMEM`).
//! The sandbox holds at most an eighth of each.
//! The baseline shows one process of a user taking the user's whole
//! allowance; it runs as a scratch uid when the tests run as root, so that
//! nothing else of root's is starved meanwhile. Its own test binary for the
//! same reason.

mod sandbox_support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;

use sandbox_support::*;
use warden::config::{SandboxSpec, Trust};

/// Takes inotify instances until refused, prints how many and whether the
/// descriptor table still had room (so the user's allowance, not
/// RLIMIT_NOFILE, stopped it), then holds them until stdin closes.
const TAKE_ALL: &str = "\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
try:
    os.close(os.open('/dev/null', os.O_RDONLY)); room = 'room'
except OSError:
    room = 'full'
print(len(fds), ctypes.get_errno(), room, flush=True)
sys.stdin.readline()
";

const PYTHON: &str = "/usr/bin/python3";

fn host_max() -> usize {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .expect("max_user_instances")
        .trim()
        .parse()
        .expect("a number")
}

/// Queues real-time signals to itself until refused, prints how many and
/// the errno, then holds them until stdin closes.
const QUEUE_ALL: &str = "\
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
n = 0
while n < 10000000 and libc.sigqueue(os.getpid(), sig, ctypes.c_void_p(0)) == 0:
    n += 1
print(n, ctypes.get_errno(), 'room', flush=True)
sys.stdin.readline()
";

/// The baseline of `script`: run as a scratch uid when the tests run as
/// root (nothing of root's is starved), else as the test's user. Its
/// report line.
fn baseline(script: &str) -> String {
    let mut base = if is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65533", "--regid=65533", "--clear-groups", PYTHON]);
        c
    } else {
        std::process::Command::new(PYTHON)
    };
    let out = base
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .expect("baseline");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `script` sandboxed; once it has reported, runs `meanwhile` (the
/// person's attempt) while it still holds what it took. Its report line
/// and what `meanwhile` returned.
fn sandboxed<T>(script: &str, meanwhile: impl FnOnce() -> T) -> (String, T) {
    sandboxed_with(script, &[], meanwhile)
}

/// [`sandboxed`] with arguments for the script.
fn sandboxed_with<T>(script: &str, args: &[&str], meanwhile: impl FnOnce() -> T) -> (String, T) {
    let fx = Fixture::new();
    let mut argv = vec!["-c", script];
    argv.extend_from_slice(args);
    let cfg = server_config(
        Path::new(PYTHON),
        &argv,
        SandboxSpec::default(),
        Trust::Untrusted,
    );
    let prepared = prepare(&cfg, &fx.ctx()).expect("prepare");
    let mut command = prepared.command;
    let mut guard = prepared.guard;
    command.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = command.spawn().expect("spawn the helper");
    guard.attach(child.id());
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    let got = meanwhile();
    let _ = child.stdin.take().expect("stdin").write_all(b"\n");
    let _ = child.wait();
    drop(guard);
    (line, got)
}

/// `count errno room` from the script's first line.
fn report(line: &str) -> (usize, i32, String) {
    let mut it = line.split_whitespace();
    let count = it.next().and_then(|s| s.parse().ok()).expect("count");
    let errno = it.next().and_then(|s| s.parse().ok()).expect("errno");
    (count, errno, it.next().unwrap_or_default().to_string())
}

#[test]
fn a_server_never_takes_the_users_inotify_instances() {
    if !Path::new(PYTHON).exists() {
        skipped("sandbox_bounds_per_user_counters", "no /usr/bin/python3");
        return;
    }
    let max = host_max();
    let emfile = nix::errno::Errno::EMFILE as i32;

    // Baseline: one process takes everything the user has left.
    let line = baseline(TAKE_ALL);
    let (count, errno, room) = report(&line);
    assert_eq!(
        (errno, room.as_str()),
        (emfile, "room"),
        "baseline must run out of the user's inotify instances: {line}"
    );
    assert!(count <= max, "{line}");

    // Sandboxed, as the test's user: an eighth at most, and the person can
    // still make one while the server holds all it could get.
    let (line, mine) = sandboxed(TAKE_ALL, || {
        nix::sys::inotify::Inotify::init(nix::sys::inotify::InitFlags::IN_CLOEXEC)
    });
    let (count, errno, room) = report(&line);
    assert!(
        mine.is_ok(),
        "the person got no inotify instance while the server held {count}: {mine:?}"
    );
    assert!(
        count <= (max / 8).max(1),
        "the server took {count} of {max}: {line}"
    );
    assert_eq!((errno, room.as_str()), (emfile, "room"), "{line}");
}

#[test]
fn a_server_never_takes_the_users_queued_signals() {
    if !Path::new(PYTHON).exists() {
        skipped("sandbox_bounds_per_user_counters", "no /usr/bin/python3");
        return;
    }
    let (limit, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_SIGPENDING)
        .expect("getrlimit");
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let eagain = nix::errno::Errno::EAGAIN as i32;
    let share = (limit / 8).max(1);

    let line = baseline(QUEUE_ALL);
    let (count, errno, _) = report(&line);
    assert_eq!(errno, eagain, "baseline must run out: {line}");
    assert!(
        count > share,
        "baseline must queue more than a share: {line}"
    );

    // The person's process queues one while the server holds its all.
    let one = QUEUE_ALL.replace("n < 10000000", "n < 1");
    let (line, person) = sandboxed(QUEUE_ALL, || {
        std::process::Command::new(PYTHON)
            .args(["-c", &one])
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    });
    let (count, errno, _) = report(&line);
    let person = person.expect("the person's process");
    assert_eq!(
        report(&person).0,
        1,
        "the person could queue no signal: {person}"
    );
    assert!(
        count <= share,
        "the server queued {count} of {limit}: {line}"
    );
    assert_eq!(errno, eagain, "{line}");
}

/// Locks SysV shared memory of `argv[1]` bytes (`SHM_LOCK`), prints the
/// result and errno, then holds it until stdin closes.
const LOCK: &str = "\
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
size = int(sys.argv[1])
seg = libc.shmget(0, ctypes.c_size_t(size), 0o1000 | 0o600)
r = libc.shmctl(seg, 11, None)
print(0 if r == 0 else 1, ctypes.get_errno(), 'room', flush=True)
sys.stdin.readline()
libc.shmctl(seg, 0, None)
";

#[test]
fn a_server_never_takes_the_users_locked_memory() {
    if !Path::new(PYTHON).exists() {
        skipped("sandbox_bounds_per_user_counters", "no /usr/bin/python3");
        return;
    }
    let (limit, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK)
        .expect("getrlimit");
    if limit == nix::sys::resource::RLIM_INFINITY || limit < 64 * 4096 {
        skipped(
            "sandbox_bounds_per_user_counters",
            "RLIMIT_MEMLOCK unlimited or too small to share",
        );
        return;
    }
    let whole = limit.to_string();
    let page = "4096".to_string();
    let run = |args: &[&str]| {
        std::process::Command::new(PYTHON)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .expect("python")
    };

    // Baseline: one process of the user locks the user's whole allowance.
    let line = if is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65533", "--regid=65533", "--clear-groups", PYTHON]);
        let o = c
            .args(["-c", LOCK, &whole])
            .stdin(Stdio::null())
            .output()
            .expect("baseline");
        String::from_utf8_lossy(&o.stdout).into_owned()
    } else {
        run(&["-c", LOCK, &whole])
    };
    assert_eq!(report(&line).0, 0, "baseline must lock it all: {line}");

    // Sandboxed: the whole allowance is refused, and while the server holds
    // all it may (an eighth), the person still locks a page.
    let (line, _) = sandboxed_with(LOCK, &[&whole], || ());
    assert_eq!(
        report(&line).0,
        1,
        "the server locked the user's whole allowance: {line}"
    );
    let share = (limit / 8 / 4096 * 4096).to_string();
    let (line, person) = sandboxed_with(LOCK, &[&share], || run(&["-c", LOCK, &page]));
    assert_eq!(report(&line).0, 0, "a share stays the server's: {line}");
    assert_eq!(
        report(&person).0,
        0,
        "the person could lock nothing: {person}"
    );
}
