//! A URI rule names a host; real servers reach the same host by other
//! spellings. Node's `fetch` (a WHATWG parser) reads `http:HOST/` and
//! `http:/HOST/` as `http://HOST/`, and Python's `urlopen` and Node both
//! reach `127.0.0.1` through the IPv4-mapped `[::ffff:127.0.0.1]`, through
//! `0.0.0.0` (this host to `connect()`) and through `localhost`. Each
//! attack reads a loopback page when everything is allowed (the control)
//! and is denied by a rule on `http://127.0.0.1:PORT/**`.

mod resolving_support;

use std::io::{Read, Write};
use std::net::TcpListener;

use resolving_support::*;
use serde_json::{Value, json};

const PAGE: &str = "LOOPBACK-SECRET-PAGE";

/// A loopback HTTP server answering every request with [`PAGE`], on a
/// thread that ends with the test process.
fn serve_page() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                PAGE.len()
            );
        }
    });
    port
}

fn fetching(world: &World, name: &str, port: u16) -> Value {
    let mut entry = server(world, name);
    entry["sandbox"]["network"] = json!({"connect_tcp": [port]});
    entry
}

fn fetch(world: &World, name: &str, url: &str) -> (Option<i32>, Value) {
    let args = json!({"url": url}).to_string();
    let out = world.run(&["call", name, "fetch", "--json", "--args", &args]);
    (out.status.code(), stdout_json(&out))
}

#[test]
fn a_host_rule_holds_for_every_spelling_of_the_host() {
    if !npm_ready() {
        panic!("run scripts/test-deps.sh first (tests/npm)");
    }
    let world = World::new();
    let port = serve_page();
    let attacks: [(&str, String); 9] = [
        ("py", format!("http://[::ffff:127.0.0.1]:{port}/x")),
        ("py", format!("http://0.0.0.0:{port}/x")),
        ("node", format!("http://0.0.0.0:{port}/x")),
        ("py", format!("http://localhost:{port}/x")),
        ("py", format!("http://LocalHost:{port}/x")),
        ("node", format!("http://[::ffff:127.0.0.1]:{port}/x")),
        ("node", format!("http:127.0.0.1:{port}/x")),
        ("node", format!("http:/localhost:{port}/x")),
        ("node", format!("HTTP:\\\\localhost:{port}/x")),
    ];
    for (name, url) in &attacks {
        world.write_config(&json!({
            "mcpServers": {*name: fetching(&world, name, port)},
            "permissions": {"allow": [format!("mcp__{name}__*")]},
            "policy": [],
        }));
        let (code, report) = fetch(&world, name, url);
        assert_eq!(code, Some(0), "{report}");
        assert!(
            answer(&report).to_string().contains(PAGE),
            "control: {name} should fetch {url}: {report}"
        );
    }
    for (name, url) in &attacks {
        world.write_config(&json!({
            "mcpServers": {*name: fetching(&world, name, port)},
            "permissions": {
                "allow": [format!("mcp__{name}__fetch")],
                "deny": [format!("mcp__{name}__fetch(url: http://127.0.0.1:{port}/**)")],
            },
            "policy": [],
        }));
        let (code, report) = fetch(&world, name, url);
        assert_denied(code, &report, "deny rule");
        assert!(!report.to_string().contains(PAGE), "{report}");
    }
}

/// A host rule for every scheme, `*://HOST/**`, loaded as a path pattern
/// (it starts with `*`) and never matched a URL: the deny never fired.
#[test]
fn a_host_rule_for_every_scheme_holds() {
    let world = World::new();
    let port = serve_page();
    let url = format!("http://localhost:{port}/x");
    world.write_config(&json!({
        "mcpServers": {"py": fetching(&world, "py", port)},
        "permissions": {"allow": ["mcp__py__*"]},
        "policy": [],
    }));
    let (code, report) = fetch(&world, "py", &url);
    assert_eq!(code, Some(0), "{report}");
    assert!(
        answer(&report).to_string().contains(PAGE),
        "control: {report}"
    );
    for pattern in [
        format!("*://localhost:{port}/**"),
        format!("{{http,https}}://localhost:{port}/**"),
    ] {
        world.write_config(&json!({
            "mcpServers": {"py": fetching(&world, "py", port)},
            "permissions": {
                "allow": ["mcp__py__fetch"],
                "deny": [format!("mcp__py__fetch(url: {pattern})")],
            },
            "policy": [],
        }));
        let (code, report) = fetch(&world, "py", &url);
        assert_denied(code, &report, "deny rule");
    }
}
