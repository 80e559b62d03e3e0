//! `warden repl` driven through a real pseudo-terminal: the real binary is
//! the session leader of a pty (its controlling terminal), rustyline edits
//! lines in raw mode, Ctrl-C and Ctrl-D are sent as the keys a person
//! presses. Servers are the notes and fixture example servers, launched in
//! their sandbox. Each test checks that no server process outlives the repl.

mod cli_support;

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cli_support::processes_with;
use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");
const WAIT: Duration = Duration::from_secs(30);

/// Everything the terminal showed, without escape sequences and `\r`.
#[derive(Default)]
struct Screen {
    text: String,
    closed: bool,
}

struct Pty {
    child: Child,
    master: std::fs::File,
    screen: Arc<(Mutex<Screen>, Condvar)>,
    /// Where the next `expect` starts looking.
    seen: usize,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Pty {
    fn spawn(env: &Env, args: &[String]) -> Pty {
        let winsize = nix::pty::Winsize {
            ws_row: 50,
            ws_col: 160,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&winsize), None).expect("openpty");
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
        // `setsid --ctty` (util-linux): a new session whose controlling
        // terminal is the pty on stdin, then exec warden (same pid).
        let mut command = Command::new("setsid");
        command
            .arg("--ctty")
            .arg(WARDEN)
            .args(args)
            .current_dir(env.path("ws"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", env.path("home"))
            .env("WARDEN_CONFIG_DIR", env.path("cfg"))
            .env("TERM", "xterm-256color")
            .env("LANG", "C.UTF-8")
            .stdin(stdio(&slave))
            .stdout(stdio(&slave))
            .stderr(stdio(&slave));
        let child = command.spawn().expect("spawn warden repl");
        drop(slave);
        let master = std::fs::File::from(pty.master);
        let screen = Arc::new((Mutex::new(Screen::default()), Condvar::new()));
        let reader = {
            let mut master = master.try_clone().expect("dup master");
            let screen = screen.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut pending = Vec::new();
                loop {
                    let n = match master.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    let (clean, rest) = strip_escapes(&pending);
                    pending = rest;
                    let (lock, ready) = &*screen;
                    lock.lock().expect("screen").text.push_str(&clean);
                    ready.notify_all();
                }
                let (lock, ready) = &*screen;
                lock.lock().expect("screen").closed = true;
                ready.notify_all();
            })
        };
        Pty {
            child,
            master,
            screen,
            seen: 0,
            reader: Some(reader),
        }
    }

    fn send(&mut self, bytes: &str) {
        self.master
            .write_all(bytes.as_bytes())
            .expect("write to the pty");
        self.master.flush().expect("flush");
    }

    /// Types a line as a person would, once the prompt is there.
    fn line(&mut self, text: &str) {
        self.expect("warden> ");
        self.send(text);
        self.send("\r");
    }

    /// Waits until `needle` appears after what earlier expects consumed.
    fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        let (lock, ready) = &*self.screen;
        let mut screen = lock.lock().expect("screen");
        loop {
            if let Some(at) = screen.text[self.seen..].find(needle) {
                let start = self.seen;
                self.seen += at + needle.len();
                return screen.text[start..self.seen].to_string();
            }
            let now = Instant::now();
            if screen.closed || now >= deadline {
                panic!(
                    "`{needle}` did not appear ({}); the terminal shows since the last match:\n{}",
                    if screen.closed {
                        "the terminal closed"
                    } else {
                        "timeout"
                    },
                    &screen.text[self.seen..]
                );
            }
            screen = ready
                .wait_timeout(screen, deadline - now)
                .expect("screen")
                .0;
        }
    }

    /// Everything shown so far.
    fn text(&self) -> String {
        self.screen.0.lock().expect("screen").text.clone()
    }

    fn wait_exit(&mut self) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return status.code().unwrap_or(-1);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("the repl did not exit; screen:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pty {
    /// After a failed test: SIGTERM (the repl stops its servers and cleans
    /// up), SIGKILL only if that does not work.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes CSI/OSC escape sequences and carriage returns; returns the
/// clean text and an incomplete sequence left at the end.
fn strip_escapes(bytes: &[u8]) -> (String, Vec<u8>) {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x1b => {
                let Some(&kind) = bytes.get(i + 1) else {
                    return (
                        String::from_utf8_lossy(&out).into_owned(),
                        bytes[i..].to_vec(),
                    );
                };
                let mut j = i + 2;
                match kind {
                    b'[' => {
                        while j < bytes.len() && !(0x40..=0x7e).contains(&bytes[j]) {
                            j += 1;
                        }
                    }
                    b']' => {
                        while j < bytes.len() && bytes[j] != 0x07 {
                            j += 1;
                        }
                    }
                    _ => j = i + 1,
                }
                if j >= bytes.len() {
                    return (
                        String::from_utf8_lossy(&out).into_owned(),
                        bytes[i..].to_vec(),
                    );
                }
                i = j + 1;
            }
            b'\r' => i += 1,
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    // Keep a trailing partial UTF-8 character for the next read.
    let valid = match std::str::from_utf8(&out) {
        Ok(_) => out.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => out.len(),
    };
    let rest = out.split_off(valid);
    (String::from_utf8_lossy(&out).into_owned(), rest)
}

/// Private HOME, config dir and workspace; a config; removed on drop.
struct Env {
    dir: tempfile::TempDir,
    /// Passed to every server as `--name`, to find stray processes.
    marker: String,
}

impl Env {
    fn new(script: Value) -> Env {
        let dir = tempfile::Builder::new()
            .prefix("warden-repl-pty-")
            .tempdir()
            .expect("temp dir");
        for sub in ["home", "cfg", "ws", "calls"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        let marker = format!(
            "ptytest{}{}",
            std::process::id(),
            dir.path()
                .file_name()
                .map(|n| n
                    .to_string_lossy()
                    .replace(|c: char| !c.is_alphanumeric(), ""))
                .unwrap_or_default()
        );
        let config = json!({
            "mcpServers": {
                "notes": {"command": WARDEN, "args": ["example-server", "notes", "--name", marker]},
                // Notes each call as it arrives (tests wait for that).
                "fx": {
                    "command": WARDEN,
                    "args": ["example-server", "fixture", "--name", marker,
                             "--count-calls", dir.path().join("calls/calls.txt")],
                    "sandbox": {"write": [dir.path().join("calls")]}
                }
            },
            "permissions": {
                "allow": ["mcp__notes__list_notes", "mcp__fx__sleep"],
                "ask": ["mcp__notes__read_note"]
            },
            "audit": {"path": dir.path().join("audit.jsonl")}
        });
        std::fs::write(
            dir.path().join("warden.json"),
            serde_json::to_vec_pretty(&config).expect("json"),
        )
        .expect("write config");
        std::fs::write(
            dir.path().join("script.json"),
            serde_json::to_vec(&script).expect("json"),
        )
        .expect("write script");
        Env { dir, marker }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--config".into(),
            self.path("warden.json").display().to_string(),
            "--model".into(),
            format!("scripted:{}", self.path("script.json").display()),
            "repl".into(),
        ]
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Every server started in the session has exited, and no process
    /// carrying this test's marker is alive.
    fn assert_no_server_left(&self) {
        let audit = self.audit();
        let started: Vec<u64> = audit
            .iter()
            .filter(|r| r["event"] == "server_start")
            .filter_map(|r| r["pid"].as_u64())
            .collect();
        assert!(!started.is_empty(), "no server_start in the audit log");
        for pid in &started {
            assert!(
                audit
                    .iter()
                    .any(|r| r["event"] == "server_exit" && r["pid"].as_u64() == Some(*pid)),
                "no server_exit for pid {pid}"
            );
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let alive: Vec<u64> = started
                .iter()
                .copied()
                .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
                .chain(processes_with(&self.marker).into_iter().map(u64::from))
                .collect();
            if alive.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server processes left: {alive:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// How many `/mcp` lines say `connected`.
fn connected_servers(shown: &str) -> usize {
    shown
        .lines()
        .filter(|l| {
            let mut words = l.split_whitespace();
            matches!(words.next(), Some("notes" | "fx")) && words.next() == Some("connected")
        })
        .count()
}

#[test]
fn mcp_tools_an_ask_answered_at_the_prompt_and_quit() {
    let env = Env::new(json!([
        {"text": "Reading note 1.", "tool_calls": [
            {"name": "mcp__notes__read_note", "arguments": {"id": 1}}
        ]},
        {"expect": "shipped with warden", "text": "Note 1 is the welcome note."}
    ]));
    let mut pty = Pty::spawn(&env, &env.args());
    // The prompt comes at once; the servers connect behind it.
    pty.expect("warden repl: 2 servers connecting in the background");

    // /mcp shows live state: poll until both servers have settled.
    let deadline = Instant::now() + WAIT;
    loop {
        pty.line("/mcp");
        let shown = pty.expect("warden> ");
        if connected_servers(&shown) == 2 {
            let notes = shown
                .lines()
                .find(|l| l.starts_with("notes "))
                .expect("a notes line");
            assert!(notes.contains("stdio"), "{notes}");
            assert!(notes.contains("protocol 20"), "{notes}");
            assert!(notes.contains("4 tools"), "{notes}");
            let fx = shown.lines().find(|l| l.starts_with("fx ")).expect("fx");
            assert!(fx.contains("protocol 20"), "{fx}");
            break;
        }
        assert!(
            !shown.lines().any(|l| l.contains(" error ")),
            "a server failed to connect:\n{shown}"
        );
        assert!(
            Instant::now() < deadline,
            "servers never connected:\n{shown}"
        );
        // Give back the prompt `expect` consumed.
        pty.seen -= "warden> ".len();
        std::thread::sleep(Duration::from_millis(200));
    }
    pty.seen -= "warden> ".len();

    pty.line("/tools");
    let tools = pty.expect("warden> ");
    for tool in [
        "mcp__notes__add_note",
        "mcp__notes__delete_note",
        "mcp__notes__list_notes",
        "mcp__notes__read_note",
        "mcp__fx__sleep",
    ] {
        assert!(tools.contains(tool), "/tools lacks {tool}:\n{tools}");
    }
    pty.seen -= "warden> ".len();

    // A model turn whose call is an `ask`, answered "once" at the prompt.
    pty.line("what does my first note say?");
    pty.expect("Reading note 1.");
    pty.expect("mcp__notes__read_note {\"id\":1}");
    let question = pty.expect("Allow? [o]nce / [s]ession / [N]o: ");
    assert!(question.contains("stage `rules`"), "{question}");
    assert!(question.contains("server: notes"), "{question}");
    pty.send("o\r");
    pty.expect("allow (rules) → ok");
    pty.expect("This is the `");
    pty.expect("Note 1 is the welcome note.");
    pty.expect("(2 model turns, 1 tool call, 0 denied");

    pty.line("/policy");
    pty.expect("default.rego");
    pty.expect("policy set sha256: ");

    pty.line("/audit 3");
    let audit = pty.expect("warden> ");
    assert!(audit.contains("approval"), "{audit}");
    assert!(
        audit.contains("tool_call     mcp__notes__read_note allow (rules) → pending")
            && audit.contains("tool_result   mcp__notes__read_note → ok"),
        "{audit}"
    );
    pty.seen -= "warden> ".len();

    // Ctrl-C at the prompt clears the line; nothing runs.
    pty.expect("warden> ");
    pty.send("delete everything");
    pty.expect("delete everything");
    pty.send("\x03");
    pty.line("/quit");
    assert_eq!(pty.wait_exit(), 0, "screen:\n{}", pty.text());

    let records = env.audit();
    let calls = cli_support::audit_calls(&env.path("audit.jsonl"));
    assert_eq!(calls.len(), 1, "only the approved call ran");
    assert_eq!(calls[0]["outcome"], "ok");
    assert!(
        records
            .iter()
            .any(|r| r["event"] == "approval" && r["action"] == "allow_once")
    );
    assert_eq!(
        records.last().map(|r| r["event"].clone()),
        Some(json!("session_end"))
    );
    env.assert_no_server_left();
    // History went to $WARDEN_CONFIG_DIR, never to HOME.
    let history = std::fs::read_to_string(env.path("cfg/history")).expect("history file");
    assert!(history.contains("/mcp"), "{history}");
    assert!(!history.contains("delete everything"));
    assert_eq!(
        std::fs::read_dir(env.path("home")).expect("home").count(),
        0,
        "nothing written to HOME"
    );
}

#[test]
fn ctrl_c_cancels_a_turn_but_keeps_the_servers_and_ctrl_d_exits() {
    let env = Env::new(json!([
        {"text": "Sleeping.", "tool_calls": [
            {"name": "mcp__fx__sleep", "arguments": {"ms": 60000}}
        ]},
        {"text": "Back again."},
        {"text": "Still here."}
    ]));
    let mut pty = Pty::spawn(&env, &env.args());
    pty.line("sleep for a minute");
    pty.expect("mcp__fx__sleep {\"ms\":60000}");
    // Once the call has reached the server, press Ctrl-C.
    let calls = env.path("calls/calls.txt");
    assert!(
        cli_support::eventually(30.0, || std::fs::read_to_string(&calls)
            .is_ok_and(|c| c.lines().any(|l| l == "sleep"))),
        "the call never reached the server"
    );
    pty.send("\x03");
    pty.expect("→ cancelled");
    pty.expect("turn cancelled");

    // The servers were not touched: /mcp still shows them connected.
    pty.line("/mcp");
    let shown = pty.expect("warden> ");
    assert_eq!(connected_servers(&shown), 2, "{shown}");
    pty.seen -= "warden> ".len();

    // The model's next turn (the script's second) answers normally.
    pty.line("are you there?");
    pty.expect("Back again.");

    // /mcp add and /mcp remove, for this session only.
    pty.line(&format!(
        "/mcp add extra {WARDEN} example-server notes --name {}",
        env.marker
    ));
    pty.expect("extra: added for this session (untrusted, default sandbox), 4 tools");
    pty.line("/tools");
    pty.expect("mcp__extra__read_note");
    pty.line("/mcp remove extra");
    pty.expect("extra: stopped and removed for this session");
    pty.line("/mcp reload notes");
    pty.expect("notes: reconnected");

    // Ctrl-D at an empty prompt ends the session cleanly.
    pty.expect("warden> ");
    pty.send("\x04");
    assert_eq!(pty.wait_exit(), 0, "screen:\n{}", pty.text());

    let calls = cli_support::audit_calls(&env.path("audit.jsonl"));
    let call = calls.first().expect("the cancelled call is audited");
    assert_eq!(call["qualified"], "mcp__fx__sleep");
    // A person cancelled it (Ctrl-C): cancelled, not abandoned.
    assert_eq!(call["outcome"], "cancelled");
    assert_eq!(call["pending_outcome"], "pending");
    env.assert_no_server_left();
}

#[test]
fn a_project_server_is_offered_for_approval_on_first_use() {
    let env = Env::new(json!([{"text": "unused"}]));
    let project = json!({
        "mcpServers": {
            "proj": {"command": WARDEN, "args": ["example-server", "notes", "--name", env.marker]}
        }
    });
    std::fs::write(
        env.path("ws/.mcp.json"),
        serde_json::to_vec_pretty(&project).expect("json"),
    )
    .expect("write .mcp.json");
    let audit = env.path("audit.jsonl").display().to_string();
    let args = vec!["--audit".to_string(), audit, "repl".to_string()];

    // First session: the exact configuration is shown; declining keeps the
    // server stopped, `/mcp approve` approves and starts it.
    let mut pty = Pty::spawn(&env, &args);
    let shown = pty.expect("Approve `proj` with exactly this configuration? [y/N] ");
    assert!(shown.contains("Server `proj` from"), "{shown}");
    assert!(shown.contains("\"example-server\""), "{shown}");
    assert!(shown.contains("sandbox:     on"), "{shown}");
    pty.send("n\r");
    pty.expect("Not approved; `proj` will not start.");
    pty.line("/mcp");
    let status = pty.expect("warden> ");
    assert!(status.contains("pending_approval"), "{status}");
    pty.seen -= "warden> ".len();
    pty.line("/mcp approve proj");
    pty.expect("Approve `proj` with exactly this configuration? [y/N] ");
    pty.send("y\r");
    pty.expect("Approved `proj`");
    pty.expect("proj: connected");
    pty.line("/tools");
    pty.expect("mcp__proj__read_note");
    pty.line("/quit");
    assert_eq!(pty.wait_exit(), 0, "screen:\n{}", pty.text());
    let approvals = std::fs::read_to_string(env.path("cfg/approvals.json")).expect("approvals");
    assert!(approvals.contains("proj"), "{approvals}");
    assert!(
        env.audit()
            .iter()
            .any(|r| r["event"] == "approval" && r["action"] == "approved")
    );

    // Second session: approved, so no question; the server just connects.
    let mut pty = Pty::spawn(&env, &args);
    pty.expect("warden repl: 1 server connecting in the background");
    let deadline = Instant::now() + WAIT;
    loop {
        pty.line("/mcp");
        let shown = pty.expect("warden> ");
        pty.seen -= "warden> ".len();
        assert!(!shown.contains("Approve"), "{shown}");
        if shown
            .lines()
            .any(|l| l.starts_with("proj ") && l.contains(" connected "))
        {
            break;
        }
        assert!(Instant::now() < deadline, "proj never connected:\n{shown}");
        std::thread::sleep(Duration::from_millis(200));
    }
    pty.line("/quit");
    assert_eq!(pty.wait_exit(), 0, "screen:\n{}", pty.text());
    env.assert_no_server_left();
}

#[test]
fn ctrl_c_at_an_ask_denies_the_call_and_cancels_the_turn() {
    let env = Env::new(json!([
        {"tool_calls": [{"name": "mcp__notes__read_note", "arguments": {"id": 2}}]},
        {"text": "Answer to the second line."},
        {"text": "Next turn."}
    ]));
    let mut pty = Pty::spawn(&env, &env.args());
    pty.line("read note 2");
    pty.expect("Allow? [o]nce / [s]ession / [N]o: ");
    pty.send("\x03");
    pty.expect("→ denied");
    pty.expect("turn cancelled");
    // The line after is a normal turn again, with a normal prompt.
    pty.line("hello");
    pty.expect("Answer to the second line.");
    pty.line("/quit");
    assert_eq!(pty.wait_exit(), 0, "screen:\n{}", pty.text());
    let records = env.audit();
    let call = records
        .iter()
        .find(|r| r["event"] == "tool_call")
        .expect("the denied call is audited");
    assert_eq!(call["outcome"], "denied");
    assert!(
        records
            .iter()
            .any(|r| r["event"] == "approval" && r["action"] == "deny")
    );
    env.assert_no_server_left();
}

/// A pasted block (`read note 2`, then `o`) must not answer the `ask` its
/// first line causes with its second: that would be a call approved by a
/// line typed before the question existed. (The line editor drops what it
/// read ahead with a line, and a question also discards what waits in the
/// terminal when it is shown; this guards the pasted case end to end.)
#[test]
fn a_line_typed_before_an_ask_never_answers_it() {
    let env = Env::new(json!([
        {"tool_calls": [{"name": "mcp__notes__read_note", "arguments": {"id": 2}}]},
        {"text": "Told about the denial."}
    ]));
    let mut pty = Pty::spawn(&env, &env.args());
    pty.expect("warden> ");
    pty.send("read note 2\ro\r");
    pty.expect("Allow? [o]nce / [s]ession / [N]o: ");
    pty.send("n\r");
    pty.expect("→ denied");
    pty.expect("Told about the denial.");
    pty.line("/quit");
    assert_eq!(pty.wait_exit(), 0, "screen:\n{}", pty.text());
    let calls = cli_support::audit_calls(&env.path("audit.jsonl"));
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        calls[0]["outcome"], "denied",
        "the pasted `o` answered the ask"
    );
    env.assert_no_server_left();
}

#[test]
fn sigterm_at_the_prompt_stops_the_servers_and_exits_1() {
    let env = Env::new(json!([{"text": "unused"}]));
    let mut pty = Pty::spawn(&env, &env.args());
    // Wait until both servers are up, so there is something to stop.
    let deadline = Instant::now() + WAIT;
    loop {
        pty.line("/mcp");
        let shown = pty.expect("warden> ");
        pty.seen -= "warden> ".len();
        if connected_servers(&shown) == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "servers never connected:\n{shown}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let pid = nix::unistd::Pid::from_raw(pty.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    assert_eq!(pty.wait_exit(), 1, "screen:\n{}", pty.text());
    let records = env.audit();
    assert_eq!(
        records.last().map(|r| r["event"].clone()),
        Some(json!("session_end"))
    );
    env.assert_no_server_left();
}

/// A model's narration and answer reach the repl's terminal neutralised
/// (issue #18): the screen shows the visible forms, which it could not if
/// the escapes had reached the terminal (this harness strips real ones).
#[test]
fn the_model_text_is_shown_neutralised() {
    let env = Env::new(json!([
        {"text": "narr\u{1b}]52;c;cHduZWQ=\u{7}\u{202e}ated", "tool_calls": [
            {"name": "mcp__notes__list_notes", "arguments": {}}
        ]},
        {"text": "answer\u{1b}[2J\u{200b}\r done"}
    ]));
    let mut pty = Pty::spawn(&env, &env.args());
    pty.line("go");
    pty.expect("narr^[]52;c;cHduZWQ=^G<U+202E>ated");
    pty.expect("answer^[[2J<U+200B>^M done");
    pty.expect("(2 model turns, 1 tool call, 0 denied");
    pty.line("/quit");
    assert_eq!(pty.wait_exit(), 0, "screen:\n{}", pty.text());
    env.assert_no_server_left();
}

/// The attack: the audit log stops taking records mid-session (here it is
/// moved away, which fails every later write) and the person approves a
/// project server at the repl. The approval was saved first and its
/// record then lost: the server ran, in this and every later session, with
/// no approval in any log. The record is written first now, so the
/// approval is not made.
#[test]
fn an_approval_the_log_cannot_take_is_not_made_in_the_repl() {
    let env = Env::new(json!([{"text": "unused"}]));
    let project = json!({
        "mcpServers": {
            "proj": {"command": WARDEN, "args": ["example-server", "notes", "--name", env.marker]}
        }
    });
    std::fs::write(
        env.path("ws/.mcp.json"),
        serde_json::to_vec_pretty(&project).expect("json"),
    )
    .expect("write .mcp.json");
    let audit = env.path("audit.jsonl");
    let args = vec![
        "--audit".to_string(),
        audit.display().to_string(),
        "repl".to_string(),
    ];
    let mut pty = Pty::spawn(&env, &args);
    pty.expect("Approve `proj` with exactly this configuration? [y/N] ");
    pty.send("n\r");
    pty.expect("Not approved; `proj` will not start.");
    std::fs::rename(&audit, env.path("audit-moved.jsonl")).expect("move the log");
    pty.line("/mcp approve proj");
    pty.expect("Approve `proj` with exactly this configuration? [y/N] ");
    pty.send("y\r");
    pty.expect("the approval could not be recorded");
    pty.line("/quit");
    pty.wait_exit();
    let approvals = std::fs::read_to_string(env.path("cfg/approvals.json")).unwrap_or_default();
    assert!(
        !approvals.contains("proj"),
        "approved, unrecorded: {approvals}"
    );
    // It never started.
    assert!(processes_with(&env.marker).is_empty());
}
