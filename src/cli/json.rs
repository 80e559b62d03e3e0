//! `--json`: every command prints exactly one JSON object on stdout, for
//! every outcome, errors included (CONTRACT §2), so a script never has to
//! parse stderr.
//!
//! Each command has its usual top-level fields ([`fields`]); its object
//! always has all of them (null where they do not apply) plus `error`:
//! `null`, or the message stderr also carries, with `outcome` naming what
//! happened (CONTRACT §2, the shape `call` has). Commands whose stdout belongs to
//! something else (`repl`, `gateway`, `sandbox exec`) refuse `--json` with
//! such an object.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value, json};

/// Whether this process already printed its object (never two).
static PRINTED: AtomicBool = AtomicBool::new(false);

/// The usual top-level fields of a command's object, by command path
/// (`"mcp status"`). Empty: the command has no JSON output.
pub fn fields(command: &str) -> &'static [&'static str] {
    match command {
        "demo" => &["ok", "checks", "failed", "seconds"],
        "call" => &[
            "server",
            "tool",
            "decision",
            "outcome",
            "result",
            "error",
            "duration_ms",
        ],
        "run" => &[
            "final_text",
            "status",
            "outcome",
            "turns",
            "tool_calls",
            "denied_calls",
            "usage",
            "calls",
            "session",
        ],
        "mcp list" => &["servers"],
        "mcp status" => &["servers", "audit"],
        "mcp approve" | "mcp revoke" => &["server", "action", "config_sha256"],
        "mcp login" => &["server", "action", "scopes", "registered", "step_up"],
        "mcp logout" => &["server", "action"],
        "pin list" => &["file", "pins"],
        "pin reset" => &["file", "server", "removed"],
        "sandbox check" => &[
            "kernel",
            "default_profile",
            "unsupported",
            "server",
            "profile",
        ],
        "policy check" => &["ok", "rules", "policies", "policy_sha256"],
        "policy eval" => &["effect", "stage", "reasons", "stages", "policy_sha256"],
        "policy test" => &["results"],
        "audit verify" => &[
            "ok",
            "file",
            "count",
            "last_hash",
            "mode",
            "heads",
            "caveats",
            "seq",
            "line",
            "problem",
            "message",
            "verified",
            "last_good_hash",
        ],
        "audit show" => &["file", "records", "verified"],
        "import" => &["config", "notes", "written"],
        "doctor" => &["ok", "checks"],
        "audit head" => &[
            "file",
            "head_file",
            "seq",
            "hash",
            "spec",
            "alg",
            "keyed",
            "generation",
            "authenticated",
        ],
        _ => &[],
    }
}

/// Prints `value` as the command's one object: every usual field present
/// (null where it does not apply) and `error` null unless set.
pub fn print(command: &str, value: Value) -> anyhow::Result<()> {
    let mut map = match value {
        Value::Object(map) => map,
        other => {
            let mut map = Map::new();
            map.insert("value".into(), other);
            map
        }
    };
    for field in fields(command) {
        map.entry(*field).or_insert(Value::Null);
    }
    map.entry("error").or_insert(Value::Null);
    emit(&Value::Object(map))
}

/// The one object for an error that stopped `command` (CONTRACT §2): its
/// usual fields null, `outcome` naming what happened and `error` the
/// message stderr carries too (for `call`, `server` and `tool` as given).
pub fn error_object(command: &str, call: Option<(&str, &str)>, kind: &str, message: &str) -> Value {
    let mut map = Map::new();
    for field in fields(command) {
        map.insert((*field).to_string(), Value::Null);
    }
    if command == "call"
        && let Some((server, tool)) = call
    {
        map.insert("server".into(), json!(server));
        map.insert("tool".into(), json!(tool));
    }
    map.insert("outcome".into(), json!(kind));
    map.insert("error".into(), json!(message));
    Value::Object(map)
}

/// Prints an error object unless an object was printed already.
pub fn print_error(command: &str, call: Option<(&str, &str)>, kind: &str, message: &str) {
    if PRINTED.load(Ordering::SeqCst) {
        return;
    }
    if let Err(error) = emit(&error_object(command, call, kind, message)) {
        eprintln!("warden: {error:#}");
    }
}

fn emit(value: &Value) -> anyhow::Result<()> {
    if PRINTED.swap(true, Ordering::SeqCst) {
        anyhow::bail!("internal: a second JSON object for one command");
    }
    // The same value, but a C1 control or bidi character in a string is
    // written as an escape, so the object is inert on a terminal too.
    let pretty = serde_json::to_string_pretty(value)?;
    let mut text = warden_core::display::json_inert(&pretty).into_owned();
    text.push('\n');
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("writing to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

/// Whether the raw command line asks for `--json` (before a `--`), for
/// errors found before or while parsing it.
pub fn requested(args: &[std::ffi::OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--json")
}

/// Global options that take a value (`--config FILE`), to find the
/// command words in a command line clap could not parse.
const VALUE_OPTIONS: &[&str] = &[
    "--config",
    "--workspace",
    "--policy",
    "--audit",
    "--lock",
    "--model",
    "--max-turns",
    "--max-tool-calls",
    "--timeout",
    "--log-format",
];

/// The command path (`"mcp status"`) and, for `call`, its SERVER and TOOL,
/// guessed from a command line clap could not parse.
pub fn guess_command(args: &[std::ffi::OsString]) -> (String, Vec<String>) {
    let mut words = Vec::new();
    let mut iter = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = iter.next() {
        if arg == "--" {
            break;
        }
        if VALUE_OPTIONS.contains(&arg.as_str()) {
            iter.next();
            continue;
        }
        if arg.starts_with('-') {
            continue;
        }
        words.push(arg);
    }
    let first = words.first().cloned().unwrap_or_default();
    let command = match first.as_str() {
        "mcp" | "pin" | "sandbox" | "policy" | "audit" => match words.get(1) {
            Some(sub) => format!("{first} {sub}"),
            None => first,
        },
        _ => first,
    };
    let rest = if command == "call" {
        words.into_iter().skip(1).take(2).collect()
    } else {
        Vec::new()
    };
    (command, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<std::ffi::OsString> {
        line.split_whitespace().map(Into::into).collect()
    }

    #[test]
    fn the_command_is_found_past_global_options() {
        let (command, rest) =
            guess_command(&args("warden --config c.json --json call fx echo --bogus"));
        assert_eq!(
            (command.as_str(), rest),
            ("call", vec!["fx".into(), "echo".into()])
        );
        let (command, _) = guess_command(&args("warden --audit call --json mcp status --x"));
        assert_eq!(command, "mcp status");
        assert!(requested(&args("warden mcp status --json")));
        assert!(!requested(&args("warden sandbox exec -- tool --json")));
    }

    #[test]
    fn error_objects_have_the_usual_fields() {
        let value = error_object("mcp status", None, "config_error", "bad");
        assert_eq!(
            value,
            json!({"servers": null, "audit": null, "outcome": "config_error", "error": "bad"})
        );
        let value = error_object("call", Some(("fx", "echo")), "unknown_server", "no");
        assert_eq!(
            value,
            json!({"server": "fx", "tool": "echo", "decision": null, "outcome": "unknown_server",
                   "result": null, "error": "no", "duration_ms": null})
        );
    }
}
