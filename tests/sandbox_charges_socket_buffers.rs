//! `memory_mb` holds for kernel socket buffers too. With `bind_tcp` and
//! `connect_tcp` on one port, a server can connect to itself and stop
//! reading: every byte it sends then sits in a send or receive queue (up
//! to 4 MB + 32 MB per connection by default). On cgroup v1 those TCP
//! buffers are charged to no counter unless the group has a TCP limit,
//! so a red-team review held 150 MB of them under `memory_mb: 128` (and
//! could have held the host's whole `tcp_mem`, after which every TCP
//! socket on the host stalls). The same attack also runs without the
//! sandbox and gets past the mark there.
//!
//! Connections a listener has not accepted are charged to no memory
//! cgroup (v1 or v2: a socket is charged on accept). A server listening
//! on 127.0.0.1..4 with the largest backlog, connecting to itself and
//! never accepting, held 170 MB of the host's TCP memory under
//! `memory_mb: 128`. listen() (which init performs for the server) now
//! takes only the wildcard or loopback address and a backlog of at most
//! 64, which bounds those queues per granted port.

mod sandbox_support;

use std::process::Command;

use sandbox_support::*;

const MB: u64 = 1 << 20;

/// Listens on the port, makes up to 200 connections to itself, accepts
/// them, and sends on each until its queues are full, never reading.
/// Stops at `stop` bytes; prints the bytes held.
const PROBE: &str = r#"
import socket, sys
port, stop = int(sys.argv[1]), int(sys.argv[2])
l = socket.socket(); l.bind(("127.0.0.1", port)); l.listen(256)
keep, held = [], 0
for i in range(200):
    try:
        c = socket.socket(); c.connect(("127.0.0.1", port)); a, _ = l.accept()
    except OSError as e:
        print("connect", i, e, flush=True); break
    c.setblocking(False); keep += [c, a]
    while held < stop:
        try: held += c.send(b"x" * 65536)
        except (BlockingIOError, OSError): break
    if held >= stop: break
print("held", held, flush=True)
"#;

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

fn held(out: &[u8]) -> u64 {
    let s = String::from_utf8_lossy(out);
    s.lines()
        .find_map(|l| l.strip_prefix("held "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no report: {s}"))
}

#[test]
fn tcp_buffers_count_against_memory_mb() {
    let fx = Fixture::new();
    let stop = (160 * MB).to_string();

    // Baseline: no sandbox, the queues pass the mark.
    let port = free_port().to_string();
    let o = Command::new("/usr/bin/python3")
        .args(["-c", PROBE, &port, &stop])
        .output()
        .expect("python3");
    let baseline = held(&o.stdout);
    assert!(
        baseline > 128 * MB,
        "baseline held only {baseline} bytes: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    let port = free_port();
    let profile = fx.workspace.path().join("profile.json");
    std::fs::write(
        &profile,
        serde_json::json!({
            "network": {"connect_tcp": [port], "bind_tcp": [port]},
            "limits": {"memory_mb": 128}
        })
        .to_string(),
    )
    .expect("profile");
    let port = port.to_string();
    let o = Command::new(WARDEN)
        .args(["sandbox", "exec", "--profile"])
        .arg(&profile)
        .args(["--", "/usr/bin/python3", "-c", PROBE, &port, &stop])
        .env("HOME", fx.workspace.path())
        .env("TMPDIR", fx.runtime.path())
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(fx.workspace.path())
        .output()
        .expect("run warden");
    if o.status.code() == Some(4) {
        // No memory cgroup for this user: the explicit limit refuses to
        // start (tested in sandbox_limits).
        skipped(
            "tcp_buffers_count_against_memory_mb",
            &String::from_utf8_lossy(&o.stderr),
        );
        return;
    }
    if o.status.code().is_none() || o.status.code() == Some(137) {
        // Killed at the limit (cgroup v2 charges socket buffers to
        // memory.max, whose OOM kill may end the probe): bounded too.
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("held"),
            "killed after reporting: {o:?}"
        );
        return;
    }
    let sandboxed = held(&o.stdout);
    assert!(
        sandboxed < 128 * MB,
        "{sandboxed} bytes of TCP buffers held under memory_mb 128: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The attack did run: connections were made and filled.
    assert!(sandboxed >= 4 * MB, "the attack never ran: {sandboxed}");
}

/// Listens on 127.0.0.1:port with the largest backlog and reports the
/// backlog the kernel took (TCP_INFO's tcpi_sacked on a listener), then
/// tries a second listener on 127.0.0.2:port.
const LISTENERS: &str = r#"
import socket, struct, sys
port = int(sys.argv[1])
l = socket.socket(); l.bind(("127.0.0.1", port)); l.listen(65535)
info = l.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
print("backlog", struct.unpack_from("I", info, 28)[0], flush=True)
try:
    m = socket.socket(); m.bind(("127.0.0.2", port)); m.listen(16)
    print("second listening", flush=True)
except OSError as e:
    print("second refused", e.errno, flush=True)
"#;

fn listeners(out: &[u8]) -> (u64, bool) {
    let s = String::from_utf8_lossy(out);
    let backlog = s
        .lines()
        .find_map(|l| l.strip_prefix("backlog "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no report: {s}"));
    (backlog, s.contains("second listening"))
}

#[test]
fn unaccepted_connections_are_bounded_by_one_small_backlog_per_address() {
    let fx = Fixture::new();
    let port = free_port().to_string();
    let o = Command::new("/usr/bin/python3")
        .args(["-c", LISTENERS, &port])
        .output()
        .expect("python3");
    let (backlog, second) = listeners(&o.stdout);
    assert!(backlog > 64, "baseline backlog {backlog}");
    assert!(second, "baseline: a second loopback listener");

    let port = free_port();
    let profile = fx.workspace.path().join("listen.json");
    std::fs::write(
        &profile,
        serde_json::json!({"network": {"bind_tcp": [port]}}).to_string(),
    )
    .expect("profile");
    let port = port.to_string();
    let o = Command::new(WARDEN)
        .args(["sandbox", "exec", "--profile"])
        .arg(&profile)
        .args(["--", "/usr/bin/python3", "-c", LISTENERS, &port])
        .env("HOME", fx.workspace.path())
        .env("TMPDIR", fx.runtime.path())
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(fx.workspace.path())
        .output()
        .expect("run warden");
    let (backlog, second) = listeners(&o.stdout);
    assert!(
        backlog <= 64,
        "sandboxed backlog {backlog}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!second, "sandboxed: a listener on 127.0.0.2");
}
