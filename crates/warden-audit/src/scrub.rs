//! Redaction pointers and secret scrubbing.

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use serde_json::{Map, Value};

use crate::{AuditError, REDACTED};

/// Compiled `redact` pointers and the secret values to scrub.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scrubber {
    /// Unescaped pointer segments; `*` matches every member or element.
    pointers: Vec<Vec<String>>,
    /// Secret values of at least [`MIN_SUBSTRING_SECRET`] bytes, longest
    /// first (so a secret that contains another is removed whole): removed
    /// wherever they occur.
    secrets: Vec<String>,
    /// Shorter, non-empty values (`1`, `on`; too short to be secrets in
    /// any real sense): replaced only where a whole string or key equals
    /// them, never inside text or numbers, or every `1` in the log would go.
    exact: Vec<String>,
    /// Finds whether any of `secrets` occurs in a string, in one pass:
    /// almost no string holds one, and those that do go through the
    /// replacement loop of [`Scrubber::scrub_str`] as before. `None`: no
    /// secrets, or too many for an automaton (then every string takes
    /// the loop).
    any_secret: Option<AhoCorasick>,
    /// The same for the secrets that can occur in a number's decimal form
    /// (digits, `-`, `+`, `.`, `e`, `E`); `None`: there are none.
    numeric: Option<AhoCorasick>,
    /// The length of the shortest of `secrets`: a shorter string holds
    /// none (most keys and values of a record are shorter than a token).
    shortest: usize,
}

/// Whether `text` holds `scheme://`, without which
/// [`warden_core::redact::urls_in`] leaves it as it is.
pub(crate) fn has_url(text: &str) -> bool {
    let bytes = text.as_bytes();
    memchr::memchr_iter(b':', bytes).any(|i| bytes[i + 1..].starts_with(b"//"))
}

/// Masks credentials in every URL inside `value`'s strings
/// ([`warden_core::redact::urls_in`]).
pub(crate) fn redact_urls(value: &mut Value) {
    match value {
        Value::String(s) => {
            if has_url(s)
                && let std::borrow::Cow::Owned(clean) = warden_core::redact::urls_in(s)
            {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_urls),
        Value::Object(map) => map.values_mut().for_each(redact_urls),
        _ => {}
    }
}

/// The `redact` pointers as unescaped segments (`""` is the whole value).
fn parse_pointers(redact: &[String]) -> Result<Vec<Vec<String>>, AuditError> {
    let mut pointers = Vec::with_capacity(redact.len());
    for pointer in redact {
        if pointer.is_empty() {
            pointers.push(Vec::new());
            continue;
        }
        let Some(rest) = pointer.strip_prefix('/') else {
            return Err(AuditError::BadPointer {
                pointer: pointer.clone(),
            });
        };
        pointers.push(
            rest.split('/')
                .map(|seg| seg.replace("~1", "/").replace("~0", "~"))
                .collect(),
        );
    }
    Ok(pointers)
}

/// Secrets at least this long are scrubbed as substrings.
pub(crate) const MIN_SUBSTRING_SECRET: usize = 4;

/// Members of a record (at any depth outside `arguments`) whose values
/// warden writes from a closed vocabulary or from its own configuration
/// (names, ids, digests, outcomes): never scrubbed. A configured value
/// that happens to be `deny` or a server's name is not a reason to blank
/// the record's effect or the server it names: a project file's `env`
/// could otherwise hide its own denied calls from `audit show --effect
/// deny`. Secrets cannot reach these fields; free text (reasons, errors,
/// the sandbox summary) is scrubbed as before.
const WARDEN_WRITTEN: &[&str] = &[
    "event",
    "call_id",
    "server",
    "tool",
    "qualified",
    "outcome",
    "kind",
    "method",
    "effect",
    "stage",
    "mode",
    "transport",
    "action",
    "pid",
    "status",
    "signal",
    "duration_ms",
    "tool_calls",
    "denied",
    "lost",
    "config_sha256",
    "policy_sha256",
    "args_sha256",
    "result_sha256",
    "warden_version",
];

/// How a record's member is scrubbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberRule {
    /// Written as is (see [`WARDEN_WRITTEN`]).
    Exempt,
    /// `arguments`: secrets scrubbed in keys and values; URLs recorded
    /// as sent.
    Arguments,
    /// Everything else: secrets scrubbed in values (keys are warden's
    /// own), then credentials in URLs masked.
    Text,
}

impl MemberRule {
    /// The rule of member `key` of an object whose own rule is `outer`
    /// (`None`: the record itself).
    pub(crate) fn of(outer: Option<MemberRule>, key: &str) -> MemberRule {
        match outer {
            None if key == "arguments" => MemberRule::Arguments,
            None | Some(MemberRule::Text) if WARDEN_WRITTEN.contains(&key) => MemberRule::Exempt,
            None => MemberRule::Text,
            Some(rule) => rule,
        }
    }

    /// Whether keys of objects under this rule are scrubbed: only the
    /// arguments' (as sent by a model or client); every other key is a
    /// field name warden chose.
    pub(crate) fn scrubs_keys(self) -> bool {
        self == MemberRule::Arguments
    }
}

impl Scrubber {
    pub(crate) fn new(redact: &[String], secrets: &[String]) -> Result<Self, AuditError> {
        Ok(Self::with_pointers(parse_pointers(redact)?, secrets))
    }

    /// This scrubber with `more` secrets as well (a token refreshed during
    /// the session); `None` when it already removes every one of them.
    pub(crate) fn with_more_secrets(&self, more: &[String]) -> Option<Scrubber> {
        let new: Vec<&String> = more
            .iter()
            .filter(|s| !s.is_empty() && !self.secrets.contains(s) && !self.exact.contains(s))
            .collect();
        if new.is_empty() {
            return None;
        }
        let all: Vec<String> = self
            .secrets
            .iter()
            .chain(&self.exact)
            .chain(new)
            .cloned()
            .collect();
        Some(Self::with_pointers(self.pointers.clone(), &all))
    }

    fn with_pointers(pointers: Vec<Vec<String>>, secrets: &[String]) -> Scrubber {
        let (mut secrets, mut exact): (Vec<String>, Vec<String>) = secrets
            .iter()
            .filter(|s| !s.is_empty())
            .cloned()
            .partition(|s| s.len() >= MIN_SUBSTRING_SECRET);
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        exact.sort();
        exact.dedup();
        // A DFA without prefilter: the strings searched are short, and a
        // rare-byte prefilter keeps stopping on the `_` and `-` that
        // tokens and identifiers share.
        let automaton = |patterns: &[&String]| {
            (!patterns.is_empty())
                .then(|| {
                    AhoCorasick::builder()
                        .kind(Some(AhoCorasickKind::DFA))
                        .prefilter(false)
                        .build(patterns)
                        .ok()
                })
                .flatten()
        };
        let any_secret = automaton(&secrets.iter().collect::<Vec<_>>());
        let numeric = automaton(&secrets.iter().filter(|s| is_numeric(s)).collect::<Vec<_>>());
        let shortest = secrets.iter().map(String::len).min().unwrap_or(0);
        Scrubber {
            pointers,
            secrets,
            exact,
            any_secret,
            numeric,
            shortest,
        }
    }

    /// Replaces every value a `redact` pointer selects by `"[REDACTED]"`.
    pub(crate) fn redact_pointers(&self, args: &mut Value) {
        for pointer in &self.pointers {
            redact_at(args, pointer);
        }
    }

    /// Removes every secret from every string, object key and number.
    pub(crate) fn scrub(&self, value: &mut Value) {
        if self.secrets.is_empty() && self.exact.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Some(clean) = self.scrub_str(s) {
                    *s = clean;
                }
            }
            Value::Number(n) => {
                if self.number_holds_secret(n.to_string().as_bytes()) {
                    *value = Value::String(REDACTED.into());
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub(v)),
            Value::Object(map) => self.scrub_map(map, None),
            Value::Null | Value::Bool(_) => {}
        }
    }

    /// Scrubs one record by [`MemberRule`]: secrets removed from the
    /// arguments (keys too) and from free text, warden's own fields and
    /// field names left alone.
    pub(crate) fn scrub_record(&self, record: &mut Map<String, Value>) {
        if self.secrets.is_empty() && self.exact.is_empty() {
            return;
        }
        for (key, value) in record.iter_mut() {
            self.scrub_by_rule(MemberRule::of(None, key), value);
        }
    }

    fn scrub_by_rule(&self, rule: MemberRule, value: &mut Value) {
        match (rule, value) {
            (MemberRule::Exempt, _) => {}
            (MemberRule::Arguments, value) => self.scrub(value),
            (MemberRule::Text, Value::Object(map)) => {
                for (key, v) in map.iter_mut() {
                    self.scrub_by_rule(MemberRule::of(Some(rule), key), v);
                }
            }
            (MemberRule::Text, Value::Array(items)) => {
                items.iter_mut().for_each(|v| self.scrub_by_rule(rule, v));
            }
            (MemberRule::Text, value) => self.scrub(value),
        }
    }

    /// As [`Scrubber::scrub`] for an object, leaving the value of `keep`
    /// (the fixed `event` tag) alone.
    pub(crate) fn scrub_map(&self, map: &mut Map<String, Value>, keep: Option<&str>) {
        if self.secrets.is_empty() && self.exact.is_empty() {
            return;
        }
        let dirty_keys: Vec<String> = map
            .keys()
            .filter(|k| self.scrub_str(k).is_some())
            .cloned()
            .collect();
        for key in dirty_keys {
            if let Some(v) = map.remove(&key) {
                let clean = self.scrub_str(&key).unwrap_or_else(|| REDACTED.into());
                map.insert(clean, v);
            }
        }
        for (key, v) in map.iter_mut() {
            if keep != Some(key.as_str()) {
                self.scrub(v);
            }
        }
    }

    /// Replaces every string inside `value` longer than `max` bytes by
    /// `{"prefix", "bytes", "sha256"}`: `bytes` and `sha256` (of its UTF-8
    /// bytes) describe the value as sent; `prefix` is its first
    /// [`prefix_len`]`(max)` bytes (cut at a character boundary) after
    /// secrets were scrubbed from the whole string, so a secret the cut
    /// would split never shows in part.
    pub(crate) fn shorten_long_strings(&self, value: &mut Value, max: usize) {
        match value {
            Value::String(s) if s.len() > max => {
                let bytes = s.len();
                let sha256 = warden_core::digest::sha256_hex(s.as_bytes());
                let clean = self.scrub_str(s).unwrap_or_else(|| std::mem::take(s));
                let mut cut = prefix_len(max).min(clean.len());
                while !clean.is_char_boundary(cut) {
                    cut -= 1;
                }
                *value = serde_json::json!({
                    "prefix": &clean[..cut],
                    "bytes": bytes,
                    "sha256": sha256,
                });
            }
            Value::Array(items) => items
                .iter_mut()
                .for_each(|v| self.shorten_long_strings(v, max)),
            Value::Object(map) => map
                .values_mut()
                .for_each(|v| self.shorten_long_strings(v, max)),
            _ => {}
        }
    }

    /// Shortens a free-text field of a record (an error, a reason, a name
    /// as the caller gave it) longer than `max` bytes to its first `keep`
    /// bytes, cut at a character boundary after secrets were scrubbed
    /// from the whole string (so a secret the cut would split never shows
    /// in part), followed by `… [N bytes, sha256 H]` (of the text as it
    /// came). Such fields are strings in the format, so they stay strings.
    pub(crate) fn shorten_text(&self, text: &mut String, max: usize, keep: usize) {
        if text.len() <= max {
            return;
        }
        let bytes = text.len();
        let sha256 = warden_core::digest::sha256_hex(text.as_bytes());
        let mut clean = self.scrub_str(text).unwrap_or_else(|| std::mem::take(text));
        let mut cut = keep.min(clean.len());
        while !clean.is_char_boundary(cut) {
            cut -= 1;
        }
        clean.truncate(cut);
        clean.push_str(&format!("… [{bytes} bytes, sha256 {sha256}]"));
        *text = clean;
    }

    /// Whether a number written as `text` holds a secret (it is then
    /// recorded as `"[REDACTED]"`). Only secrets made of the characters of
    /// numbers can be in one; secrets shorter than
    /// [`MIN_SUBSTRING_SECRET`] are never looked for in numbers.
    pub(crate) fn number_holds_secret(&self, text: &[u8]) -> bool {
        match &self.numeric {
            Some(numeric) => numeric.is_match(text),
            // No such secret, or no automaton could be built for them.
            None => self
                .secrets
                .iter()
                .filter(|secret| is_numeric(secret))
                .any(|secret| memchr::memmem::find(text, secret.as_bytes()).is_some()),
        }
    }

    /// `Some(cleaned)` when `s` contains a secret.
    pub(crate) fn scrub_str(&self, s: &str) -> Option<String> {
        if self.exact.iter().any(|e| e == s) {
            return Some(REDACTED.into());
        }
        // The loop below replaces nothing unless a secret occurs in `s`
        // itself: ask that in one pass first.
        if s.len() < self.shortest {
            return None;
        }
        match &self.any_secret {
            Some(any) if !any.is_match(s) => return None,
            None if self.secrets.is_empty() => return None,
            _ => {}
        }
        let mut out: Option<String> = None;
        for secret in &self.secrets {
            let current = out.as_deref().unwrap_or(s);
            if current.contains(secret.as_str()) {
                out = Some(current.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }
}

/// Whether `secret` is made only of characters a number's decimal form
/// can hold.
fn is_numeric(secret: &str) -> bool {
    secret.bytes().all(|b| b"0123456789+-.eE".contains(&b))
}

/// About how many bytes `value` takes in a record once its strings
/// longer than `max` are shortened (strings and keys as their bytes plus
/// quotes, no escapes counted; numbers as their digits; punctuation), or
/// `None` as soon as that passes `limit`: the walk stops there, so a huge
/// value costs no more than `limit` worth of counting.
pub(crate) fn recorded_size(value: &Value, max: usize, limit: usize) -> Option<usize> {
    fn walk(value: &Value, max: usize, left: &mut usize) -> bool {
        let cost = match value {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => digits(u),
                (None, Some(i)) => 1 + digits(i.unsigned_abs()),
                // The longest float serde_json writes (`-1.2345678901234567e-308`).
                (None, None) => 24,
            },
            // `{"bytes":N,"prefix":"…","sha256":"<64>"}`.
            Value::String(s) if s.len() > max => prefix_len(max) + 110,
            Value::String(s) => s.len() + 2,
            Value::Array(items) => 2 + items.len(),
            Value::Object(map) => 2 + map.len(),
        };
        let Some(rest) = left.checked_sub(cost) else {
            return false;
        };
        *left = rest;
        match value {
            Value::Array(items) => items.iter().all(|v| walk(v, max, left)),
            Value::Object(map) => map.iter().all(|(k, v)| {
                match left.checked_sub(k.len() + 3) {
                    Some(rest) => *left = rest,
                    None => return false,
                }
                walk(v, max, left)
            }),
            _ => true,
        }
    }
    let mut left = limit;
    walk(value, max, &mut left).then_some(limit - left)
}

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Bytes of `value`'s canonical JSON, counted without building it: key
/// order changes no length, and serde_json writes strings and numbers as
/// the canonical form does.
pub(crate) fn canonical_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// How much of a shortened string is kept: 256 bytes, or `max` when that
/// is smaller.
pub(crate) fn prefix_len(max: usize) -> usize {
    max.min(256)
}

fn redact_at(value: &mut Value, segments: &[String]) {
    let Some((segment, rest)) = segments.split_first() else {
        *value = Value::String(REDACTED.into());
        return;
    };
    match value {
        Value::Object(map) => {
            if segment == "*" {
                map.values_mut().for_each(|v| redact_at(v, rest));
            } else if let Some(v) = map.get_mut(segment) {
                redact_at(v, rest);
            }
        }
        Value::Array(items) => {
            if segment == "*" {
                items.iter_mut().for_each(|v| redact_at(v, rest));
            } else if let Some(v) = segment
                .parse::<usize>()
                .ok()
                .filter(|_| segment.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|i| items.get_mut(i))
            {
                redact_at(v, rest);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_redact_nested_escaped_and_wildcard_paths() {
        let s = Scrubber::new(
            &[
                "/password".into(),
                "/a~1b".into(),
                "/items/*/token".into(),
                "/list/1".into(),
                "/missing/deep".into(),
            ],
            &[],
        )
        .unwrap();
        let mut v = json!({
            "password": {"nested": 1}, "a/b": "x", "keep": "y",
            "items": [{"token": "t1", "id": 1}, {"token": "t2"}],
            "list": [0, 1, 2]
        });
        s.redact_pointers(&mut v);
        assert_eq!(
            v,
            json!({
                "password": "[REDACTED]", "a/b": "[REDACTED]", "keep": "y",
                "items": [{"token": "[REDACTED]", "id": 1}, {"token": "[REDACTED]"}],
                "list": [0, "[REDACTED]", 2]
            })
        );
    }

    #[test]
    fn empty_pointer_redacts_everything_and_bad_pointer_is_refused() {
        let s = Scrubber::new(&[String::new()], &[]).unwrap();
        let mut v = json!({"a": 1});
        s.redact_pointers(&mut v);
        assert_eq!(v, json!("[REDACTED]"));
        assert!(matches!(
            Scrubber::new(&["password".into()], &[]),
            Err(AuditError::BadPointer { .. })
        ));
    }

    #[test]
    fn long_strings_are_shortened_everywhere_with_their_size_and_digest() {
        let secret = "ghp_0123456789abcdef";
        let s = Scrubber::new(&[], &[secret.into()]).unwrap();
        // The secret straddles the 256-byte cut: none of it may remain.
        let long = format!("{}{secret}{}", "a".repeat(250), "é".repeat(3000));
        let mut v = json!({"short": "x".repeat(10), "long": long, "deep": [{"x": long}], "n": 5});
        s.shorten_long_strings(&mut v, 4096);
        let expected = json!({
            "prefix": format!("{}{}", "a".repeat(250), "[REDAC"),
            "bytes": long.len(),
            "sha256": warden_core::digest::sha256_hex(long.as_bytes()),
        });
        assert_eq!(v["long"], expected);
        assert_eq!(v["deep"][0]["x"], expected);
        assert_eq!(v["short"], json!("x".repeat(10)));
        assert_eq!(v["n"], json!(5));
        // A cut inside a multi-byte character moves back to its start.
        let mut v = json!("é".repeat(200));
        s.shorten_long_strings(&mut v, 100);
        assert_eq!(v["prefix"], json!("é".repeat(50)));
        let mut v = json!("é".repeat(200));
        s.shorten_long_strings(&mut v, 99);
        assert_eq!(v["prefix"], json!("é".repeat(49)));
        // Exactly at the limit: kept.
        let mut v = json!("y".repeat(64));
        s.shorten_long_strings(&mut v, 64);
        assert_eq!(v, json!("y".repeat(64)));
    }

    #[test]
    fn short_secrets_are_only_replaced_where_they_are_the_whole_value() {
        let s = Scrubber::new(&[], &["1".into(), "on".into()]).unwrap();
        let mut v = json!({"a": "1", "b": "x1on", "c": 1, "d": 11, "on": "on"});
        s.scrub(&mut v);
        assert_eq!(
            v,
            json!({"a": "[REDACTED]", "b": "x1on", "c": 1, "d": 11, "[REDACTED]": "[REDACTED]"})
        );
    }

    #[test]
    fn secrets_are_scrubbed_from_strings_keys_and_numbers() {
        let s = Scrubber::new(
            &[],
            &[
                "abcd".into(),
                "abcdefgh".into(),
                "4242".into(),
                String::new(),
            ],
        )
        .unwrap();
        let mut v = json!({"xabcdefghx": ["abcd-abcd", 14242, 7, "ok"], "event": "abcd"});
        let Value::Object(map) = &mut v else {
            unreachable!()
        };
        s.scrub_map(map, Some("event"));
        assert_eq!(
            v,
            json!({"x[REDACTED]x": ["[REDACTED]-[REDACTED]", "[REDACTED]", 7, "ok"], "event": "abcd"})
        );
    }

    /// `scrub_str` and the number check as they were before the one-pass
    /// prefilter: one search per secret.
    fn by_loop(secrets: &[&str], s: &str) -> Option<String> {
        let scrubber = Scrubber::new(
            &[],
            &secrets.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        if scrubber.exact.iter().any(|e| e == s) {
            return Some(REDACTED.into());
        }
        let mut out: Option<String> = None;
        for secret in &scrubber.secrets {
            let current = out.as_deref().unwrap_or(s);
            if current.contains(secret.as_str()) {
                out = Some(current.replace(secret.as_str(), REDACTED));
            }
        }
        out
    }

    #[test]
    fn the_prefilter_changes_no_result() {
        // Secrets that overlap, contain each other, share bytes with
        // "[REDACTED]", are numeric, or are short.
        let sets: [&[&str]; 5] = [
            &["abcd", "abcdefgh", "cdef", "REDA", "CTED"],
            &["4242", "1e30", "-12.5", "sk-bench-secret"],
            &["ghp_000000000000000000000000000000000000", "on", "1"],
            &["a\u{e9}b\u{1}c", "\u{e9}b\u{1}"],
            &[],
        ];
        let texts = [
            "",
            "a",
            "on",
            "1",
            "abc",
            "abcd",
            "xabcdefghx",
            "abcdef",
            "cdefabcd",
            "[REDACTED]",
            "REDACTED",
            "14242",
            "1e300",
            "-12.55",
            "x-12.5e7",
            "sk-bench-secretsk-bench-secret",
            "ghp_000000000000000000000000000000000000\n",
            "a\u{e9}b\u{1}cd",
            "\u{e9}b\u{1}",
            "tool_call",
            "mcp__fs__read_text_file",
        ];
        for secrets in sets {
            let owned: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
            let scrubber = Scrubber::new(&[], &owned).unwrap();
            for text in texts {
                assert_eq!(
                    scrubber.scrub_str(text),
                    by_loop(secrets, text),
                    "{secrets:?} in {text:?}"
                );
                let in_number = owned
                    .iter()
                    .filter(|s| s.len() >= MIN_SUBSTRING_SECRET)
                    .any(|s| text.contains(s.as_str()));
                if text.bytes().all(|b| b"0123456789+-.eE".contains(&b)) {
                    assert_eq!(
                        scrubber.number_holds_secret(text.as_bytes()),
                        in_number,
                        "{secrets:?} in {text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn urls_are_found_by_their_marker() {
        for (text, url) in [
            ("https://h/", true),
            ("x http://u:p@h/?a=b", true),
            ("a:b//c", false),
            ("://", true),
            ("no url: here", false),
            ("ends with:", false),
            ("", false),
        ] {
            assert_eq!(has_url(text), url, "{text}");
            assert_eq!(has_url(text), text.contains("://"), "{text}");
        }
    }
}
