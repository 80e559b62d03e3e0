//! Text that reaches a person's terminal: neutralising control characters
//! from servers and models, the `ask` question, and [`TerminalAsker`], the
//! [`Asker`] that puts it on the controlling terminal.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use futures::future::BoxFuture;
use warden_core::Effect;
use warden_policy::{AskAnswer, AskPrompt, Asker};

/// Prompts on the controlling terminal (`/dev/tty`, not stdin/stdout, which
/// may carry protocol). Any error, EOF or unrecognised answer is a deny.
#[derive(Debug, Clone)]
pub struct TerminalAsker {
    tty: PathBuf,
}

impl Default for TerminalAsker {
    fn default() -> Self {
        TerminalAsker {
            tty: PathBuf::from("/dev/tty"),
        }
    }
}

impl TerminalAsker {
    pub fn new() -> Self {
        Self::default()
    }

    /// A terminal asker on another device (tests use a pseudo-terminal or file).
    pub fn with_device(tty: impl Into<PathBuf>) -> Self {
        TerminalAsker { tty: tty.into() }
    }
}

impl Asker for TerminalAsker {
    fn ask<'a>(&'a self, prompt: &'a AskPrompt) -> BoxFuture<'a, AskAnswer> {
        let tty = self.tty.clone();
        let text = render_prompt(prompt);
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || {
                let file = match std::fs::OpenOptions::new().read(true).write(true).open(&tty) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(tty = %tty.display(), error = %e, "cannot open the terminal to ask; denying");
                        return AskAnswer::Deny;
                    }
                };
                let reader = match file.try_clone() {
                    Ok(r) => std::io::BufReader::new(r),
                    Err(_) => return AskAnswer::Deny,
                };
                prompt_on(reader, file, &text)
            })
            .await;
            answer.unwrap_or(AskAnswer::Deny)
        })
    }
}

/// Writes the prompt, reads one answer. EOF, errors and anything not
/// understood are `Deny`.
pub fn prompt_on(mut reader: impl BufRead, mut writer: impl Write, text: &str) -> AskAnswer {
    if writer.write_all(text.as_bytes()).is_err() || writer.flush().is_err() {
        return AskAnswer::Deny;
    }
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => AskAnswer::Deny,
        Ok(_) => parse_answer(&line),
    }
}

pub fn parse_answer(line: &str) -> AskAnswer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "o" | "once" | "a" | "allow" => AskAnswer::AllowOnce,
        "s" | "session" | "always" => AskAnswer::AllowSession,
        _ => AskAnswer::Deny,
    }
}

/// Removes control characters (terminal escape sequences) from text that
/// came from a server or a model before it reaches a terminal.
pub fn sanitize_for_terminal(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                '�'
            } else {
                c
            }
        })
        .collect()
}

/// The text put to the person (control characters neutralised); its last
/// line is the question itself.
pub fn render_prompt(p: &AskPrompt) -> String {
    // Every key, values shortened (the pipeline denies rather than asking
    // when they cannot all be shown).
    let args = if p.argument_lines.is_empty() {
        "    (none)".to_string()
    } else {
        p.argument_lines
            .iter()
            .map(|l| format!("    {}: {}", l.key, l.value))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let reasons = p
        .reasons
        .iter()
        .map(|r| format!("  - {r}"))
        .collect::<Vec<_>>()
        .join("\n");
    sanitize_for_terminal(&format!(
        "\nwarden: tool call needs your approval ({effect} from stage `{stage}`)\n  \
         server: {server}\n  tool:   {tool} ({qualified})\n  arguments:\n{args}\n  why:\n{reasons}\n\
         Allow? [o]nce / [s]ession / [N]o: ",
        effect = Effect::Ask,
        stage = p.stage,
        server = p.server,
        tool = p.tool,
        qualified = p.qualified,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eof_and_garbage_deny() {
        let mut out = Vec::new();
        assert_eq!(prompt_on(&b""[..], &mut out, "?"), AskAnswer::Deny);
        assert_eq!(prompt_on(&b"maybe\n"[..], &mut out, "?"), AskAnswer::Deny);
        assert_eq!(prompt_on(&b"\n"[..], &mut out, "?"), AskAnswer::Deny);
        assert_eq!(prompt_on(&b"o\n"[..], &mut out, "?"), AskAnswer::AllowOnce);
        assert_eq!(
            prompt_on(&b"S\n"[..], &mut out, "?"),
            AskAnswer::AllowSession
        );
    }

    /// A long first argument once cut the prompt at 2,000 characters, so
    /// later keys were never shown.
    #[test]
    fn every_key_is_shown_after_a_long_value() {
        let arguments = serde_json::json!({"aaa": "x".repeat(10_000), "zzz_command": "rm -rf /"});
        let prompt = AskPrompt {
            server: "s".into(),
            tool: "t".into(),
            qualified: "mcp__s__t".into(),
            argument_lines: warden_policy::argument_lines(&arguments).unwrap(),
            arguments,
            stage: warden_core::Stage::Rules,
            reasons: vec!["r".into()],
        };
        let text = render_prompt(&prompt);
        assert!(text.contains("/zzz_command: \"rm -rf /\""), "{text}");
        assert!(text.len() < 1_000, "{}", text.len());
    }

    #[test]
    fn escapes_are_neutralised() {
        assert_eq!(sanitize_for_terminal("a\x1b[2Jb"), "a�[2Jb");
    }
}
