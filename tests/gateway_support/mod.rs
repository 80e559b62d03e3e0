//! Helpers for the gateway tests: a private world (config dir, HOME,
//! workspace in a temp folder), the real `warden gateway` process, and an
//! rmcp client that may or may not support elicitation.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, FormElicitationCapability,
    Implementation, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

#[path = "../cli_support/mod.rs"]
pub mod cli_support;

#[allow(unused_imports)]
pub use cli_support::{World, audit_lines, eventually};

/// The config every gateway test uses: `notes` and `fixture`, rules that
/// allow, ask and deny, and an audit log.
pub fn standard_config(world: &World) -> Value {
    json!({
        "mcpServers": {
            "notes": world.notes("notes"),
            "fixture": world.fixture(),
        },
        "permissions": {
            "allow": [
                "mcp__notes__read_note", "mcp__notes__list_notes",
                "mcp__fixture__echo", "mcp__fixture__fail", "mcp__fixture__rpc_error",
                "mcp__fixture__sleep", "mcp__fixture__add_tool", "mcp__fixture__added_tool"
            ],
            "ask": ["mcp__notes__add_note"],
            "deny": ["mcp__notes__delete_note", "mcp__fixture__echo(message: *secret*)"]
        },
        "audit": {"path": world.path("audit.jsonl")}
    })
}

pub fn audit_path(world: &World) -> PathBuf {
    world.path("audit.jsonl")
}

/// `warden gateway ARGS…` in `world`, as a tokio command with piped stdio.
pub fn gateway_command(world: &World, args: &[&str]) -> tokio::process::Command {
    gateway_command_with(world, &[], args)
}

/// `warden GLOBAL… gateway ARGS…`.
pub fn gateway_command_with(
    world: &World,
    global: &[&str],
    args: &[&str],
) -> tokio::process::Command {
    let std_cmd = world.warden(global);
    let mut cmd = tokio::process::Command::from(std_cmd);
    cmd.arg("gateway")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A test MCP client: declares elicitation only when it has an answer.
#[derive(Clone, Default)]
pub struct TestClient {
    /// What to answer to an elicitation (`None`: elicitation not supported).
    pub answer: Option<(ElicitationAction, Value)>,
    pub asked: Arc<Mutex<Vec<String>>>,
    pub list_changed: Arc<AtomicUsize>,
    /// Never answer an elicitation (the person walked away).
    pub hang: bool,
    /// Declare URL-mode elicitation too (with an answer only).
    pub url_mode: bool,
}

impl TestClient {
    pub fn plain() -> TestClient {
        TestClient::default()
    }

    pub fn answering(decision: &str) -> TestClient {
        TestClient {
            answer: Some((ElicitationAction::Accept, json!({ "decision": decision }))),
            ..TestClient::default()
        }
    }

    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }

    pub fn list_changed(&self) -> usize {
        self.list_changed.load(Ordering::SeqCst)
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.answer.is_some() && self.url_mode {
            let mut caps = ClientCapabilities::default();
            caps.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new())
                    .with_url(UrlElicitationCapability::new()),
            );
            caps
        } else if self.answer.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("gateway-test", "0.0.0"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let text = match &request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => format!(
                "{message}\n{}",
                serde_json::to_string(requested_schema).unwrap_or_default()
            ),
            other => format!("{other:?}"),
        };
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(text);
        }
        if self.hang {
            tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        }
        Ok(match &self.answer {
            Some((action, content)) => {
                ElicitResult::new(action.clone()).with_content(content.clone())
            }
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let params = CallToolRequestParams::new(name.to_string());
    match arguments {
        Value::Object(map) => params.with_arguments(map),
        _ => params,
    }
}

/// All text blocks of a result, joined.
pub fn text_of(result: &CallToolResult) -> String {
    let value = serde_json::to_value(result).unwrap_or_default();
    value["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// The venv of tests/python/setup-venv.sh (the official MCP Python SDK and
/// the conformance fixture server), made or reused.
pub fn python_venv() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/setup-venv.sh"))
        .output()
        .expect("run tests/python/setup-venv.sh");
    assert!(
        out.status.success(),
        "setup-venv.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The interpreter's prefix a venv links to (`home` in `pyvenv.cfg`): a
/// sandboxed venv python needs it granted.
pub fn interpreter_prefix(venv: &Path) -> PathBuf {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).expect("pyvenv.cfg");
    let home = cfg
        .lines()
        .find_map(|l| l.strip_prefix("home = "))
        .expect("home in pyvenv.cfg");
    Path::new(home.trim())
        .parent()
        .expect("a prefix")
        .to_path_buf()
}

/// A `warden gateway --stdio` process with a plain client on its stdio.
pub struct StdioGateway {
    pub client: rmcp::service::RunningService<RoleClient, TestClient>,
    pub child: tokio::process::Child,
    stderr: tokio::task::JoinHandle<String>,
}

impl StdioGateway {
    /// Spawns `cmd` (its stdin, stdout and stderr piped) and initialises a
    /// plain client over its stdio; stderr is collected until it exits.
    pub async fn spawn(mut cmd: tokio::process::Command) -> StdioGateway {
        let mut child = cmd.spawn().expect("spawn gateway");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let mut err = child.stderr.take().expect("stderr");
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut err, &mut text).await;
            text
        });
        let client = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            rmcp::ServiceExt::serve(TestClient::plain(), (stdout, stdin)),
        )
        .await
        .expect("initialize in time")
        .expect("initialize");
        StdioGateway {
            client,
            child,
            stderr,
        }
    }

    /// `fx__echo` of `message`.
    pub async fn echo(&self, message: &str) -> CallToolResult {
        self.client
            .call_tool(call("fx__echo", json!({ "message": message })))
            .await
            .expect("a result")
    }

    /// Disconnects the client: the gateway's exit status and stderr.
    pub async fn finish(mut self) -> (std::process::ExitStatus, String) {
        let _ = self.client.cancel().await;
        let status = tokio::time::timeout(std::time::Duration::from_secs(20), self.child.wait())
            .await
            .expect("the gateway exits after its client disconnects")
            .expect("wait");
        (status, self.stderr.await.unwrap_or_default())
    }
}

/// `request` records of `kind` in the audit log, each merged with its
/// `request_result` (as `result`).
pub fn requests(world: &World, kind: &str) -> Vec<Value> {
    let records = audit_lines(&audit_path(world));
    records
        .iter()
        .filter(|r| r["event"] == "request" && r["kind"] == kind)
        .map(|r| {
            let mut merged = r.clone();
            merged["result"] = records
                .iter()
                .find(|x| x["event"] == "request_result" && x["call_id"] == r["call_id"])
                .cloned()
                .unwrap_or(Value::Null);
            merged
        })
        .collect()
}

/// tests/python: the Python test servers and the SDK client.
pub fn python_scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

/// How the Python client starts `warden [GLOBAL…] gateway --stdio
/// [GATEWAY…]` for `world` (its `-- COMMAND…` target).
pub fn stdio_target(world: &World, global: &[&str], gateway: &[&str]) -> Vec<String> {
    let mut target = vec![
        "--".to_string(),
        cli_support::WARDEN.to_string(),
        "--config".into(),
        world.path("warden.json").display().to_string(),
        "--workspace".into(),
        world.workspace.display().to_string(),
    ];
    target.extend(global.iter().map(|a| a.to_string()));
    target.extend(["gateway".to_string(), "--stdio".to_string()]);
    target.extend(gateway.iter().map(|a| a.to_string()));
    target
}

/// The environment of the gateway the Python client starts (a plan's
/// `env`): `world`'s configuration folder, HOME and TMPDIR.
pub fn stdio_env(world: &World) -> Value {
    json!({
        "WARDEN_CONFIG_DIR": world.config_dir,
        "HOME": world.home,
        "TMPDIR": world.dir.path(),
    })
}

/// The official Python SDK client (tests/python/gateway_client.py)
/// running `plan` against the gateway at `target` (a URL and token, or
/// `-- COMMAND…` it starts, with [`stdio_env`] unless the plan has an
/// `env`); its JSON output.
pub async fn run_gateway_client(world: &World, plan: &Value, target: &[String]) -> Value {
    let mut plan = plan.clone();
    if plan.get("env").is_none() {
        plan["env"] = stdio_env(world);
    }
    let plan_file = world.path(&format!("plan-{}.json", uuid::Uuid::new_v4().simple()));
    std::fs::write(&plan_file, plan.to_string()).expect("write plan");
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(180),
        tokio::process::Command::new(python_venv().join("bin/python"))
            .arg(python_scripts().join("gateway_client.py"))
            .arg(&plan_file)
            .args(target)
            .env("HOME", &world.home)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the client finishes in time")
    .expect("run the python client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "client failed: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// `warden ARGS…` for `world` with no controlling terminal (`setsid`),
/// `stdin` piped in, no `WARDEN_MODEL`; its output once it exits.
pub fn run_detached(world: &World, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let plain = world.warden(args);
    let mut command = std::process::Command::new("setsid");
    command.arg(plain.get_program()).args(plain.get_args());
    for (key, value) in plain.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    let mut child = command
        .current_dir(&world.workspace)
        .env_remove("WARDEN_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

/// `warden gateway --listen 127.0.0.1:0 EXTRA…` for `world`, once it has
/// said where it listens, with the tokens it printed.
pub struct Listening {
    pub child: tokio::process::Child,
    pub url: String,
    /// The clients' bearer token the gateway printed (none with
    /// `--no-auth` or `--token-file`).
    pub token: Option<String>,
    /// The person's-client token (with `--ask-client`).
    pub ask_token: Option<String>,
}

impl Listening {
    pub async fn start(world: &World, extra: &[&str]) -> Listening {
        use tokio::io::AsyncBufReadExt;
        let mut args = vec!["--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = gateway_command(world, &args)
            .spawn()
            .expect("spawn gateway");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let (url, token, ask_token) =
            tokio::time::timeout(std::time::Duration::from_secs(60), async {
                let (mut token, mut ask_token) = (None, None);
                let mut seen = Vec::new();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Some(url) = line.strip_prefix("warden gateway: listening on ") {
                        return (url.trim().to_string(), token, ask_token);
                    }
                    if line.starts_with("warden gateway: bearer token") {
                        token = line.rsplit(' ').next().map(str::to_string);
                    }
                    if line.starts_with("warden gateway: ask-client token") {
                        ask_token = line.rsplit(' ').next().map(str::to_string);
                    }
                    seen.push(line);
                }
                panic!("the gateway never said where it listens: {seen:?}");
            })
            .await
            .expect("listening in time");
        // Keep draining stderr so the gateway never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Listening {
            child,
            url,
            token,
            ask_token,
        }
    }

    /// The clients' bearer token, which the gateway must have printed.
    pub fn bearer(&self) -> String {
        self.token.clone().expect("a bearer token")
    }

    /// The port in [`Listening::url`].
    pub fn port(&self) -> u16 {
        self.url
            .trim_end_matches("/mcp")
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in the url")
    }

    /// SIGTERM: the gateway stops its servers and exits cleanly, leaving
    /// no process behind.
    pub async fn stop(mut self, world: &World) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
        }
        let status = tokio::time::timeout(std::time::Duration::from_secs(20), self.child.wait())
            .await
            .expect("the gateway exits on SIGTERM")
            .expect("wait");
        assert!(status.success(), "{status:?}");
        assert!(
            eventually(10.0, || world.leftover_processes().is_empty()),
            "left behind: {:?}",
            world.leftover_processes()
        );
    }
}

/// `warden gateway --stdio` driven line by line (for messages an SDK
/// client would never send), initialized, its stdout read by a thread
/// into `lines` (each line that reads as JSON).
pub struct RawStdio {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    pub lines: std::sync::mpsc::Receiver<Value>,
}

impl RawStdio {
    /// Started as a client declaring `capabilities`, and initialized.
    pub fn start(world: &World, capabilities: Value) -> RawStdio {
        let mut raw = RawStdio::spawn(world);
        raw.initialize(capabilities);
        raw
    }

    /// Started, nothing sent yet.
    pub fn spawn(world: &World) -> RawStdio {
        use std::io::BufRead;
        let mut child = world
            .warden(&["gateway", "--stdio"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the gateway");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(value) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        RawStdio {
            child,
            stdin,
            lines,
        }
    }

    /// Initializes the session as a client declaring `capabilities`.
    pub fn initialize(&mut self, capabilities: Value) {
        let raw = self;
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": capabilities,
                               "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        );
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let left = until
                .checked_duration_since(std::time::Instant::now())
                .expect("an answer to initialize in time");
            let line = raw
                .lines
                .recv_timeout(left)
                .expect("an answer to initialize");
            if line["id"] == json!(0) {
                assert!(line.get("result").is_some(), "initialize: {line}");
                break;
            }
        }
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    }

    /// Writes `line` and a newline.
    pub fn send(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Closes stdin and waits for the gateway to end (killed after 10 s).
    pub fn stop(mut self) {
        drop(self.stdin.take());
        for _ in 0..200 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
