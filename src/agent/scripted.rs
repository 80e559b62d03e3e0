//! `scripted:FILE`: a model that replays a JSON list of assistant turns, for
//! tests and the offline demo.
//!
//! ```json
//! [
//!   {"text": "Reading the note.", "tool_calls": [{"name": "mcp__notes__read_note", "arguments": {"id": "a"}}]},
//!   {"expect": "denied", "tool_calls": [{"name": "mcp__notes__list_notes"}]},
//!   {"text": "Done."}
//! ]
//! ```
//!
//! Each turn has `text` and/or `tool_calls` (each `{"name", "arguments"?,
//! "id"?}`); a turn without `tool_calls` ends the run. The optional
//! `expect` (a string or a list of strings) makes the script check what it
//! was given: each string must occur in the messages that came in since the
//! previous turn (the tool results, or the task for the first turn), else the
//! model fails. That is how a scripted run proves that it saw a denial.
//! `absent` (a string or a list) is the opposite, over everything the model
//! is sent (system prompt, every message, the tool definitions): none of
//! the strings may occur, else the model fails without saying where (so a
//! leaked secret is not printed by the failure itself). `wait_ms` makes the
//! model take that long to answer, as a real one thinks: a time in which no
//! tool call is in flight (tests of what a server may do meanwhile).

use std::path::Path;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{Message, Model, ModelError, ModelRequest, ModelTurn, ToolCall, Usage};

#[derive(Debug, Clone)]
struct ScriptTurn {
    text: Option<String>,
    tool_calls: Vec<ToolCall>,
    expect: Vec<String>,
    absent: Vec<String>,
    wait_ms: u64,
}

/// Replays assistant turns in order.
#[derive(Debug)]
pub struct ScriptedModel {
    origin: String,
    turns: Vec<ScriptTurn>,
    next: Mutex<usize>,
}

impl ScriptedModel {
    /// Reads and checks a script file.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Script {
            file: origin.clone(),
            message: format!("cannot read the script: {e}"),
        })?;
        Self::from_json_str(&text, &origin)
    }

    /// Parses a script; `origin` names it in errors (a file name).
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self, ModelError> {
        let err = |message: String| ModelError::Script {
            file: origin.to_string(),
            message,
        };
        let v: Value =
            serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
        let list = v
            .as_array()
            .ok_or_else(|| err("must be a JSON list of assistant turns".into()))?;
        if list.is_empty() {
            return Err(err("the list of turns is empty".into()));
        }
        let turns = list
            .iter()
            .enumerate()
            .map(|(i, t)| parse_turn(i, t).map_err(|m| err(format!("turn {i}: {m}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            origin: origin.to_string(),
            turns,
            next: Mutex::new(0),
        })
    }

    /// Turns not yet replayed.
    pub fn remaining(&self) -> usize {
        let next = *self.next.lock().unwrap_or_else(|p| p.into_inner());
        self.turns.len().saturating_sub(next)
    }

    /// The next turn to replay (counted as replayed).
    fn take_turn(&self) -> Result<(usize, &ScriptTurn), ModelError> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let index = *next;
        let turn = self.turns.get(index).ok_or(ModelError::Exhausted)?;
        *next += 1;
        Ok((index, turn))
    }

    fn next_turn(
        &self,
        index: usize,
        turn: &ScriptTurn,
        request: &ModelRequest,
    ) -> Result<ModelTurn, ModelError> {
        if !turn.expect.is_empty() {
            let incoming = incoming_text(&request.messages);
            for e in &turn.expect {
                if !incoming.contains(e.as_str()) {
                    let shown: String = incoming.chars().take(300).collect();
                    return Err(ModelError::Script {
                        file: self.origin.clone(),
                        message: format!(
                            "turn {index}: expected '{e}' in what the model was given since the previous turn, got: {shown}"
                        ),
                    });
                }
            }
        }
        if !turn.absent.is_empty() {
            let sent = format!("{request:?}");
            if let Some(i) = turn.absent.iter().position(|a| sent.contains(a.as_str())) {
                return Err(ModelError::Script {
                    file: self.origin.clone(),
                    message: format!("turn {index}: absent[{i}] occurs in what the model was sent"),
                });
            }
        }
        Ok(ModelTurn {
            text: turn.text.clone(),
            tool_calls: turn.tool_calls.clone(),
            usage: Usage::default(),
            truncated: false,
        })
    }
}

impl Model for ScriptedModel {
    fn name(&self) -> String {
        format!("scripted:{}", self.origin)
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        Box::pin(async move {
            let (index, turn) = self.take_turn()?;
            if turn.wait_ms > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(turn.wait_ms)).await;
            }
            self.next_turn(index, turn, request)
        })
    }
}

/// The text of the messages after the last assistant message.
fn incoming_text(messages: &[Message]) -> String {
    let start = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
        .map_or(0, |i| i + 1);
    messages[start..]
        .iter()
        .map(|m| match m {
            Message::User { text } => text.as_str(),
            Message::Tool { content, .. } => content.as_str(),
            Message::Assistant { .. } => "",
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse_turn(index: usize, t: &Value) -> Result<ScriptTurn, String> {
    let o = t
        .as_object()
        .ok_or("must be an object with \"text\" and/or \"tool_calls\"")?;
    check_keys(o, &["text", "tool_calls", "expect", "absent", "wait_ms"])?;
    let text = match o.get("text") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("\"text\" must be a string".into()),
    };
    let mut tool_calls = Vec::new();
    match o.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (j, c) in calls.iter().enumerate() {
                tool_calls
                    .push(parse_call(index, j, c).map_err(|m| format!("tool_calls[{j}]: {m}"))?);
            }
        }
        Some(_) => return Err("\"tool_calls\" must be a list".into()),
    }
    if text.is_none() && tool_calls.is_empty() {
        return Err("has neither \"text\" nor \"tool_calls\"".into());
    }
    Ok(ScriptTurn {
        text,
        tool_calls,
        expect: strings(o, "expect")?,
        absent: strings(o, "absent")?,
        wait_ms: match o.get("wait_ms") {
            None | Some(Value::Null) => 0,
            Some(v) => v.as_u64().ok_or("\"wait_ms\" must be a whole number")?,
        },
    })
}

/// A key holding a string or a list of strings (absent: none).
fn strings(o: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    let wrong = || format!("\"{key}\" must be a string or a list of strings");
    match o.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(wrong),
        Some(_) => Err(wrong()),
    }
}

fn parse_call(turn: usize, j: usize, c: &Value) -> Result<ToolCall, String> {
    let o = c
        .as_object()
        .ok_or("must be an object with \"name\" and \"arguments\"")?;
    check_keys(o, &["name", "arguments", "id"])?;
    let name = o
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("\"name\" must be a non-empty string")?;
    let arguments = match o.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return Err("\"arguments\" must be an object".into()),
    };
    let id = match o.get("id") {
        None => format!("call_{turn}_{j}"),
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("\"id\" must be a non-empty string".into()),
    };
    Ok(ToolCall {
        id,
        name: name.to_string(),
        arguments,
    })
}

fn check_keys(o: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "unknown key \"{k}\" (allowed: {})",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}
