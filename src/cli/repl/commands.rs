//! The repl's slash commands: `/mcp` (and `reload`, `add`, `remove`,
//! `approve`), `/tools`, `/resources`, `/prompts`, `/read`, `/prompt`
//! (in `resources.rs`), `/workspace` (in `workspace.rs`), `/policy`,
//! `/audit [N]`, `/help`, `/quit`; and the
//! approval of project servers on first use.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use serde_json::{Value, json};

use super::Repl;
use super::editor::Read;
use crate::config::{self, Approvals, LoadOptions, Scope};
use crate::mcp::ServerState;
use warden_audit::Event;
use warden_core::display;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

const HELP: &str = "\
Type a task for the model, or a command:
  /mcp                       servers: state, protocol version, tool count, errors
  /mcp reload [NAME]         reconnect one server (or all)
  /mcp add NAME CMD [ARGS…]  add a stdio server for this session (untrusted, default sandbox)
  /mcp remove NAME           stop a server and drop it for this session
  /mcp approve NAME          approve a project server's exact configuration
  /tools                     the tools the model sees
  /resources                 resources and templates the servers offer (what is not denied)
  /prompts                   prompts the servers offer, as prompt__SERVER__PROMPT
  /read [SERVER] URI         read a resource (decided and audited like a tool call)
  /prompt SERVER PROMPT [JSON]  get a prompt with arguments (decided and audited)
  /policy                    loaded policies and their SHA-256 digests
  /policy reload             load rules and policies again (a failure keeps the current ones)
  /audit [N]                 the last N records of this session's audit log (default 10)
  /workspace [DIR]           the workspace, or narrow the root servers are given to DIR in it
  /help                      this text
  /quit                      stop the servers and leave (also Ctrl-D)
Ctrl-C cancels a running turn; at the prompt it clears the line.";

impl Repl {
    pub(super) async fn command(&mut self, line: &str) -> Flow {
        let words = match split_words(line) {
            Ok(words) => words,
            Err(error) => {
                eprintln!("{error}");
                return Flow::Continue;
            }
        };
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        match words.as_slice() {
            ["/quit"] | ["/exit"] | ["/q"] => return Flow::Quit,
            ["/help"] | ["/?"] => println!("{HELP}"),
            ["/mcp"] | ["/mcp", "status"] | ["/mcp", "list"] => self.show_servers(),
            ["/mcp", "reload"] => self.reload(None).await,
            ["/mcp", "reload", name] => self.reload(Some(name)).await,
            ["/mcp", "add", name, command, args @ ..] => self.add(name, command, args).await,
            ["/mcp", "remove", name] => self.remove(name).await,
            ["/mcp", "approve", name] => self.approve(name, true).await,
            ["/tools"] => self.show_tools(),
            ["/resources"] => self.show_resources().await,
            ["/prompts"] => self.show_prompts().await,
            ["/read", uri] => self.read_resource(uri, None).await,
            ["/read", server, uri] => self.read_resource(uri, Some(server)).await,
            ["/prompt", server, prompt] => self.get_prompt(server, prompt, None).await,
            ["/prompt", server, prompt, args] => self.get_prompt(server, prompt, Some(args)).await,
            ["/policy"] => self.show_policy(),
            ["/policy", "reload"] => self.reload_policy(),
            ["/workspace"] => self.workspace(None).await,
            ["/workspace", dir] => self.workspace(Some(dir)).await,
            ["/audit"] => self.show_audit(10),
            ["/audit", n] => match n.parse::<usize>() {
                Ok(n) => self.show_audit(n),
                Err(_) => eprintln!("usage: /audit [N]  (N a number of records)"),
            },
            [cmd, ..]
                if matches!(
                    *cmd,
                    "/mcp" | "/audit" | "/tools" | "/policy" | "/read" | "/prompt" | "/workspace"
                ) =>
            {
                eprintln!("usage error; /help lists the commands and their arguments");
            }
            [cmd, ..] => eprintln!("unknown command `{cmd}`; /help lists the commands"),
            [] => {}
        }
        Flow::Continue
    }

    fn show_servers(&self) {
        let statuses = self.host.statuses();
        if statuses.is_empty() {
            println!("no servers configured (add one with /mcp add NAME CMD [ARGS…])");
            return;
        }
        let view = self.host.tools();
        for status in statuses {
            let tools = view.visible().filter(|t| t.server == status.name).count();
            let state = serde_json::to_value(status.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            println!(
                "{:<16} {:<16} {:<6} protocol {:<11} {} tool{}",
                status.name,
                state,
                status.transport,
                display::line(status.protocol.as_deref().unwrap_or("-")),
                tools,
                super::plural(tools)
            );
            if let Some(error) = &status.error {
                println!("    error: {}", display::line(error));
            }
            let skipped = view
                .skipped()
                .iter()
                .filter(|s| s.server == status.name)
                .count();
            if skipped > 0 {
                println!("    {skipped} tool(s) skipped (see `warden mcp status`)");
            }
        }
    }

    async fn reload(&self, name: Option<&str>) {
        let names: Vec<String> = match name {
            Some(name) => vec![name.to_string()],
            None => self
                .host
                .statuses()
                .into_iter()
                .filter(|s| {
                    !matches!(
                        s.state,
                        ServerState::Disabled | ServerState::Blocked | ServerState::PendingApproval
                    )
                })
                .map(|s| s.name)
                .collect(),
        };
        for name in names {
            self.spinner.start(&format!("reconnecting {name}…"));
            let result = self.host.manager().reconnect(&name).await;
            self.spinner.stop();
            match result {
                Ok(()) => println!("{name}: reconnected"),
                Err(error) => eprintln!("{name}: {}", display::text(&error.to_string())),
            }
        }
    }

    async fn add(&self, name: &str, command: &str, args: &[&str]) {
        let server = match session_server(&self.host, name, command, args) {
            Ok(server) => server,
            Err(error) => {
                eprintln!("cannot add `{name}`: {error}");
                return;
            }
        };
        self.spinner.start(&format!("connecting {name}…"));
        let result = self.host.add_server(server).await;
        self.spinner.stop();
        match result {
            Ok(()) => {
                let tools = self
                    .host
                    .tools()
                    .visible()
                    .filter(|t| t.server == name)
                    .count();
                println!(
                    "{name}: added for this session (untrusted, default sandbox), {tools} tool{}",
                    super::plural(tools)
                );
            }
            Err(error) => eprintln!("{name}: {}", display::text(&error.to_string())),
        }
    }

    async fn remove(&self, name: &str) {
        self.spinner.start(&format!("stopping {name}…"));
        let removed = self.host.remove_server(name).await;
        self.spinner.stop();
        if removed {
            println!("{name}: stopped and removed for this session");
        } else {
            eprintln!("no server named `{name}`");
        }
    }

    fn show_tools(&self) {
        let view = self.host.tools();
        let mut count = 0;
        for tool in view.visible() {
            count += 1;
            let description = tool
                .definition
                .description
                .as_deref()
                .and_then(|d| d.lines().next())
                .unwrap_or("");
            println!(
                "{:<40} {}",
                tool.qualified,
                display::line(&super::clip(description, 100))
            );
        }
        for skipped in view.skipped() {
            println!(
                "{:<40} skipped: {}",
                format!("{}/{}", skipped.server, display::line(&skipped.name)),
                display::line(&skipped.reason)
            );
        }
        if count == 0 {
            let connecting = self
                .host
                .statuses()
                .iter()
                .any(|s| s.state == ServerState::Connecting);
            if connecting {
                println!("no tools yet: servers are still connecting");
            } else {
                println!("no tools");
            }
        }
    }

    fn reload_policy(&self) {
        match self.host.reload_policy() {
            Ok(reloaded) => {
                println!(
                    "policy reloaded: {} permission rules, policy set {}",
                    reloaded.rules,
                    reloaded.policy_sha256.as_deref().unwrap_or("(none)")
                );
            }
            Err(error) => {
                eprintln!("policy reload refused; the current policy stays in force:\n{error}");
            }
        }
    }

    fn show_policy(&self) {
        let pipeline = self.host.pipeline();
        let loaded = pipeline.loaded_policies();
        if loaded.is_empty() {
            println!("no Rego policies loaded (permission rules only)");
        }
        for (path, sha) in loaded {
            println!("{}  {}", sha, path.display());
        }
        if let Some(digest) = pipeline.policy_sha256() {
            println!("policy set sha256: {digest}");
        }
        let mode = serde_json::to_value(self.host.mode()).unwrap_or(Value::Null);
        println!("mode: {}", mode.as_str().unwrap_or("?"));
    }

    fn show_audit(&self, n: usize) {
        let Some(path) = self.host.audit_path() else {
            println!("no audit log in this session (configure `audit.path` or pass --audit FILE)");
            return;
        };
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(error) => {
                eprintln!("cannot read {}: {error}", path.display());
                return;
            }
        };
        let session = self.host.session();
        let mut records: std::collections::VecDeque<Value> = Default::default();
        // A `tool_result` is shown with its call's name (by call_id).
        let mut names: std::collections::HashMap<String, Value> = Default::default();
        for line in std::io::BufReader::new(file).lines() {
            let Ok(line) = line else { break };
            let Ok(mut record) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if record["session"].as_str() != Some(session) {
                continue;
            }
            let id = record["call_id"].as_str().unwrap_or_default().to_string();
            match record["event"].as_str() {
                Some("tool_call") => {
                    names.insert(id, record["qualified"].clone());
                }
                Some("tool_result") => {
                    record["qualified"] = names.get(&id).cloned().unwrap_or_default();
                }
                _ => {}
            }
            records.push_back(record);
            if records.len() > n {
                records.pop_front();
            }
        }
        println!("{} (session {session})", path.display());
        for record in records {
            println!("{}", display::line(&compact_record(&record)));
        }
    }

    /// Offers approval of each project server pending approval, showing its
    /// exact configuration first (as `warden mcp approve` does).
    pub(super) async fn offer_approvals(&self) {
        let pending: Vec<String> = self
            .host
            .statuses()
            .into_iter()
            .filter(|s| s.state == ServerState::PendingApproval)
            .map(|s| s.name)
            .collect();
        for name in pending {
            self.approve(&name, false).await;
        }
    }

    /// Shows `name`'s exact configuration and asks; on yes records the
    /// approval (approvals file and audit log) and, when `connect`, starts it.
    async fn approve(&self, name: &str, connect: bool) {
        let Some(server) = self.host.config().servers.get(name) else {
            eprintln!("no configured server named `{name}`");
            return;
        };
        if !self
            .host
            .statuses()
            .iter()
            .any(|s| s.name == name && s.state == ServerState::PendingApproval)
        {
            eprintln!("`{name}` is not waiting for approval");
            return;
        }
        if !std::io::stdin().is_terminal() {
            // As `warden mcp approve`: a piped line never approves a server.
            eprintln!(
                "`{name}` awaits approval; standard input is not a terminal, so it cannot be \
                 approved here: run `warden mcp approve {name}`"
            );
            return;
        }
        let raw = match config::raw_server_entry(server) {
            Ok(raw) => raw,
            Err(error) => {
                eprintln!("{error}");
                return;
            }
        };
        let preamble = super::super::mcp_config::describe(self.host.config(), server, &raw);
        let question = format!("Approve `{name}` with exactly this configuration? [y/N] ");
        let answer = self.editor.read(&preamble, &question, false).await;
        let Read::Line(answer) = answer else {
            eprintln!("Not approved; `{name}` will not start.");
            return;
        };
        if !matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
            eprintln!("Not approved; `{name}` will not start.");
            return;
        }
        // Written ahead: an approval the audit log cannot take is not made.
        if let Err(refusal) = self.host.audit_ahead(Event::Approval {
            server: name.to_string(),
            config_sha256: server.digest.clone(),
            action: warden_audit::ApprovalAction::Approved,
            subject: "server configuration".to_string(),
            call_id: None,
        }) {
            eprintln!(
                "Not approved; `{name}` will not start: the approval could not be recorded ({})",
                refusal.0
            );
            return;
        }
        let recorded = Approvals::load(&self.host.config().config_dir)
            .and_then(|mut approvals| approvals.approve(server).map(|()| approvals));
        match recorded {
            Ok(approvals) => eprintln!(
                "Approved `{name}`; recorded in {}.",
                approvals.path().display()
            ),
            Err(error) => {
                eprintln!(
                    "the approval is in the audit log but could not be saved, so `{name}` is \
                     still not approved: {error}"
                );
                return;
            }
        }
        if connect {
            self.spinner.start(&format!("connecting {name}…"));
            let result = self.host.admit_server(name).await;
            self.spinner.stop();
            match result {
                Ok(()) => println!("{name}: connected"),
                Err(error) => eprintln!("{name}: {error}"),
            }
        } else if let Err(error) = self
            .host
            .manager()
            .readmit(name, crate::mcp::Admission::Start)
        {
            eprintln!("{name}: {error}");
        }
    }
}

/// A stdio server for this session only: `{"command": CMD, "args": ARGS}`
/// validated by the configuration loader like any configured server
/// (untrusted, default sandbox), in the user's scope.
fn session_server(
    host: &crate::host::Host,
    name: &str,
    command: &str,
    args: &[&str],
) -> anyhow::Result<config::ServerConfig> {
    // A command with a slash is relative to where the person is, not to the
    // temporary file the entry is validated from.
    let command = if command.contains('/') {
        std::path::absolute(command)?.display().to_string()
    } else {
        command.to_string()
    };
    let dir = tempfile::Builder::new()
        .prefix("warden-repl-add-")
        .tempdir()?;
    let file = dir.path().join("session.json");
    let document = json!({
        "mcpServers": {name: {"command": command, "args": args}},
        "policy": [],
    });
    std::fs::write(&file, serde_json::to_vec_pretty(&document)?)?;
    let loaded = config::load(&LoadOptions {
        config_file: Some(file.clone()),
        workspace: host.config().workspace.clone(),
        config_dir: host.config().config_dir.clone(),
    })
    .map_err(|e| {
        // The position in the generated file means nothing to the person.
        let message = e.to_string();
        let prefix = file.display().to_string();
        let message = message
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split_once(": "))
            .map_or(message.as_str(), |(_, rest)| rest);
        anyhow::anyhow!("{message}")
    })?;
    let mut server = loaded
        .servers
        .get(name)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the server entry did not load"))?;
    server.scope = Scope::User;
    server.source = PathBuf::from("(added in the repl with /mcp add)");
    Ok(server)
}

/// One audit record on one line: `seq time event details`.
fn compact_record(record: &Value) -> String {
    let seq = record["seq"].as_u64().unwrap_or(0);
    let ts = record["ts"].as_str().unwrap_or("");
    let time = ts.get(11..19).unwrap_or(ts);
    let event = record["event"].as_str().unwrap_or("?");
    let detail = match event {
        "tool_call" if record["decision"].is_object() => format!(
            "{} {} ({}) → {}",
            record["qualified"].as_str().unwrap_or("?"),
            record["decision"]["effect"].as_str().unwrap_or("?"),
            record["decision"]["stage"].as_str().unwrap_or("?"),
            record["outcome"].as_str().unwrap_or("?"),
        ),
        "tool_call" => format!(
            "{} → {}",
            record["qualified"].as_str().unwrap_or("?"),
            record["outcome"].as_str().unwrap_or("?"),
        ),
        "policy_reload" if record["ok"] == Value::Bool(true) => "policy reloaded".to_string(),
        "policy_reload" => format!(
            "policy reload refused, previous kept: {}",
            record["error"].as_str().unwrap_or("?")
        ),
        "tool_result" => format!(
            "{} → {} {}ms",
            record["qualified"].as_str().unwrap_or("?"),
            record["outcome"].as_str().unwrap_or("?"),
            record["duration_ms"].as_u64().unwrap_or(0)
        ),
        "request" => format!(
            "{} {} {} → {}",
            record["kind"].as_str().unwrap_or("?"),
            record["target"].as_str().unwrap_or("?"),
            record["arguments"]["uri"].as_str().unwrap_or(""),
            record["outcome"].as_str().unwrap_or("?"),
        ),
        "request_result" => format!(
            "{} → {} {}ms",
            record["kind"].as_str().unwrap_or("?"),
            record["outcome"].as_str().unwrap_or("?"),
            record["duration_ms"].as_u64().unwrap_or(0)
        ),
        "audit_gap" => format!(
            "{} records lost since {}",
            record["lost"],
            record["since"].as_str().unwrap_or("?")
        ),
        "server_start" => format!(
            "{} pid {}",
            record["server"].as_str().unwrap_or("?"),
            record["pid"]
        ),
        "server_exit" => format!(
            "{} pid {}: {}",
            record["server"].as_str().unwrap_or("?"),
            record["pid"],
            record["reason"].as_str().unwrap_or("")
        ),
        "approval" => format!(
            "{} {} ({})",
            record["server"].as_str().unwrap_or("?"),
            record["action"].as_str().unwrap_or("?"),
            record["subject"].as_str().unwrap_or("")
        ),
        "session_start" => format!(
            "warden {} mode {}",
            record["warden_version"].as_str().unwrap_or("?"),
            record["mode"].as_str().unwrap_or("?")
        ),
        _ => String::new(),
    };
    format!("{seq:>5} {time} {event:<13} {detail}")
}

/// Splits a command line into words; `"…"` and `'…'` group words with
/// spaces, `\` escapes the next character outside single quotes.
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => match chars.next() {
                Some(next) => word.push(next),
                None => return Err("a `\\` at the end of the line escapes nothing".into()),
            },
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote".into());
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_with_quotes() {
        assert_eq!(
            split_words(r#"/mcp add x "/a b/c" 'd "e"' f\ g"#).unwrap(),
            vec!["/mcp", "add", "x", "/a b/c", "d \"e\"", "f g"]
        );
        assert!(split_words("/mcp add 'x").is_err());
    }

    #[test]
    fn records_are_compact() {
        let r = json!({"seq": 3, "ts": "2026-01-01T10:11:12Z", "event": "tool_call",
            "qualified": "mcp__notes__read_note", "decision": {"effect": "allow", "stage": "rules"},
            "outcome": "pending"});
        assert_eq!(
            compact_record(&r),
            "    3 10:11:12 tool_call     mcp__notes__read_note allow (rules) → pending"
        );
        let r = json!({"seq": 4, "ts": "2026-01-01T10:11:12Z", "event": "tool_result",
            "qualified": "mcp__notes__read_note", "outcome": "ok", "duration_ms": 4});
        assert_eq!(
            compact_record(&r),
            "    4 10:11:12 tool_result   mcp__notes__read_note → ok 4ms"
        );
    }
}
