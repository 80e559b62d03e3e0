//! What never reaches an output: credentials in URLs (userinfo, query
//! values, fragments; [`warden_core::redact`]) and the secrets of the
//! configuration (`env`, `env_from`, `headers` values, and every value a
//! project file expanded from the host environment).
//!
//! One process-wide list, filled when the configuration loads
//! ([`register`]), applied at every edge text leaves through: the log
//! writer ([`Stderr`], which also covers the libraries' own log lines,
//! e.g. rmcp's "fail to get common stream: error sending request for url
//! (…)"), the command line's errors and JSON output, what models and
//! gateway clients are told. The audit log scrubs the same values itself
//! (`warden_audit::AuditOptions::secrets`).

use std::borrow::Cow;
use std::io::Write;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Values this short are too common to scrub inside text (`1`, `on`).
const MIN_SECRET: usize = 4;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// How many times [`SECRETS`] grew: an audit log opened earlier learns the
/// values registered since (a refreshed OAuth token) when it changes.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Adds secret values to scrub from every output from now on.
pub fn register<I: IntoIterator<Item = String>>(values: I) {
    let mut secrets = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    let before = secrets.len();
    for v in values {
        if v.len() >= MIN_SECRET && !secrets.contains(&v) {
            secrets.push(v);
        }
    }
    if secrets.len() != before {
        GENERATION.fetch_add(1, Ordering::Release);
    }
    // Longest first, so a secret that contains another goes whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Changes whenever a secret is registered (compare with an earlier value).
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Every registered secret.
pub fn registered() -> Vec<String> {
    SECRETS.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `text` with credentials in URLs masked and registered secrets replaced
/// by `[REDACTED]`.
pub fn clean(text: &str) -> Cow<'_, str> {
    let mut out = warden_core::redact::urls_in(text);
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), warden_core::redact::MASK));
        }
    }
    out
}

/// `text` with registered secrets replaced (URLs left as they are): for
/// what a server answered, which may hold URLs that are not warden's.
pub fn secrets_only(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), warden_core::redact::MASK));
        }
    }
    out
}

/// [`clean`] on every string inside a JSON value (keys included).
pub fn clean_json(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            if let Cow::Owned(c) = clean(s) {
                *s = c;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean_json),
        Value::Object(map) => {
            let dirty: Vec<String> = map
                .keys()
                .filter(|k| matches!(clean(k), Cow::Owned(_)))
                .cloned()
                .collect();
            for key in dirty {
                if let Some(v) = map.remove(&key) {
                    map.insert(clean(&key).into_owned(), v);
                }
            }
            map.values_mut().for_each(clean_json);
        }
        _ => {}
    }
}

/// The log writer: stderr, each line [`clean`]ed and then neutralised
/// for a terminal ([`warden_core::display`]): log lines quote what servers
/// wrote (their stderr, errors, names), and a log read later with `cat`
/// is a terminal too. tracing writes one whole event per call, so no
/// sequence or character is split between calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Secrets first (on the text as written), then what may reach a
        // terminal.
        let text = String::from_utf8_lossy(buf);
        let shown = warden_core::display::text(&clean(&text)).into_owned();
        std::io::stderr().write_all(shown.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        Stderr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_secrets_are_cleaned() {
        register(["s3cr3t-value".to_string(), "x".to_string()]);
        assert_eq!(
            clean("GET https://h/mcp?token=abc failed; key s3cr3t-value, x stays"),
            "GET https://h/mcp?token=[REDACTED] failed; key [REDACTED], x stays"
        );
        let mut v = serde_json::json!({"e": ["u https://a:b@h/"], "s3cr3t-value": 1});
        clean_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"e": ["u https://[REDACTED]@h/"], "[REDACTED]": 1})
        );
    }
}
