//! A server cannot stall or starve processes outside its sandbox through
//! kernel facilities that reach past every namespace:
//! - a file lease (`fcntl(F_SETLEASE)`) on a file of its read grant made
//!   every other process's open for writing wait for it, up to
//!   `fs.lease-break-time` (45 s): the person's editor and git froze;
//! - Linux AIO contexts (`io_setup`) come out of one budget for the whole
//!   host (`fs.aio-max-nr`), which one server took in full;
//! - epoll watches are counted per user across namespaces
//!   (`fs.epoll.max_user_watches`, no per-namespace limit) and cost ~200
//!   bytes: a server held 500 000 in 128 MB, so with the default
//!   `memory_mb` one could take all of the person's (root's too), after
//!   which every `epoll_ctl(ADD)` of that user on the host fails. A
//!   sandbox now holds at most an eighth, epoll instances sent over a
//!   socket and closed (in no process's table) included;
//! - `prlimit` of another process reached the sandbox's init (which keeps
//!   that quota) and the server's own children: only its own limits now.
//!
//! Each attack also runs without the sandbox and works there.

mod sandbox_support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use sandbox_support::*;

/// Takes a read lease on argv[1] (ignoring the SIGIO of a break), says
/// so, and holds it until stdin closes.
const LEASE: &str = r#"
import fcntl, os, signal, sys
signal.signal(signal.SIGIO, signal.SIG_IGN)
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    fcntl.fcntl(fd, 1024, fcntl.F_RDLCK)  # F_SETLEASE
    print("lease taken", flush=True)
except OSError as e:
    print("lease refused", e.errno, flush=True)
sys.stdin.read()
"#;

/// Makes AIO contexts of 4096 events until refused (at most argv[1]),
/// reports how many and the errno that stopped it, releases them on exit.
const AIO: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
made, err = 0, 0
for i in range(int(sys.argv[1])):
    ctx = ctypes.c_ulong(0)
    if libc.syscall(206, 4096, ctypes.byref(ctx)) != 0:
        err = ctypes.get_errno(); break
    made += 1
print("contexts", made, "errno", err, flush=True)
"#;

/// Starts `cmd` with the lease probe, waits for its report, tries a
/// non-blocking open for writing of `file` meanwhile (EWOULDBLOCK: a
/// lease holds it), then ends the probe. Returns (report, open result).
fn lease_attack(mut cmd: Command, file: &Path) -> (String, std::io::Result<std::fs::File>) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    let read = child
        .stdout
        .take()
        .map(|o| BufReader::new(o).read_line(&mut line));
    let open = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(file);
    // Closing stdin ends the probe; a probe that never reported is killed.
    drop(child.stdin.take());
    if !matches!(read, Some(Ok(n)) if n > 0) {
        let _ = child.kill();
    }
    let _ = child.wait();
    (line, open)
}

#[test]
fn a_lease_in_a_read_grant_never_stalls_a_writer_outside() {
    let fx = Fixture::new();
    let dir = fx.workspace.path().join("shared");
    std::fs::create_dir(&dir).expect("mkdir");
    let file = dir.join("notes.txt");
    std::fs::write(&file, "hello").expect("write");
    let f = file.display().to_string();

    // Baseline: the lease is taken and a writer would wait for it.
    let mut plain = Command::new("/usr/bin/python3");
    plain.args(["-c", LEASE, &f]);
    let (report, open) = lease_attack(plain, &file);
    assert!(report.starts_with("lease taken"), "baseline: {report}");
    let e = open.expect_err("baseline: the writer must meet the lease");
    assert_eq!(
        e.raw_os_error(),
        Some(nix::libc::EWOULDBLOCK),
        "baseline: {e}"
    );

    let cmd = sandbox_exec(
        &fx,
        &serde_json::json!({"read": [dir]}),
        &["/usr/bin/python3", "-c", LEASE, &f],
    );
    let (report, open) = lease_attack(cmd, &file);
    assert!(report.starts_with("lease refused"), "sandboxed: {report}");
    open.expect("a writer outside opens the file at once");
}

fn aio_report(out: &std::process::Output) -> (u64, i32) {
    let s = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = s.split_whitespace().collect();
    match w.as_slice() {
        ["contexts", n, "errno", e, ..] => (n.parse().expect("count"), e.parse().expect("errno")),
        _ => panic!("no report: {s} {}", String::from_utf8_lossy(&out.stderr)),
    }
}

#[test]
fn a_server_never_takes_the_hosts_aio_budget() {
    let fx = Fixture::new();
    // Baseline: one context is made (the call reaches the host's budget;
    // one is enough to show it, the attack below asks for all of it).
    let out = Command::new("/usr/bin/python3")
        .args(["-c", AIO, "1"])
        .output()
        .expect("python3");
    assert_eq!(aio_report(&out), (1, 0), "baseline");

    let out = sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", AIO, "64"],
    )
    .output()
    .expect("run warden");
    assert_eq!(aio_report(&out), (0, nix::libc::ENOSYS), "sandboxed");
}

/// Two processes each add up to argv[1] epoll watches (the same eventfds
/// under many descriptor numbers in many epoll instances) and hold them
/// until both are done; each prints how many it made and the errno that
/// stopped it (0: none).
const EPOLL: &str = r#"
import os, select, sys
want = int(sys.argv[1])
done_r, done_w = os.pipe()
pid = os.fork()
files = [os.eventfd(0) for _ in range(78)]
eps = [select.epoll() for _ in range(78)]
nums = [os.dup(files[0]) for _ in range(78)]
for d in nums: os.close(d)
n, err = 0, 0
try:
    for ep in eps:
        for f in files:
            for k in nums:
                if n >= want: raise StopIteration
                os.dup2(f, k); ep.register(k, select.EPOLLIN); n += 1; os.close(k)
except StopIteration:
    pass
except OSError as e:
    err = e.errno
# One write per report: the two processes print at once.
os.write(1, f"watches {n} errno {err}\n".encode())
if pid:
    os.close(done_w)
    os.waitpid(pid, 0)
else:
    # Hold the watches until the parent is done too (EOF on the pipe).
    os.close(done_w)
    os.read(done_r, 1)
"#;

/// (watches made by both processes, errnos seen).
fn epoll_report(out: &std::process::Output) -> (u64, Vec<i32>) {
    let s = String::from_utf8_lossy(&out.stdout);
    let mut total = 0;
    let mut errs = Vec::new();
    for l in s.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if let ["watches", n, "errno", e] = w.as_slice() {
            total += n.parse::<u64>().expect("count");
            errs.push(e.parse().expect("errno"));
        }
    }
    assert_eq!(
        errs.len(),
        2,
        "two reports: {s} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (total, errs)
}

#[test]
fn a_server_holds_at_most_an_eighth_of_the_persons_epoll_watches() {
    let fx = Fixture::new();
    let max: u64 = std::fs::read_to_string("/proc/sys/fs/epoll/max_user_watches")
        .expect("max_user_watches")
        .trim()
        .parse()
        .expect("number");
    let share = max / 8;
    // Each process asks for 60 % of the share: 120 % together.
    let each = (share * 6 / 10).to_string();
    if share * 6 / 10 > 78 * 78 * 78 {
        skipped(
            "a_server_holds_at_most_an_eighth_of_the_persons_epoll_watches",
            &format!("max_user_watches {max} is larger than the probe reaches"),
        );
        return;
    }

    let out = Command::new("/usr/bin/python3")
        .args(["-c", EPOLL, &each])
        .output()
        .expect("python3");
    let (total, errs) = epoll_report(&out);
    assert!(total > share, "baseline made only {total} of {share}");
    assert_eq!(errs, vec![0, 0], "baseline");

    let out = sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", EPOLL, &each],
    )
    .output()
    .expect("run warden");
    let (total, errs) = epoll_report(&out);
    assert!(total <= share, "sandboxed: {total} watches, share {share}");
    assert!(
        errs.contains(&nix::libc::ENOSPC),
        "sandboxed: {errs:?} ({total} watches)"
    );
}

/// Sends epoll instances away over unix sockets and closes them, so no
/// process holds them (they are "in flight" in a socket's queue): each
/// instance gets up to 6000 watches first (60 eventfds under 100 fixed
/// descriptor numbers), until argv[1] watches were made or an add was
/// refused. Prints how many, the errno that stopped it and how many
/// instances were sent.
const EPOLL_IN_FLIGHT: &str = r#"
import os, select, socket, sys
want = int(sys.argv[1])
files = [os.eventfd(0) for _ in range(60)]
nums = range(150, 250)
pairs, n, err, sent = [], 0, 0, 0
def fill(ep):
    global n
    for f in files:
        for k in nums:
            if n >= want: return
            os.dup2(f, k)
            try: ep.register(k, select.EPOLLIN)
            finally: os.close(k)
            n += 1
while n < want and not err:
    ep = select.epoll()
    try: fill(ep)
    except OSError as e: err = e.errno
    if sent % 32 == 0:
        pairs.append(socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET))
    socket.send_fds(pairs[-1][0], [b"x"], [ep.fileno()])
    sent += 1
    ep.close()
print("watches", n, "errno", err, "sent", sent, flush=True)
"#;

fn in_flight_report(out: &std::process::Output) -> (u64, i32, u64) {
    let s = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = s.split_whitespace().collect();
    match w.as_slice() {
        ["watches", n, "errno", e, "sent", k, ..] => (
            n.parse().expect("count"),
            e.parse().expect("errno"),
            k.parse().expect("sent"),
        ),
        _ => panic!("no report: {s} {}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// The watches of an epoll instance that was sent over a socket and
/// closed are in no process's descriptor table, so counting the tables
/// missed them: a server held any number that way. init now keeps its
/// own duplicate of every instance added to, and counts those.
#[test]
fn epoll_instances_sent_away_and_closed_still_count_against_the_share() {
    let fx = Fixture::new();
    let max: u64 = std::fs::read_to_string("/proc/sys/fs/epoll/max_user_watches")
        .expect("max_user_watches")
        .trim()
        .parse()
        .expect("number");
    let share = max / 8;
    // 120 % of the share, in at most ~200 instances in flight (under the
    // sandbox's open_files, which bounds a user's descriptors in flight).
    let want = share * 12 / 10;
    if want > 200 * 6000 {
        skipped(
            "epoll_instances_sent_away_and_closed_still_count_against_the_share",
            &format!("max_user_watches {max} is larger than the probe reaches"),
        );
        return;
    }
    let want = want.to_string();

    let out = unprivileged(&["/usr/bin/python3", "-c", EPOLL_IN_FLIGHT, &want])
        .output()
        .expect("python3");
    let (total, err, sent) = in_flight_report(&out);
    assert_eq!(err, 0, "baseline");
    assert!(total > share, "baseline made only {total} of {share}");

    let out = sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", EPOLL_IN_FLIGHT, &want],
    )
    .output()
    .expect("run warden");
    let (total, err, sent_boxed) = in_flight_report(&out);
    assert!(
        total <= share,
        "sandboxed: {total} watches in {sent_boxed} instances sent away (baseline sent {sent}), \
         share {share}"
    );
    assert_eq!(err, nix::libc::ENOSPC, "sandboxed: {total} watches");
}

/// Lowers the RLIMIT_NOFILE of pid 1 (the sandbox's init, which keeps
/// the epoll quota) and of a child of its own, then changes its own
/// limits (allowed); prints each errno (0: done). pid 1 only with
/// argv[1] `with-init` (outside, pid 1 is the host's init: never tried).
const PRLIMIT: &str = r#"
import os, resource, sys, time
R = resource.RLIMIT_NOFILE
child = os.fork()
if child == 0:
    time.sleep(5); os._exit(0)
targets = [("child", child)] + ([("init", 1)] if sys.argv[1:] == ["with-init"] else [])
for name, pid in targets:
    try:
        resource.prlimit(pid, R, (8, 8))
        print(name, 0, flush=True)
    except OSError as e:
        print(name, e.errno, flush=True)
soft, hard = resource.getrlimit(R)
resource.setrlimit(R, (soft - 1, hard))
resource.prlimit(0, R, (soft - 2, hard))
print("own", resource.getrlimit(R)[0] == soft - 2, flush=True)
os.kill(child, 9); os.waitpid(child, 0)
"#;

fn errno_of(report: &str, what: &str) -> i32 {
    report
        .lines()
        .find_map(|l| l.strip_prefix(what)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {what} in: {report}"))
}

#[test]
fn a_server_changes_no_other_processs_limits() {
    let fx = Fixture::new();
    // Baseline: a process may change the limits of another of its user's
    // (its own child here; outside, pid 1 is the host's init: not tried).
    let out = unprivileged(&["/usr/bin/python3", "-c", PRLIMIT])
        .output()
        .expect("python3");
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(errno_of(&report, "child"), 0, "baseline: {report}");

    let out = sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", PRLIMIT, "with-init"],
    )
    .output()
    .expect("run warden");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(errno_of(&report, "init"), nix::libc::EPERM, "{report}");
    assert_eq!(errno_of(&report, "child"), nix::libc::EPERM, "{report}");
    assert!(report.contains("own True"), "own limits stay: {report}");
}

/// Makes and closes argv[1] epoll instances, each watching a fresh pipe
/// (closed with it) and stdin (which stays open, so a closed instance
/// keeps that watch while init holds it); prints how many were made and
/// the errno that stopped it (0: none).
const EPOLL_CHURN: &str = r#"
import os, select, sys
made, err = 0, 0
try:
    for _ in range(int(sys.argv[1])):
        ep = select.epoll()
        r, w = os.pipe()
        ep.register(r, select.EPOLLIN)
        ep.register(0, select.EPOLLIN)
        ep.close(); os.close(r); os.close(w)
        made += 1
except OSError as e:
    err = e.errno
print("made", made, "errno", err, flush=True)
"#;

/// init's duplicates must not turn an ordinary server that creates and
/// closes epoll instances over time into one that is refused.
#[test]
fn a_server_that_makes_and_closes_epoll_instances_is_not_refused() {
    let fx = Fixture::new();
    let out = sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", EPOLL_CHURN, "3000"],
    )
    .stdin(Stdio::piped())
    .output()
    .expect("run warden");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.starts_with("made 3000 errno 0"),
        "{report} {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Each closed instance here keeps its stdin watch, and so one of
    // init's descriptors: once init has none left (warden's hard
    // RLIMIT_NOFILE lowered to 300), further adds fail closed with ENOSPC.
    let inner = sandbox_exec(
        &fx,
        &serde_json::json!({}),
        &["/usr/bin/python3", "-c", EPOLL_CHURN, "1000"],
    );
    let out = Command::new("/usr/bin/prlimit")
        .args(["--nofile=300:300", "--", WARDEN])
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(fx.workspace.path())
        .stdin(Stdio::piped())
        .output()
        .expect("run warden");
    let report = String::from_utf8_lossy(&out.stdout);
    let made: u64 = report
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no report: {report}"));
    assert!(
        made < 300
            && report
                .trim_end()
                .ends_with(&format!("errno {}", nix::libc::ENOSPC)),
        "{report} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
