//! A server's questions at the terminal (CONTRACT §8): its elicitation
//! during `warden call` or in the repl is put to the person at the
//! controlling terminal (a real pseudo-terminal here), or answered from an
//! `--answers` file given explicitly; with neither it is declined, with the
//! reason recorded. An `ask` about its sampling in `warden run` is put to
//! the person the same way. The server is the Python
//! conformance fixture (tests/python/conformance_fixture_server.py, official
//! MCP SDK), sandboxed, whose tools elicit and report the answer they got.
//!
//! Checked: the answer that reaches the server (defaults applied for an
//! accept that leaves fields out, SEP-1034), an answer that does not fit
//! the requested schema never sent, the audit records (`request` written
//! ahead, `request_result` with the answer's digest, `answered_by`, and
//! never the answer's content; `warden audit verify` passes), and a
//! hostile message's escape sequences never reaching the terminal raw.

mod gateway_support;

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use gateway_support::{World, audit_lines, interpreter_prefix, python_venv};
use serde_json::{Value, json};

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

/// The conformance fixture as server `fx`, its tools allowed.
fn write_config(world: &World, permissions: Value) {
    let venv = python_venv();
    world.write_config(&json!({
        "mcpServers": {"fx": {
            "command": venv.join("bin/python"),
            "args": [scripts().join("conformance_fixture_server.py"), "--marker", world.marker],
            "timeout": 30,
            "sandbox": {"read": [venv, interpreter_prefix(&venv), scripts()]}
        }},
        "permissions": permissions,
        "audit": {"path": world.path("audit.jsonl")}
    }));
}

fn allow_tools() -> Value {
    json!({"allow": ["mcp__fx__*"]})
}

/// `warden ARGS…` without a controlling terminal (`setsid`), so nothing
/// can be asked at a terminal.
fn run_detached(world: &World, args: &[&str]) -> Output {
    let plain = world.warden(args);
    let mut command = Command::new("setsid");
    command.arg(plain.get_program()).args(plain.get_args());
    for (key, value) in plain.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    command
        .current_dir(&world.workspace)
        .stdin(Stdio::null())
        .output()
        .expect("run warden")
}

fn write_answers(world: &World, answers: Value) -> PathBuf {
    let path = world.path("answers.json");
    std::fs::write(&path, answers.to_string()).expect("write answers");
    path
}

/// The elicitation's `request` and `request_result` records.
fn elicitation_records(world: &World) -> (Value, Option<Value>) {
    let records = audit_lines(&world.path("audit.jsonl"));
    let request = records
        .iter()
        .find(|r| r["event"] == "request" && r["kind"] == "elicitation")
        .cloned()
        .unwrap_or_else(|| panic!("no elicitation request record: {records:#?}"));
    let result = records
        .iter()
        .find(|r| r["event"] == "request_result" && r["call_id"] == request["call_id"])
        .cloned();
    (request, result)
}

fn verify_audit(world: &World) {
    let audit = world.path("audit.jsonl");
    let out = world.run(&["audit", "verify", audit.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "audit verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_accept_from_the_answers_file_takes_the_schemas_defaults() {
    let world = World::new();
    write_config(&world, allow_tools());
    // `name` given (a value found nowhere else), every other field left to
    // its default.
    let answers = write_answers(
        &world,
        json!([{"action": "accept", "content": {"name": "Ada-canary-7f3"}, "server": "fx",
                "message": "defaults given"}]),
    );
    let out = run_detached(
        &world,
        &[
            "call",
            "fx",
            "test_elicitation_sep1034_defaults",
            "--answers",
            answers.to_str().expect("utf-8"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reported = stdout
        .split("content=")
        .nth(1)
        .map(str::trim)
        .unwrap_or_default();
    let content: Value = serde_json::from_str(reported).unwrap_or(Value::Null);
    assert!(stdout.contains("action=accept"), "{stdout}");
    assert_eq!(
        content,
        json!({"name": "Ada-canary-7f3", "age": 30, "score": 95.5, "status": "active", "verified": true}),
        "{stdout}"
    );

    let (request, result) = elicitation_records(&world);
    assert_eq!(request["outcome"], "pending");
    assert_eq!(request["target"], "elicitation__fx");
    assert_eq!(request["arguments"]["mode"], "form");
    let result = result.expect("a request_result");
    assert_eq!(result["outcome"], "ok");
    assert_eq!(
        result["answered_by"],
        format!("file:{}", answers.display()),
        "{result}"
    );
    assert_eq!(result["result_sha256"].as_str().map(str::len), Some(64));
    let log = std::fs::read_to_string(world.path("audit.jsonl")).expect("audit");
    // The tool's result (which echoes the answer) is only a digest too.
    assert!(
        !log.contains("Ada-canary-7f3"),
        "the answer's content is in the log"
    );
    verify_audit(&world);
    let audit = world.path("audit.jsonl");
    let shown = world.run(&["audit", "show", audit.to_str().expect("utf-8")]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("ok (by file:/"), "{shown}");
}

#[test]
fn an_answer_that_does_not_fit_the_schema_is_never_sent() {
    let world = World::new();
    write_config(&world, allow_tools());
    let answers = write_answers(
        &world,
        json!([{"action": "accept", "content": {"username": 42, "email": "a@example.com"}}]),
    );
    let out = run_detached(
        &world,
        &[
            "call",
            "fx",
            "test_elicitation",
            "--args",
            r#"{"message": "who?"}"#,
            "--answers",
            answers.to_str().expect("utf-8"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("action=decline"), "{stdout}{stderr}");
    assert!(!stdout.contains("a@example.com"), "{stdout}");
    assert!(stderr.contains("does not fit"), "{stderr}");
    let (request, result) = elicitation_records(&world);
    assert_eq!(request["outcome"], "pending");
    let result = result.expect("a request_result");
    assert_eq!(result["outcome"], "cancelled", "{result}");
    assert!(
        result["error"]
            .as_str()
            .is_some_and(|e| e.contains("`username`") && e.contains("does not fit")),
        "{result}"
    );
    assert!(result.get("answered_by").is_none(), "{result}");
    verify_audit(&world);
}

#[test]
fn with_no_terminal_and_no_answers_file_it_is_declined_with_the_reason() {
    let world = World::new();
    write_config(&world, allow_tools());
    let out = run_detached(
        &world,
        &[
            "call",
            "fx",
            "test_elicitation",
            "--args",
            r#"{"message": "who?"}"#,
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("action=decline"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (request, result) = elicitation_records(&world);
    assert!(result.is_none(), "declined unasked: nothing written ahead");
    assert_eq!(request["outcome"], "denied");
    assert!(
        request["error"]
            .as_str()
            .is_some_and(|e| e.contains("no terminal") && e.contains("--answers")),
        "{request}"
    );

    // --ci: an `ask` is a deny, so even an answers file is not consulted.
    let world = World::new();
    write_config(&world, allow_tools());
    let answers = write_answers(&world, json!([{"action": "accept", "content": {}}]));
    let out = run_detached(
        &world,
        &[
            "--ci",
            "call",
            "fx",
            "test_elicitation_sep1034_defaults",
            "--answers",
            answers.to_str().expect("utf-8"),
        ],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("action=decline"));
    let (request, _) = elicitation_records(&world);
    assert_eq!(request["outcome"], "denied");
    assert_eq!(request["decision"]["effect"], "deny");

    // --ci with an explicit allow rule: the answers file answers.
    let world = World::new();
    write_config(&world, json!({"allow": ["mcp__fx__*", "elicitation__fx"]}));
    let answers = write_answers(&world, json!([{"action": "accept", "content": {}}]));
    let out = run_detached(
        &world,
        &[
            "--ci",
            "call",
            "fx",
            "test_elicitation_sep1034_defaults",
            "--answers",
            answers.to_str().expect("utf-8"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("action=accept"), "{stdout}");
    let (_, result) = elicitation_records(&world);
    assert!(
        result.expect("a request_result")["answered_by"]
            .as_str()
            .is_some_and(|by| by.starts_with("file:/"))
    );
}

/// A server could put elicitation after elicitation to the person, asking
/// again after every decline for as long as it ran, until someone said
/// yes: there was no bound. Now at most `elicitation.max_requests` per
/// server and session are passed on; later ones are declined unasked,
/// with the reason recorded.
#[test]
fn elicitations_past_the_servers_limit_are_declined_unasked() {
    let world = World::new();
    let venv = python_venv();
    world.write_config(&json!({
        "mcpServers": {"fx": {
            "command": venv.join("bin/python"),
            "args": [scripts().join("conformance_fixture_server.py"), "--marker", world.marker],
            "timeout": 30,
            "elicitation": {"max_requests": 1},
            "sandbox": {"read": [venv, interpreter_prefix(&venv), scripts()]}
        }},
        "permissions": allow_tools(),
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let answers = write_answers(
        &world,
        json!([{"action": "decline", "server": "fx"}, {"action": "accept", "server": "fx", "content": {}}]),
    );
    let call = json!({"name": "mcp__fx__test_elicitation", "arguments": {"message": "who?"}});
    let script = world.path("script.json");
    std::fs::write(
        &script,
        json!([{"tool_calls": [call]}, {"tool_calls": [call]}, {"text": "done"}]).to_string(),
    )
    .expect("script");
    let model = format!("scripted:{}", script.display());
    let out = run_detached(
        &world,
        &[
            "--model",
            &model,
            "run",
            "--task",
            "go",
            "--answers",
            answers.to_str().expect("utf-8"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("done"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = audit_lines(&world.path("audit.jsonl"));
    let requests: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "request" && r["kind"] == "elicitation")
        .collect();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(
        requests[1]["outcome"], "denied",
        "asked again: {}",
        requests[1]
    );
    assert!(
        requests[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("elicitation.max_requests (1) are used up")),
        "{}",
        requests[1]
    );
    let answered = records
        .iter()
        .filter(|r| {
            r["event"] == "request_result" && requests.iter().any(|q| q["call_id"] == r["call_id"])
        })
        .count();
    assert_eq!(answered, 1, "{records:#?}");
    verify_audit(&world);
}

/// Every byte the terminal received (escape sequences included), and
/// whether it has closed.
type Screen = Arc<(Mutex<(Vec<u8>, bool)>, Condvar)>;

/// A pseudo-terminal whose slave is warden's controlling terminal; the
/// screen keeps every byte (escape sequences included) as received.
struct Pty {
    child: std::process::Child,
    master: std::fs::File,
    screen: Screen,
    seen: usize,
    /// warden has exited (else it is killed when the test ends, failed).
    done: bool,
}

impl Drop for Pty {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Pty {
    fn spawn(world: &World, args: &[&str]) -> Pty {
        let pty = nix::pty::openpty(None, None).expect("openpty");
        // Neither end may leak into warden (or another test's child): a
        // warden holding its own master would never see the terminal close.
        for fd in [&pty.master, &pty.slave] {
            nix::fcntl::fcntl(
                fd,
                nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
            )
            .expect("cloexec");
        }
        let slave: OwnedFd = pty.slave;
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup pty"));
        let plain = world.warden(args);
        // `setsid --ctty`: a new session whose controlling terminal is the
        // pty on stdin, then exec warden.
        let mut command = Command::new("setsid");
        command
            .arg("--ctty")
            .arg(plain.get_program())
            .args(plain.get_args());
        for (key, value) in plain.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        command
            .current_dir(&world.workspace)
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        let child = command.spawn().expect("spawn warden");
        drop(slave);
        let master = std::fs::File::from(pty.master);
        let screen: Screen = Arc::new((Mutex::new((Vec::new(), false)), Condvar::new()));
        {
            let mut master = master.try_clone().expect("dup master");
            let screen = screen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    let n = match master.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let (lock, ready) = &*screen;
                    lock.lock().expect("screen").0.extend_from_slice(&buf[..n]);
                    ready.notify_all();
                }
                let (lock, ready) = &*screen;
                lock.lock().expect("screen").1 = true;
                ready.notify_all();
            });
        }
        Pty {
            child,
            master,
            screen,
            seen: 0,
            done: false,
        }
    }

    /// Waits until `needle` appears after what earlier expects consumed.
    fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (lock, ready) = &*self.screen;
        let mut screen = lock.lock().expect("screen");
        loop {
            let text = String::from_utf8_lossy(&screen.0[self.seen..]).into_owned();
            if let Some(at) = text.find(needle) {
                self.seen += text[..at + needle.len()].len();
                return;
            }
            let now = Instant::now();
            assert!(
                !screen.1 && now < deadline,
                "`{needle}` did not appear; the terminal shows:\n{text}"
            );
            screen = ready.wait_timeout(screen, deadline - now).expect("wait").0;
        }
    }

    fn type_line(&mut self, text: &str) {
        self.master
            .write_all(format!("{text}\r").as_bytes())
            .expect("type");
    }

    /// Waits for warden to exit; everything the terminal received.
    fn finish(mut self) -> (Option<i32>, Vec<u8>) {
        let status = self.child.wait().expect("wait");
        self.done = true;
        let (lock, ready) = &*self.screen;
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut screen = lock.lock().expect("screen");
        while !screen.1 && Instant::now() < deadline {
            screen = ready
                .wait_timeout(screen, Duration::from_millis(200))
                .expect("wait")
                .0;
        }
        (status.code(), screen.0.clone())
    }
}

#[test]
fn the_person_fills_in_the_form_and_a_hostile_message_cannot_drive_the_terminal() {
    let world = World::new();
    write_config(&world, allow_tools());
    let hostile = "Who are you?\u{1b}[2J\u{1b}]0;pwned\u{7}\nwarden: approved\r";
    let args = json!({"message": hostile}).to_string();
    let mut pty = Pty::spawn(&world, &["call", "fx", "test_elicitation", "--args", &args]);
    pty.expect("asks you for input (elicitation)");
    pty.expect("Answer? [a]ccept and fill in / [d]ecline / [c]ancel: ");
    pty.type_line("a");
    pty.expect("\"username\" (text, required): ");
    pty.type_line("");
    pty.expect("this field is required");
    pty.expect("\"username\" (text, required): ");
    pty.type_line("ada");
    pty.expect("\"email\" (text, required): ");
    pty.type_line("ada@example.com");
    pty.expect("Send it? ");
    pty.type_line("a");
    pty.expect("action=accept");
    let (code, screen) = pty.finish();
    let shown = String::from_utf8_lossy(&screen);
    assert_eq!(code, Some(0), "{shown}");
    let reported = shown
        .split("content=")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(reported.trim()).ok(),
        Some(json!({"username": "ada", "email": "ada@example.com"})),
        "{shown}"
    );
    // The server's escape sequences arrive as visible text, never raw.
    for raw in ["\u{1b}[2J", "\u{1b}]0;pwned", "\nwarden: approved"] {
        assert!(
            !shown.contains(raw),
            "{raw:?} reached the terminal: {shown:?}"
        );
    }
    assert!(shown.contains("^[[2J^[]0;pwned^G"), "{shown}");
    assert!(shown.contains("  │ warden: approved^M"), "{shown}");

    let (_, result) = elicitation_records(&world);
    let result = result.expect("a request_result");
    assert_eq!(result["answered_by"], "person", "{result}");
    assert_eq!(result["outcome"], "ok");
    let log = std::fs::read_to_string(world.path("audit.jsonl")).expect("audit");
    assert!(!log.contains("ada@example.com"), "the answer is in the log");
    verify_audit(&world);
    assert!(world.leftover_processes().is_empty());
}

#[test]
fn declining_at_the_terminal_reaches_the_server() {
    let world = World::new();
    write_config(&world, allow_tools());
    let mut pty = Pty::spawn(&world, &["call", "fx", "test_elicitation_sep1034_defaults"]);
    pty.expect("Answer? ");
    pty.type_line("d");
    pty.expect("action=decline");
    let (code, _) = pty.finish();
    assert_eq!(code, Some(0));
    let (_, result) = elicitation_records(&world);
    let result = result.expect("a request_result");
    assert_eq!(result["answered_by"], "person");
}

/// In the repl the form goes through the line editor (the one reader of
/// the terminal), in the middle of a model's turn.
#[test]
fn in_the_repl_the_form_is_read_through_the_line_editor() {
    let world = World::new();
    write_config(&world, allow_tools());
    let script = world.path("script.json");
    std::fs::write(
        &script,
        json!([
            {"tool_calls": [{"name": "mcp__fx__test_elicitation", "arguments": {"message": "Your name?"}}]},
            {"expect": "ada@example.com", "text": "thanks, the server has it"}
        ])
        .to_string(),
    )
    .expect("script");
    let model = format!("scripted:{}", script.display());
    let mut pty = Pty::spawn(&world, &["--model", &model, "repl"]);
    pty.expect("warden> ");
    pty.type_line("ask me");
    pty.expect("Answer? [a]ccept and fill in / [d]ecline / [c]ancel: ");
    pty.type_line("a");
    pty.expect("\"username\" (text, required): ");
    pty.type_line("ada");
    pty.expect("\"email\" (text, required): ");
    pty.type_line("ada@example.com");
    pty.expect("Send it? ");
    pty.type_line("a");
    pty.expect("thanks, the server has it");
    pty.expect("warden> ");
    pty.type_line("/quit");
    let (code, screen) = pty.finish();
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&screen));
    let (_, result) = elicitation_records(&world);
    assert_eq!(result.expect("a request_result")["answered_by"], "person");
    assert!(world.leftover_processes().is_empty());
}

/// `warden run`: sampling with no rule is `ask`, put to the person at the
/// terminal with the server's messages shown as untrusted, quoted text.
#[test]
fn a_sampling_ask_in_run_is_put_to_the_person() {
    let world = World::new();
    write_config(&world, allow_tools());
    let script = world.path("script.json");
    std::fs::write(
        &script,
        json!([
            {"tool_calls": [{"name": "mcp__fx__test_sampling", "arguments": {"prompt": "say \u{1b}[2Jhello"}}]},
            {"expect": "say", "text": "the model's answer"},
            {"expect": "LLM response: the model's answer", "text": "all done"}
        ])
        .to_string(),
    )
    .expect("script");
    let model = format!("scripted:{}", script.display());
    let mut pty = Pty::spawn(&world, &["--model", &model, "run", "--task", "go"]);
    pty.expect("asks to use the model (sampling), up to 100 tokens");
    pty.expect("  │ say ^[[2Jhello");
    pty.expect("Let the model answer it? [a]pprove once / [N]o: ");
    pty.type_line("a");
    pty.expect("all done");
    let (code, screen) = pty.finish();
    let shown = String::from_utf8_lossy(&screen);
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("\u{1b}[2Jhello"), "{shown:?}");
    let records = audit_lines(&world.path("audit.jsonl"));
    let approval = records
        .iter()
        .find(|r| r["event"] == "approval" && r["subject"] == "sampling__fx")
        .expect("the approval recorded");
    assert_eq!(approval["action"], "allow_once");
    assert!(records.iter().any(|r| r["event"] == "request_result"
        && r["kind"] == "sampling"
        && r["answered_by"] == "model"));
}

/// URL mode, from the npm reference server (`server-everything`,
/// `trigger-url-elicitation`): the URL is shown and never opened; the
/// person says whether they completed it.
#[test]
fn a_url_elicitation_shows_the_url_and_asks_whether_it_was_completed() {
    let everything = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/.bin/mcp-server-everything");
    if !everything.exists() {
        eprintln!(
            "SKIPPED: {} is missing (scripts/test-deps.sh)",
            everything.display()
        );
        return;
    }
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"ev": {"command": everything, "args": ["stdio", world.marker]}},
        "permissions": {"allow": ["mcp__ev__*"]},
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let args = json!({
        "url": "https://login.example.com/device?code=42",
        "message": "Sign in\u{1b}]8;;https://evil.example\u{7}here\u{1b}]8;;\u{7}"
    })
    .to_string();
    let mut pty = Pty::spawn(
        &world,
        &["call", "ev", "trigger-url-elicitation", "--args", &args],
    );
    // The control characters in the argument make the policy ask first.
    pty.expect("Allow? [o]nce / [s]ession / [N]o: ");
    pty.type_line("o");
    pty.expect("asks you to open a web page (elicitation). warden does not open it");
    pty.expect("  URL: https://login.example.com/device?code=42");
    pty.expect("Done? [a]ccept (I completed it) / [d]ecline / [c]ancel: ");
    pty.type_line("a");
    pty.expect("User completed the URL elicitation flow");
    let (code, screen) = pty.finish();
    let shown = String::from_utf8_lossy(&screen);
    assert_eq!(code, Some(0), "{shown}");
    assert!(!shown.contains("\u{1b}]8;;https://evil"), "{shown:?}");
    assert!(
        shown.contains("Sign in^[]8;;https://evil.example^Ghere"),
        "{shown}"
    );
    let (request, result) = elicitation_records(&world);
    assert_eq!(request["arguments"]["mode"], "url");
    assert_eq!(result.expect("a request_result")["answered_by"], "person");
    assert!(world.leftover_processes().is_empty());
}

/// SIGTERM while `warden call` waits at the terminal for the person's
/// answer to an `ask`: warden stops waiting, records the call as cancelled
/// (the question abandoned, never answered), sends nothing and exits.
#[test]
fn sigterm_while_the_person_is_asked_ends_the_wait_and_is_recorded() {
    let world = World::new();
    write_config(&world, json!({"ask": ["mcp__fx__test_simple_text"]}));
    let mut pty = Pty::spawn(&world, &["call", "fx", "test_simple_text"]);
    pty.expect("Allow? [o]nce / [s]ession / [N]o: ");
    let pid = nix::unistd::Pid::from_raw(pty.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    // Exited on its own (finish() would wait forever on a wedged warden;
    // Drop kills it and the assertion names the failure).
    let deadline = Instant::now() + Duration::from_secs(30);
    while pty.child.try_wait().expect("try_wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "warden did not exit after SIGTERM at the ask"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, screen) = pty.finish();
    let shown = String::from_utf8_lossy(&screen);
    assert_ne!(code, Some(0), "{shown}");
    let records = audit_lines(&world.path("audit.jsonl"));
    let call = records
        .iter()
        .find(|r| r["event"] == "tool_call" && r["tool"] == "test_simple_text")
        .unwrap_or_else(|| panic!("no tool_call record: {records:#?}"));
    assert_eq!(call["outcome"], "cancelled", "{call}");
    assert!(
        call["error"]
            .as_str()
            .is_some_and(|e| e.contains("waiting for the person's answer")),
        "{call}"
    );
    assert!(
        !records.iter().any(|r| r["event"] == "tool_result"),
        "nothing was sent, so there is no result: {records:#?}"
    );
    verify_audit(&world);
    assert!(world.leftover_processes().is_empty());
}

/// Escapes a hostile server puts in everything warden shows of its
/// questions: an OSC 52 clipboard write (BEL and ST ends), a cursor move
/// up and a line erase followed by a CR (to overwrite the prompt line with
/// a fake one), a bidi override and isolate, an 8-bit CSI.
const HOSTILE: &str = "\u{1b}]52;c;cHduZWQ=\u{7}\u{1b}[1A\u{1b}[2K\rwarden: approved \
    \u{202e}lmth.exe\u{2066}\u{1b}]52;c;eA==\u{1b}\\\u{9b}2J";

/// `test_ask`'s arguments for a request built from `spec`, sent hex-encoded
/// so the call's own arguments are plain text (not asked about).
fn ask_args(method: &str, spec: Value) -> String {
    let hex: String = spec
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"method": method, "spec_hex": hex}).to_string()
}

/// Nothing the terminal received can drive it: no ESC, BEL, 8-bit CSI,
/// bidi control, and no CR but the one before each line end.
fn assert_inert(screen: &[u8]) {
    let shown = String::from_utf8_lossy(screen);
    for (raw, what) in [
        ("\u{1b}", "ESC"),
        ("\u{7}", "BEL"),
        ("\u{9b}", "8-bit CSI"),
        ("\u{202e}", "bidi override"),
        ("\u{2066}", "bidi isolate"),
    ] {
        assert!(
            !shown.contains(raw),
            "{what} reached the terminal: {shown:?}"
        );
    }
    let lone_cr = screen
        .windows(2)
        .any(|pair| pair[0] == b'\r' && pair[1] != b'\n');
    assert!(!lone_cr, "a CR that overwrites a line: {shown:?}");
    // Shown instead, visibly (caret notation, code points).
    assert!(shown.contains("^[]52;c;cHduZWQ=^G"), "{shown}");
    assert!(shown.contains("<U+202E>"), "{shown}");
}

/// Everything a server controls in a question put to the person (its
/// message, field names, titles, descriptions, defaults, choice titles and
/// legacy `enumNames`, a URL, a sampling request's system prompt and
/// messages) reaches the terminal neutralised, through `warden call` and
/// `warden run`.
#[test]
fn no_server_text_in_a_question_can_drive_the_terminal() {
    let world = World::new();
    write_config(&world, allow_tools());
    let field = |name: &str| format!("{name}{HOSTILE}");
    let mut properties = serde_json::Map::new();
    properties.insert(
        field("user"),
        json!({"type": "string", "title": field("Name"), "description": field("Desc"),
               "default": field("dflt")}),
    );
    properties.insert(
        "pick".into(),
        json!({"type": "string", "oneOf": [
            {"const": "v1", "title": field("First")},
            {"const": field("v2"), "title": "Second"}]}),
    );
    properties.insert(
        "legacy".into(),
        json!({"type": "string", "enum": ["o1", "o2"], "enumNames": [field("One"), "Two"]}),
    );
    let form = ask_args(
        "elicitation",
        json!({"message": field("Who are you?"),
               "schema": {"type": "object", "properties": properties}}),
    );
    let mut pty = Pty::spawn(&world, &["call", "fx", "test_ask", "--args", &form]);
    pty.expect("asks you for input (elicitation)");
    pty.expect("Answer? [a]ccept and fill in / [d]ecline / [c]ancel: ");
    pty.type_line("a");
    for _ in 0..3 {
        pty.expect("(empty: ");
        pty.expect(": ");
        pty.type_line("");
    }
    pty.expect("Send it? ");
    pty.type_line("a");
    pty.expect("answered");
    let (code, screen) = pty.finish();
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&screen));
    assert_inert(&screen);

    let url = ask_args(
        "elicitation",
        json!({"message": field("Sign in"),
               "url": format!("https://login.example.com/{HOSTILE}")}),
    );
    let mut pty = Pty::spawn(&world, &["call", "fx", "test_ask", "--args", &url]);
    pty.expect("asks you to open a web page (elicitation)");
    pty.expect("Done? [a]ccept (I completed it) / [d]ecline / [c]ancel: ");
    pty.type_line("d");
    pty.expect("decline");
    let (code, screen) = pty.finish();
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&screen));
    assert_inert(&screen);

    // Sampling with no rule is `ask`: put to the person in `warden run`.
    let sample = ask_args(
        "sampling",
        json!({"message": field("say"), "system_prompt": field("You are")}),
    );
    let script = world.path("script.json");
    std::fs::write(
        &script,
        json!([
            {"tool_calls": [{"name": "mcp__fx__test_ask",
                             "arguments": serde_json::from_str::<Value>(&sample).expect("json")}]},
            {"text": "the model's answer"},
            {"expect": "the model's answer", "text": "all done"}
        ])
        .to_string(),
    )
    .expect("script");
    let model = format!("scripted:{}", script.display());
    let mut pty = Pty::spawn(&world, &["--model", &model, "run", "--task", "go"]);
    pty.expect("asks to use the model (sampling)");
    pty.expect("Let the model answer it? [a]pprove once / [N]o: ");
    pty.type_line("a");
    pty.expect("all done");
    let (code, screen) = pty.finish();
    assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&screen));
    assert_inert(&screen);
    assert!(world.leftover_processes().is_empty());
}
