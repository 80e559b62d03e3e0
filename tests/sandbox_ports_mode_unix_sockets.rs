//! Unix sockets in ports mode (`connect_tcp`/`bind_tcp`), where the
//! server shares the host's network namespace:
//! - a pathname socket inside a grant stayed connectable (a read-only
//!   bind does not stop a connect): with `/var/run` or a docker socket
//!   in a read grant, that is root on the host. A red-team review sent
//!   data to a host listener in a read grant;
//! - the host's abstract socket names are shared: Landlock's scoping
//!   stops a connect *out*, but nothing stopped the server binding a name
//!   and taking what host programs send there (a name of a service that
//!   is not running, e.g. an X display's `@/tmp/.X11-unix/X1`, which X
//!   clients try first). The review received a host program's
//!   connection and datagram this way.
//!
//! - a connected pair from `socketpair()` has no name, and `bind()` gave
//!   it one: the server held a host name, so the host's own service
//!   could no longer bind it.
//!
//! `socket(AF_UNIX)` is refused in ports mode (connected pairs from
//! `socketpair()` stay), the listen() supervisor refuses abstract
//! listeners as well, and `bind()` is made by init, which names no unix
//! socket. Each attack also runs without the sandbox and
//! works there.

#[path = "support/ports.rs"]
mod ports;
mod sandbox_support;

use std::io::{BufRead, BufReader, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixStream};
use std::process::{Child, Command, Stdio};

use sandbox_support::*;

/// Binds `\0argv[2]` as a stream listener or a datagram socket (argv[1]),
/// reports "ready" or "refused", then prints what one peer sent.
const PROBE: &str = r#"
import socket, sys
kind = socket.SOCK_STREAM if sys.argv[1] == "stream" else socket.SOCK_DGRAM
try:
    s = socket.socket(socket.AF_UNIX, kind)
    s.bind("\0" + sys.argv[2])
    if kind == socket.SOCK_STREAM:
        s.listen(1)
    print("ready", flush=True)
except OSError as e:
    print("refused", e.errno, flush=True); sys.exit(0)
if kind == socket.SOCK_STREAM:
    c, _ = s.accept(); data = c.recv(100)
else:
    data = s.recv(100)
print("got", data.decode(), flush=True)
"#;

/// A probe that is killed (with its sandbox: the helper's SIGKILL takes
/// init and so the namespace) however the test ends.
struct Probe(Child);

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(mut cmd: Command) -> (Probe, BufReader<std::process::ChildStdout>, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let child = Probe(child);
    let mut line = String::new();
    out.read_line(&mut line).expect("report");
    (child, out, line)
}

/// The host program's side: connects or sends `token` to the name.
fn host_sends(kind: &str, name: &str, token: &str) -> bool {
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
    if kind == "stream" {
        UnixStream::connect_addr(&addr)
            .and_then(|mut s| s.write_all(token.as_bytes()))
            .is_ok()
    } else {
        UnixDatagram::unbound()
            .and_then(|s| s.send_to_addr(token.as_bytes(), &addr))
            .is_ok()
    }
}

fn probe(kind: &str, name: &str) -> Vec<String> {
    vec![
        "/usr/bin/python3".into(),
        "-c".into(),
        PROBE.into(),
        kind.into(),
        name.into(),
    ]
}

#[test]
fn abstract_unix_names_of_the_host_are_never_taken_in_ports_mode() {
    let fx = Fixture::new();
    let profile = fx.workspace.path().join("profile.json");
    std::fs::write(
        &profile,
        serde_json::json!({"network": {"connect_tcp": [9], "bind_tcp": [9]}}).to_string(),
    )
    .expect("profile");
    for kind in ["stream", "dgram"] {
        // Baseline: the name is taken and the host program's data arrives.
        let name = format!("warden-squat-{}", uuid::Uuid::new_v4().simple());
        let argv = probe(kind, &name);
        let mut plain = Command::new(&argv[0]);
        plain.args(&argv[1..]);
        let (child, mut out, line) = start(plain);
        assert_eq!(line.trim(), "ready", "baseline {kind}");
        assert!(host_sends(kind, &name, &fx.token), "baseline {kind}");
        let mut got = String::new();
        out.read_line(&mut got).expect("read");
        drop(child);
        assert!(got.contains(&fx.token), "baseline {kind}: {got}");

        let name = format!("warden-squat-{}", uuid::Uuid::new_v4().simple());
        let argv = probe(kind, &name);
        let mut cmd = Command::new(WARDEN);
        cmd.args(["sandbox", "exec", "--profile"])
            .arg(&profile)
            .arg("--")
            .args(&argv)
            .env("HOME", fx.workspace.path())
            .env("TMPDIR", fx.runtime.path())
            .env_remove("WARDEN_CGROUP_PARENT")
            .current_dir(fx.workspace.path());
        let (child, mut out, line) = start(cmd);
        assert!(line.starts_with("refused"), "sandboxed {kind}: {line}");
        assert!(
            !host_sends(kind, &name, &fx.token),
            "sandboxed {kind}: the host's data went to the name"
        );
        // The probe ends by itself after a refusal; EOF comes then.
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut rest);
        drop(child);
        assert!(!rest.contains(&fx.token), "sandboxed {kind}: {rest}");
    }
}

/// Connects to the pathname socket argv[1] and sends argv[2].
const CONNECT: &str = r#"
import socket, sys
try:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(sys.argv[1]); c.sendall(sys.argv[2].encode())
    print("connected", flush=True)
except OSError as e:
    print("refused", e.errno, flush=True)
"#;

/// Whether a connection is waiting on `l` (the probe has ended, so one
/// that was made is in the backlog by now).
fn pending(l: &std::os::unix::net::UnixListener, token: &str) -> bool {
    l.set_nonblocking(true).expect("nonblocking");
    match l.accept() {
        Ok((mut s, _)) => {
            s.set_nonblocking(false).expect("blocking");
            let mut got = String::new();
            let _ = std::io::Read::read_to_string(&mut s, &mut got);
            got.contains(token)
        }
        Err(_) => false,
    }
}

#[test]
fn a_pathname_socket_in_a_read_grant_is_never_connectable_in_ports_mode() {
    let fx = Fixture::new();
    let run = fx.workspace.path().join("run");
    std::fs::create_dir(&run).expect("mkdir");
    let sock = run.join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
    let path = sock.display().to_string();

    // Baseline: the host service receives the token.
    let o = Command::new("/usr/bin/python3")
        .args(["-c", CONNECT, &path, &fx.token])
        .output()
        .expect("python3");
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("connected"));
    assert!(pending(&listener, &fx.token), "baseline: nothing arrived");

    let profile = fx.workspace.path().join("grant.json");
    std::fs::write(
        &profile,
        serde_json::json!({"read": [run], "network": {"connect_tcp": [9]}}).to_string(),
    )
    .expect("profile");
    let o = Command::new(WARDEN)
        .args(["sandbox", "exec", "--profile"])
        .arg(&profile)
        .args(["--", "/usr/bin/python3", "-c", CONNECT, &path, &fx.token])
        .env("HOME", fx.workspace.path())
        .env("TMPDIR", fx.runtime.path())
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(fx.workspace.path())
        .output()
        .expect("run warden");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("refused"), "sandboxed: {out}");
    assert!(
        !pending(&listener, &fx.token),
        "sandboxed: the host service got a connection"
    );
}

/// argv[1]: the pair's type, argv[2]: the abstract name, argv[3]: a
/// TCP port, argv[4:]: descriptor numbers to race. Names one end of a
/// connected pair, then (`race`) binds descriptor number N to the name
/// while a thread swaps a TCP socket and the pair's end in and out of N;
/// then binds TCP ports; stays up until killed.
const NAME_A_PAIR: &str = r#"
import os, socket, sys, threading, time
kind = socket.SOCK_STREAM if sys.argv[1] == "stream" else socket.SOCK_SEQPACKET
name = "\0" + sys.argv[2]
a, b = socket.socketpair(socket.AF_UNIX, kind)
try:
    a.bind(name); print("pair named", flush=True)
except OSError as e:
    print("pair refused", e.errno, flush=True)
b.send(b"x"); print("pair works", a.recv(1).decode(), flush=True)
if sys.argv[1] == "race":
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    n = os.dup(t.fileno()); stop = False
    def swap():
        while not stop:
            os.dup2(a.fileno(), n); os.dup2(t.fileno(), n)
    th = threading.Thread(target=swap); th.start()
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    raw = struct.pack("H", socket.AF_UNIX) + name.encode()
    buf = ctypes.create_string_buffer(raw, len(raw))
    named = sum(libc.bind(n, buf, len(raw)) == 0 for _ in range(3000))
    stop = True; th.join()
    print("race named", named, flush=True)
for fam, host in [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]:
    for p in sys.argv[3:]:
        s = socket.socket(fam); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(p))); print("tcp", int(fam), p, "bound", flush=True)
        except OSError as e:
            print("tcp", int(fam), p, "refused", e.errno, flush=True)
print("done", flush=True)
time.sleep(120)
"#;

/// Runs the probe until "done"; its lines, and whether the host could bind
/// the name meanwhile (while the probe still holds all it named).
fn name_a_pair(cmd: Command, name: &str, stream: bool) -> (Vec<String>, bool) {
    let (child, mut out, first) = start(cmd);
    let mut lines = vec![first.trim().to_string()];
    while lines.last().is_some_and(|l| l != "done") {
        let mut l = String::new();
        if out.read_line(&mut l).expect("read") == 0 {
            break;
        }
        lines.push(l.trim().to_string());
    }
    // An abstract name is taken per socket type: the host binds the same.
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, bind, socket};
    let ty = if stream {
        SockType::Stream
    } else {
        SockType::SeqPacket
    };
    let host = socket(AddressFamily::Unix, ty, SockFlag::SOCK_CLOEXEC, None).expect("socket");
    let addr = UnixAddr::new_abstract(name.as_bytes()).expect("name");
    let host_binds = bind(std::os::fd::AsRawFd::as_raw_fd(&host), &addr).is_ok();
    drop(child);
    (lines, host_binds)
}

#[test]
fn a_connected_pair_never_takes_a_host_name_and_binds_keep_to_the_granted_ports() {
    let fx = Fixture::new();
    let granted = ports::ReservedPort::new();
    let other = ports::ReservedPort::new();
    let (g, o) = (granted.port.to_string(), other.port.to_string());
    let profile = fx.workspace.path().join("profile.json");
    std::fs::write(
        &profile,
        serde_json::json!({"network": {"connect_tcp": [9], "bind_tcp": [granted.port]}})
            .to_string(),
    )
    .expect("profile");
    let refused = format!("refused {}", nix::errno::Errno::EACCES as i32);
    for kind in ["stream", "seqpacket", "race"] {
        let argv = |name: &str| -> Vec<String> {
            [
                "/usr/bin/python3",
                "-c",
                NAME_A_PAIR,
                kind,
                name,
                &g,
                &o,
                "0",
            ]
            .map(String::from)
            .to_vec()
        };
        // Baseline: the pair takes the name; the host's service cannot
        // bind it; every port binds.
        let name = format!("warden-pair-{}", uuid::Uuid::new_v4().simple());
        let a = argv(&name);
        let mut plain = Command::new(&a[0]);
        plain.args(&a[1..]);
        let (lines, host_binds) = name_a_pair(plain, &name, kind == "stream");
        assert!(
            lines.contains(&"pair named".to_string()),
            "baseline {kind}: {lines:?}"
        );
        assert!(!host_binds, "baseline {kind}: the host bound a taken name");
        assert!(
            lines.iter().filter(|l| l.ends_with(" bound")).count() == 6,
            "baseline {kind}: {lines:?}"
        );

        let name = format!("warden-pair-{}", uuid::Uuid::new_v4().simple());
        let a = argv(&name);
        let mut cmd = Command::new(WARDEN);
        cmd.args(["sandbox", "exec", "--profile"])
            .arg(&profile)
            .arg("--")
            .args(&a)
            .env("HOME", fx.workspace.path())
            .env("TMPDIR", fx.runtime.path())
            .env_remove("WARDEN_CGROUP_PARENT")
            .current_dir(fx.workspace.path());
        let (lines, host_binds) = name_a_pair(cmd, &name, kind == "stream");
        let said = format!("sandboxed {kind}: {lines:?}");
        assert!(lines.contains(&format!("pair {refused}")), "{said}");
        assert!(lines.contains(&"pair works x".to_string()), "{said}");
        if kind == "race" {
            assert!(lines.contains(&"race named 0".to_string()), "{said}");
        }
        assert!(host_binds, "{said}: the name was taken from the host");
        // AF_INET, AF_INET6
        for fam in [2, 10] {
            assert!(lines.contains(&format!("tcp {fam} {g} bound")), "{said}");
            for p in [&o, "0"] {
                assert!(
                    lines.contains(&format!("tcp {fam} {p} {refused}")),
                    "{said}"
                );
            }
        }
    }
}
