//! Issue 11, class 11, end to end: a token in an HTTP server's URL was
//! printed in full by an error log line. Now credentials in URLs (userinfo,
//! query values, fragments) are masked wherever a URL can be printed: log
//! lines (the libraries' own included), `mcp status`, errors, the audit log.

mod resolving_support;

use resolving_support::*;
use serde_json::json;

const QUERY_TOKEN: &str = "qtok-8d7e6f5a4b3c";
const USER_TOKEN: &str = "utok-1a2b3c4d5e6f";

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn tokens_in_server_urls_never_reach_logs_status_errors_or_audit() {
    let world = World::new();
    let port = closed_port();
    let ok_port = {
        // A listening socket that answers nothing useful: the client gets
        // an HTTP-level failure rather than a refused connection.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            for stream in l.incoming().flatten().take(20) {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = stream
                    .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n");
            }
        });
        port
    };
    world.write_config(&json!({
        "mcpServers": {
            "q": {"type": "http", "url": format!("http://127.0.0.1:{port}/mcp?token={QUERY_TOKEN}")},
            "u": {"type": "http", "url": format!("http://user:{USER_TOKEN}@127.0.0.1:{ok_port}/mcp")},
            "s": {"type": "sse", "url": format!("http://127.0.0.1:{ok_port}/sse?key={QUERY_TOKEN}#{USER_TOKEN}")},
        },
        "permissions": {"allow": ["mcp__q__*"]},
    }));
    let audit = world.path("audit.jsonl");
    let audit_arg = audit.to_string_lossy().into_owned();
    let mut outputs = Vec::new();
    for args in [
        vec!["-vvv", "mcp", "status", "--json"],
        vec!["-vvv", "mcp", "list", "--json"],
        vec!["-vvv", "--audit", &audit_arg, "call", "q", "x", "--json"],
        vec!["-vvv", "--log-format", "json", "call", "u", "x"],
    ] {
        let out = world
            .warden(&args)
            .env("RUST_LOG", "trace")
            .output()
            .expect("run");
        outputs.push((
            args.join(" "),
            format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ));
    }
    outputs.push((
        "audit".into(),
        std::fs::read_to_string(&audit).unwrap_or_default(),
    ));
    let mut saw_redacted = false;
    for (what, text) in &outputs {
        assert!(
            !text.contains(QUERY_TOKEN) && !text.contains(USER_TOKEN),
            "`{what}` printed a credential:\n{text}"
        );
        saw_redacted |= text.contains("[REDACTED]") || text.contains("<configured URL>");
    }
    assert!(saw_redacted, "the URLs were shown, masked: {outputs:?}");
    // The failure is still explained: which server, which host.
    let status = &outputs[0].1;
    assert!(status.contains("127.0.0.1"), "{status}");
}
