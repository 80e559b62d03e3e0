//! The repl's `/resources`, `/prompts`, `/read URI` and `/prompt SERVER
//! PROMPT [JSON]`: what the session's servers offer besides tools, and
//! reading it through the one mediated path (decided, asked about at the
//! terminal, audited) like a model's tool call.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Repl, ReplAsker, clip, lock};
use crate::host::{CallReport, Caller, PromptRef, PromptRequest, ResourceRequest};
use warden_audit::Outcome;
use warden_core::display;

impl Repl {
    /// Waits for the background connections, as a turn does.
    async fn settle(&mut self) {
        let token = CancellationToken::new();
        self.wait_settled(&token).await;
    }

    pub(super) async fn show_resources(&mut self) {
        self.settle().await;
        let resources = self.host.list_resources().await;
        let templates = self.host.list_resource_templates().await;
        for r in &resources {
            let about = r
                .resource
                .description
                .as_deref()
                .unwrap_or(&r.resource.name);
            println!(
                "{:<12} {:<40} {}",
                display::line(&r.server),
                display::line(&r.resource.uri),
                display::line(&clip(about, 80))
            );
        }
        for t in &templates {
            println!(
                "{:<12} {:<40} (template)",
                display::line(&t.server),
                display::line(&t.template.uri_template)
            );
        }
        if resources.is_empty() && templates.is_empty() {
            println!("no resources (none offered, or every one is denied)");
        }
    }

    pub(super) async fn show_prompts(&mut self) {
        self.settle().await;
        let prompts = self.host.list_prompts().await;
        for p in &prompts {
            let args: Vec<String> = p
                .prompt
                .arguments
                .iter()
                .flatten()
                .map(|a| {
                    if a.required == Some(true) {
                        a.name.clone()
                    } else {
                        format!("[{}]", a.name)
                    }
                })
                .collect();
            println!(
                "{:<40} {}",
                display::line(&p.qualified),
                display::line(&args.join(" "))
            );
        }
        if prompts.is_empty() {
            println!("no prompts (none offered, or every one is denied)");
        }
    }

    pub(super) async fn read_resource(&mut self, uri: &str, server: Option<&str>) {
        self.settle().await;
        let (asker, token) = self.one_off_asker();
        let report = self
            .host
            .read_resource(
                ResourceRequest {
                    uri: uri.to_string(),
                    server: server.map(str::to_string),
                    subscribe: false,
                    caller: Caller::Cli,
                },
                Some(&asker),
                token,
                None,
            )
            .await;
        *lock(&self.turn) = None;
        show(&report, "contents");
    }

    pub(super) async fn get_prompt(&mut self, server: &str, prompt: &str, arguments: Option<&str>) {
        self.settle().await;
        let arguments = match arguments.map(serde_json::from_str::<Value>) {
            None => None,
            Some(Ok(Value::Object(map))) => Some(map),
            Some(_) => {
                eprintln!("usage: /prompt SERVER PROMPT [JSON object of arguments]");
                return;
            }
        };
        let (asker, token) = self.one_off_asker();
        let report = self
            .host
            .get_prompt(
                PromptRequest {
                    target: PromptRef::Remote {
                        server: server.to_string(),
                        prompt: prompt.to_string(),
                    },
                    arguments,
                    caller: Caller::Cli,
                },
                Some(&asker),
                token,
                None,
            )
            .await;
        *lock(&self.turn) = None;
        show(&report, "messages");
    }

    /// An asker for one request typed at the prompt; Ctrl-C cancels it.
    fn one_off_asker(&self) -> (ReplAsker, CancellationToken) {
        let token = CancellationToken::new();
        *lock(&self.turn) = Some(token.clone());
        let asker = ReplAsker {
            editor: self.editor.clone(),
            spinner: self.spinner.clone(),
            turn: token.clone(),
        };
        (asker, token)
    }
}

/// Prints the text of a read or a prompt (`key`: `contents` or
/// `messages`), or why there is none.
fn show(report: &CallReport, key: &str) {
    if report.outcome != Outcome::Ok {
        let why = match report.outcome {
            Outcome::Denied => report.denial_text(),
            _ => format!(
                "{}: {}",
                report.outcome,
                report.error.as_deref().unwrap_or("no details")
            ),
        };
        eprintln!("{}", display::text(&crate::scrub::clean(&why)));
        return;
    }
    let items = report
        .result
        .as_ref()
        .and_then(|r| r.get(key))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for item in items {
        let text = item
            .get("text")
            .or_else(|| item.pointer("/content/text"))
            .and_then(Value::as_str);
        match text {
            Some(text) => println!("{}", display::text(&crate::scrub::secrets_only(text))),
            None => println!("[non-text content]"),
        }
    }
}
