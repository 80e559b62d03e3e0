//! Who answers a server's elicitation (and an `ask` about its sampling)
//! when the session itself is the client, i.e. `warden call`, `run` and the
//! repl, which have no downstream client to pass it to: an [`Answerer`].
//! Two exist: the person at the terminal (`crate::terminal::form`), and an
//! answers file given explicitly with `--answers FILE` ([`AnswersFile`],
//! for tests and CI). warden never answers on the person's behalf: without
//! either, an elicitation is declined.
//!
//! The answers file is a JSON list, consumed in order: each elicitation
//! takes the first unused entry that matches it.
//!
//! ```json
//! [
//!   {"action": "accept", "content": {"name": "Ada"}, "server": "fx", "message": "user information"},
//!   {"action": "decline"},
//!   {"kind": "sampling", "action": "approve", "server": "fx"}
//! ]
//! ```
//!
//! `kind` is `elicitation` (default) or `sampling`; `action` is `accept`,
//! `decline` or `cancel` for an elicitation, `approve` or `deny` for
//! sampling; `server` (exact) and `message` (a part of the elicitation's
//! message) narrow what an entry answers. An `accept` takes the schema's
//! defaults for the fields its `content` leaves out (SEP-1034), and an
//! answer that does not fit the requested schema is never sent.

// Sampling is deprecated for 2026-07-28 (SEP-2577) but is how the session
// protocol (2025-11-25) works.
#![allow(deprecated)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction,
};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::elicitation::Form;

/// Answers a server's elicitation, or approves its sampling, for the
/// session (no downstream client).
pub trait Answerer: Send + Sync {
    /// Who answered, as recorded in `request_result.answered_by`:
    /// `person` or `file:/abs/path`.
    fn who(&self) -> String;

    /// Whether anyone can be asked at all (a terminal to open): `Err`
    /// says why not, and the request is declined unasked.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// The answer to `params`, from `server`; `Err` says why there is none
    /// (the server is then sent a decline).
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        params: &'a ElicitRequestParams,
    ) -> BoxFuture<'a, Result<ElicitResult, String>>;

    /// Whether the sampling request `params` of `server` may go to the
    /// session's model (an `ask` decision); `Err` says why no one could
    /// answer (a deny).
    fn approve_sampling<'a>(
        &'a self,
        server: &'a str,
        params: &'a CreateMessageRequestParams,
    ) -> BoxFuture<'a, Result<bool, String>>;
}

/// The form of a form-mode elicitation.
pub fn form_of(params: &ElicitRequestParams) -> Result<Option<Form>, String> {
    match params {
        ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } => {
            let schema = serde_json::to_value(requested_schema).map_err(|e| e.to_string())?;
            Form::from_schema(&schema, requested_schema.property_order.as_deref()).map(Some)
        }
        _ => Ok(None),
    }
}

/// The message of an elicitation.
pub fn message_of(params: &ElicitRequestParams) -> &str {
    match params {
        ElicitRequestParams::FormElicitationParams { message, .. }
        | ElicitRequestParams::UrlElicitationParams { message, .. } => message,
        _ => "",
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum EntryKind {
    #[default]
    Elicitation,
    Sampling,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(default)]
    kind: EntryKind,
    action: String,
    #[serde(default)]
    content: Option<Map<String, Value>>,
    #[serde(default)]
    server: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl Entry {
    fn matches(&self, kind: EntryKind, server: &str, message: &str) -> bool {
        self.kind == kind
            && self.server.as_deref().is_none_or(|s| s == server)
            && self.message.as_deref().is_none_or(|m| message.contains(m))
    }
}

/// `--answers FILE`: answers given in advance, consumed in order.
pub struct AnswersFile {
    path: PathBuf,
    /// Each entry, and whether it has been used.
    entries: Mutex<Vec<(Entry, bool)>>,
}

impl AnswersFile {
    /// Reads and checks the file (each action known for its kind).
    pub fn load(path: &Path) -> Result<AnswersFile, String> {
        let path = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let entries: Vec<Entry> = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a list of answers ({e}); see README, \"Answering a server's questions\"",
                path.display()
            )
        })?;
        for (i, entry) in entries.iter().enumerate() {
            let known: &[&str] = match entry.kind {
                EntryKind::Elicitation => &["accept", "decline", "cancel"],
                EntryKind::Sampling => &["approve", "deny"],
            };
            if !known.contains(&entry.action.as_str()) {
                return Err(format!(
                    "{}: answer {}: action `{}` is not one of {}",
                    path.display(),
                    i + 1,
                    entry.action,
                    known.join(", ")
                ));
            }
            if entry.content.is_some() && entry.action != "accept" {
                return Err(format!(
                    "{}: answer {}: only an accept carries content",
                    path.display(),
                    i + 1
                ));
            }
        }
        Ok(AnswersFile {
            path,
            entries: Mutex::new(entries.into_iter().map(|e| (e, false)).collect()),
        })
    }

    /// Takes the first unused entry matching; its position from 1.
    fn take(&self, kind: EntryKind, server: &str, message: &str) -> Option<(usize, Entry)> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (i, (entry, used)) = entries
            .iter_mut()
            .enumerate()
            .find(|(_, (e, used))| !*used && e.matches(kind, server, message))?;
        *used = true;
        Some((i + 1, entry.clone()))
    }

    fn answer(&self, server: &str, params: &ElicitRequestParams) -> Result<ElicitResult, String> {
        let file = self.path.display();
        let (n, entry) = self
            .take(EntryKind::Elicitation, server, message_of(params))
            .ok_or_else(|| format!("the answers file {file} has no answer left for it"))?;
        let action = match entry.action.as_str() {
            "accept" => ElicitationAction::Accept,
            "decline" => return Ok(ElicitResult::new(ElicitationAction::Decline)),
            _ => return Ok(ElicitResult::new(ElicitationAction::Cancel)),
        };
        let form = form_of(params).map_err(|e| format!("the requested form: {e}"))?;
        match (form, entry.content) {
            (Some(form), content) => {
                let content = form
                    .complete(&content.unwrap_or_default())
                    .map_err(|why| {
                        format!("answer {n} of {file} does not fit the requested form, so it was not sent: {why}")
                    })?;
                Ok(ElicitResult::new(action).with_content(Value::Object(content)))
            }
            (None, None) => Ok(ElicitResult::new(action)),
            (None, Some(_)) => Err(format!(
                "answer {n} of {file} has content, but a URL-mode elicitation takes none"
            )),
        }
    }
}

impl Answerer for AnswersFile {
    fn who(&self) -> String {
        format!("file:{}", self.path.display())
    }

    fn elicit<'a>(
        &'a self,
        server: &'a str,
        params: &'a ElicitRequestParams,
    ) -> BoxFuture<'a, Result<ElicitResult, String>> {
        Box::pin(async move { self.answer(server, params) })
    }

    fn approve_sampling<'a>(
        &'a self,
        server: &'a str,
        _params: &'a CreateMessageRequestParams,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let (_, entry) = self.take(EntryKind::Sampling, server, "").ok_or_else(|| {
                format!(
                    "the answers file {} has no sampling answer left",
                    self.path.display()
                )
            })?;
            Ok(entry.action == "approve")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ElicitationSchema;
    use serde_json::json;

    fn file(entries: Value) -> (tempfile::TempDir, AnswersFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("answers.json");
        std::fs::write(&path, entries.to_string()).unwrap();
        let answers = AnswersFile::load(&path).unwrap();
        (dir, answers)
    }

    fn form(message: &str, schema: Value) -> ElicitRequestParams {
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.into(),
            requested_schema: serde_json::from_value::<ElicitationSchema>(schema).unwrap(),
        }
    }

    #[test]
    fn entries_are_taken_in_order_by_server_and_message() {
        let (_dir, answers) = file(json!([
            {"action": "decline", "server": "other"},
            {"action": "accept", "content": {"n": 2}, "message": "second"},
            {"action": "accept", "content": {"n": 1}},
        ]));
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let first = answers
            .answer("fx", &form("first", schema.clone()))
            .unwrap();
        assert_eq!(first.content, Some(json!({"n": 1})));
        let second = answers
            .answer("fx", &form("the second one", schema.clone()))
            .unwrap();
        assert_eq!(second.content, Some(json!({"n": 2})));
        let err = answers.answer("fx", &form("third", schema)).unwrap_err();
        assert!(err.contains("no answer left"), "{err}");
        assert!(answers.who().starts_with("file:/"));
    }

    #[test]
    fn an_answer_that_does_not_fit_is_not_sent() {
        let (_dir, answers) = file(json!([{"action": "accept", "content": {"n": "two"}}]));
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let err = answers.answer("fx", &form("m", schema)).unwrap_err();
        assert!(err.contains("does not fit") && err.contains("`n`"), "{err}");
    }

    #[test]
    fn unknown_actions_and_fields_are_refused_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        for bad in [
            json!([{"action": "maybe"}]),
            json!([{"kind": "sampling", "action": "accept"}]),
            json!([{"action": "decline", "content": {}}]),
            json!([{"action": "accept", "contents": {}}]),
            json!({"action": "accept"}),
        ] {
            std::fs::write(&path, bad.to_string()).unwrap();
            assert!(AnswersFile::load(&path).is_err(), "{bad}");
        }
    }
}
