//! Human-readable output shared by commands.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};

use serde_json::Value;

use super::GlobalArgs;
use crate::host::CallReport;
use warden_audit::Outcome;
use warden_core::display;

/// How the text a server or a model wrote reaches stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stdout {
    /// Byte for byte: stdout is a pipe or a file (the text is data for
    /// whatever reads it), or `--raw` asked for it.
    Exact,
    /// Exact but for [`display::workflow_commands`]: a pipe that a CI
    /// runner reads (`GITHUB_ACTIONS`, `TF_BUILD`) without `--ci`. The
    /// runner would obey a `::add-mask::` line in the text.
    ExactForRunner,
    /// Through [`display::text`]: a person reads it on a terminal, or in
    /// the log of a `--ci` job.
    Shown,
}

impl Stdout {
    /// Exact unless a person is reading (stdout is a terminal, or `--ci`
    /// says it is a CI job's log) or a CI runner is (see [`ci_runner`]),
    /// and `--raw` was not given.
    pub fn for_results(global: &GlobalArgs) -> Stdout {
        if global.raw {
            Stdout::Exact
        } else if global.ci || std::io::stdout().is_terminal() {
            Stdout::Shown
        } else if ci_runner(&|k| std::env::var_os(k)) {
            Stdout::ExactForRunner
        } else {
            Stdout::Exact
        }
    }

    pub fn apply<'a>(self, text: &'a str) -> Cow<'a, str> {
        match self {
            Stdout::Exact => Cow::Borrowed(text),
            Stdout::ExactForRunner => display::workflow_commands(text),
            Stdout::Shown => display::text(text),
        }
    }
}

/// Whether a CI runner that acts on workflow commands in the log reads
/// this process's output: GitHub Actions and the Gitea and Forgejo runners
/// set `GITHUB_ACTIONS`, Azure Pipelines `TF_BUILD`. Its log is a pipe, yet
/// the runner obeys a `::add-mask::` or `##vso[` line in it.
pub fn ci_runner(env: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    ["GITHUB_ACTIONS", "TF_BUILD"]
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.is_empty()))
}

/// Prints one result text on stdout (with a final newline); a closed pipe
/// (`| head`) is not an error.
pub fn print_result_text(text: &str, stdout: Stdout) {
    let mut out = std::io::stdout().lock();
    let _ = out
        .write_all(stdout.apply(text).as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

/// Prints a call's result for a person: text blocks as they are, other
/// blocks summarised on one line each, then the decision on stderr (where
/// a server's error text is always neutralised: stderr is for people).
pub fn print_call_report(report: &CallReport, stdout: Stdout) {
    if let Some(result) = &report.result {
        for line in render_result(result, stdout) {
            print_result_text(&line, stdout);
        }
    }
    let error = |fallback: &'static str| display::text(report.error.as_deref().unwrap_or(fallback));
    match report.outcome {
        Outcome::Ok => {}
        Outcome::Denied => match &report.decision {
            Some(d) => eprintln!(
                "denied by the {} stage: {}",
                d.stage,
                display::line(&d.reasons.join("; "))
            ),
            None => eprintln!("denied"),
        },
        Outcome::ToolError => eprintln!("the tool reported an error"),
        outcome if outcome.is_refusal() => eprintln!("warden: {}", error("refused")),
        other => eprintln!("{}: {}", other.as_str(), error("no detail")),
    }
}

/// One line (or a text block) per content block of a `CallToolResult`.
/// On a terminal the one-line fields (URIs, names, MIME types) are shown
/// as fields, so a newline in one cannot fake a line; the caller shows the
/// whole as text.
pub fn render_result(result: &Value, stdout: Stdout) -> Vec<String> {
    let mut lines = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("?");
        let field = |text: &'_ str| -> String {
            match stdout {
                // The printer breaks workflow commands in the whole line.
                Stdout::Exact | Stdout::ExactForRunner => text.to_string(),
                Stdout::Shown => display::line(text).into_owned(),
            }
        };
        let str_of = |key: &str| field(block.get(key).and_then(Value::as_str).unwrap_or(""));
        lines.push(match kind {
            // The text itself: shown as text (or exact) by the printer.
            "text" => block
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes base64]",
                str_of("mimeType"),
                block
                    .get("data")
                    .and_then(Value::as_str)
                    .map_or(0, str::len)
            ),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                let uri = field(resource.get("uri").and_then(Value::as_str).unwrap_or(""));
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => format!("[resource {uri}]\n{text}"),
                    None => format!("[resource {uri} (binary)]"),
                }
            }
            "resource_link" => format!("[resource link {} {}]", str_of("uri"), str_of("name")),
            other => format!("[{} content]", field(other)),
        });
    }
    if let Some(structured) = result.get("structuredContent")
        && lines.is_empty()
    {
        lines.push(serde_json::to_string_pretty(structured).unwrap_or_default());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a terminal a result's one-line fields cannot start a line of
    /// their own; its text is left to the printer (exact or shown).
    #[test]
    fn result_fields_are_fields_on_a_terminal() {
        let result = serde_json::json!({"content": [
            {"type": "text", "text": "a\u{1b}[2J\nb"},
            {"type": "resource_link", "uri": "file:///x\nwarden: approved", "name": "n\u{202e}"},
            {"type": "image", "mimeType": "image/png\r", "data": "AAAA"},
            {"type": "x\u{9b}"},
        ]});
        let shown = render_result(&result, Stdout::Shown);
        assert_eq!(shown[0], "a\u{1b}[2J\nb", "the printer shows the text");
        assert_eq!(
            shown[1],
            "[resource link file:///x^Jwarden: approved n<U+202E>]"
        );
        assert_eq!(shown[2], "[image: image/png^M, 4 bytes base64]");
        assert_eq!(shown[3], "[x<U+009B> content]");
        assert_eq!(Stdout::Shown.apply(&shown[0]), "a^[[2J\nb");
        let exact = render_result(&result, Stdout::Exact);
        assert_eq!(
            exact[1],
            "[resource link file:///x\nwarden: approved n\u{202e}]"
        );
        assert_eq!(Stdout::Exact.apply(&exact[0]), "a\u{1b}[2J\nb");
    }
}
