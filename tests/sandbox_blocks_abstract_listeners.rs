//! In ports mode (`connect_tcp`/`bind_tcp`) the server shares the host's
//! network namespace, and with it the namespace of abstract unix socket
//! names. Landlock's scoping stops it connecting *out* to a host name,
//! but nothing stopped it binding one and taking what host programs send
//! there: a name of a service that is not running (an X display's
//! `@/tmp/.X11-unix/X1`, which X clients try first) is one bind away. A
//! red-team review received a host program's connection (stream) and
//! datagram this way. Stream and seqpacket listeners on abstract names
//! are now refused by the listen() supervisor, datagram sockets by
//! seccomp. Each attack also runs without the sandbox and works there.

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
