//! `warden repl` with lines piped in and no controlling terminal: slash
//! commands and turns work, but a piped line can never answer an `ask`
//! (the question goes to the controlling terminal, and without one the
//! call is denied).

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

#[test]
fn piped_lines_run_commands_but_cannot_approve_an_ask() {
    let dir = tempfile::Builder::new()
        .prefix("warden-repl-piped-")
        .tempdir()
        .expect("temp dir");
    let path = |name: &str| dir.path().join(name);
    for sub in ["home", "cfg", "ws"] {
        std::fs::create_dir_all(path(sub)).expect("mkdir");
    }
    let config = json!({
        "mcpServers": {"notes": {"command": WARDEN, "args": ["example-server", "notes"]}},
        "permissions": {"ask": ["mcp__notes__read_note"]},
        "audit": {"path": path("audit.jsonl")}
    });
    std::fs::write(path("warden.json"), config.to_string()).expect("config");
    let script = json!([
        {"tool_calls": [{"name": "mcp__notes__read_note", "arguments": {"id": 1}}]},
        {"expect": "denied", "text": "It was denied."}
    ]);
    std::fs::write(path("script.json"), script.to_string()).expect("script");

    // `setsid` (util-linux) drops the controlling terminal before warden runs.
    let mut command = Command::new("setsid");
    command
        .arg(WARDEN)
        .arg("--config")
        .arg(path("warden.json"))
        .arg("--model")
        .arg(format!("scripted:{}", path("script.json").display()))
        .arg("repl")
        .current_dir(path("ws"))
        .env("HOME", path("home"))
        .env("WARDEN_CONFIG_DIR", path("cfg"))
        .env_remove("RUST_LOG")
        .env_remove("WARDEN_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"read note 1\no\n/tools\n/audit\n/quit\n")
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("→ denied"), "{stderr}");
    assert!(stdout.contains("It was denied."), "{stdout}");
    assert!(stdout.contains("mcp__notes__read_note"), "{stdout}");

    let records: Vec<Value> = std::fs::read_to_string(path("audit.jsonl"))
        .expect("audit")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["outcome"], "denied");
    assert!(
        !records
            .iter()
            .any(|r| r["event"] == "approval" && r["action"] == "allow_once"),
        "a piped line approved a call"
    );
}

#[test]
fn a_piped_line_never_approves_a_project_server() {
    let dir = tempfile::Builder::new()
        .prefix("warden-repl-piped-")
        .tempdir()
        .expect("temp dir");
    let path = |name: &str| dir.path().join(name);
    for sub in ["home", "cfg", "ws"] {
        std::fs::create_dir_all(path(sub)).expect("mkdir");
    }
    let project = json!({
        "mcpServers": {"proj": {"command": WARDEN, "args": ["example-server", "notes"]}}
    });
    std::fs::write(path("ws/.mcp.json"), project.to_string()).expect("project file");
    let mut child = Command::new(WARDEN)
        .arg("repl")
        .current_dir(path("ws"))
        .env("HOME", path("home"))
        .env("WARDEN_CONFIG_DIR", path("cfg"))
        .env_remove("RUST_LOG")
        .env_remove("WARDEN_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"y\n/mcp approve proj\ny\n/mcp\n/quit\n")
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("run `warden mcp approve proj`"), "{stderr}");
    assert!(stdout.contains("pending_approval"), "{stdout}");
    assert!(!path("cfg/approvals.json").exists(), "nothing was approved");
}

/// `/resources`, `/prompts`, `/read` and `/prompt`: listed without what is
/// denied outright, read through the pipeline, refused with the reason, and
/// recorded as `request` events.
#[test]
fn resources_and_prompts_from_the_repl_are_decided_and_recorded() {
    let dir = tempfile::Builder::new()
        .prefix("warden-repl-resources-")
        .tempdir()
        .expect("temp dir");
    let path = |name: &str| dir.path().join(name);
    for sub in ["home", "cfg", "ws"] {
        std::fs::create_dir_all(path(sub)).expect("mkdir");
    }
    let config = json!({
        "mcpServers": {"fx": {"command": WARDEN, "args": ["example-server", "fixture"]}},
        "permissions": {
            "allow": ["resource__fx(uri: fixture://notes/**)", "prompt__fx__greet"],
            "deny": ["resource__fx(uri: fixture://secret/**)"]
        },
        "audit": {"path": path("audit.jsonl")}
    });
    std::fs::write(path("warden.json"), config.to_string()).expect("config");
    let mut child = Command::new("setsid")
        .arg(WARDEN)
        .arg("--config")
        .arg(path("warden.json"))
        .arg("repl")
        .current_dir(path("ws"))
        .env("HOME", path("home"))
        .env("WARDEN_CONFIG_DIR", path("cfg"))
        .env_remove("RUST_LOG")
        .env_remove("WARDEN_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"/resources\n/prompts\n/read fixture://notes/1\n/read fixture://secret/key\n\
              /prompt fx greet '{\"name\": \"Ada\"}'\n/quit\n",
        )
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("fixture://notes/1"), "{stdout}");
    assert!(stdout.contains("fixture://items/{id}"), "{stdout}");
    assert!(!stdout.contains("fixture://secret/key"), "{stdout}");
    assert!(stdout.contains("prompt__fx__greet"), "{stdout}");
    assert!(stdout.contains("note one"), "{stdout}");
    assert!(stdout.contains("Hello, Ada!"), "{stdout}");
    assert!(
        stderr.contains("Denied by warden's rules stage"),
        "{stderr}"
    );
    let records: Vec<Value> = std::fs::read_to_string(path("audit.jsonl"))
        .expect("audit")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let requests: Vec<&Value> = records.iter().filter(|r| r["event"] == "request").collect();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(requests.iter().all(|r| r["caller"] == "cli"));
    assert!(
        requests
            .iter()
            .any(|r| r["arguments"]["uri"] == "fixture://secret/key" && r["outcome"] == "denied")
    );
    assert!(
        requests
            .iter()
            .any(|r| r["kind"] == "prompt" && r["outcome"] == "pending")
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r["event"] == "request_result" && r["outcome"] == "ok")
            .count(),
        2
    );
}

/// `/policy reload`: a configuration that loads replaces the rules; one
/// that does not is refused with the reason and the rules stay. The test
/// writes each line only after the answer to the previous one arrived.
#[test]
fn policy_reload_applies_or_refuses_and_keeps_the_old_rules() {
    use std::io::BufRead;
    use std::sync::mpsc;
    use std::time::Duration;

    let dir = tempfile::Builder::new()
        .prefix("warden-repl-piped-")
        .tempdir()
        .expect("temp dir");
    let path = |name: &str| dir.path().join(name);
    for sub in ["home", "cfg", "ws"] {
        std::fs::create_dir_all(path(sub)).expect("mkdir");
    }
    let config = |rules: Value| {
        json!({
            "mcpServers": {"notes": {"command": WARDEN, "args": ["example-server", "notes"]}},
            "permissions": rules,
            "audit": {"path": path("audit.jsonl")}
        })
        .to_string()
    };
    std::fs::write(
        path("warden.json"),
        config(json!({"ask": ["mcp__notes__read_note"]})),
    )
    .expect("config");
    let mut child = Command::new("setsid")
        .arg(WARDEN)
        .arg("--config")
        .arg(path("warden.json"))
        .arg("repl")
        .current_dir(path("ws"))
        .env("HOME", path("home"))
        .env("WARDEN_CONFIG_DIR", path("cfg"))
        .env_remove("RUST_LOG")
        .env_remove("WARDEN_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // stdout and stderr lines, in one channel, as they come.
    let (tx, rx) = mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("stderr")),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let mut seen = Vec::new();
    let mut wait_for = |needle: &str| {
        loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!("no `{needle}` within 60 s; got:\n{}", seen.join("\n")),
            }
        }
    };
    let mut stdin = child.stdin.take().expect("stdin");

    std::fs::write(
        path("warden.json"),
        config(json!({"deny": ["mcp__notes__read_note", "mcp__notes__add_note"]})),
    )
    .expect("config");
    stdin.write_all(b"/policy reload\n").expect("write");
    wait_for("policy reloaded: 2 permission rules");

    std::fs::write(
        path("warden.json"),
        "{\"permissions\": {\"deny\": [\"mcp_\"]}}",
    )
    .expect("config");
    stdin.write_all(b"/policy reload\n").expect("write");
    wait_for("policy reload refused");
    wait_for("mcp_");

    stdin.write_all(b"/quit\n").expect("write");
    drop(stdin);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{}", seen.join("\n"));

    let reloads: Vec<Value> = std::fs::read_to_string(path("audit.jsonl"))
        .expect("audit")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] == "policy_reload")
        .collect();
    assert_eq!(reloads.len(), 2, "{reloads:#?}");
    assert_eq!(
        (reloads[0]["ok"].clone(), reloads[0]["rules"].clone()),
        (json!(true), json!(2))
    );
    assert_eq!(reloads[1]["ok"], false);
}
