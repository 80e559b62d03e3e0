//! A record's line: the event, its arguments redacted and shortened,
//! secrets scrubbed, URL credentials masked, plus the chain fields, as
//! canonical JSON with its `hash`, ending in `\n`.
//!
//! Two ways to the same bytes: [`Encoder::record`] serialises the event
//! straight to canonical JSON, scrubbing as it goes (every record a session
//! normally writes); [`value_line`] builds a `serde_json::Value`, scrubs and
//! writes it (the general path, for what the encoder hands back: a key that
//! holds a secret, shapes no record uses). The tests hold the two to each
//! other.

use std::sync::{Arc, OnceLock};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

use super::encode::{ChainValue, Encoder};
use super::{Inner, MAX_ARGUMENTS_BYTES, MAX_REASONS, MAX_TEXT_BYTES, TEXT_KEPT};
use crate::chain::Hasher;
use crate::scrub::{Scrubber, canonical_len, recorded_size};
use crate::{AuditError, DecisionRecord, Event, RECORD_VERSION};

/// What a log puts in every line besides the event.
struct Settings<'a> {
    session: &'a str,
    hasher: &'a Hasher,
    scrubber: &'a Scrubber,
}

impl Inner {
    /// Applies the `redact` pointers and shortens long strings in a call's
    /// arguments, and bounds the record's free text (before the record is
    /// written, outside the file lock): whatever a caller, a server or a
    /// policy's reasons hold, a record stays under about
    /// [`MAX_ARGUMENTS_BYTES`] + ([`MAX_REASONS`] + 3) × [`MAX_TEXT_BYTES`].
    pub(super) fn clean_arguments_of(&self, event: &mut Event) {
        let scrubber = self.scrubber();
        let text = |s: &mut String| scrubber.shorten_text(s, MAX_TEXT_BYTES, TEXT_KEPT);
        let decision = |d: &mut Option<DecisionRecord>| {
            if let Some(d) = d {
                if d.reasons.len() > MAX_REASONS {
                    // One reason per argument key of a huge call is a
                    // policy's right, not a record's: keep the first ones
                    // and say how many more there were.
                    let more = d.reasons.len() - (MAX_REASONS - 1);
                    let all = warden_core::digest::sha256_json(&serde_json::json!(d.reasons));
                    d.reasons.truncate(MAX_REASONS - 1);
                    d.reasons
                        .push(format!("… and {more} more reasons (sha256 of all: {all})"));
                }
                d.reasons.iter_mut().for_each(text);
            }
        };
        match event {
            Event::ToolCall(call) => {
                self.clean_arguments(&mut call.arguments, || call.args_sha256.clone());
                text(&mut call.qualified);
                call.error.as_mut().map(text);
                decision(&mut call.decision);
            }
            Event::Request(request) => {
                self.clean_arguments(&mut request.arguments, || request.args_sha256.clone());
                text(&mut request.target);
                // A method nobody serves is the client's text, of any length.
                request.method.as_mut().map(text);
                request.error.as_mut().map(text);
                decision(&mut request.decision);
            }
            Event::ToolResult(result) => {
                result.error.as_mut().map(text);
            }
            Event::RequestResult(result) => {
                result.result.error.as_mut().map(text);
            }
            Event::ServerExit { reason, .. } => text(reason),
            _ => {}
        }
    }

    /// `redact` pointers and long strings, for recorded arguments; when
    /// even shortened they would take more than [`MAX_ARGUMENTS_BYTES`]
    /// (many keys, many values), only their size and digest
    /// (`digest()`, the `args_sha256` of the record).
    pub(super) fn clean_arguments(&self, args: &mut Value, digest: impl FnOnce() -> String) {
        let scrubber = self.scrubber();
        if recorded_size(args, self.max_value_bytes, MAX_ARGUMENTS_BYTES).is_none() {
            *args = serde_json::json!({
                "omitted": format!(
                    "too large to record: more than {MAX_ARGUMENTS_BYTES} bytes even with long strings shortened"
                ),
                "bytes": canonical_len(args),
                "sha256": digest(),
            });
            return;
        }
        scrubber.redact_pointers(args);
        scrubber.shorten_long_strings(args, self.max_value_bytes);
    }

    /// The scrubber records are written with now.
    pub(super) fn scrubber(&self) -> Arc<Scrubber> {
        Arc::clone(&self.scrubber.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Appends the line of `event` (arguments already cleaned) as record
    /// `seq` after `prev` to `line`; returns its hash.
    pub(super) fn record_line(
        &self,
        encoder: &mut Encoder,
        line: &mut Vec<u8>,
        ts: DateTime<Utc>,
        event: &Event,
        seq: u64,
        prev: &str,
    ) -> Result<[u8; 64], AuditError> {
        let scrubber = self.scrubber();
        let settings = Settings {
            session: &self.session,
            hasher: &self.hasher,
            scrubber: &scrubber,
        };
        record_line(&settings, encoder, line, ts, event, seq, prev)
    }
}

fn record_line(
    settings: &Settings<'_>,
    encoder: &mut Encoder,
    line: &mut Vec<u8>,
    ts: DateTime<Utc>,
    event: &Event,
    seq: u64,
    prev: &str,
) -> Result<[u8; 64], AuditError> {
    let ts = ts.to_rfc3339_opts(SecondsFormat::Micros, true);
    // In key order, as the encoder wants them no more than the reader.
    let chain = [
        ("alg", ChainValue::Str(settings.hasher.mode().as_str())),
        ("prev", ChainValue::Str(prev)),
        ("seq", ChainValue::Number(seq)),
        ("session", ChainValue::Str(settings.session)),
        ("ts", ChainValue::Str(&ts)),
        ("v", ChainValue::Number(RECORD_VERSION)),
    ];
    let hasher = settings.hasher;
    if let Ok(hash) = encoder.record(event, &chain, settings.scrubber, line, |canonical| {
        hasher.hash_hex(canonical)
    }) {
        return Ok(hash);
    }
    value_line(settings, line, ts, event, seq, prev)
}

/// The general path: the event as a `Value`, scrubbed (secrets everywhere
/// but the `event` tag, URL credentials outside the arguments), the chain
/// fields added, written canonically.
fn value_line(
    settings: &Settings<'_>,
    line: &mut Vec<u8>,
    ts: String,
    event: &Event,
    seq: u64,
    prev: &str,
) -> Result<[u8; 64], AuditError> {
    let mut body = match serde_json::to_value(event)? {
        Value::Object(map) => map,
        other => {
            let mut map = Map::new();
            map.insert("event".into(), other);
            map
        }
    };
    settings.scrubber.scrub_record(&mut body);
    // Credentials in URLs (userinfo, query values, fragments) in any
    // text but the call's arguments, which are recorded as sent.
    for (key, value) in body.iter_mut() {
        if key != "arguments" && key != "event" {
            crate::scrub::redact_urls(value);
        }
    }
    debug_assert!(!body.contains_key("hash"));
    body.insert("ts".into(), ts.into());
    body.insert("v".into(), RECORD_VERSION.into());
    body.insert("seq".into(), seq.into());
    body.insert("session".into(), settings.session.into());
    body.insert("alg".into(), settings.hasher.mode().as_str().into());
    body.insert("prev".into(), prev.into());
    let (hash, bytes) = chain_line(&body, settings.hasher);
    line.extend_from_slice(&bytes);
    let mut out = [0u8; 64];
    out.copy_from_slice(hash.as_bytes());
    Ok(out)
}

/// Whether `serde_json::Map` iterates in sorted key order, as it does
/// unless some crate in the build enables serde_json's `preserve_order`.
/// Then `serde_json::to_writer` already writes canonical JSON (compact,
/// keys sorted bytewise, the same escapes and numbers), in one pass; else
/// `warden_core::digest::write_canonical` sorts explicitly. `verify`
/// always uses `warden_core::digest::canonical_json`, so the two are checked against each
/// other.
fn maps_are_sorted() -> bool {
    static SORTED: OnceLock<bool> = OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut map = Map::new();
        map.insert("b".into(), Value::Null);
        map.insert("a".into(), Value::Null);
        map.insert("B".into(), Value::Null);
        map.keys().map(String::as_str).eq(["B", "a", "b"])
    })
}

fn write_canonical(out: &mut Vec<u8>, value: &Value) {
    if maps_are_sorted() && serde_json::to_writer(&mut *out, value).is_ok() {
        return;
    }
    warden_core::digest::write_canonical(value, out);
}

/// The record's `hash` and its line: the canonical JSON of `body` (which
/// has no `hash`) is hashed, then `"hash":"…"` is spliced in at its sorted
/// place and `\n` added, so the record is serialised once.
fn chain_line(body: &Map<String, Value>, hasher: &Hasher) -> (String, Vec<u8>) {
    let mut keys: Vec<&String> = body.keys().collect();
    if !maps_are_sorted() {
        keys.sort();
    }
    let mut buf = Vec::with_capacity(1024);
    buf.push(b'{');
    // Where `"hash":…` goes, and whether a comma goes before (it follows a
    // member) or after it (it precedes one).
    let mut splice: Option<(usize, bool, bool)> = None;
    for (i, key) in keys.iter().enumerate() {
        if splice.is_none() && key.as_str() > "hash" {
            splice = Some((buf.len(), i > 0, i == 0));
        }
        if i > 0 {
            buf.push(b',');
        }
        warden_core::digest::write_json_str(&mut buf, key);
        buf.push(b':');
        write_canonical(&mut buf, &body[key.as_str()]);
    }
    buf.push(b'}');
    let hash = hasher.hash(&buf);

    let (at, comma_before, comma_after) =
        splice.unwrap_or((buf.len() - 1, !keys.is_empty(), false));
    let member = format!("\"hash\":\"{hash}\"");
    let mut line = Vec::with_capacity(buf.len() + member.len() + 2);
    line.extend_from_slice(&buf[..at]);
    if comma_before {
        line.push(b',');
    }
    line.extend_from_slice(member.as_bytes());
    if comma_after {
        line.push(b',');
    }
    line.extend_from_slice(&buf[at..]);
    line.push(b'\n');
    (hash, line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use warden_core::digest::canonical_json;

    #[test]
    fn chain_line_is_the_canonical_record_with_its_hash() {
        for key in [None, Some(b"k".as_slice())] {
            let hasher = Hasher::new(key).unwrap();
            for body in [
                json!({}),
                json!({"a": 1}),
                json!({"z": "\u{1}é\"", "hasg": null, "hasi": [1.5, -0.0, 1e300]}),
                json!({"b": {"y": 1, "x": [{"d": 1, "c": 2}]}, "a": "x", "seq": 7, "v": 1}),
            ] {
                let Value::Object(map) = body else {
                    unreachable!()
                };
                let (hash, line) = chain_line(&map, &hasher);
                assert_eq!(
                    hash,
                    hasher.hash(canonical_json(&Value::Object(map.clone())).as_bytes())
                );
                let mut with = map.clone();
                with.insert("hash".into(), hash.into());
                let expected = canonical_json(&Value::Object(with)) + "\n";
                assert_eq!(String::from_utf8(line).unwrap(), expected);
            }
        }
    }

    use crate::record::{
        ApprovalAction, Caller, DecisionRecord, RequestKind, RequestRecord, RequestResultRecord,
        ResultRecord, ToolCallRecord,
    };
    use warden_core::{Effect, Mode, Stage, TransportKind};

    fn call(arguments: Value, reason: &str, error: Option<&str>) -> Event {
        Event::ToolCall(ToolCallRecord {
            call_id: "c-1".into(),
            server: Some("fs".into()),
            tool: None,
            qualified: "mcp__fs__read".into(),
            caller: Caller::Gateway,
            args_sha256: "ab".repeat(32),
            arguments,
            decision: Some(DecisionRecord {
                effect: Effect::Allow,
                stage: Stage::Rules,
                reasons: vec![reason.into(), "second".into()],
                policy_sha256: None,
            }),
            outcome: crate::Outcome::Pending,
            error: error.map(str::to_string),
        })
    }

    /// Records of every kind, with what scrubbing and canonical order must
    /// get right: secrets (in strings, numbers, nested values, the cut of
    /// a shortened string), short secrets, URLs with credentials inside and
    /// outside the arguments, escapes, non-ASCII keys, floats, negatives.
    fn events() -> Vec<Event> {
        let long = format!("{}ghp_secretvalue{}", "a".repeat(250), "é".repeat(40));
        vec![
            call(json!({"path": "/srv/x", "n": 40}), "allow", None),
            call(
                json!({
                    "z": {"b": [1, -2, 1.5, -0.0, 1e300, 2.5e-8, null, true], "a": "x\u{1}\"\\/é"},
                    "é": "ghp_secretvalue in text", "Z": 123456789, "n": 98765,
                    "url": "https://user:pw@h.example/p?token=t#f",
                    "short": "on", "arr": [{"y": 1, "x": "sk-other-secret"}, []], "e": {},
                    "long": long,
                    // Keys alike in their first 8 bytes, or only in padding.
                    "same_prefix_b": 1, "same_prefix_a": 2, "same_pre": 3, "ab\u{0}": 4, "ab": 5,
                }),
                "see https://u:p@h.example/?k=v and ghp_secretvalue",
                Some("failed at https://h.example/a?b=c (98765)"),
            ),
            Event::SessionStart {
                warden_version: "0.1.0".into(),
                config_sha256: "cd".repeat(32),
                policy_sha256: None,
                mode: Mode::Gateway,
                workspace: "/home/u/ghp_secretvalue/ws".into(),
            },
            Event::ServerStart {
                server: "fs".into(),
                transport: TransportKind::Stdio,
                pid: Some(98765),
                sandbox: json!({"layers": ["ns", "landlock"], "net": {"allow": ["a:1"]}, "mem": 1.25}),
            },
            Event::ServerExit {
                server: "fs".into(),
                pid: None,
                status: Some(-1),
                signal: Some(9),
                reason: "exited".into(),
            },
            Event::ToolResult(ResultRecord {
                call_id: "c-1".into(),
                outcome: crate::Outcome::ToolError,
                duration_ms: 98765,
                result_sha256: None,
                error: Some("https://x.example/#frag".into()),
            }),
            Event::Request(RequestRecord {
                call_id: "r-1".into(),
                kind: RequestKind::Resource,
                server: None,
                target: "resource__fs".into(),
                method: Some("resources/read".into()),
                caller: Caller::Cli,
                arguments: json!({"uri": "file:///etc/x?y=z"}),
                args_sha256: "ef".repeat(32),
                decision: None,
                outcome: crate::Outcome::Denied,
                error: None,
                capped: Some(json!({"max_tokens": {"asked": 10000, "sent": 4096}})),
            }),
            Event::RequestResult(RequestResultRecord {
                kind: RequestKind::Prompt,
                result: ResultRecord {
                    call_id: "r-1".into(),
                    outcome: crate::Outcome::Ok,
                    duration_ms: 0,
                    result_sha256: Some("01".repeat(32)),
                    error: None,
                },
                answered_by: Some("file:/tmp/answers.json".into()),
            }),
            Event::Approval {
                server: "fs".into(),
                config_sha256: "cd".repeat(32),
                action: ApprovalAction::AllowOnce,
                subject: "mcp__fs__read".into(),
                call_id: Some("c-1".into()),
            },
            Event::AuditGap {
                lost: 3,
                since: "2026-12-01T00:00:00Z".into(),
                error: "disk full".into(),
            },
            Event::PolicyReload {
                ok: false,
                policy_sha256: None,
                previous_sha256: Some("ab".repeat(32)),
                rules: 12,
                error: Some("bad rego".into()),
            },
            Event::SessionEnd {
                tool_calls: 7,
                denied: 1,
            },
        ]
    }

    fn ts() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-01T04:05:06.123456Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    /// A line (after an earlier one) and its hash.
    type Written = (Vec<u8>, [u8; 64]);

    /// Both paths for `event`: whether the one-pass encoder took it, and
    /// the two lines with their hashes.
    fn both(settings: &Settings<'_>, event: &Event) -> (bool, Written, Written) {
        let prev = "12".repeat(32);
        let mut encoder = Encoder::default();
        let mut line = b"earlier line\n".to_vec();
        let hash = record_line(settings, &mut encoder, &mut line, ts(), event, 42, &prev).unwrap();
        let mut general = b"earlier line\n".to_vec();
        let general_hash = value_line(
            settings,
            &mut general,
            ts().to_rfc3339_opts(SecondsFormat::Micros, true),
            event,
            42,
            &prev,
        )
        .unwrap();
        // The encoder again, alone, with a fresh buffer: did it take it?
        let mut alone = Vec::new();
        let fast = encoder
            .record(event, &[], settings.scrubber, &mut alone, |_| [b'0'; 64])
            .is_ok();
        (fast, (line, hash), (general, general_hash))
    }

    #[test]
    fn the_one_pass_encoder_writes_what_the_general_path_writes() {
        let secrets: Vec<String> = vec![
            "ghp_secretvalue".into(),
            "sk-other-secret".into(),
            "8765".into(),
            "on".into(),
        ];
        let scrubbers = [
            Scrubber::default(),
            Scrubber::new(&["/z/a".into(), "/arr/*/y".into()], &secrets).unwrap(),
        ];
        for key in [None, Some(b"k".as_slice())] {
            let hasher = Hasher::new(key).unwrap();
            for scrubber in &scrubbers {
                let settings = Settings {
                    session: "s\u{7f}\"é",
                    hasher: &hasher,
                    scrubber,
                };
                for mut event in events() {
                    // As the log does before writing.
                    if let Event::ToolCall(call) = &mut event {
                        scrubber.redact_pointers(&mut call.arguments);
                        scrubber.shorten_long_strings(&mut call.arguments, 64);
                    }
                    let (fast, (line, hash), (general, general_hash)) = both(&settings, &event);
                    assert!(fast, "the encoder refused {event:?}");
                    assert_eq!(
                        String::from_utf8(line).unwrap(),
                        String::from_utf8(general).unwrap()
                    );
                    assert_eq!(hash, general_hash);
                }
            }
        }
    }

    /// Configured values that are also warden's vocabulary (`deny`, a
    /// server's name, an outcome, a field name) blank nothing warden
    /// writes itself: a project's `env` of `{"A": "deny", "B": "fs"}` hid
    /// the effect, outcome and server of every record. They are still
    /// removed from the arguments (keys too) and from free text.
    #[test]
    fn configured_values_that_are_warden_words_leave_its_own_fields_alone() {
        let words: Vec<String> = [
            "allow",
            "rules",
            "fs",
            "mcp__fs__read",
            "pending",
            "denied",
            "tool_calls",
            "outcome",
            "c-1",
            "session_end",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let scrubber = Scrubber::new(&[], &words).unwrap();
        let hasher = Hasher::Plain;
        let settings = Settings {
            session: "s",
            hasher: &hasher,
            scrubber: &scrubber,
        };
        let mut events = events();
        events.push(call(
            json!({"outcome": "allow", "path": "fs/x"}),
            "matched allow rule for fs",
            None,
        ));
        for event in events {
            let (_, (line, _), (general, _)) = both(&settings, &event);
            assert_eq!(line, general, "the two paths differ");
            let text = String::from_utf8(line).unwrap();
            let v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
            match &event {
                Event::ToolCall(call) => {
                    assert_eq!(v["qualified"], "mcp__fs__read", "{v}");
                    assert_eq!(v["server"], "fs", "{v}");
                    assert_eq!(v["call_id"], "c-1", "{v}");
                    assert_eq!(v["outcome"], "pending", "{v}");
                    assert_eq!(v["decision"]["effect"], "allow", "{v}");
                    assert_eq!(v["decision"]["stage"], "rules", "{v}");
                    let reasons = v["decision"]["reasons"].to_string();
                    assert!(!reasons.contains("allow"), "free text scrubbed: {v}");
                    if call.arguments.get("outcome").is_some() {
                        assert_eq!(
                            v["arguments"],
                            json!({"[REDACTED]": "[REDACTED]", "path": "fs/x"}),
                            "{v}"
                        );
                    }
                }
                Event::SessionEnd { .. } => {
                    assert_eq!(v["event"], "session_end", "{v}");
                    assert_eq!(v["tool_calls"], 7, "{v}");
                    assert_eq!(v["denied"], 1, "{v}");
                }
                _ => {}
            }
        }
    }

    #[test]
    fn a_key_holding_a_secret_takes_the_general_path_with_the_same_result() {
        // Keys that scrub to the same name: which value stays is the
        // general path's rule, so the encoder must hand these over.
        let scrubber = Scrubber::new(&[], &["abcd".into(), "on".into()]).unwrap();
        let hasher = Hasher::Plain;
        let settings = Settings {
            session: "s",
            hasher: &hasher,
            scrubber: &scrubber,
        };
        for args in [
            json!({"xabcdx": 1, "x[REDACTED]x": 2}),
            json!({"deep": [{"on": "on"}]}),
            json!({"abcd": {"abcd": "abcd"}}),
        ] {
            let event = call(args, "r", None);
            let (fast, (line, hash), (general, general_hash)) = both(&settings, &event);
            assert!(!fast);
            assert_eq!(line, general);
            assert_eq!(hash, general_hash);
            assert!(!String::from_utf8(line).unwrap().contains("abcd"));
        }
    }

    #[test]
    fn every_line_verifies() {
        let scrubber = Scrubber::new(&[], &["ghp_secretvalue".into()]).unwrap();
        let hasher = Hasher::new(Some(b"key")).unwrap();
        let settings = Settings {
            session: "s",
            hasher: &hasher,
            scrubber: &scrubber,
        };
        for event in events() {
            let (_, (line, hash), _) = both(&settings, &event);
            let text = String::from_utf8(line).unwrap();
            let record = text.lines().nth(1).unwrap();
            let Value::Object(map) = serde_json::from_str(record).unwrap() else {
                unreachable!()
            };
            assert_eq!(map["hash"].as_str().unwrap().as_bytes(), hash);
            assert_eq!(hasher.hash_record(map.clone()).as_bytes(), hash);
            assert_eq!(canonical_json(&Value::Object(map)), record);
            assert!(!record.contains("ghp_secretvalue"));
        }
    }
}
