//! OAuth end to end with the real `warden` binary: warden's fixture server
//! served on 127.0.0.1 behind a small OAuth 2.1 authorization server and
//! bearer check written here (same origin; RFC 9728 protected-resource
//! metadata, RFC 8414 metadata, dynamic registration, authorization code
//! with PKCE S256 checked, the `resource` parameter, refresh tokens). The
//! browser is tests/fixtures/oauth/browser-follow.sh (curl following the
//! authorization URL, which this server approves at once).
//!
//! Proves: a server that needs a login says so and never prompts (also in
//! `--ci`); `warden mcp login` discovers, registers, sends PKCE, the
//! challenge's scope and the resource, waits for the redirect and stores
//! the tokens 0600 in a 0700 folder; `warden call` uses them; an expired
//! token is refreshed and the new one stored; a server echoing the token
//! back is not kept in the audit log; status and doctor report the login
//! without the token; logout deletes it; a forged redirect without the
//! login's `state` is turned away; protected-resource metadata naming
//! another resource is refused before any authorization request.

mod cli_support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::IntoResponse;
use cli_support::*;
use serde_json::{Value, json};

const SCOPE: &str = "notes:read";

#[derive(Default)]
struct Auth {
    base: Mutex<String>,
    /// `resource` the protected-resource metadata names, when not the server.
    resource_override: Mutex<Option<String>>,
    /// code → (code_challenge, redirect_uri, scope)
    codes: Mutex<HashMap<String, (String, String, String)>>,
    /// Access tokens the resource accepts.
    tokens: Mutex<Vec<String>>,
    refresh_tokens: Mutex<Vec<String>>,
    /// What happened, in order: `register`, `authorize QUERY`, `token
    /// GRANT`, `mcp TOKEN-OR-none`.
    log: Mutex<Vec<String>>,
    counter: Mutex<u32>,
}

impl Auth {
    fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
    fn next(&self, prefix: &str) -> String {
        let mut n = self.counter.lock().unwrap();
        *n += 1;
        format!("{prefix}-{}-{}", *n, uuid::Uuid::new_v4().simple())
    }
}

fn query(uri: &Uri) -> HashMap<String, String> {
    url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// BASE64URL(SHA256(verifier)) without padding (RFC 7636 S256).
fn s256(verifier: &str) -> String {
    let hex = warden_core::digest::sha256_hex(verifier.as_bytes());
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n =
            chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn issue(auth: &Auth, scope: &str) -> Value {
    let access = auth.next("at");
    let refresh = auth.next("rt");
    auth.tokens.lock().unwrap().push(access.clone());
    auth.refresh_tokens.lock().unwrap().push(refresh.clone());
    json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
           "refresh_token": refresh, "scope": scope})
}

fn routes(auth: Arc<Auth>, router: axum::Router, addr: SocketAddr) -> axum::Router {
    use axum::routing::{get, post};
    let base = format!("http://{addr}");
    *auth.base.lock().unwrap() = base.clone();
    let prm_url = format!("{base}/.well-known/oauth-protected-resource/mcp");

    let a = auth.clone();
    let challenge = format!("Bearer resource_metadata=\"{prm_url}\", scope=\"{SCOPE}\"");
    let guard = axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let a = a.clone();
            let challenge = challenge.clone();
            async move {
                let token = req
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(str::to_string);
                a.note(format!("mcp {}", token.as_deref().unwrap_or("none")));
                let valid = token
                    .as_ref()
                    .is_some_and(|t| a.tokens.lock().unwrap().contains(t));
                if !valid {
                    return (
                        StatusCode::UNAUTHORIZED,
                        [(header::WWW_AUTHENTICATE, challenge)],
                        "unauthorized",
                    )
                        .into_response();
                }
                // A hostile server: a request that says `ECHO_BEARER` is
                // answered with a JSON-RPC error quoting the token it came
                // with (what a log would then hold, unless scrubbed).
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20)
                    .await
                    .unwrap_or_default();
                if bytes.windows(11).any(|w| w == b"ECHO_BEARER") {
                    let id = serde_json::from_slice::<Value>(&bytes)
                        .ok()
                        .and_then(|v| v.get("id").cloned())
                        .unwrap_or(Value::Null);
                    let token = token.unwrap_or_default();
                    return axum::Json(json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32000, "message": format!("bad token {token}")}}))
                    .into_response();
                }
                next.run(axum::extract::Request::from_parts(parts, bytes.into()))
                    .await
            }
        },
    );

    let a = auth.clone();
    let b = base.clone();
    let prm = get(move || {
        let a = a.clone();
        let b = b.clone();
        async move {
            let resource = a
                .resource_override
                .lock()
                .unwrap()
                .clone()
                .unwrap_or(format!("{b}/mcp"));
            axum::Json(json!({"resource": resource, "authorization_servers": [b],
                              "scopes_supported": [SCOPE, "notes:write"]}))
        }
    });
    let b = base.clone();
    let metadata = get(move || {
        let b = b.clone();
        async move {
            axum::Json(json!({
                "issuer": b,
                "authorization_endpoint": format!("{b}/authorize"),
                "token_endpoint": format!("{b}/token"),
                "registration_endpoint": format!("{b}/register"),
                "revocation_endpoint": format!("{b}/revoke"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
            }))
        }
    });
    let a = auth.clone();
    let register = post(move |body: String| {
        let a = a.clone();
        async move {
            a.note("register".into());
            let request: Value = serde_json::from_str(&body).unwrap_or_default();
            (
                StatusCode::CREATED,
                axum::Json(json!({"client_id": "warden-e2e-client",
                                  "redirect_uris": request["redirect_uris"]})),
            )
        }
    });
    let a = auth.clone();
    let b = base.clone();
    let authorize = get(move |uri: Uri| {
        let a = a.clone();
        let b = b.clone();
        async move {
            a.note(format!("authorize {}", uri.query().unwrap_or("")));
            let q = query(&uri);
            let ok = q.get("response_type").map(String::as_str) == Some("code")
                && q.get("code_challenge_method").map(String::as_str) == Some("S256")
                && q.get("client_id").map(String::as_str) == Some("warden-e2e-client")
                && q.get("resource") == Some(&format!("{b}/mcp"));
            let (Some(redirect), Some(state), Some(challenge), true) = (
                q.get("redirect_uri"),
                q.get("state"),
                q.get("code_challenge"),
                ok,
            ) else {
                return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
            };
            let code = a.next("code");
            a.codes.lock().unwrap().insert(
                code.clone(),
                (
                    challenge.clone(),
                    redirect.clone(),
                    q.get("scope").cloned().unwrap_or_default(),
                ),
            );
            let mut location = url::Url::parse(redirect).unwrap();
            location
                .query_pairs_mut()
                .append_pair("code", &code)
                .append_pair("state", state);
            (
                StatusCode::FOUND,
                [(header::LOCATION, location.to_string())],
                "",
            )
                .into_response()
        }
    });
    let a = auth.clone();
    let b = base.clone();
    let token = post(move |headers: HeaderMap, body: String| {
        let a = a.clone();
        let b = b.clone();
        async move {
            let _ = headers;
            let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect();
            let grant = form.get("grant_type").cloned().unwrap_or_default();
            a.note(format!("token {grant}"));
            let bad = |why: &str| {
                (
                    StatusCode::BAD_REQUEST,
                    axum::Json(json!({"error": "invalid_grant", "error_description": why})),
                )
                    .into_response()
            };
            match grant.as_str() {
                "authorization_code" => {
                    let Some((challenge, redirect, scope)) = form
                        .get("code")
                        .and_then(|c| a.codes.lock().unwrap().remove(c))
                    else {
                        return bad("unknown code");
                    };
                    if form.get("code_verifier").map(|v| s256(v)) != Some(challenge) {
                        return bad("PKCE verifier does not match");
                    }
                    if form.get("redirect_uri") != Some(&redirect) {
                        return bad("redirect_uri differs");
                    }
                    if form.get("resource") != Some(&format!("{b}/mcp")) {
                        return bad("resource missing or wrong");
                    }
                    axum::Json(issue(&a, &scope)).into_response()
                }
                "refresh_token" => {
                    let known = form
                        .get("refresh_token")
                        .is_some_and(|r| a.refresh_tokens.lock().unwrap().contains(r));
                    if !known {
                        return bad("unknown refresh token");
                    }
                    axum::Json(issue(&a, SCOPE)).into_response()
                }
                _ => bad("unsupported grant"),
            }
        }
    });
    let a = auth.clone();
    let revoke = post(move |body: String| {
        let a = a.clone();
        async move {
            let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect();
            let known = form
                .get("token")
                .is_some_and(|t| a.refresh_tokens.lock().unwrap().contains(t));
            a.note(format!(
                "revoke {} known={known}",
                form.get("token_type_hint").cloned().unwrap_or_default()
            ));
            StatusCode::OK
        }
    });
    router
        .layer(guard)
        .route("/revoke", revoke)
        .route("/.well-known/oauth-protected-resource/mcp", prm)
        .route("/.well-known/oauth-authorization-server", metadata)
        .route("/register", register)
        .route("/authorize", authorize)
        .route("/token", token)
}

async fn protected_fixture(auth: Arc<Auth>) -> (String, warden::example_servers::HttpHandle) {
    let (addr, handle) = warden::example_servers::serve_http_wrapped(
        "fixture",
        &[],
        "127.0.0.1:0".parse().unwrap(),
        move |router, addr| routes(auth, router, addr),
    )
    .await
    .expect("serve");
    (format!("http://{addr}/mcp"), handle)
}

fn browser() -> String {
    format!(
        "{}/tests/fixtures/oauth/browser-follow.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn login(world: &World, name: &str) -> std::process::Output {
    world
        .warden(&["mcp", "login", name])
        .env("BROWSER", browser())
        .env("WARDEN_TEST_BROWSER_LOG", world.path("browser.log"))
        .output()
        .expect("run login")
}

fn token_file(world: &World, name: &str) -> std::path::PathBuf {
    world.config_dir.join("oauth").join(format!("{name}.json"))
}

fn stored_access_token(world: &World, name: &str) -> String {
    let file: Value =
        serde_json::from_slice(&std::fs::read(token_file(world, name)).expect("login file"))
            .expect("json");
    file["credentials"]["token_response"]["access_token"]
        .as_str()
        .expect("an access token")
        .to_string()
}

/// The stored login expired as far as warden knows, and `token` refused by
/// the server from now on: the next connection refreshes.
fn expire(file: &std::path::Path, auth: &Auth, token: &str) {
    let mut stored: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    stored["credentials"]["token_received_at"] = json!(1_000_000);
    std::fs::write(file, serde_json::to_vec(&stored).unwrap()).unwrap();
    auth.tokens.lock().unwrap().retain(|t| t != token);
}

/// `warden --ci call srv echo` with `message`.
fn call_echo(world: &World, message: &str) -> std::process::Output {
    let args = json!({ "message": message }).to_string();
    world.run(&["--ci", "call", "srv", "echo", "--args", &args])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_call_refresh_status_and_logout() {
    let auth = Arc::new(Auth::default());
    let (url, server) = protected_fixture(auth.clone()).await;
    let world = World::new();
    let audit = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {"srv": {"type": "http", "url": url, "timeout": 20}},
        "permissions": {"allow": ["mcp__srv__*"]},
        "audit": {"path": audit},
    }));

    // No login yet: the server's 401 becomes advice, and nothing prompts.
    let before = world.run(&[
        "--ci",
        "call",
        "srv",
        "echo",
        "--args",
        r#"{"message":"hi"}"#,
    ]);
    assert_ne!(before.status.code(), Some(0));
    assert!(
        stderr(&before).contains("run `warden mcp login srv`"),
        "{}",
        stderr(&before)
    );
    assert!(!auth.log().iter().any(|l| l.starts_with("authorize")));
    // `mcp status` says so in its JSON too: the server's challenge shows it
    // uses OAuth although no login is stored (and `oauth` is not set).
    let status = world.run(&["--json", "mcp", "status"]);
    let doc = stdout_json(&status);
    let srv = doc["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "srv"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        srv["oauth"],
        json!({"uses_oauth": true, "logged_in": false, "login": "missing"}),
        "{doc}"
    );
    assert!(
        srv["error"]
            .as_str()
            .is_some_and(|e| e.contains("warden mcp login srv")),
        "{srv}"
    );

    let out = login(&world, "srv");
    assert_eq!(out.status.code(), Some(0), "login: {}", stderr(&out));
    let log = auth.log();
    assert!(log.iter().any(|l| l == "register"), "{log:?}");
    let authorize = log
        .iter()
        .find_map(|l| l.strip_prefix("authorize "))
        .expect("an authorization request");
    let q: HashMap<String, String> = url::form_urlencoded::parse(authorize.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(q["scope"], SCOPE, "the challenge's scope: {q:?}");
    assert_eq!(q["code_challenge_method"], "S256");
    assert!(q["redirect_uri"].starts_with("http://127.0.0.1:"));
    assert!(q["redirect_uri"].ends_with("/callback"));
    assert!(log.iter().any(|l| l == "token authorization_code"));
    // The URL went to stderr and to $BROWSER, the tokens nowhere.
    let browsed = std::fs::read_to_string(world.path("browser.log")).expect("browser ran");
    assert!(browsed.contains("/authorize?"));
    let access = stored_access_token(&world, "srv");
    assert!(!stderr(&out).contains(&access));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&access));

    // 0600 file in a 0700 folder.
    let file = token_file(&world, "srv");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o700);

    // The call carries the token.
    let call = world.run(&[
        "--ci",
        "call",
        "srv",
        "echo",
        "--args",
        r#"{"message":"hi"}"#,
    ]);
    assert_eq!(call.status.code(), Some(0), "{}", stderr(&call));
    assert!(String::from_utf8_lossy(&call.stdout).contains("hi"));
    assert!(!stderr(&call).contains(&access));
    assert!(auth.log().contains(&format!("mcp {access}")));
    // The token in a call's arguments and echoed in its result (a server
    // that sends it back, as a hostile one might): the audit log keeps
    // neither. (`warden call` prints a result exactly as the server sent
    // it, CONTRACT §2, to the person who owns the login; what a model is
    // given is scrubbed like every configured secret.)
    let echo = json!({"message": format!("leak {access}")}).to_string();
    let call = world.run(&["--ci", "call", "srv", "echo", "--args", &echo]);
    assert_eq!(call.status.code(), Some(0), "{}", stderr(&call));
    assert!(!stderr(&call).contains(&access));
    let log_text = std::fs::read_to_string(&audit).expect("audit log");
    assert!(log_text.contains("\"tool_call\""));
    assert!(log_text.contains("leak"));
    assert!(!log_text.contains(&access), "the token is in the audit log");

    // Expired (as far as warden knows) and refused by the server from now
    // on: warden refreshes, stores the new token and uses it.
    expire(&file, &auth, &access);
    let again = call_echo(&world, "again");
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(auth.log().iter().any(|l| l == "token refresh_token"));
    let fresh = stored_access_token(&world, "srv");
    assert_ne!(fresh, access, "the refreshed token was not stored");
    assert!(auth.log().contains(&format!("mcp {fresh}")));
    assert_eq!(mode(&file), 0o600);

    // Refreshed again in the middle of a call to a server that quotes the
    // token it was sent in its error: the new token, unknown when the
    // session (and its audit log) opened, reaches neither stderr nor the
    // audit log.
    expire(&file, &auth, &fresh);
    let quoted = call_echo(&world, "ECHO_BEARER");
    assert_ne!(quoted.status.code(), Some(0));
    let newest = stored_access_token(&world, "srv");
    assert_ne!(newest, fresh, "the second refresh was not stored");
    assert!(auth.log().contains(&format!("mcp {newest}")));
    assert!(stderr(&quoted).contains("bad token"), "{}", stderr(&quoted));
    assert!(!stderr(&quoted).contains(&newest), "{}", stderr(&quoted));
    let log_text = std::fs::read_to_string(&audit).expect("audit log");
    assert!(log_text.contains("bad token [REDACTED]"), "{log_text}");
    assert!(
        !log_text.contains(&newest),
        "the refreshed token is in the audit log"
    );

    // Status and doctor report the login, never the token.
    let status = world.run(&["--json", "mcp", "status"]);
    let doc = stdout_json(&status);
    let srv = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "srv")
        .unwrap()
        .clone();
    assert_eq!(srv["oauth"]["uses_oauth"], true, "{srv}");
    assert_eq!(srv["oauth"]["logged_in"], true, "{srv}");
    assert_eq!(srv["state"], "connected", "{srv}");
    let doctor = world.run(&["--json", "doctor"]);
    let doctor_text = String::from_utf8_lossy(&doctor.stdout).into_owned();
    let checks = stdout_json(&doctor)["checks"].clone();
    let login_check = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "login srv")
        .unwrap_or_else(|| panic!("no login check: {checks}"))
        .clone();
    assert_eq!(login_check["status"], "ok", "{login_check}");
    for text in [
        String::from_utf8_lossy(&status.stdout).into_owned(),
        stderr(&status),
        doctor_text,
        stderr(&doctor),
    ] {
        assert!(!text.contains(&fresh) && !text.contains(&access));
    }

    // Logout revokes the refresh token at the server (RFC 7009) and
    // deletes the login; the next call asks for a login again.
    let out = world.run(&["--json", "mcp", "logout", "srv"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["action"], "revoked");
    assert!(
        auth.log()
            .contains(&"revoke refresh_token known=true".to_string()),
        "{:?}",
        auth.log()
    );
    assert!(!file.exists());
    let again = stdout_json(&world.run(&["--json", "mcp", "logout", "srv"]));
    assert_eq!(again["action"], "not_logged_in");
    let after = world.run(&[
        "--ci",
        "call",
        "srv",
        "echo",
        "--args",
        r#"{"message":"x"}"#,
    ]);
    assert_ne!(after.status.code(), Some(0));
    assert!(
        stderr(&after).contains("run `warden mcp login srv`"),
        "{}",
        stderr(&after)
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_redirect_without_the_state_is_turned_away() {
    let auth = Arc::new(Auth::default());
    let (url, server) = protected_fixture(auth.clone()).await;
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"srv": {"type": "http", "url": url, "timeout": 20, "oauth": true}},
        "permissions": {"allow": ["mcp__srv__*"]},
    }));
    let forge_log = world.path("forged.log");
    let out = world
        .warden(&["mcp", "login", "srv"])
        .env(
            "BROWSER",
            format!(
                "{}/tests/fixtures/oauth/browser-forge-then-follow.sh",
                env!("CARGO_MANIFEST_DIR")
            ),
        )
        .env("WARDEN_TEST_FORGE_LOG", &forge_log)
        .output()
        .expect("run login");
    // Both forgeries were answered 400 and ignored; the real redirect that
    // followed completed the login with the real code.
    let statuses = std::fs::read_to_string(&forge_log).expect("the forger ran");
    assert_eq!(
        statuses.lines().collect::<Vec<_>>(),
        ["400", "400"],
        "{statuses}"
    );
    assert_eq!(out.status.code(), Some(0), "login: {}", stderr(&out));
    let exchanges = auth
        .log()
        .iter()
        .filter(|l| *l == "token authorization_code")
        .count();
    assert_eq!(exchanges, 1, "{:?}", auth.log());
    let call = world.run(&[
        "--ci",
        "call",
        "srv",
        "echo",
        "--args",
        r#"{"message":"ok"}"#,
    ]);
    assert_eq!(call.status.code(), Some(0), "{}", stderr(&call));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_login_fails_clearly_in_ci_without_contacting_the_server() {
    let auth = Arc::new(Auth::default());
    let (url, server) = protected_fixture(auth.clone()).await;
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"srv": {"type": "http", "url": url, "timeout": 20, "oauth": true}},
        "permissions": {"allow": ["mcp__srv__*"]},
    }));
    let out = world.run(&["--ci", "--json", "call", "srv", "echo", "--args", "{}"]);
    assert_ne!(out.status.code(), Some(0));
    let report = stdout_json(&out);
    let error = report["error"].as_str().unwrap_or_default();
    assert!(error.contains("needs an OAuth login"), "{report}");
    assert!(error.contains("warden mcp login srv"), "{report}");
    assert!(auth.log().is_empty(), "contacted: {:?}", auth.log());
    // `mcp login` itself needs a person: not in --ci.
    let login = world.run(&["--ci", "mcp", "login", "srv"]);
    assert_eq!(login.status.code(), Some(2), "{}", stderr(&login));
    let status = stdout_json(&world.run(&["--json", "mcp", "status"]));
    assert_eq!(
        status["servers"][0]["oauth"]["logged_in"], false,
        "{status}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_naming_another_resource_is_refused_before_authorizing() {
    let auth = Arc::new(Auth::default());
    *auth.resource_override.lock().unwrap() = Some("https://evil.example/mcp".into());
    let (url, server) = protected_fixture(auth.clone()).await;
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"srv": {"type": "http", "url": url, "timeout": 20}},
    }));
    let out = login(&world, "srv");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr(&out).to_lowercase().contains("mismatch"),
        "{}",
        stderr(&out)
    );
    let log = auth.log();
    assert!(
        !log.iter()
            .any(|l| l.starts_with("authorize") || l == "register"),
        "{log:?}"
    );
    assert!(
        !world.path("browser.log").exists(),
        "the browser was opened"
    );
    assert!(!token_file(&world, "srv").exists());
    server.shutdown().await;
}

#[test]
fn oauth_config_is_validated_with_file_and_key() {
    let world = World::new();
    for (oauth, expect) in [
        (json!({"client_secret": "x"}), "client_secret"),
        (json!({"redirect_port": 70000}), "redirect_port"),
        (json!({"scopes": ["a b"]}), "scopes"),
        (
            json!({"client_metadata_url": "http://example.com/c.json"}),
            "client_metadata_url",
        ),
        (json!({"colour": 1}), "colour"),
        (json!("yes"), "oauth"),
    ] {
        world.write_config(&json!({
            "mcpServers": {"srv": {"type": "http", "url": "http://127.0.0.1:1/mcp", "oauth": oauth}},
        }));
        let out = world.run(&["mcp", "list"]);
        assert_eq!(out.status.code(), Some(2), "{oauth}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("warden.json") && err.contains(expect),
            "{oauth}: {err}"
        );
    }
    world.write_config(&json!({
        "mcpServers": {"s": {"type": "sse", "url": "http://127.0.0.1:1/sse", "oauth": true}},
    }));
    let out = world.run(&["mcp", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("only for streamable-HTTP"),
        "{}",
        stderr(&out)
    );
}
