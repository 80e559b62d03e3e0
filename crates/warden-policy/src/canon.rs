//! One canonical form per argument value, computed once per call and used
//! by the rules stage and the Rego stage alike (`input.arguments`).
//!
//! Warden never rewrites what a server receives; it decides on what the
//! value *means*. A string is read the ways a server may read it:
//!
//! - an absolute path (`/…`): [`warden_core::path::normalize`]d, so
//!   `//etc/./shadow` is `/etc/shadow`;
//! - a relative path: joined to the workspace, then normalised;
//! - a `file:` URI: the path it names (as Python's `urllib` and Node's
//!   `fileURLToPath` decode it), *and* the relative path a server that does
//!   not parse URIs would open (`WORKSPACE/file:/…`);
//! - another `scheme://` URI: its WHATWG serialisation (scheme and host
//!   lower-cased, default port and dot segments removed), and again the
//!   relative path a path-only server would open;
//! - a value starting with `~`: warden never expands `~`, because it cannot
//!   know which home directory the server uses.
//!
//! Each reading is a [`Reading`]; a value is *certain* when warden knows
//! every reading for sure. An `allow` rule needs a certain value and every
//! reading to match; a `deny`/`ask` rule fires when any reading matches.
//! A value is *uncertain* (with a reason) where real parsers disagree with
//! each other or with warden: a `file:` URI with a query, fragment,
//! backslash, control character, whitespace at either end, a
//! percent-encoded `/`, `\`, `.`, NUL or control character, invalid
//! percent-encoding or UTF-8, a host other than `localhost`, or no `//`
//! (`file:x`), an empty path segment (`//`, which WHATWG parsers keep, so a
//! later `..` climbs differently); a value starting with `~`; a URI with userinfo, a
//! backslash, a control character or a percent-encoded `.`/`/`; and a
//! plain path that a URL parser (Python's `urllib.parse`, which servers
//! apply to anything they expect to be a URI) reads differently: one with
//! a NUL or control character, whitespace at either end, a leading `//`
//! (a host), `?` or `#`, a percent-escape, or a `NAME:` prefix before a
//! `/`. For uncertain values the readings are every
//! plausible one (Python's, Node's, a naive prefix strip, with and without
//! decoding, `~` at `/` and at the host's HOME), for deny and ask rules.
//!
//! Numbers are compared by value: `2`, `2.0` and `2e0` are all `2`.
//!
//! Too large or too deep arguments are refused before anything else
//! evaluates them ([`Limits`]).

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value};
use warden_core::path::{absolutize_str, has_dot_segments, rooted};

/// Caps on arguments, checked before any stage evaluates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of all strings and keys together.
    pub max_bytes: usize,
    /// Nesting of arrays and objects (the arguments object is level 1).
    pub max_depth: usize,
    /// Values (scalars, arrays, objects) in all.
    pub max_values: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 8 << 20,
            max_depth: 32,
            max_values: 100_000,
        }
    }
}

/// How a string was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A relative path or plain text (`src/a.rs`, `read`, `feature/x`).
    Relative,
    /// A relative path with `.` or `..` components (`../x`).
    RelativeDots,
    /// `/…`.
    Absolute,
    /// `~…`.
    Home,
    /// `file:…`.
    FileUri,
    /// `scheme://…` other than `file:`.
    Uri,
}

/// One meaning of a value: a path (absolute, normalised) or a URI
/// (canonical string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    Path(String),
    Uri(String),
}

impl Reading {
    pub fn as_str(&self) -> &str {
        match self {
            Reading::Path(s) | Reading::Uri(s) => s,
        }
    }
}

/// A string argument and its meanings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonStr {
    /// As sent.
    pub raw: String,
    pub shape: Shape,
    /// What `input.arguments` shows: the normalised path or canonical URI
    /// when certain (for [`Shape::Relative`], the value as written, since
    /// it means the same and is usually not a path at all); the raw value
    /// when uncertain.
    pub primary: String,
    /// Every meaning warden considers (never empty).
    pub readings: Vec<Reading>,
    /// Why the value cannot be read with certainty.
    pub uncertain: Option<String>,
}

impl CanonStr {
    pub fn is_certain(&self) -> bool {
        self.uncertain.is_none()
    }

    /// Looks like a path or URI (has a `/`, starts with `~`, or has a URI
    /// scheme): what `input.readings`/`input.uncertain` report. (Text such
    /// as `Fix #42` is read every way for rules, but not reported.)
    pub fn path_shaped(&self) -> bool {
        matches!(self.shape, Shape::Home | Shape::FileUri | Shape::Uri) || self.raw.contains('/')
    }
}

/// A value with every string canonicalised.
#[derive(Debug, Clone, PartialEq)]
pub enum CanonValue {
    Null,
    Bool(bool),
    /// A number, integral values as integers (`2.0` → `2`).
    Number(Number),
    Str(Box<CanonStr>),
    Array(Vec<CanonValue>),
    Object(BTreeMap<String, CanonValue>),
}

impl CanonValue {
    /// RFC 6901 lookup, like `serde_json::Value::pointer`.
    pub fn pointer(&self, pointer: &str) -> Option<&CanonValue> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut at = self;
        for token in rest.split('/') {
            let token = token.replace("~1", "/").replace("~0", "~");
            at = match at {
                CanonValue::Object(map) => map.get(&token)?,
                CanonValue::Array(items) => {
                    if token.starts_with('+') || (token.len() > 1 && token.starts_with('0')) {
                        return None;
                    }
                    items.get(token.parse::<usize>().ok()?)?
                }
                _ => return None,
            };
        }
        Some(at)
    }

    /// A top-level argument.
    pub fn get(&self, name: &str) -> Option<&CanonValue> {
        match self {
            CanonValue::Object(map) => map.get(name),
            _ => None,
        }
    }
}

/// The canonical arguments of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Canonical {
    pub value: CanonValue,
}

impl Canonical {
    /// `input.arguments`: the arguments with each string replaced by its
    /// primary form and numbers by their canonical value.
    pub fn arguments_json(&self) -> Value {
        fn conv(v: &CanonValue) -> Value {
            match v {
                CanonValue::Null => Value::Null,
                CanonValue::Bool(b) => Value::Bool(*b),
                CanonValue::Number(n) => Value::Number(n.clone()),
                CanonValue::Str(s) => Value::String(s.primary.clone()),
                CanonValue::Array(items) => Value::Array(items.iter().map(conv).collect()),
                CanonValue::Object(map) => Value::Object(
                    map.iter()
                        .map(|(k, v)| (k.clone(), conv(v)))
                        .collect::<Map<String, Value>>(),
                ),
            }
        }
        conv(&self.value)
    }

    /// Every path-shaped string value that is uncertain or has more than
    /// one reading (URIs: the URI's meaning, and the relative path a server
    /// that does not parse URIs opens), by JSON pointer: `(pointer, value)`. For `input.readings` and
    /// `input.uncertain`.
    pub fn notable(&self) -> Vec<(String, &CanonStr)> {
        fn walk<'a>(v: &'a CanonValue, at: &mut String, out: &mut Vec<(String, &'a CanonStr)>) {
            match v {
                CanonValue::Str(s)
                    if (!s.is_certain() || s.readings.len() > 1) && s.path_shaped() =>
                {
                    out.push((at.clone(), s));
                }
                CanonValue::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        below(at, &i.to_string(), |at| walk(item, at, out));
                    }
                }
                CanonValue::Object(map) => {
                    for (k, item) in map {
                        below(at, &pointer_token(k), |at| walk(item, at, out));
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.value, &mut String::new(), &mut out);
        out
    }
}

/// An object key as one JSON pointer token (RFC 6901: `~` is `~0`, `/`
/// is `~1`).
pub(crate) fn pointer_token(key: &str) -> std::borrow::Cow<'_, str> {
    if key.contains(['~', '/']) {
        key.replace('~', "~0").replace('/', "~1").into()
    } else {
        key.into()
    }
}

/// Runs `f` with `token` appended to the JSON pointer `at`, then takes it
/// off again (walks build pointers in one buffer).
pub(crate) fn below<T>(at: &mut String, token: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let len = at.len();
    at.push('/');
    at.push_str(token);
    let out = f(at);
    at.truncate(len);
    out
}

/// What is known of the world when reading values.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    /// Absolute, normalised workspace: relative paths are joined to it.
    pub workspace: &'a str,
    /// The host's HOME, for one plausible reading of `~` (deny rules only).
    pub home: Option<&'a str>,
}

/// Canonicalises one call's arguments; `Err` says which limit was exceeded.
pub fn canonicalize(args: &Value, ctx: &Context<'_>, limits: &Limits) -> Result<Canonical, String> {
    let mut budget = Budget {
        bytes: 0,
        values: 0,
        limits,
    };
    let value = walk(args, ctx, 1, &mut budget)?;
    Ok(Canonical { value })
}

struct Budget<'l> {
    bytes: usize,
    values: usize,
    limits: &'l Limits,
}

impl Budget<'_> {
    fn value(&mut self, depth: usize) -> Result<(), String> {
        self.values += 1;
        if self.values > self.limits.max_values {
            return Err(format!(
                "the arguments hold more than {} values",
                self.limits.max_values
            ));
        }
        if depth > self.limits.max_depth {
            return Err(format!(
                "the arguments are nested deeper than {} levels",
                self.limits.max_depth
            ));
        }
        Ok(())
    }

    fn bytes(&mut self, n: usize) -> Result<(), String> {
        self.bytes += n;
        if self.bytes > self.limits.max_bytes {
            return Err(format!(
                "the arguments hold more than {} MiB of text",
                self.limits.max_bytes >> 20
            ));
        }
        Ok(())
    }
}

fn walk(
    v: &Value,
    ctx: &Context<'_>,
    depth: usize,
    budget: &mut Budget<'_>,
) -> Result<CanonValue, String> {
    // Scalars do not nest: only arrays and objects count as levels.
    budget.value(if v.is_array() || v.is_object() {
        depth
    } else {
        0
    })?;
    Ok(match v {
        Value::Null => CanonValue::Null,
        Value::Bool(b) => CanonValue::Bool(*b),
        Value::Number(n) => CanonValue::Number(canonical_number(n)),
        Value::String(s) => {
            budget.bytes(s.len())?;
            CanonValue::Str(Box::new(canon_str(s, ctx)))
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(walk(item, ctx, depth + 1, budget)?);
            }
            CanonValue::Array(out)
        }
        Value::Object(map) => {
            let mut out = BTreeMap::new();
            for (k, item) in map {
                budget.bytes(k.len())?;
                out.insert(k.clone(), walk(item, ctx, depth + 1, budget)?);
            }
            CanonValue::Object(out)
        }
    })
}

/// The canonical form of a number: integral values within ±2^53 become
/// integers (`2.0`, `2e0`, `-0.0` → `2`, `2`, `0`); others stay as parsed.
pub fn canonical_number(n: &Number) -> Number {
    if n.is_i64() || n.is_u64() {
        return n.clone();
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => {
            // Exact: |f| ≤ 2^53 is an integer an i64 holds.
            Number::from(f as i64)
        }
        _ => n.clone(),
    }
}

/// Numeric value of a number or of a string that a server might parse as
/// one (`"2.0"`, `" 2 "`, `"2e0"`), for deny/ask rules on numbers.
pub fn numeric_value(v: &CanonValue) -> Option<f64> {
    match v {
        CanonValue::Number(n) => n.as_f64(),
        CanonValue::Str(s) => {
            let t = s.raw.trim();
            // Only decimal literals: "inf"/"nan" are no note ids.
            if t.is_empty()
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"+-.eE_".contains(&b))
            {
                return None;
            }
            t.replace('_', "")
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
        }
        _ => None,
    }
}

/// Reads one string value (see the module docs).
pub fn canon_str(raw: &str, ctx: &Context<'_>) -> CanonStr {
    let literal = || Reading::Path(absolutize_str(ctx.workspace, raw));
    // URL parsers strip leading spaces and control characters.
    let trimmed = raw.trim_start_matches(|c: char| c <= ' ');
    if let Some((scheme, rest)) = split_scheme(trimmed) {
        if scheme.eq_ignore_ascii_case("file") {
            return file_uri(raw, rest, ctx);
        }
        if rest.starts_with("//") {
            return other_uri(raw, ctx);
        }
    }
    // pathlib collapses leading `.` components (`./~/a` is `~/a`), and
    // then `expanduser()` expands the `~`.
    if leading_dots_stripped(raw).starts_with('~') {
        return home(raw, ctx);
    }
    let why = plain_uncertainty(raw);
    let mut readings = vec![literal()];
    if why.is_some() {
        for r in uri_reference_readings(raw) {
            push_unique(
                &mut readings,
                Reading::Path(absolutize_str(ctx.workspace, &r)),
            );
        }
    }
    let (shape, primary) = if raw.starts_with('/') {
        (Shape::Absolute, readings[0].as_str().to_string())
    } else if has_dot_segments(raw) {
        (Shape::RelativeDots, readings[0].as_str().to_string())
    } else {
        (Shape::Relative, raw.to_string())
    };
    let primary = if why.is_some() {
        raw.to_string()
    } else {
        primary
    };
    let nul = why.map(str::to_string);
    CanonStr {
        raw: raw.to_string(),
        shape,
        primary,
        readings,
        uncertain: nul,
    }
}

/// Why a string without a URI scheme cannot be read as a path with
/// certainty: where Python's `urllib.parse` (which a server may apply to
/// any string it expects to be a URI) reads it differently from a path, or
/// where servers disagree on a path (NUL).
fn plain_uncertainty(raw: &str) -> Option<&'static str> {
    let bytes = raw.as_bytes();
    // One pass over the bytes for what would otherwise be five scans of
    // a possibly long argument. `raw` is UTF-8: a control character
    // (`char::is_control`, Unicode Cc) is an ASCII control or DEL, or
    // U+0080–U+009F, which UTF-8 writes as 0xC2 0x80–0x9F.
    let (mut nul, mut control, mut query, mut escape) = (false, false, false, false);
    // Most arguments are plain text: blocks of 32 bytes without any byte
    // of interest are skipped with a test the compiler vectorises (a byte
    // at a time, this loop was a 100 KB argument's largest cost: ~2 ns a
    // byte). A block with one is read byte by byte; what follows a byte
    // (`0xC2 0x85`, `%4F`) is read across the block's end.
    for block in (0..bytes.len()).step_by(NOTABLE_BLOCK) {
        let end = (block + NOTABLE_BLOCK).min(bytes.len());
        if !bytes[block..end]
            .iter()
            .fold(false, |any, &b| any | notable_byte(b))
        {
            continue;
        }
        for (i, &b) in bytes.iter().enumerate().take(end).skip(block) {
            match b {
                0 => nul = true,
                1..=0x1f | 0x7f => control = true,
                0xc2 if bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)) => {
                    control = true
                }
                b'?' | b'#' => query = true,
                b'%' => {
                    escape |= bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                        && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                }
                _ => {}
            }
        }
    }
    if nul {
        Some("it contains a NUL character (C-based servers cut the path there; others fail)")
    } else if control {
        Some("it contains a control character (URL parsers drop tabs and line breaks)")
    } else if raw.trim() != raw {
        Some("it has whitespace at either end (URL parsers strip it)")
    } else if raw.starts_with("//") && !raw.starts_with("///") {
        Some("it starts with `//`, which URL parsers read as a host (`//HOST/PATH`)")
    } else if query {
        Some("it contains `?` or `#`, which URL parsers read as a query or fragment")
    } else if escape {
        Some("it contains a percent-escape, which URL parsers decode")
    } else if split_scheme(raw).is_some_and(|(_, rest)| rest.contains('/')) {
        Some("it starts with `NAME:`, which URL parsers read as a scheme")
    } else {
        None
    }
}

/// Bytes [`plain_uncertainty`] skips in one test when none is notable.
const NOTABLE_BLOCK: usize = 32;

/// A byte [`plain_uncertainty`] looks at: controls (and the first byte of
/// U+0080–U+009F), `?`, `#`, `%`.
fn notable_byte(b: u8) -> bool {
    b < 0x20 || b == 0x7f || b == 0xc2 || b == b'?' || b == b'#' || b == b'%'
}

/// What a server that runs the string through a URL parser (Python's
/// `urllib.parse.urlparse`, then `url2pathname`) opens: whitespace and
/// control characters dropped, a scheme, `//HOST`, query and fragment
/// removed, escapes decoded; and what a C-based server opens (cut at NUL).
fn uri_reference_readings(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some((before, _)) = raw.split_once('\0') {
        out.push(before.to_string());
    }
    let cleaned: String = raw
        .trim()
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let rest = match split_scheme(&cleaned) {
        Some((_, rest)) => rest.to_string(),
        None => cleaned.clone(),
    };
    let rest = match rest.strip_prefix("//") {
        Some(after) => after
            .find('/')
            .map_or(String::new(), |i| after[i..].to_string()),
        None => rest,
    };
    let path = rest.split(['?', '#']).next().unwrap_or("").to_string();
    out.push(path.clone());
    out.push(percent_decode_lossy(&path));
    out
}

fn push_unique(readings: &mut Vec<Reading>, r: Reading) {
    if !readings.contains(&r) {
        readings.push(r);
    }
}

/// A resource URI (`resources/read`, CONTRACT §8): always parsed as a
/// URI, so a `file:` URI means only its path, another scheme only its
/// canonical form (no relative-path reading). A value that is not a URI
/// is read as a path, as [`canon_str`] does.
pub fn canon_resource_uri(raw: &str, ctx: &Context<'_>) -> CanonStr {
    let mut c = canon_str(raw, ctx);
    if matches!(c.shape, Shape::FileUri | Shape::Uri) {
        let literal = Reading::Path(absolutize_str(ctx.workspace, raw));
        if c.readings.len() > 1 {
            c.readings.retain(|r| *r != literal);
        }
    }
    c
}

/// `scheme:rest` when `value` starts with an RFC 3986 scheme.
pub fn split_scheme(value: &str) -> Option<(&str, &str)> {
    let colon = value.find(':')?;
    let scheme = &value[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then(|| (scheme, &value[colon + 1..]))
}

/// A relative path without its leading `.` components and the slashes
/// after them (`.//./~/a` → `~/a`), as Python's `pathlib` reads it.
fn leading_dots_stripped(raw: &str) -> &str {
    let mut t = raw;
    loop {
        if let Some(rest) = t.strip_prefix("./") {
            t = rest.trim_start_matches('/');
        } else {
            return t;
        }
    }
}

/// `~`, `~/…`, `~user/…` (and `./~/…`).
fn home(raw: &str, ctx: &Context<'_>) -> CanonStr {
    let stripped = leading_dots_stripped(raw);
    let (head, tail) = stripped.split_once('/').unwrap_or((stripped, ""));
    let mut readings = Vec::new();
    // `~` as a root of its own: `~/a/../.ssh/k` is `~/.ssh/k`; matches
    // patterns such as `**/.ssh/**`.
    let under = rooted(tail);
    push_unique(
        &mut readings,
        Reading::Path(format!("{head}{}", under.trim_end_matches('/'))),
    );
    // HOME at `/`: the furthest `..` can climb (`~/../../etc` → `/etc`).
    push_unique(&mut readings, Reading::Path(rooted(tail)));
    // The host's own HOME (what an unsandboxed server on this machine uses).
    if head == "~"
        && let Some(home) = ctx.home.filter(|h| h.starts_with('/'))
    {
        push_unique(&mut readings, Reading::Path(absolutize_str(home, tail)));
    }
    // A server that does not expand `~` opens `WORKSPACE/~/…`.
    push_unique(
        &mut readings,
        Reading::Path(absolutize_str(ctx.workspace, raw)),
    );
    CanonStr {
        raw: raw.to_string(),
        shape: Shape::Home,
        primary: raw.to_string(),
        readings,
        uncertain: Some(
            "it starts with `~`: warden does not expand `~`, because it cannot know which home \
             directory the server uses"
                .into(),
        ),
    }
}

/// A `file:` URI. `rest` follows the scheme's colon.
fn file_uri(raw: &str, rest: &str, ctx: &Context<'_>) -> CanonStr {
    let literal = Reading::Path(absolutize_str(ctx.workspace, raw));
    let strict = strict_file_path(raw, rest);
    match strict {
        Ok(path) => CanonStr {
            raw: raw.to_string(),
            shape: Shape::FileUri,
            primary: path.clone(),
            readings: dedup(vec![Reading::Path(path), literal]),
            uncertain: None,
        },
        Err(why) => {
            let mut readings = Vec::new();
            for r in loose_file_readings(raw, rest) {
                push_unique(&mut readings, Reading::Path(r));
            }
            push_unique(&mut readings, literal);
            CanonStr {
                raw: raw.to_string(),
                shape: Shape::FileUri,
                primary: raw.to_string(),
                readings,
                uncertain: Some(format!("it is a `file:` URI {why}")),
            }
        }
    }
}

fn dedup(readings: Vec<Reading>) -> Vec<Reading> {
    let mut out = Vec::with_capacity(readings.len());
    for r in readings {
        push_unique(&mut out, r);
    }
    out
}

/// The path of a `file:` URI that every parser warden knows reads the same
/// way, or why there is none.
fn strict_file_path(raw: &str, rest: &str) -> Result<String, &'static str> {
    if raw.trim() != raw {
        return Err("with whitespace at either end (URL parsers strip it)");
    }
    if raw.chars().any(char::is_control) {
        return Err("with a control character (URL parsers drop tabs and line breaks)");
    }
    if raw.contains('\\') {
        return Err("with a backslash (Node reads it as `/`, Python as a file name character)");
    }
    if raw.contains('#') {
        return Err("with a fragment (`#`: URL parsers drop it, naive servers do not)");
    }
    if raw.contains('?') {
        return Err("with a query (`?`: URL parsers drop it, naive servers do not)");
    }
    let path = if let Some(after) = rest.strip_prefix("//") {
        let slash = after.find('/').unwrap_or(after.len());
        let host = &after[..slash];
        if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
            return Err("with a host other than `localhost` (Python ignores it, Node refuses it)");
        }
        &after[slash..]
    } else if rest.starts_with('/') {
        rest
    } else {
        return Err("without `//` (`file:x`: Node reads `/x`, Python a relative path)");
    };
    if path.is_empty() {
        return Ok("/".into());
    }
    if path.contains("//") {
        return Err(
            "with an empty path segment (`//`: URL parsers keep it, so a later `..` \
                    climbs differently than in a path)",
        );
    }
    // A Windows drive letter (`/C:/`, `/C|/`) is treated specially by WHATWG.
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if first.len() == 2
        && first.as_bytes()[0].is_ascii_alphabetic()
        && matches!(first.as_bytes()[1], b':' | b'|')
    {
        return Err("with a drive letter (URL parsers treat it specially)");
    }
    let decoded = percent_decode_strict(path)?;
    Ok(rooted(&decoded))
}

/// Decodes `%XX`; refuses what parsers decode differently.
fn percent_decode_strict(s: &str) -> Result<String, &'static str> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            else {
                return Err("with a `%` that is not a valid escape");
            };
            if matches!(b, b'/' | b'\\' | b'.' | b'%') || b < 0x20 || b == 0x7f {
                return Err(
                    "with a percent-encoded `/`, `\\`, `.`, `%`, NUL or control character \
                     (parsers disagree on whether it separates or climbs)",
                );
            }
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "that decodes to invalid UTF-8")
}

/// Every plausible path of a `file:` URI warden cannot read with certainty.
fn loose_file_readings(raw: &str, rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let stripped: String = raw
        .trim()
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let rest_stripped = split_scheme(&stripped).map_or("", |(_, r)| r);
    for rest in [rest, rest_stripped] {
        // The part after the authority (any host is ignored).
        let path_all = match rest.strip_prefix("//") {
            Some(after) => after.find('/').map_or("", |i| &after[i..]),
            None => rest,
        };
        // URL parsers: query and fragment dropped.
        let path_url = path_all.split(['?', '#']).next().unwrap_or("");
        for candidate in [path_all, path_url] {
            let decoded = percent_decode_lossy(candidate);
            for p in [candidate.to_string(), decoded] {
                out.push(rooted(&p));
                // Node: `\` is a separator in file URLs.
                if p.contains('\\') {
                    out.push(rooted(&p.replace('\\', "/")));
                }
                // C-based servers cut at NUL.
                if let Some((before, _)) = p.split_once('\0') {
                    out.push(rooted(before));
                }
            }
        }
    }
    out
}

fn percent_decode_lossy(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `scheme://…` other than `file:`.
fn other_uri(raw: &str, ctx: &Context<'_>) -> CanonStr {
    let literal = Reading::Path(absolutize_str(ctx.workspace, raw));
    let parsed = url::Url::parse(raw);
    let why = if raw.trim() != raw || raw.chars().any(char::is_control) {
        Some("with whitespace at either end or a control character (URL parsers strip them)")
    } else if raw.contains('\\') {
        Some("with a backslash (WHATWG parsers read it as `/`, others do not)")
    } else if authority(raw).contains('@') {
        Some("with userinfo (`user@host`: parsers disagree on where the host starts)")
    } else if contains_ci(raw, "%2e") || contains_ci(raw, "%2f") || contains_ci(raw, "%5c") {
        Some("with a percent-encoded `.`, `/` or `\\` (parsers disagree on whether it climbs)")
    } else if parsed.is_err() {
        Some("that does not parse as a URL")
    } else if !special_scheme(raw)
        && has_dot_segments(after_scheme(raw).split(['?', '#']).next().unwrap_or(""))
    {
        // Web URLs are fetched through URL parsers, which remove them; a
        // server's own scheme (`notes://`, `repo://`) is often split by
        // hand, the host read as the first folder.
        Some(
            "with `.` or `..` segments in a scheme of its own (URL parsers remove them \
             below the host; a server that joins the rest as a path climbs out of it)",
        )
    } else {
        None
    };
    let canonical = parsed.ok().map(|u| u.as_str().to_string());
    let mut readings = Vec::new();
    if let Some(c) = &canonical {
        readings.push(Reading::Uri(c.clone()));
    }
    if why.is_some() {
        push_unique(&mut readings, Reading::Uri(raw.to_string()));
        // The naive reading: everything after `scheme://` as one path.
        if let Some((scheme, _)) = split_scheme(raw) {
            let joined = rooted(after_scheme(raw));
            push_unique(
                &mut readings,
                Reading::Uri(format!("{scheme}://{}", joined.trim_start_matches('/'))),
            );
        }
    }
    push_unique(&mut readings, literal);
    CanonStr {
        raw: raw.to_string(),
        shape: Shape::Uri,
        primary: match (&canonical, why) {
            (Some(c), None) => c.clone(),
            _ => raw.to_string(),
        },
        readings,
        uncertain: why.map(|w| format!("it is a URI {w}")),
    }
}

/// Whether `raw` has one of WHATWG's special schemes (web URLs).
fn special_scheme(raw: &str) -> bool {
    split_scheme(raw).is_some_and(|(scheme, _)| {
        ["http", "https", "ws", "wss", "ftp"]
            .iter()
            .any(|s| scheme.eq_ignore_ascii_case(s))
    })
}

/// What follows `scheme://` (or the whole string without it).
fn after_scheme(raw: &str) -> &str {
    raw.find("://").map_or(raw, |i| &raw[i + 3..])
}

fn authority(raw: &str) -> &str {
    let after = raw.find("://").map_or("", |i| &raw[i + 3..]);
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    &after[..end]
}

fn contains_ci(haystack: &str, needle: &str) -> bool {
    haystack.to_ascii_lowercase().contains(needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `plain_uncertainty` was before its one-pass scan: the oracle
    /// (its own copy of the messages: calling the function under test for
    /// them would hide a byte it stopped looking at).
    fn plain_uncertainty_by_scans(raw: &str) -> Option<&'static str> {
        let escape = raw
            .as_bytes()
            .windows(3)
            .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit());
        if raw.contains('\0') {
            Some("it contains a NUL character (C-based servers cut the path there; others fail)")
        } else if raw.chars().any(char::is_control) {
            Some("it contains a control character (URL parsers drop tabs and line breaks)")
        } else if raw.trim() != raw {
            Some("it has whitespace at either end (URL parsers strip it)")
        } else if raw.starts_with("//") && !raw.starts_with("///") {
            Some("it starts with `//`, which URL parsers read as a host (`//HOST/PATH`)")
        } else if raw.contains(['?', '#']) {
            Some("it contains `?` or `#`, which URL parsers read as a query or fragment")
        } else if escape {
            Some("it contains a percent-escape, which URL parsers decode")
        } else if split_scheme(raw).is_some_and(|(_, rest)| rest.contains('/')) {
            Some("it starts with `NAME:`, which URL parsers read as a scheme")
        } else {
            None
        }
    }

    proptest::proptest! {
        #[test]
        fn one_pass_uncertainty_is_the_scans(
            raw in "[a/%4f?#: \\t\\x00\\x7f\\u{80}\\u{9f}\\u{a0}\\u{c2}\\u{2028}é]{0,12}",
        ) {
            proptest::prop_assert_eq!(plain_uncertainty(&raw), plain_uncertainty_by_scans(&raw));
        }

        /// Long text with a few notable bytes anywhere: the blocks skipped
        /// whole, and a `%4F` or `0xC2 0x85` cut by a block's end.
        #[test]
        fn block_skipping_uncertainty_is_the_scans(
            before in "x{0,80}",
            notable in "[%4f?#\\t\\x00\\x1f\\x7f\\u{80}\\u{85}\\u{9f}é]{0,3}",
            after in "[x4]{0,80}",
        ) {
            let raw = format!("{before}{notable}{after}");
            proptest::prop_assert_eq!(plain_uncertainty(&raw), plain_uncertainty_by_scans(&raw));
        }

        #[test]
        fn string_absolutize_is_the_path_one(
            base in "/[a./é]{0,12}",
            path in "[a./é\\x00 ~:]{0,16}",
        ) {
            let by_path = warden_core::path::absolutize(
                std::path::Path::new(&base),
                std::path::Path::new(&path),
            )
            .to_string_lossy()
            .into_owned();
            proptest::prop_assert_eq!(warden_core::path::absolutize_str(&base, &path), by_path);
        }
    }

    const WS: &str = "/w";

    fn c(raw: &str) -> CanonStr {
        canon_str(
            raw,
            &Context {
                workspace: WS,
                home: Some("/home/u"),
            },
        )
    }

    fn paths(s: &CanonStr) -> Vec<&str> {
        s.readings.iter().map(Reading::as_str).collect()
    }

    #[test]
    fn plain_paths() {
        // `//etc/shadow` is `/etc/shadow` to the kernel, but `/shadow` on
        // host `etc` to a URL parser: both readings, no certainty.
        let dd = c("//etc/shadow");
        assert!(!dd.is_certain());
        assert!(
            paths(&dd).contains(&"/etc/shadow") && paths(&dd).contains(&"/shadow"),
            "{dd:?}"
        );
        assert_eq!(c("///etc/shadow").primary, "/etc/shadow");
        assert_eq!(c("/etc/./shadow").primary, "/etc/shadow");
        assert_eq!(c("/proc/self//environ").primary, "/proc/self/environ");
        assert_eq!(c("/w/../x").primary, "/x");
        let rel = c("src/a.rs");
        assert_eq!(rel.primary, "src/a.rs");
        assert_eq!(paths(&rel), ["/w/src/a.rs"]);
        assert_eq!(c("a/../../x").primary, "/x");
        assert_eq!(c("read").primary, "read");
        assert!(c("/w/a\\..\\..\\b").is_certain());
        for bad in [
            "/w/a\0/../../etc",
            "/w/..\t/x",
            " /etc/x",
            "/w/a#/../../../x",
            "/w/a?/../../../x",
            "/w/%2e%2e/x",
            "s:/x/../../etc",
        ] {
            assert!(!c(bad).is_certain(), "{bad:?}");
        }
        // Python's reading of `/w/..\t/x` (tab dropped) is `/x`.
        assert!(paths(&c("/w/..\t/x")).contains(&"/x"));
        assert!(c("50% done").is_certain() && c("Fix #42").shape == Shape::Relative);
    }

    #[test]
    fn file_uris() {
        let u = c("file:///w/a/../b");
        assert_eq!(u.primary, "/w/b");
        assert!(u.is_certain());
        assert_eq!(paths(&u), ["/w/b", "/w/file:/w/b"]);
        assert_eq!(c("file://localhost/w/x").primary, "/w/x");
        assert_eq!(c("FILE:/w/x").primary, "/w/x");
        assert_eq!(c("file:///w/%41%20b").primary, "/w/A b");
        for bad in [
            "file:///w/secrets/key#/../../public/x",
            "file:///w/a?x=/../../b",
            "file:///w/a\\..\\..\\b",
            "file:///w/a%2f..%2f..%2fb",
            "file:///w/%2e%2e/x",
            "file:///w/a\t/../b",
            "file://evil/w/x",
            "file:w/x",
            "file:///w/a%00b",
            "file:///C:/x",
            " file:///w/x",
            "file:///w/%zz",
            "file:///w/%ff",
            "file:///a//../w/x",
            "file:////w/x",
        ] {
            assert!(!c(bad).is_certain(), "{bad}");
            assert_eq!(c(bad).primary, bad);
        }
        // Python's and Node's readings are among the plausible ones.
        let frag = c("file:///w/secrets/key#/../../public/x");
        assert!(paths(&frag).contains(&"/w/secrets/key"), "{frag:?}");
        assert!(paths(&frag).contains(&"/w/public/x"), "{frag:?}");
        assert!(paths(&c("file:///w/a\\..\\..\\b")).contains(&"/b"));
        assert!(paths(&c("file:///w/a%2f..%2f..%2fb")).contains(&"/b"));
    }

    #[test]
    fn home_is_uncertain_with_every_reading() {
        let h = c("~/../../../../../../etc/shadow");
        assert!(!h.is_certain());
        assert!(paths(&h).contains(&"/etc/shadow"), "{h:?}");
        assert!(!c("./~/a").is_certain() && !c(".//./~").is_certain());
        assert!(paths(&c("./~/a")).contains(&"/home/u/a"));
        let k = c("~/a/../.ssh/k");
        assert_eq!(paths(&k)[0], "~/.ssh/k");
        assert!(paths(&k).contains(&"/home/u/.ssh/k"));
        assert!(paths(&c("~")).contains(&"/home/u"));
    }

    #[test]
    fn uris() {
        let u = c("HTTPS://Example.COM:443/a/../b");
        assert!(u.is_certain());
        assert_eq!(u.primary, "https://example.com/b");
        for bad in [
            "https://good.com\\@evil.com/",
            "https://good.com@evil.com/",
            "https://h/%2e%2e/x",
        ] {
            assert!(!c(bad).is_certain(), "{bad}");
        }
        // Not a URI: a scheme without `//` is text.
        assert_eq!(c("note: buy milk").shape, Shape::Relative);
    }

    #[test]
    fn numbers_by_value() {
        let n = |v: Value| canonical_number(v.as_number().unwrap());
        assert_eq!(n(json!(2.0)), Number::from(2));
        assert_eq!(n(serde_json::from_str("2e0").unwrap()), Number::from(2));
        assert_eq!(n(json!(-0.0)), Number::from(0));
        assert_eq!(n(json!(2.5)).as_f64(), Some(2.5));
        assert_eq!(n(json!(u64::MAX)), Number::from(u64::MAX));
    }

    #[test]
    fn limits() {
        let ctx = Context {
            workspace: WS,
            home: None,
        };
        let small = Limits {
            max_bytes: 10,
            max_depth: 3,
            max_values: 5,
        };
        assert!(canonicalize(&json!({"a": "0123456789x"}), &ctx, &small).is_err());
        assert!(canonicalize(&json!({"a": [[1]]}), &ctx, &small).is_ok());
        assert!(canonicalize(&json!({"a": [[[1]]]}), &ctx, &small).is_err());
        assert!(canonicalize(&json!([1, 2, 3, 4, 5]), &ctx, &small).is_err());
    }

    #[test]
    fn input_arguments_and_notable() {
        let ctx = Context {
            workspace: WS,
            home: None,
        };
        let canon = canonicalize(
            &json!({"p": "/etc//x", "n": 2.0, "u": "file:///w/a#b", "t": "hi"}),
            &ctx,
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(
            canon.arguments_json(),
            json!({"p": "/etc/x", "n": 2, "u": "file:///w/a#b", "t": "hi"})
        );
        let notable: Vec<String> = canon.notable().into_iter().map(|(p, _)| p).collect();
        assert_eq!(notable, ["/u"]);
        assert_eq!(
            canon.value.pointer("/p").and_then(|v| match v {
                CanonValue::Str(s) => Some(s.primary.clone()),
                _ => None,
            }),
            Some("/etc/x".to_string())
        );
    }
}
