//! `warden gateway --listen`: streamable HTTP at `/mcp`, with rmcp as the
//! client, the Host/Origin checks, and the loopback-only default.

mod gateway_support;

use std::time::Duration;

use gateway_support::{
    Listening, TestClient, World, call, eventually, gateway_command, is_error, standard_config,
    text_of,
};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

async fn listen(world: &World) -> Listening {
    listen_with(world, &[]).await
}

async fn listen_with(world: &World, extra: &[&str]) -> Listening {
    // Every test here makes an HTTP client after this; reqwest is built
    // without a default crypto provider, so install one whatever the order
    // the tests run in.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Listening::start(world, extra).await
}

fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("reqwest client")
}

fn initialize_body() -> String {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}
        }
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_client_uses_the_gateway_over_streamable_http() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    // This client is the person's (it presents the ask-client token), so
    // it is asked by elicitation.
    let gateway = listen_with(&world, &["--ask-client"]).await;
    let _ = rustls::crypto::ring::default_provider().install_default();

    let handler = TestClient::answering("allow_once");
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone())
            .auth_header(gateway.ask_token.clone().expect("ask-client token")),
    );
    let client = handler
        .clone()
        .serve(transport)
        .await
        .expect("initialize over HTTP");
    let tools = client.list_all_tools().await.expect("list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"notes__read_note"), "{names:?}");
    assert!(!names.contains(&"notes__delete_note"), "{names:?}");

    let result = client
        .call_tool(call("notes__read_note", json!({"id": 2})))
        .await
        .expect("read_note");
    assert!(text_of(&result).contains("Milk"), "{result:?}");

    let result = client
        .call_tool(call("fixture__echo", json!({"message": "my secret"})))
        .await
        .expect("echo");
    assert!(is_error(&result));
    assert!(text_of(&result).contains("rules stage"));

    // Elicitation over HTTP.
    let result = client
        .call_tool(call("notes__add_note", json!({"title": "h", "body": "b"})))
        .await
        .expect("add_note");
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(handler.asked().len(), 1);

    // list_changed reaches an HTTP client too.
    client
        .call_tool(call("fixture__add_tool", json!({})))
        .await
        .expect("add_tool");
    assert!(
        eventually(10.0, || handler.list_changed() > 0),
        "no list_changed over HTTP"
    );
    let _ = client.cancel().await;
    gateway.stop(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_host_or_origin_is_refused_with_403() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let gateway = listen(&world).await;
    let http = http_client();
    let token = gateway.token.clone().expect("token");
    let post = |host: Option<&str>, origin: Option<&str>| {
        let mut request = http
            .post(&gateway.url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize_body());
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let bad_host = post(Some("evil.example"), None).await.expect("send");
    assert_eq!(bad_host.status().as_u16(), 403);
    let rebinding = post(Some(&format!("evil.example:{}", gateway.port())), None)
        .await
        .expect("send");
    assert_eq!(rebinding.status().as_u16(), 403);
    let bad_origin = post(None, Some("http://evil.example")).await.expect("send");
    assert_eq!(bad_origin.status().as_u16(), 403);
    // The same request from a loopback origin is served.
    let good = post(None, Some(&format!("http://127.0.0.1:{}", gateway.port())))
        .await
        .expect("send");
    assert_eq!(good.status().as_u16(), 200);
    gateway.stop(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warden_itself_can_use_the_gateway_as_an_http_upstream() {
    // warden's own client negotiates with `server/discover` first and falls
    // back to the session protocol the gateway speaks.
    let world = World::new();
    world.write_config(&standard_config(&world));
    let gateway = listen(&world).await;
    let outer = World::new();
    outer.write_config(&json!({
        "mcpServers": {"gw": {"type": "http", "url": gateway.url,
                              "headers": {"Authorization": format!("Bearer {}", gateway.token.clone().expect("token"))}}},
        "permissions": {"allow": ["mcp__gw__*"]},
    }));
    let out = tokio::task::spawn_blocking(move || {
        let out = outer.run(&[
            "call",
            "gw",
            "notes__read_note",
            "--json",
            "--args",
            r#"{"id": 2}"#,
        ]);
        drop(outer);
        out
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Milk, bread, coffee."), "{stdout}");
    gateway.stop(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_remote_listens_and_warns_about_plain_http() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let mut child = gateway_command(
        &world,
        &["--listen", "0.0.0.0:0", "--allow-remote", "--no-auth"],
    )
    .spawn()
    .expect("spawn gateway");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let seen = tokio::time::timeout(Duration::from_secs(60), async {
        let mut seen = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            let done = line.contains("plain HTTP");
            seen.push(line);
            if done {
                break;
            }
        }
        seen
    })
    .await
    .expect("stderr in time");
    let text = seen.join("\n");
    assert!(text.contains("listening on http://0.0.0.0:"), "{text}");
    assert!(
        text.contains("NOT authenticated"),
        "--no-auth is loud: {text}"
    );
    assert!(text.contains("plain HTTP"), "{text}");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let gateway = Listening {
        child,
        url: String::new(),
        token: None,
        ask_token: None,
    };
    gateway.stop(&world).await;
}

/// Class 10 of issue 11: `--listen` had no authentication. A request
/// without the bearer token (or with a wrong one) is refused with 401
/// before anything else, even before the Host/Origin checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_token_are_refused_before_anything_else() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let gateway = listen(&world).await;
    let token = gateway
        .token
        .clone()
        .expect("a token is generated by default");
    assert!(token.len() >= 32, "{token}");
    let http = http_client();
    let post = |auth: Option<String>, host: Option<&str>| {
        let mut request = http
            .post(&gateway.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(initialize_body());
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        request.send()
    };
    for auth in [
        None,
        Some("Bearer wrong".to_string()),
        Some(format!("Bearer {}x", token)),
        Some(format!("Basic {token}")),
        Some(token.clone()),
    ] {
        let r = post(auth.clone(), None).await.expect("send");
        assert_eq!(r.status().as_u16(), 401, "{auth:?}");
        assert!(r.headers().contains_key("www-authenticate"));
    }
    // 401, not 403: the token is checked before the Host header.
    let r = post(None, Some("evil.example")).await.expect("send");
    assert_eq!(r.status().as_u16(), 401);
    let r = post(Some(format!("Bearer {token}")), Some("evil.example"))
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 403);
    let r = post(Some(format!("bearer {token}")), None)
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 200);
    // No rmcp client gets in without it either.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone()),
    );
    assert!(TestClient::plain().serve(transport).await.is_err());
    gateway.stop(&world).await;
}

/// `--token-file`: the operator's token; the file must be private.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_sets_the_token() {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new();
    world.write_config(&standard_config(&world));
    let file = world.path("token");
    std::fs::write(&file, "operator-chosen-token-0123456789\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = world.run(&[
        "gateway",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("chmod 600"));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let gateway = listen_with(&world, &["--token-file", file.to_str().unwrap()]).await;
    assert_eq!(gateway.token, None, "a token from a file is never printed");
    // reqwest needs a crypto provider; do not depend on another test
    // having installed it first.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone())
            .auth_header("operator-chosen-token-0123456789"),
    );
    let client = TestClient::plain()
        .serve(transport)
        .await
        .expect("initialize");
    let result = client
        .call_tool(call("notes__read_note", json!({"id": 2})))
        .await
        .expect("read_note");
    assert!(text_of(&result).contains("Milk"), "{result:?}");
    let _ = client.cancel().await;
    gateway.stop(&world).await;
}

/// Class 10 of issue 11: the client that made the call answered its own
/// `ask`. Now only the client presenting the ask-client token is asked; an
/// ordinary client's `ask` is denied with a reason saying no one could be
/// asked, even though it declares elicitation and would say yes; and it
/// cannot join the person's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_marked_client_is_asked() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let gateway = listen_with(&world, &["--ask-client"]).await;
    let ask_token = gateway.ask_token.clone().expect("ask-client token printed");
    let token = gateway.token.clone().expect("token");
    assert_ne!(ask_token, token);

    let eager = TestClient::answering("allow_once");
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone())
            .auth_header(token.clone()),
    );
    let client = eager.clone().serve(transport).await.expect("initialize");
    let result = client
        .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"})))
        .await
        .expect("add_note");
    assert!(is_error(&result), "{result:?}");
    assert!(
        eager.asked().is_empty(),
        "the caller was asked: {:?}",
        eager.asked()
    );
    assert!(
        text_of(&result).contains("no one could be asked"),
        "{}",
        text_of(&result)
    );
    let _ = client.cancel().await;

    let person = TestClient::answering("allow_once");
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone())
            .auth_header(ask_token.clone()),
    );
    let client = person.clone().serve(transport).await.expect("initialize");
    let result = client
        .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"})))
        .await
        .expect("add_note");
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(person.asked().len(), 1);
    let _ = client.cancel().await;
    gateway.stop(&world).await;
}

/// A session belongs to the token that opened it: the ordinary token
/// cannot post into the person's session (to answer its questions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_bound_to_their_token() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let gateway = listen_with(&world, &["--ask-client"]).await;
    let (token, ask_token) = (
        gateway.token.clone().unwrap(),
        gateway.ask_token.clone().unwrap(),
    );
    let http = http_client();
    let opened = http
        .post(&gateway.url)
        .bearer_auth(&ask_token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize_body())
        .send()
        .await
        .expect("initialize");
    assert_eq!(opened.status().as_u16(), 200);
    let session = opened
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("session id")
        .to_string();
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}).to_string();
    let hijack = http
        .post(&gateway.url)
        .bearer_auth(&token)
        .header("mcp-session-id", &session)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(ping)
        .send()
        .await
        .expect("send");
    assert_eq!(hijack.status().as_u16(), 403);
    gateway.stop(&world).await;
}

#[test]
fn a_non_loopback_address_needs_allow_remote() {
    let world = World::new();
    world.write_config(&standard_config(&world));
    let out = world.run(&["gateway", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-remote"), "{stderr}");
    assert!(world.leftover_processes().is_empty());

    let out = world.run(&["gateway"]);
    assert_eq!(out.status.code(), Some(2));
    let out = world.run(&["gateway", "--stdio", "--allow-host", "example.org"]);
    assert_eq!(out.status.code(), Some(2));
    let out = world.run(&["gateway", "--stdio", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The gateway's `--token-file` lets any client in. A sandboxed server
/// whose read grant covers it must not read it: the same `cat` run
/// without the sandbox prints the token; through the gateway it is
/// refused, and the rest of the grant stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cannot_read_the_gateway_token_file_inside_its_grant() {
    use std::os::unix::fs::PermissionsExt;
    const TOKEN: &str = "operator-token-CANARY-5b1e0c9d";
    let world = World::new();
    let file = world.path("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(world.path("beside.txt"), "readable-beside\n").unwrap();
    let script = format!(
        "cat {0}; echo rc=$?; cat {1}; wc -c < {0}",
        file.display(),
        world.path("beside.txt").display()
    );
    // Without the sandbox, the file is there to read.
    let plain = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("sh");
    assert!(String::from_utf8_lossy(&plain.stdout).contains(TOKEN));

    world.write_config(&json!({
        "mcpServers": {"hostile": {
            "command": gateway_support::cli_support::WARDEN,
            "args": ["__hostile-server", world.marker.as_str()],
            "sandbox": {"read": [world.dir.path()]}
        }},
        "permissions": {"allow": ["mcp__hostile__spawn_shell"]},
        // The sandbox is under test, not the policy (which asks about
        // the `?` of `$?`).
        "policy": []
    }));
    let gateway = listen_with(&world, &["--token-file", file.to_str().unwrap()]).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.clone()).auth_header(TOKEN),
    );
    let client = TestClient::plain()
        .serve(transport)
        .await
        .expect("initialize");
    let result = client
        .call_tool(call("hostile__spawn_shell", json!({"command": script})))
        .await
        .expect("spawn_shell");
    let said = text_of(&result);
    assert!(!is_error(&result), "{said}");
    assert!(!said.contains(TOKEN), "{said}");
    assert!(said.contains("Permission denied"), "{said}");
    assert!(said.contains("readable-beside"), "{said}");
    let _ = client.cancel().await;
    gateway.stop(&world).await;
    // The token file is untouched.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{TOKEN}\n")
    );
}
