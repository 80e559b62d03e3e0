//! TCP ports for tests without the bind-and-release race: a port found by
//! binding port 0 and closing the socket is free for anyone (another
//! test's server included) until the test uses it.
//!
//! - [`ReservedPort`]: bound on 127.0.0.1, never listened on, held for as
//!   long as the value lives. A connection to it is refused; the kernel
//!   hands it to no other port-0 bind; a process that binds it by number
//!   with `SO_REUSEADDR` (Rust's `TcpListener::bind` sets it) may still
//!   bind and listen on it, so a test can give the port to a server.
//! - [`listening_port`]: the TCP port a child process listens on, read
//!   from /proc, for servers told to listen on port 0 that do not print
//!   the port they got.

#![allow(dead_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::sys::socket::{
    AddressFamily, SockFlag, SockType, SockaddrIn, bind, getsockname, setsockopt, socket,
    sockopt::ReuseAddr,
};

pub struct ReservedPort {
    _socket: OwnedFd,
    pub port: u16,
}

impl ReservedPort {
    pub fn new() -> ReservedPort {
        let socket = socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .expect("socket");
        setsockopt(&socket, ReuseAddr, &true).expect("SO_REUSEADDR");
        bind(socket.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).expect("bind");
        let port = getsockname::<SockaddrIn>(socket.as_raw_fd())
            .expect("getsockname")
            .port();
        ReservedPort {
            _socket: socket,
            port,
        }
    }
}

/// The port `pid` listens on (TCP, IPv4 or IPv6), once it does; `None`
/// after `limit`. Polled: a process starting to listen sends no event.
pub async fn listening_port(pid: u32, limit: Duration) -> Option<u16> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(port) = listening_now(pid) {
            return Some(port);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn listening_now(pid: u32) -> Option<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            link.strip_prefix("socket:[")
                .and_then(|rest| rest.strip_suffix(']'))
                .map(str::to_string)
        })
        .collect();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 10 || fields[3] != "0A" || !inodes.iter().any(|i| i == fields[9]) {
                continue;
            }
            let port = fields[1].rsplit(':').next()?;
            return u16::from_str_radix(port, 16).ok();
        }
    }
    None
}
