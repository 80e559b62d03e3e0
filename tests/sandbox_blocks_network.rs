//! Network `none` stops TCP, UDP and abstract unix sockets to the host's
//! loopback; `connect_tcp` opens exactly the listed TCP ports and still no
//! UDP. Each attack also runs unsandboxed to show the listener would see it.

#[path = "support/ports.rs"]
mod ports;
mod sandbox_support;

use std::io::Read;
use std::time::Duration;

use sandbox_support::*;
use serde_json::json;
use warden::config::{NetworkSpec, SandboxSpec};

fn tcp_listener() -> (std::net::TcpListener, u16) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

/// Whether the listener got a connection carrying `token`.
fn tcp_saw(l: &std::net::TcpListener, token: &str) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    while std::time::Instant::now() < deadline {
        if let Ok((mut c, _)) = l.accept() {
            let _ = c.set_nonblocking(false);
            let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = String::new();
            let _ = c.read_to_string(&mut buf);
            return buf.contains(token);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn udp_listener() -> (std::net::UdpSocket, u16) {
    let u = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    u.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let port = u.local_addr().expect("addr").port();
    (u, port)
}

fn udp_saw(u: &std::net::UdpSocket, token: &str) -> bool {
    let mut buf = [0u8; 256];
    match u.recv(&mut buf) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).contains(token),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_tcp_listener_never_sees_a_connection() {
    let fx = Fixture::new();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let (l, port) = tcp_listener();
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (out, _) = call(
            &s,
            "tcp_connect",
            json!({"port": port, "message": fx.token}),
        )
        .await;
        let (bind, bj) = call(&s, "tcp_bind", json!({"port": 0})).await;
        s.stop().await;
        let saw = tcp_saw(&l, &fx.token);
        match mode {
            Mode::Unsandboxed => assert!(saw, "baseline must connect: {out}"),
            Mode::Sandboxed => {
                assert!(!saw, "listener saw the sandboxed server: {out}");
                assert_eq!(bj["ok"], json!(false), "bind allowed: {bind}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_udp_listener_never_sees_a_packet() {
    let fx = Fixture::new();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let (u, port) = udp_listener();
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (out, _) = call(&s, "udp_send", json!({"port": port, "message": fx.token})).await;
        s.stop().await;
        let saw = udp_saw(&u, &fx.token);
        match mode {
            Mode::Unsandboxed => assert!(saw, "baseline must send: {out}"),
            Mode::Sandboxed => assert!(!saw, "listener saw a datagram: {out}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abstract_unix_socket_outside_is_refused() {
    use std::os::linux::net::SocketAddrExt;
    let fx = Fixture::new();
    let name = format!("wsb-{}", uuid::Uuid::new_v4().simple());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
    let l = std::os::unix::net::UnixListener::bind_addr(&addr).expect("bind abstract");
    l.set_nonblocking(true).expect("nonblocking");
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (out, _) = call(
            &s,
            "abstract_connect",
            json!({"name": name, "message": fx.token}),
        )
        .await;
        s.stop().await;
        let mut saw = false;
        if let Ok((mut c, _)) = l.accept() {
            let _ = c.set_nonblocking(false);
            let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = String::new();
            let _ = c.read_to_string(&mut buf);
            saw = buf.contains(&fx.token);
        }
        match mode {
            Mode::Unsandboxed => assert!(saw, "baseline must connect: {out}"),
            Mode::Sandboxed => assert!(!saw, "abstract socket reached: {out}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_port_grants_open_only_the_listed_ports_and_never_udp() {
    let fx = Fixture::new();
    let (granted, gport) = tcp_listener();
    let (other, oport) = tcp_listener();
    let (u, uport) = udp_listener();
    // Held (bound, not listening) so no other process takes them; the
    // server binds them with SO_REUSEADDR.
    let (reserved, other_reserved) = (ports::ReservedPort::new(), ports::ReservedPort::new());
    let (bport, other_bport) = (reserved.port, other_reserved.port);
    let spec = SandboxSpec {
        network: NetworkSpec::Ports {
            connect_tcp: vec![gport],
            bind_tcp: vec![bport],
        },
        ..SandboxSpec::default()
    };
    let s = launch_hostile(&fx, Mode::Sandboxed, spec).await;
    let (g, gj) = call(
        &s,
        "tcp_connect",
        json!({"port": gport, "message": fx.token}),
    )
    .await;
    let (o, _) = call(
        &s,
        "tcp_connect",
        json!({"port": oport, "message": fx.token}),
    )
    .await;
    let (ud, _) = call(&s, "udp_send", json!({"port": uport, "message": fx.token})).await;
    let (b1, b1j) = call(&s, "tcp_bind", json!({"port": bport})).await;
    let (b2, b2j) = call(&s, "tcp_bind", json!({"port": other_bport})).await;
    s.stop().await;
    assert_eq!(b1j["ok"], json!(true), "granted bind refused: {b1}");
    assert_eq!(b2j["ok"], json!(false), "other bind allowed: {b2}");
    // Refused by the sandbox, not because the port was taken.
    assert_eq!(
        b2j["errno"],
        json!(nix::errno::Errno::EACCES as i32),
        "{b2}"
    );
    assert_eq!(gj["ok"], json!(true), "{g}");
    assert!(
        tcp_saw(&granted, &fx.token),
        "granted port not reached: {g}"
    );
    assert!(!tcp_saw(&other, &fx.token), "other port reached: {o}");
    assert!(!udp_saw(&u, &fx.token), "UDP reached in ports mode: {ud}");
}

/// A pathname unix socket outside the grants (think /var/run/docker.sock):
/// never reachable under network `none`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pathname_unix_socket_outside_is_refused() {
    let fx = Fixture::new();
    let path = fx.secret_dir.path().join("control.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, SandboxSpec::default()).await;
        let (out, _) = call(
            &s,
            "unix_connect",
            json!({"path": path, "content": fx.token}),
        )
        .await;
        s.stop().await;
        let mut saw = false;
        if let Ok((mut c, _)) = l.accept() {
            let _ = c.set_nonblocking(false);
            let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = String::new();
            let _ = c.read_to_string(&mut buf);
            saw = buf.contains(&fx.token);
        }
        match mode {
            Mode::Unsandboxed => assert!(saw, "baseline must connect: {out}"),
            Mode::Sandboxed => assert!(!saw, "unix socket reached: {out}"),
        }
    }
}

/// A pathname datagram socket the host listens on (think journald or
/// syslog): under network `none`, `sendmsg`/`sendmmsg` with a `msg_name`
/// never deliver, from a socket or a socketpair, of type `SOCK_DGRAM` or
/// `SOCK_RAW`, whether the socket is
/// outside the grants or inside a read grant (a read-only bind does not
/// stop sends to a socket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datagrams_to_a_pathname_unix_socket_are_refused_under_none() {
    let fx = Fixture::new();
    let granted = fx.workspace.path().join("sockets");
    std::fs::create_dir(&granted).expect("mkdir");
    let spec = SandboxSpec {
        read: vec![granted.clone()],
        ..SandboxSpec::default()
    };
    for dir in [fx.secret_dir.path(), granted.as_path()] {
        let path = dir.join("log.sock");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).expect("bind");
        listener
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
            let s = launch_hostile(&fx, mode, spec.clone()).await;
            let mut outs = Vec::new();
            // SOCK_RAW: AF_UNIX makes it a datagram socket (a red-team
            // review sent through one after SOCK_DGRAM was refused).
            for via in ["socket", "socketpair", "sendmmsg", "raw", "raw-socketpair"] {
                let token = format!("{}-{via}", fx.token);
                let (raw, j) = call(
                    &s,
                    "dgram_send",
                    json!({"path": path, "message": token, "via": via}),
                )
                .await;
                let mut buf = [0u8; 256];
                let got = listener
                    .recv(&mut buf)
                    .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
                    .unwrap_or_default();
                outs.push((via, raw, j, got.contains(&token)));
            }
            s.stop().await;
            for (via, raw, j, delivered) in outs {
                match mode {
                    Mode::Unsandboxed => {
                        assert!(delivered, "baseline {via} must deliver: {raw}")
                    }
                    Mode::Sandboxed => {
                        assert!(!delivered, "{via} delivered ({}): {raw}", dir.display());
                        assert_eq!(j["errno"], json!(nix::errno::Errno::EACCES as i32), "{raw}");
                    }
                }
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// `connect_tcp: [A]`: TCP Fast Open (`sendto`/`sendmsg` with MSG_FASTOPEN,
/// `TCP_FASTOPEN_CONNECT` + connect) never reaches another port B. A still
/// works with `TCP_FASTOPEN_CONNECT` (Landlock sees that connect);
/// MSG_FASTOPEN is refused outright (seccomp cannot read its address).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_fast_open_never_reaches_an_ungranted_port() {
    let fx = Fixture::new();
    let (granted, gport) = tcp_listener();
    let (other, oport) = tcp_listener();
    let spec = SandboxSpec {
        network: NetworkSpec::Ports {
            connect_tcp: vec![gport],
            bind_tcp: vec![],
        },
        ..SandboxSpec::default()
    };
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, spec.clone()).await;
        let mut outs = Vec::new();
        for via in ["sendto", "sendmsg", "connect"] {
            let token = format!("{}-{via}", fx.token);
            let (raw, j) = call(
                &s,
                "tfo_send",
                json!({"port": oport, "message": token, "via": via}),
            )
            .await;
            outs.push((via, raw, j, tcp_saw(&other, &token)));
        }
        let gtoken = format!("{}-granted", fx.token);
        let (g, gj) = call(
            &s,
            "tfo_send",
            json!({"port": gport, "message": gtoken, "via": "connect"}),
        )
        .await;
        let granted_saw = tcp_saw(&granted, &gtoken);
        s.stop().await;
        assert_eq!(gj["ok"], json!(true), "{g}");
        assert!(granted_saw, "the granted port must get TFO data: {g}");
        for (via, raw, j, delivered) in outs {
            match mode {
                Mode::Unsandboxed => assert!(delivered, "baseline {via} must deliver: {raw}"),
                Mode::Sandboxed => {
                    assert!(!delivered, "{via} reached port {oport}: {raw}");
                    assert_eq!(j["ok"], json!(false), "{raw}");
                }
            }
        }
    }
}

/// `listen()` on a TCP socket that was never bound auto-binds a port on all
/// interfaces; in ports mode that is refused whether `bind_tcp` is empty
/// or not, while bind(granted port) + listen works and the host reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_without_bind_never_opens_a_port() {
    let fx = Fixture::new();
    let out = fx.workspace.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let reserved = ports::ReservedPort::new();
    let bport = reserved.port;
    for bind_tcp in [vec![], vec![bport]] {
        let spec = SandboxSpec {
            network: NetworkSpec::Ports {
                connect_tcp: vec![],
                bind_tcp: bind_tcp.clone(),
            },
            write: vec![out.clone()],
            ..SandboxSpec::default()
        };
        for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
            let s = launch_hostile(&fx, mode, spec.clone()).await;
            // From the thread serving the call, and from another one (the
            // supervisor is told a thread id, which a pidfd of the process
            // does not take: listen() from any other thread got ESRCH).
            for thread in [false, true] {
                let (raw, j) = listen_and_connect(&s, &out, None, &fx.token, thread).await;
                let positive = if bind_tcp.is_empty() {
                    None
                } else {
                    Some(listen_and_connect(&s, &out, Some(bport), &fx.token, thread).await)
                };
                let reached = j["detail"]["received"].as_str() == Some(fx.token.as_str());
                match mode {
                    Mode::Unsandboxed => assert!(reached, "baseline must auto-bind: {raw}"),
                    Mode::Sandboxed => {
                        assert!(!reached, "auto-bound port reached ({bind_tcp:?}): {raw}");
                        assert_eq!(j["errno"], json!(nix::errno::Errno::EACCES as i32), "{raw}");
                    }
                }
                if let Some((praw, pj)) = positive {
                    assert_eq!(
                        pj["detail"]["received"].as_str(),
                        Some(fx.token.as_str()),
                        "bind of the granted port + listen must work (thread: {thread}): {praw}"
                    );
                }
            }
            s.stop().await;
        }
    }
}

/// Calls `listen_tcp` and, meanwhile, connects to the port it reports
/// (through a file in `dir`) and sends `token`.
async fn listen_and_connect(
    s: &Server,
    dir: &std::path::Path,
    port: Option<u16>,
    token: &str,
    thread: bool,
) -> (String, serde_json::Value) {
    let port_file = dir.join(format!("port-{}", uuid::Uuid::new_v4().simple()));
    let pf = port_file.clone();
    let token = token.to_string();
    // Polls for the port file until the call has returned (a refused
    // listen never writes one), or a generous deadline.
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let done = answered.clone();
    let connector = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline
            && !done.load(std::sync::atomic::Ordering::SeqCst)
        {
            if let Some(p) = std::fs::read_to_string(&pf)
                .ok()
                .and_then(|s| s.trim().parse::<u16>().ok())
            {
                if let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", p)) {
                    use std::io::Write;
                    let _ = c.write_all(token.as_bytes());
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let r = call(
        s,
        "listen_tcp",
        json!({"port": port, "port_file": port_file, "wait_ms": 20000, "thread": thread}),
    )
    .await;
    answered.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = connector.join();
    let _ = std::fs::remove_file(&port_file);
    r
}

/// A host service listening with `SO_REUSEPORT` shares its port with any
/// socket of the same user that sets the option too, and the kernel then
/// deals that service's connections out between them: a server granted
/// `bind_tcp` on that port would take part of the host's traffic. The
/// option is refused in ports mode, so the bind meets the host's listener
/// (`EADDRINUSE`) as it would without the option.
#[test]
fn a_granted_bind_port_never_joins_a_host_listener() {
    use nix::sys::socket::{
        AddressFamily, Backlog, SockFlag, SockType, SockaddrIn, bind, getsockname, listen,
        setsockopt, socket, sockopt::ReusePort,
    };
    use std::os::fd::AsRawFd;
    let host = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .expect("socket");
    setsockopt(&host, ReusePort, &true).expect("SO_REUSEPORT");
    bind(host.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).expect("bind");
    listen(&host, Backlog::MAXCONN).expect("listen");
    let port = getsockname::<SockaddrIn>(host.as_raw_fd())
        .expect("getsockname")
        .port();
    let script = format!(
        "import socket\n\
         s = socket.socket()\n\
         try:\n    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n\
         except OSError as e:\n    print('setsockopt refused', e.errno)\n\
         try:\n    s.bind(('127.0.0.1', {port})); s.listen(); print('joined')\n\
         except OSError as e:\n    print('bind refused', e.errno)\n"
    );
    let python = std::path::Path::new("/usr/bin/python3");
    let baseline = std::process::Command::new(python)
        .args(["-c", &script])
        .output()
        .expect("python");
    let said = String::from_utf8_lossy(&baseline.stdout);
    assert!(said.contains("joined"), "baseline must join: {said}");

    let fx = Fixture::new();
    let spec = SandboxSpec {
        network: NetworkSpec::Ports {
            connect_tcp: vec![],
            bind_tcp: vec![port],
        },
        ..SandboxSpec::default()
    };
    let cfg = server_config(
        python,
        &["-c", &script],
        spec,
        warden::config::Trust::Untrusted,
    );
    let out = run_prepared(prepare(&cfg, &fx.ctx()).expect("prepare"));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !said.contains("joined"),
        "the server joined the host's port: {said}"
    );
    assert!(
        said.contains(&format!(
            "setsockopt refused {}",
            nix::errno::Errno::EACCES as i32
        )),
        "{said}"
    );
    drop(host);
}
