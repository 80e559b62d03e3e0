//! A URI rule names a host; real servers reach the same host by other
//! spellings. Node's `fetch` (a WHATWG parser) reads `http:HOST/` and
//! `http:/HOST/` as `http://HOST/`, and Python's `urlopen` and Node both
//! reach `127.0.0.1` through the IPv4-mapped `[::ffff:127.0.0.1]`, through
//! `0.0.0.0` (this host to `connect()`) and through `localhost`. Each
//! attack reads a loopback page when everything is allowed (the control)
//! and is denied by a rule on `http://127.0.0.1:PORT/**`.
//!
//! Python's clients read URLs otherwise than WHATWG parsers do
//! (`warden_policy`'s `python_urls.rs`): `urlopen` unwraps `<URL:…>`,
//! strips Unicode spaces, decodes `%3A` before it looks for the port and
//! reads the port with `int()`; httpx takes `evil.example\@` as userinfo.
//! Each reaches `127.0.0.1` while WHATWG reads no URL or another host.

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
    fetch_with(world, name, "fetch", url)
}

fn fetch_with(world: &World, name: &str, tool: &str, url: &str) -> (Option<i32>, Value) {
    let args = json!({"url": url}).to_string();
    let out = world.run(&["call", name, tool, "--json", "--args", &args]);
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

/// Spellings only Python's clients read as `127.0.0.1:PORT` (urllib's
/// `fetch`, httpx's `fetch_httpx`): before warden read URLs as they do,
/// each was allowed by `allow mcp__py__fetch*` despite the deny on
/// `http://127.0.0.1:PORT/**`, and the server fetched the page.
#[test]
fn a_host_rule_holds_for_the_host_python_clients_reach() {
    let world = World::new();
    let port = serve_page();
    let p = port.to_string();
    let underscored = format!("{}_{}", &p[..1], &p[1..]);
    let attacks: [(&str, String); 9] = [
        ("fetch", format!("<URL:http://127.0.0.1:{port}/x>")),
        ("fetch", format!("URL:http://127.0.0.1:{port}/x")),
        ("fetch", format!("\u{a0}http://127.0.0.1:{port}/x")),
        ("fetch", format!("http://127.0.0.1%3a{port}/x")),
        ("fetch", format!("http://127.0.0.1:+{port}/x")),
        ("fetch", format!("http://localhost:{underscored}/x")),
        (
            "fetch_httpx",
            format!("http://evil.example\\@127.0.0.1:{port}/x"),
        ),
        ("fetch_httpx", format!("http://127.0.0.1: {port}/x")),
        ("fetch_httpx", format!("http://127.0.0.1:\u{ff10}{port}/x")),
    ];
    world.write_config(&json!({
        "mcpServers": {"py": fetching(&world, "py", port)},
        "permissions": {"allow": ["mcp__py__*"]},
        "policy": [],
    }));
    for (tool, url) in &attacks {
        let (code, report) = fetch_with(&world, "py", tool, url);
        assert_eq!(code, Some(0), "{report}");
        assert!(
            answer(&report).to_string().contains(PAGE),
            "control: {tool} should fetch {url:?}: {report}"
        );
    }
    world.write_config(&json!({
        "mcpServers": {"py": fetching(&world, "py", port)},
        "permissions": {
            "allow": ["mcp__py__fetch*"],
            "deny": [format!("mcp__py__fetch*(url: http://127.0.0.1:{port}/**)")],
        },
        "policy": [],
    }));
    for (tool, url) in &attacks {
        let (code, report) = fetch_with(&world, "py", tool, url);
        assert_denied(code, &report, "deny rule");
        assert!(
            !report.to_string().contains(PAGE),
            "{tool} {url:?}: {report}"
        );
    }
    // An allow on the host does not hold for a spelling some client reads
    // elsewhere: the rules stage asks (a deny with --ci) and says why.
    world.write_config(&json!({
        "mcpServers": {"py": fetching(&world, "py", port)},
        "permissions": {"allow": [format!("mcp__py__fetch_httpx(url: http://evil.example/**)")]},
        "policy": [],
    }));
    let url = format!("http://evil.example\\@127.0.0.1:{port}/x");
    let out = world.run(&[
        "call",
        "py",
        "fetch_httpx",
        "--ci",
        "--json",
        "--args",
        &json!({"url": url}).to_string(),
    ]);
    let report = stdout_json(&out);
    assert_eq!(out.status.code(), Some(3), "{report}");
    assert!(
        report.to_string().contains("Python's HTTP clients"),
        "{report}"
    );
    assert!(!report.to_string().contains(PAGE), "{report}");
}
