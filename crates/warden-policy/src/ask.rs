//! Asking a person (or an MCP client) about an `ask` decision: what is
//! asked ([`AskPrompt`]), the possible answers, and the [`Asker`] trait.
//! Implementations live with their front ends: the terminal asker and the
//! repl in the warden crate, the gateway's elicitation asker, test doubles.

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use warden_core::Stage;

/// What is put to the person deciding.
#[derive(Debug, Clone, Serialize)]
pub struct AskPrompt {
    pub server: String,
    /// The server's own tool name.
    pub tool: String,
    pub qualified: String,
    pub arguments: Value,
    /// Every argument key with its value, for showing: see
    /// [`argument_lines`]. A question shows all of them (values may be
    /// shortened, keys never).
    pub argument_lines: Vec<ArgumentLine>,
    /// The stage that asked.
    pub stage: Stage,
    pub reasons: Vec<String>,
}

/// One argument as shown in a question: its key (a JSON pointer for
/// nested keys, `/opts/mode`) in full and its value, shortened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArgumentLine {
    pub key: String,
    pub value: String,
}

/// Most lines a question may hold; more keys than this, and warden denies
/// instead of asking about arguments nobody can read.
pub const MAX_ARGUMENT_LINES: usize = 200;
/// Longest key shown (keys are never shortened: a longer one denies).
pub const MAX_KEY_CHARS: usize = 256;
/// Longest value shown; longer values are shortened with `…`.
pub const MAX_VALUE_CHARS: usize = 160;

/// Every key of `arguments` (nested objects and arrays of objects
/// expanded, so no key hides inside a shortened value) with its value
/// shortened; `Err` when they cannot all be shown.
pub fn argument_lines(arguments: &Value) -> Result<Vec<ArgumentLine>, String> {
    fn walk(v: &Value, at: &str, out: &mut Vec<ArgumentLine>) -> Result<(), String> {
        let expand = match v {
            Value::Object(map) => !map.is_empty(),
            Value::Array(items) => items.iter().any(|i| i.is_object() || i.is_array()),
            _ => false,
        };
        if !expand {
            if at.chars().count() > MAX_KEY_CHARS {
                return Err(format!(
                    "an argument key is {} characters long (at most {MAX_KEY_CHARS} can be shown)",
                    at.chars().count()
                ));
            }
            if out.len() >= MAX_ARGUMENT_LINES {
                return Err(format!(
                    "the arguments have more than {MAX_ARGUMENT_LINES} keys and values to show"
                ));
            }
            out.push(ArgumentLine {
                key: if at.is_empty() {
                    "/".into()
                } else {
                    at.to_string()
                },
                value: shorten(
                    &serde_json::to_string(v).unwrap_or_default(),
                    MAX_VALUE_CHARS,
                ),
            });
            return Ok(());
        }
        match v {
            Value::Object(map) => {
                for (k, item) in map {
                    let key = format!("{at}/{}", crate::canon::pointer_token(k));
                    walk(item, &key, out)?;
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{at}/{i}"), out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }
    let mut out = Vec::new();
    match arguments {
        Value::Object(map) if map.is_empty() => {}
        Value::Null => {}
        v => walk(v, "", &mut out)?,
    }
    Ok(out)
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_key_is_shown_even_after_a_long_value() {
        let args =
            json!({"a_first": "x".repeat(5000), "z_last": "rm -rf /", "opts": {"force": true}});
        let lines = argument_lines(&args).unwrap();
        let keys: Vec<&str> = lines.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["/a_first", "/opts/force", "/z_last"]);
        assert!(lines[0].value.chars().count() <= MAX_VALUE_CHARS);
        assert_eq!(lines[2].value, "\"rm -rf /\"");
    }

    #[test]
    fn keys_that_cannot_be_shown_refuse() {
        assert!(argument_lines(&json!({"k".repeat(300): 1})).is_err());
        let many: serde_json::Map<String, Value> =
            (0..201).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(argument_lines(&Value::Object(many)).is_err());
        // Arrays of objects are expanded, arrays of scalars are one value.
        let lines = argument_lines(&json!({"files": [{"path": "a", "mode": "w"}], "tags": [1, 2]}))
            .unwrap();
        let keys: Vec<&str> = lines.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys, ["/files/0/mode", "/files/0/path", "/tags"]);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AskAnswer {
    AllowOnce,
    /// Allow this tool for the rest of the session (for the same kind of ask).
    AllowSession,
    Deny,
    /// No one could be asked (no terminal to open): not an answer, so no
    /// `approval` is recorded; the call is denied all the same.
    Unasked,
}

/// Answers `ask` decisions. Anything but an explicit allow is a deny.
pub trait Asker: Send + Sync {
    fn ask<'a>(&'a self, prompt: &'a AskPrompt) -> BoxFuture<'a, AskAnswer>;
}
