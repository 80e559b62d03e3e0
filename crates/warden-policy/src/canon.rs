//! One canonical form per argument value, computed once per call and used
//! by the rules stage and the Rego stage alike (`input.arguments`).
//!
//! Warden never rewrites what a server receives; it decides on what the
//! value *means*. A string is read the ways a server may read it:
//!
//! - an absolute path (`/…`): [`warden_core::path::normalize`]d, so
//!   `//etc/./shadow` is `/etc/shadow`;
//! - a relative path: joined to the workspace, then normalised, and to the
//!   server's working directory when its configuration sets `cwd` (a server
//!   opens it from there; servers that resolve against their root, from the
//!   workspace); its canonical form is the workspace one (`src/a.rs` is
//!   `WORKSPACE/src/a.rs`), a single word (`read`) stays as written;
//! - a `file:` URI: the path it names (as Python's `urllib` and Node's
//!   `fileURLToPath` decode it), *and* the relative path a server that does
//!   not parse URIs would open (`WORKSPACE/file:/…`);
//! - another `scheme://` URI: its WHATWG serialisation (scheme and host
//!   lower-cased, default port and dot segments removed); the files a server
//!   may open for it, as *path* readings: its path (Python servers open
//!   `url2pathname(urlparse(uri).path)` whatever the scheme:
//!   `x:///etc/shadow`, `http://localhost/etc/shadow`) and its host joined
//!   with its path (`notes://.ssh/id_rsa` → `/.ssh/id_rsa`), decoded,
//!   normalised; and again the relative path a path-only server would open.
//!   Deny and ask path patterns see those paths; an `allow` on a path never
//!   holds for such a URI (its first reading is a URI, no path);
//! - a value starting with `~`: warden never expands `~`, because it cannot
//!   know which home directory the server uses: `~` is read at `/` (the
//!   furthest `..` climbs), at the host's HOME and at every HOME the server
//!   may have ([`Context::homes`]: the sandbox's private `/tmp/home`, the
//!   configuration's `env.HOME`);
//! - JSON text (`["secrets/key"]`, a string whose trimmed text is a JSON
//!   array or object as Python's `json.loads` reads it): the official
//!   Python SDK parses it into a value for an argument whose type is not
//!   plain `str`, so the readings of every string inside (read as plain
//!   values, one level deep) join its own; what is inside counts against
//!   the [`Limits`];
//! - a value not in Unicode NFC (a decomposed `é`): each path reading also
//!   in NFC and NFD (rule patterns are matched in both forms, so a value in
//!   NFC needs no other reading).
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
//! later `..` climbs differently); a value starting with `~`; a URI with
//! userinfo, a backslash, a control character or a percent-encoded
//! `.`/`/`, or of a web scheme without `//` (`https:host/x`, which WHATWG
//! parsers read as `https://host/x`); a plain path that a URL parser (Python's `urllib.parse`, which
//! servers apply to anything they expect to be a URI) reads differently:
//! one with a NUL or control character, whitespace at either end, a
//! leading `//` (a host), `?` or `#`, a percent-escape, a `NAME:` prefix
//! before a `/`, or `;` in its last segment (`a/..;x` is `a/..`); a plain
//! path a server may expand: `$NAME` or `${…}` (`os.path.expandvars`), or,
//! with a `/`, a glob character `*`, `?`, `[`, `{`; JSON text; and a value
//! that is not in NFC (a decomposed `é` reaches the composed file on macOS
//! and through npm's server-filesystem). For uncertain values the readings
//! are every plausible one (Python's, Node's, a naive prefix strip, with
//! and without decoding, `~` and `$HOME` at `/` and at each HOME, other
//! variables at `/`, a glob cut at its first pattern segment, `;params`
//! cut), for deny and ask rules.
//!
//! Readings are lexical: a symlink is never followed (what a link points
//! to can change between the decision and the open). The sandbox's grants
//! are what keeps a server from following a link out of its view.
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
    /// A JSON array or object as text (`["a/b"]`), which servers built on
    /// the official Python SDK parse into a value when the argument's type
    /// is not plain `str`. `paths`: some string inside is path-shaped.
    JsonText { paths: bool },
}

/// One meaning of a value: a path (absolute, normalised) or a URI
/// (canonical string).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
        match self.shape {
            Shape::Home | Shape::FileUri | Shape::Uri => true,
            // `["a\u002fb"]` holds `a/b` without a `/` of its own.
            Shape::JsonText { paths } => paths,
            Shape::Relative | Shape::RelativeDots | Shape::Absolute => self.raw.contains('/'),
        }
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
#[derive(Debug, Clone, Default)]
pub struct Context<'a> {
    /// Absolute, normalised workspace: relative paths are joined to it.
    pub workspace: &'a str,
    /// The host's HOME, for one plausible reading of `~` (deny rules only).
    pub home: Option<&'a str>,
    /// The server's working directory (absolute, normalised), when its
    /// configuration gives it one: a server opens a relative path from
    /// there, while servers that resolve against their root use the
    /// workspace, so a relative path is read against both.
    pub cwd: Option<&'a str>,
    /// The HOMEs the server may have besides the host's (the sandbox's
    /// private one, `env.HOME` of its configuration): more readings of
    /// `~` and `$HOME`.
    pub homes: &'a [String],
}

impl Context<'_> {
    /// Where a relative path is taken from: the workspace, then the
    /// server's working directory when it is another.
    fn bases(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.workspace).chain(
            self.cwd
                .filter(|c| c.starts_with('/') && *c != self.workspace),
        )
    }

    /// Every HOME `~` may stand for, the host's first.
    fn all_homes(&self) -> impl Iterator<Item = &str> {
        self.home
            .into_iter()
            .chain(self.homes.iter().map(String::as_str))
            .filter(|h| h.starts_with('/'))
    }
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
        self.values(1, depth)
    }

    /// `n` more values, the deepest of them at nesting `depth`.
    fn values(&mut self, n: usize, depth: usize) -> Result<(), String> {
        self.values = self.values.saturating_add(n);
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
            let mut c = canon_str(s, ctx);
            if let Some(json) = json_text(s) {
                with_json_readings(&mut c, json, ctx, depth, budget)?;
            }
            CanonValue::Str(Box::new(c))
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
    let mut c = read_str(raw, ctx);
    // Every URL spelling in use has `//` after its scheme: one search
    // keeps this off the path of ordinary values.
    if has(raw, "//") {
        python_client_readings(&mut c);
    }
    if has(raw, "proc") {
        proc_link_readings(&mut c, ctx);
    }
    // Most values are ASCII: one fast scan, and nothing else to do.
    if !raw.is_ascii() {
        unicode_forms(&mut c);
    }
    c
}

fn read_str(raw: &str, ctx: &Context<'_>) -> CanonStr {
    // URL parsers strip leading spaces and control characters.
    let trimmed = raw.trim_start_matches(|c: char| c <= ' ');
    if let Some((scheme, rest)) = split_scheme(trimmed) {
        if scheme.eq_ignore_ascii_case("file") {
            return file_uri(raw, rest, ctx);
        }
        // WHATWG parsers (Node's `fetch`, browsers) read a web scheme's
        // host without the `//`: `https:evil.com/x` is
        // `https://evil.com/x`.
        if rest.starts_with("//") || special_scheme(trimmed) {
            return other_uri(raw, ctx);
        }
    }
    // pathlib collapses leading `.` components (`./~/a` is `~/a`), and
    // then `expanduser()` expands the `~`.
    if leading_dots_stripped(raw).starts_with('~') {
        return home(raw, ctx);
    }
    let scan = Scan::of(raw);
    let why = scan.reason(raw);
    let mut readings = Vec::new();
    push_joined(&mut readings, ctx, raw);
    if why.is_some() {
        for r in uri_reference_readings(raw) {
            read_path_into(&mut readings, ctx, &r);
        }
        other_readings(&mut readings, ctx, raw, &scan);
    }
    let (shape, primary) = if raw.starts_with('/') {
        (Shape::Absolute, readings[0].as_str().to_string())
    } else if has_dot_segments(raw) {
        (Shape::RelativeDots, readings[0].as_str().to_string())
    } else if has_byte(raw, b'/') {
        // What a path means is the file it names: `input.arguments` shows
        // `WORKSPACE/src/a.rs` for `src/a.rs`, as the rules read it.
        (Shape::Relative, readings[0].as_str().to_string())
    } else {
        // A single word (`read`, `main`) is usually no path at all.
        (Shape::Relative, raw.to_string())
    };
    let primary = if why.is_some() {
        raw.to_string()
    } else {
        primary
    };
    CanonStr {
        raw: raw.to_string(),
        shape,
        primary,
        readings,
        uncertain: why.map(str::to_string),
    }
}

/// Where `/proc`'s magic links in the value lead ([`crate::proc_links`]),
/// from the path as sent (a lexical `..` after `root` is not the kernel's)
/// and from each path reading.
fn proc_link_readings(c: &mut CanonStr, ctx: &Context<'_>) {
    let sent = c.raw.trim_start_matches(|ch: char| ch <= ' ');
    let sent = match split_scheme(sent) {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("file") => rest
            .strip_prefix("//")
            .map(|r| r.strip_prefix("localhost").unwrap_or(r))
            .unwrap_or(rest),
        _ => sent,
    };
    let cwds: Vec<&str> = ctx.bases().collect();
    let mut found = crate::proc_links::readings(sent, &cwds);
    for r in &c.readings {
        if let Reading::Path(p) = r {
            found.extend(crate::proc_links::readings(p, &cwds));
        }
    }
    for path in found {
        push_unique(&mut c.readings, Reading::Path(path));
    }
}

/// The reason a value some Python HTTP client fetches from another place
/// than WHATWG parsers read is uncertain.
const PYTHON_CLIENTS: &str = "it is a URL that Python's HTTP clients (`urllib.request`, `httpx`, \
                              `requests`) fetch from another host or port than WHATWG parsers \
                              read (they strip `<URL:…>` and Unicode spaces, decode `%3A` before \
                              the port, read the port as Python's `int()`, take a `\\@` as \
                              userinfo)";

/// The places Python's HTTP clients connect to for the value
/// ([`crate::python_urls`]), as URI readings with their loopback
/// spellings, so a deny or ask on a host holds for the host the server
/// reaches. A value some client reads as another place than warden's
/// WHATWG reading (or as a URL where warden reads none) is uncertain: no
/// `allow` holds for it.
fn python_client_readings(c: &mut CanonStr) {
    let reached = crate::python_urls::reached(&c.raw);
    if reached.is_empty() {
        return;
    }
    let whatwg = match c.shape {
        Shape::Uri => url::Url::parse(&c.raw).ok(),
        _ => None,
    };
    let mut elsewhere = false;
    for u in reached {
        let same = whatwg.as_ref().is_some_and(|w| {
            w.scheme() == u.scheme()
                && w.host_str() == u.host_str()
                && w.port_or_known_default() == u.port_or_known_default()
        });
        elsewhere |= !same;
        let variants = authority_variants(&u);
        let same_host: Vec<String> = std::iter::once(u.clone())
            .chain(variants.iter().filter_map(|v| url::Url::parse(v).ok()))
            .flat_map(|v| same_host_variants(&v))
            .collect();
        push_unique(&mut c.readings, Reading::Uri(u.as_str().to_string()));
        for v in variants.into_iter().chain(same_host) {
            push_unique(&mut c.readings, Reading::Uri(v));
        }
    }
    if elsewhere {
        c.uncertain = Some(match c.uncertain.take() {
            None => PYTHON_CLIENTS.to_string(),
            Some(why) => format!("{why}; and {PYTHON_CLIENTS}"),
        });
    }
}

/// `path` as servers open it: an absolute path as it is (normalised); a
/// relative one joined to the workspace and to the server's working
/// directory ([`Context::bases`]).
fn push_joined(readings: &mut Vec<Reading>, ctx: &Context<'_>, path: &str) {
    for base in ctx.bases() {
        push_unique(readings, Reading::Path(absolutize_str(base, path)));
        if path.starts_with('/') {
            break;
        }
    }
}

/// A path a server may open, read as [`canon_str`] reads a plain value:
/// with the readings of `~` when it starts with one.
fn read_path_into(readings: &mut Vec<Reading>, ctx: &Context<'_>, path: &str) {
    if leading_dots_stripped(path).starts_with('~') {
        home_readings(readings, ctx, path);
    } else {
        push_joined(readings, ctx, path);
    }
}

/// The readings of what servers do to a path besides parsing it as a URL:
/// expand environment variables, expand a glob.
fn other_readings(readings: &mut Vec<Reading>, ctx: &Context<'_>, raw: &str, scan: &Scan) {
    if scan.var {
        for expanded in var_expansions(raw, ctx) {
            read_path_into(readings, ctx, &expanded);
        }
    }
    if scan.glob && raw.contains('/') {
        for container in glob_readings(raw) {
            read_path_into(readings, ctx, &container);
        }
    }
}

/// What one pass over a plain value's bytes found.
#[derive(Debug, Default, Clone, Copy)]
struct Scan {
    nul: bool,
    control: bool,
    /// `?` or `#`.
    query: bool,
    /// `%XX`.
    escape: bool,
    /// `$NAME` or `${…}` (what `os.path.expandvars` replaces).
    var: bool,
    /// `*`, `?`, `[` or `{`: what glob expansion reads as a pattern.
    glob: bool,
}

impl Scan {
    fn of(raw: &str) -> Scan {
        let bytes = raw.as_bytes();
        let mut scan = Scan::default();
        // One pass over the bytes for what would otherwise be a scan per
        // question of a possibly long argument. `raw` is UTF-8: a control
        // character (`char::is_control`, Unicode Cc) is an ASCII control
        // or DEL, or U+0080–U+009F, which UTF-8 writes as 0xC2 0x80–0x9F.
        // Most arguments are plain text: blocks of 32 bytes without any
        // byte of interest are skipped with a test the compiler
        // vectorises (a byte at a time, this loop was a 100 KB argument's
        // largest cost: ~2 ns a byte). A block with one is read byte by
        // byte; what follows a byte (`0xC2 0x85`, `%4F`, `$H`) is read
        // across the block's end.
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
                    0 => scan.nul = true,
                    1..=0x1f | 0x7f => scan.control = true,
                    0xc2 if bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)) => {
                        scan.control = true
                    }
                    b'?' => {
                        scan.query = true;
                        scan.glob = true;
                    }
                    b'#' => scan.query = true,
                    b'%' => {
                        scan.escape |= bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                            && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                    }
                    b'$' => {
                        scan.var |= bytes
                            .get(i + 1)
                            .is_some_and(|&n| n.is_ascii_alphanumeric() || n == b'_' || n == b'{')
                    }
                    b'*' | b'[' | b'{' => scan.glob = true,
                    _ => {}
                }
            }
        }
        scan
    }

    /// Why a string without a URI scheme cannot be read as a path with
    /// certainty: where Python's `urllib.parse` (which a server may apply
    /// to any string it expects to be a URI) reads it differently from a
    /// path, where servers disagree on a path (NUL), or where a server may
    /// expand it (variables, globs).
    fn reason(&self, raw: &str) -> Option<&'static str> {
        if self.nul {
            Some("it contains a NUL character (C-based servers cut the path there; others fail)")
        } else if self.control {
            Some("it contains a control character (URL parsers drop tabs and line breaks)")
        } else if raw.trim() != raw {
            Some("it has whitespace at either end (URL parsers strip it)")
        } else if raw.starts_with("//") && !raw.starts_with("///") {
            Some("it starts with `//`, which URL parsers read as a host (`//HOST/PATH`)")
        } else if self.query {
            Some("it contains `?` or `#`, which URL parsers read as a query or fragment")
        } else if self.escape {
            Some("it contains a percent-escape, which URL parsers decode")
        } else if split_scheme(raw).is_some_and(|(_, rest)| has_byte(rest, b'/')) {
            Some("it starts with `NAME:`, which URL parsers read as a scheme")
        } else {
            self.expansion_reason(raw)
        }
    }

    /// [`Scan::reason`]'s questions that are not about URL parsers (also
    /// asked of a value starting with `~`).
    fn expansion_reason(&self, raw: &str) -> Option<&'static str> {
        if self.var {
            Some(
                "it contains `$NAME` or `${…}`, which servers that expand environment \
                 variables (`os.path.expandvars`) replace",
            )
        } else if self.glob && has_byte(raw, b'/') {
            Some(
                "it contains `*`, `?`, `[` or `{`, which a server that expands globs reads as a \
                 pattern matching other paths",
            )
        } else if has_byte(last_segment(raw), b';') {
            Some(
                "its last segment contains `;`, where URL parsers (Python's `urlparse`) cut it \
                 (`a/..;x` is `a/..`)",
            )
        } else {
            None
        }
    }
}

/// Why a string without a URI scheme cannot be read with certainty
/// ([`Scan::reason`]).
#[cfg(test)]
fn plain_uncertainty(raw: &str) -> Option<&'static str> {
    Scan::of(raw).reason(raw)
}

/// What follows the last `/` (all of `s` without one).
fn last_segment(s: &str) -> &str {
    memchr::memrchr(b'/', s.as_bytes()).map_or(s, |i| &s[i + 1..])
}

/// Whether `s` contains the ASCII byte `b`. UTF-8 writes an ASCII
/// character as that byte and never uses it inside another character, so
/// this is `s.contains(char::from(b))`, searched with SIMD: the plain
/// value path asks it of every string argument, up to the largest.
fn has_byte(s: &str, b: u8) -> bool {
    debug_assert!(b.is_ascii());
    memchr::memchr(b, s.as_bytes()).is_some()
}

/// `s.contains(needle)`, searched with SIMD.
fn has(s: &str, needle: &str) -> bool {
    memchr::memmem::find(s.as_bytes(), needle.as_bytes()).is_some()
}

/// Bytes [`Scan::of`] skips in one test when none is notable.
const NOTABLE_BLOCK: usize = 32;

/// A byte [`Scan::of`] looks at: controls (and the first byte of
/// U+0080–U+009F), `?`, `#`, `%`, `$`, `*`, `[`, `{`.
fn notable_byte(b: u8) -> bool {
    b < 0x20
        || b == 0x7f
        || b == 0xc2
        || b == b'?'
        || b == b'#'
        || b == b'%'
        || b == b'$'
        || b == b'*'
        || b == b'['
        || b == b'{'
}

/// What a server that runs the string through a URL parser (Python's
/// `urllib.parse.urlparse`, then `url2pathname`) opens: whitespace and
/// control characters dropped, a scheme, `//HOST`, query and fragment
/// removed, `;params` cut from the last segment, escapes decoded; and what
/// a C-based server opens (cut at NUL).
fn uri_reference_readings(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some((before, _)) = raw.split_once('\0') {
        out.push(before.to_string());
    }
    let trimmed = raw.trim();
    // Collected a character at a time only when there is one to drop: a
    // long value with a space at its end is copied whole.
    let cleaned: String = if trimmed.contains(['\t', '\n', '\r']) {
        trimmed
            .chars()
            .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
            .collect()
    } else {
        trimmed.to_string()
    };
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
    let path = rest.split(['?', '#']).next().unwrap_or("");
    let cut = without_params(path);
    for p in [path, cut] {
        if p.len() == path.len() && !std::ptr::eq(p, path) {
            // No `;params`: the cut is the path again.
            continue;
        }
        out.push(p.to_string());
        if p.contains('%') {
            out.push(percent_decode_lossy(p));
        }
    }
    out
}

/// `path` without the `;params` of its last segment, as Python's
/// `urlparse` splits them off (`/a/..;x` → `/a/..`).
fn without_params(path: &str) -> &str {
    let from = path.len() - last_segment(path).len();
    match memchr::memchr(b';', &path.as_bytes()[from..]) {
        Some(i) => &path[..from + i],
        None => path,
    }
}

/// Each `$NAME` / `${NAME}` of `raw` replaced as `os.path.expandvars`
/// would if it were set: by `/` (a variable may hold any path; `/` is the
/// furthest a `..` after it can climb, as for `~`), and `$HOME` by each
/// HOME the server may have.
fn var_expansions(raw: &str, ctx: &Context<'_>) -> Vec<String> {
    let mut out = vec![expand_vars(raw, |_| "/")];
    for home in ctx.all_homes() {
        out.push(expand_vars(
            raw,
            |name| if name == "HOME" { home } else { "/" },
        ));
    }
    out
}

/// `raw` with every variable `value(NAME)`: `$` then ASCII letters,
/// digits and `_`, or `${…}` up to the first `}` (Python's
/// `\$(\w+|\{[^}]*\})` with `re.ASCII`).
fn expand_vars<'v>(raw: &str, value: impl Fn(&str) -> &'v str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let name_len = if let Some(braced) = after.strip_prefix('{') {
            braced.find('}').map(|close| (close + 2, &braced[..close]))
        } else {
            let n = after
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            (n > 0).then(|| (n, &after[..n]))
        };
        match name_len {
            Some((len, name)) => {
                out.push_str(value(name));
                rest = &after[len..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Most alternatives `{a,b}` groups are expanded into for
/// [`glob_readings`]; further groups stay as they are.
const MAX_BRACE_EXPANSIONS: usize = 16;

/// Paths that hold whatever a glob (`*`, `?`, `[…]`, `{a,b}`, `**`) may
/// expand to, for deny and ask rules: the glob read with each pattern
/// segment as one opaque name, normalised, and cut where the first pattern
/// segment is left (`/ws/secret*/key` → `/ws`; `/ws/*/../../etc/x` →
/// `/etc/x`, since the `..` undoes the segment the `*` matched). Brace
/// groups are expanded first (an alternative may be `..`).
///
/// Sound for pattern segments that match one name each (every `*`, `?`,
/// `[…]` segment, and braces without `/`): each expansion lies under the
/// reading, so a deny on `DIR/**` holding the reading holds every match.
/// A `**` matches any number of levels, so a `..` after it cannot be
/// undone lexically: the reading is cut before the `**` (matches of many
/// levels), and read again with `**` as no level at all (the furthest a
/// `..` climbs). Not covered, and left to the value's uncertainty (no
/// `allow` holds; the shipped policies ask): a `**` followed by more
/// `..` than one level but fewer than it matched lands between those two,
/// a glob whose pattern lies below a denied folder (`/ws/secret*` under a
/// deny of `/ws/secrets/**`), and brace groups beyond
/// [`MAX_BRACE_EXPANSIONS`].
fn glob_readings(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    for alternative in brace_expansions(raw) {
        out.push(glob_container(&alternative, false));
        if alternative.split('/').any(|seg| seg == "**") {
            out.push(glob_container(&alternative, true));
        }
    }
    out
}

fn is_pattern_segment(seg: &str) -> bool {
    seg.contains(['*', '?', '[', '{'])
}

/// See [`glob_readings`]; `no_globstar`: `**` segments as no level.
fn glob_container(glob: &str, no_globstar: bool) -> String {
    let absolute = glob.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    for seg in glob.split('/') {
        match seg {
            "" | "." => {}
            "**" if no_globstar => {}
            ".." => match kept.last() {
                // A `**` of unknown depth: what follows cannot be read.
                Some(&"**") => break,
                Some(&"..") | None if !absolute => kept.push(".."),
                Some(_) => {
                    kept.pop();
                }
                None => {}
            },
            seg => kept.push(seg),
        }
    }
    let cut = kept
        .iter()
        .position(|seg| is_pattern_segment(seg))
        .unwrap_or(kept.len());
    let joined = kept[..cut].join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// `raw` with its `{a,b,…}` groups (not nested) expanded, at most
/// [`MAX_BRACE_EXPANSIONS`] alternatives; `raw` alone when it has none.
fn brace_expansions(raw: &str) -> Vec<String> {
    let mut done = Vec::new();
    let mut todo = vec![raw.to_string()];
    while let Some(s) = todo.pop() {
        let group = s.find('{').and_then(|open| {
            let close = open + s[open..].find('}')?;
            let inner = &s[open + 1..close];
            (!inner.contains('{') && inner.contains(',')).then_some((open, close))
        });
        let alternatives = group.map_or(0, |(open, close)| s[open..close].matches(',').count() + 1);
        match group {
            Some((open, close))
                if done.len() + todo.len() + alternatives <= MAX_BRACE_EXPANSIONS =>
            {
                for alt in s[open + 1..close].split(',') {
                    todo.push(format!("{}{alt}{}", &s[..open], &s[close + 1..]));
                }
            }
            _ => done.push(s),
        }
    }
    done
}

fn push_unique(readings: &mut Vec<Reading>, r: Reading) {
    if !readings.contains(&r) {
        readings.push(r);
    }
}

/// A resource URI (`resources/read`, CONTRACT §8): always parsed as a
/// URI, so a `file:` URI means only its path, another scheme its canonical
/// form and the paths a server of that scheme may open (no relative-path
/// reading of the whole URI). A value that is not a URI is read as a path,
/// as [`canon_str`] does.
pub fn canon_resource_uri(raw: &str, ctx: &Context<'_>) -> CanonStr {
    let mut c = canon_str(raw, ctx);
    if matches!(c.shape, Shape::FileUri | Shape::Uri) {
        let mut literal = Vec::new();
        push_joined(&mut literal, ctx, raw);
        if c.readings.iter().any(|r| !literal.contains(r)) {
            c.readings.retain(|r| !literal.contains(r));
        }
    }
    c
}

/// `scheme:rest` when `value` starts with an RFC 3986 scheme.
pub fn split_scheme(value: &str) -> Option<(&str, &str)> {
    let colon = memchr::memchr(b':', value.as_bytes())?;
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
    let mut readings = Vec::new();
    home_readings(&mut readings, ctx, raw);
    let scan = Scan::of(raw);
    other_readings(&mut readings, ctx, raw, &scan);
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

/// The readings of a path starting with `~` (after leading `.`s).
fn home_readings(readings: &mut Vec<Reading>, ctx: &Context<'_>, raw: &str) {
    let stripped = leading_dots_stripped(raw);
    let (head, tail) = stripped.split_once('/').unwrap_or((stripped, ""));
    // `~` as a root of its own: `~/a/../.ssh/k` is `~/.ssh/k`; matches
    // patterns such as `**/.ssh/**`.
    let under = rooted(tail);
    push_unique(
        readings,
        Reading::Path(format!("{head}{}", under.trim_end_matches('/'))),
    );
    // HOME at `/`: the furthest `..` can climb (`~/../../etc` → `/etc`).
    push_unique(readings, Reading::Path(rooted(tail)));
    // The HOMEs the server may have: the host's (an unsandboxed server, or
    // one that asks the password database), the sandbox's private one,
    // its configuration's `env.HOME`. `~/..` climbs from each differently.
    if head == "~" {
        for home in ctx.all_homes() {
            push_unique(readings, Reading::Path(absolutize_str(home, tail)));
        }
    } else if let Some(name) = head.strip_prefix('~') {
        // `~NAME`: NAME's home, as Python's `expanduser` finds it.
        for home in crate::user_homes::homes(name) {
            push_unique(readings, Reading::Path(absolutize_str(&home, tail)));
        }
    }
    // A server that does not expand `~` opens `WORKSPACE/~/…`.
    push_joined(readings, ctx, raw);
}

/// A `file:` URI. `rest` follows the scheme's colon.
fn file_uri(raw: &str, rest: &str, ctx: &Context<'_>) -> CanonStr {
    let mut literal = Vec::new();
    push_joined(&mut literal, ctx, raw);
    let strict = strict_file_path(raw, rest);
    match strict {
        Ok(path) => {
            let mut readings = vec![Reading::Path(path.clone())];
            for r in literal {
                push_unique(&mut readings, r);
            }
            CanonStr {
                raw: raw.to_string(),
                shape: Shape::FileUri,
                primary: path,
                readings,
                uncertain: None,
            }
        }
        Err(why) => {
            let mut readings = Vec::new();
            for r in loose_file_readings(raw, rest) {
                push_unique(&mut readings, Reading::Path(r));
            }
            for r in literal {
                push_unique(&mut readings, r);
            }
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

/// The reason a value that is not NFC is uncertain.
const NOT_NFC: &str = "it is not in Unicode's composed form (NFC): servers that match names \
                       by their normal form (npm's server-filesystem) or file systems that \
                       normalise (macOS) open the composed name";

/// For a value that is not ASCII and not in NFC (a decomposed `é`, which
/// reaches the composed file through npm's server-filesystem and on
/// macOS): uncertain, and each path reading also in NFC and NFD.
///
/// A value in NFC gets no other reading: rule patterns are compiled in
/// both forms (`rules::parse`), so an NFC value meets a pattern written in
/// either, and an `allow` keeps its one reading to match. That keeps the
/// common case (accented or CJK text, almost always NFC) at one check of
/// the value: decomposing 100 KB of French for an NFD reading cost eight
/// times the rest of its reading. (Rego compares text as written: a policy
/// names non-ASCII paths in NFC.)
fn unicode_forms(c: &mut CanonStr) {
    use unicode_normalization::UnicodeNormalization;
    if is_nfc(&c.raw) {
        return;
    }
    if c.uncertain.is_none() {
        c.uncertain = Some(NOT_NFC.to_string());
        c.primary = c.raw.clone();
    }
    let mut forms = Vec::new();
    for r in &c.readings {
        if let Reading::Path(p) = r
            && !p.is_ascii()
        {
            forms.push(Reading::Path(p.nfc().collect()));
            forms.push(Reading::Path(p.nfd().collect()));
        }
    }
    for r in forms {
        push_unique(&mut c.readings, r);
    }
}

/// Whether `s` is in NFC, deciding on its runs of characters from U+0300
/// alone where it can. Unicode's quick check (UAX #15) keeps one state,
/// the combining class of the last character, which every character below
/// U+0300 resets to 0: ASCII, Latin-1 and the Latin extensions are all
/// starters allowed in NFC (a test checks each). So each run of
/// characters from U+0300 can be checked on its own, starting from 0,
/// and the rest (most of a Latin text: `é` is U+00E9) is skipped a byte at
/// a time instead of decoded and looked up. In UTF-8 a byte from 0xCC is
/// always the first of a character from U+0300 (continuation bytes are
/// below 0xC0, and 0xC2–0xCB start U+0080–U+02FF). Only a `Maybe` (a
/// mark that may compose with what precedes it) needs the full comparison.
fn is_nfc(s: &str) -> bool {
    use unicode_normalization::{IsNormalized, is_nfc_quick};
    let bytes = s.as_bytes();
    let mut maybe = false;
    let mut at = 0;
    while let Some(start) = bytes[at..].iter().position(|&b| b >= 0xcc) {
        let start = at + start;
        let end = s[start..]
            .char_indices()
            .find(|&(_, c)| u32::from(c) < 0x300)
            .map_or(s.len(), |(i, _)| start + i);
        match is_nfc_quick(s[start..end].chars()) {
            IsNormalized::Yes => {}
            IsNormalized::No => return false,
            IsNormalized::Maybe => maybe = true,
        }
        at = end;
    }
    !maybe || unicode_normalization::is_nfc(s)
}

/// What [`json_text`] found in a JSON array or object.
struct JsonText {
    /// Every string in it, keys included, decoded.
    strings: Vec<String>,
    /// Deepest nesting (the outer array or object is 1).
    depth: usize,
}

/// `text` as Python's `json.loads` reads it (what servers on the official
/// Python SDK do to a string argument whose type is not plain `str`),
/// when that is an array or an object; `None` otherwise. Python's
/// grammar: JSON plus `NaN`, `Infinity`, `-Infinity`, numbers of any
/// size and lone surrogates (replaced here), which serde_json refuses: a
/// parser stricter than the server's would miss the strings inside. One
/// pass, no recursion (a stack of open containers).
fn json_text(text: &str) -> Option<JsonText> {
    let b = text.as_bytes();
    let ws = |i: &mut usize| {
        while b
            .get(*i)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            *i += 1;
        }
    };
    let mut i = 0;
    ws(&mut i);
    // Cheap refusal of everything that is not an array or object.
    if !matches!(b.get(i), Some(b'[' | b'{')) {
        return None;
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Expect {
        Value,
        ValueOrClose,
        KeyOrClose,
        Key,
        Colon,
        CommaOrClose,
    }
    let mut stack: Vec<u8> = Vec::new();
    let mut out = JsonText {
        strings: Vec::new(),
        depth: 0,
    };
    let mut expect = Expect::Value;
    loop {
        ws(&mut i);
        let c = *b.get(i)?;
        match expect {
            Expect::ValueOrClose | Expect::KeyOrClose
                if (c == b']' && expect == Expect::ValueOrClose)
                    || (c == b'}' && expect == Expect::KeyOrClose) =>
            {
                stack.pop();
                i += 1;
            }
            Expect::Value | Expect::ValueOrClose => match c {
                b'[' | b'{' => {
                    stack.push(c);
                    out.depth = out.depth.max(stack.len());
                    i += 1;
                    expect = if c == b'[' {
                        Expect::ValueOrClose
                    } else {
                        Expect::KeyOrClose
                    };
                    continue;
                }
                b'"' => out.strings.push(json_string(b, &mut i)?),
                _ => i = json_scalar(b, i)?,
            },
            Expect::Key | Expect::KeyOrClose => {
                if c != b'"' {
                    return None;
                }
                out.strings.push(json_string(b, &mut i)?);
                expect = Expect::Colon;
                continue;
            }
            Expect::Colon => {
                if c != b':' {
                    return None;
                }
                i += 1;
                expect = Expect::Value;
                continue;
            }
            Expect::CommaOrClose => {
                let top = *stack.last()?;
                match (c, top) {
                    (b',', b'[') => expect = Expect::Value,
                    (b',', _) => expect = Expect::Key,
                    (b']', b'[') | (b'}', b'{') => {
                        stack.pop();
                        i += 1;
                        if stack.is_empty() {
                            break;
                        }
                        continue;
                    }
                    _ => return None,
                }
                i += 1;
                continue;
            }
        }
        // A value (or a container) ended.
        if stack.is_empty() {
            break;
        }
        expect = Expect::CommaOrClose;
    }
    ws(&mut i);
    (i == b.len()).then_some(out)
}

/// A JSON string starting at `b[*i]` (`"`), decoded; `*i` moves past it.
fn json_string(b: &[u8], i: &mut usize) -> Option<String> {
    let mut units: Vec<u16> = Vec::new();
    let mut out = String::new();
    let mut j = *i + 1;
    // Runs of plain bytes are copied whole (the text is UTF-8, and `"`
    // and `\` are ASCII, so a run ends on a character boundary).
    let flush = |units: &mut Vec<u16>, out: &mut String| {
        if !units.is_empty() {
            out.extend(char::decode_utf16(units.drain(..)).map(|r| r.unwrap_or('\u{fffd}')));
        }
    };
    loop {
        let start = j;
        while b
            .get(j)
            .is_some_and(|&c| c != b'"' && c != b'\\' && c >= 0x20)
        {
            j += 1;
        }
        if j > start {
            flush(&mut units, &mut out);
            out.push_str(std::str::from_utf8(&b[start..j]).ok()?);
        }
        match *b.get(j)? {
            b'"' => {
                flush(&mut units, &mut out);
                *i = j + 1;
                return Some(out);
            }
            b'\\' => {
                let e = *b.get(j + 1)?;
                let simple = match e {
                    b'"' => Some('"'),
                    b'\\' => Some('\\'),
                    b'/' => Some('/'),
                    b'b' => Some('\u{8}'),
                    b'f' => Some('\u{c}'),
                    b'n' => Some('\n'),
                    b'r' => Some('\r'),
                    b't' => Some('\t'),
                    b'u' => None,
                    _ => return None,
                };
                match simple {
                    Some(ch) => {
                        flush(&mut units, &mut out);
                        out.push(ch);
                        j += 2;
                    }
                    None => {
                        let hex = b.get(j + 2..j + 6)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        let unit = u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
                        units.push(unit);
                        j += 6;
                    }
                }
            }
            // A control character: Python's strict decoder refuses it.
            _ => return None,
        }
    }
}

/// The end of a JSON scalar (Python's: `true`, `false`, `null`, `NaN`,
/// `Infinity`, `-Infinity`, a number) starting at `b[i]`.
fn json_scalar(b: &[u8], i: usize) -> Option<usize> {
    let rest = &b[i..];
    for word in [
        &b"true"[..],
        b"false",
        b"null",
        b"NaN",
        b"Infinity",
        b"-Infinity",
    ] {
        if rest.starts_with(word) {
            return Some(i + word.len());
        }
    }
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
    let digits = |j: usize| j + b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut j = i;
    if b.get(j) == Some(&b'-') {
        j += 1;
    }
    match b.get(j) {
        Some(b'0') => j += 1,
        Some(b'1'..=b'9') => j = digits(j),
        _ => return None,
    }
    if b.get(j) == Some(&b'.') && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
        j = digits(j + 1);
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(b.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if b.get(k).is_some_and(u8::is_ascii_digit) {
            j = digits(k);
        }
    }
    Some(j)
}

/// The reason a JSON text value is uncertain.
const JSON_TEXT: &str = "it is JSON text, which some servers parse into a value (the official \
                         Python SDK does for an argument whose type is not plain `str`): the \
                         strings inside are read too";

/// A string that is JSON text (`["secrets/key"]`): the readings of every
/// string inside (read as plain values, one level: JSON text inside is not
/// parsed again) join the value's, for deny and ask rules, and the value is
/// uncertain, so no `allow` on a path holds for it. The strings inside
/// count against the limits as the arguments' own do (each is read again,
/// and its readings kept), and so does the nesting; numbers and other
/// scalars inside do not (they cost only the parse, which the text's own
/// bytes paid for, and give no reading).
fn with_json_readings(
    c: &mut CanonStr,
    json: JsonText,
    ctx: &Context<'_>,
    depth: usize,
    budget: &mut Budget<'_>,
) -> Result<(), String> {
    budget.values(json.strings.len(), depth + json.depth.saturating_sub(1))?;
    budget.bytes(json.strings.iter().map(String::len).sum())?;
    let mut seen: std::collections::HashSet<Reading> = c.readings.iter().cloned().collect();
    let mut paths = false;
    for s in &json.strings {
        let inner = canon_str(s, ctx);
        paths |= inner.path_shaped();
        for r in inner.readings {
            if !seen.contains(&r) {
                seen.insert(r.clone());
                c.readings.push(r);
            }
        }
    }
    c.shape = Shape::JsonText { paths };
    c.primary = c.raw.clone();
    c.uncertain = Some(match c.uncertain.take() {
        None => JSON_TEXT.to_string(),
        Some(why) => format!("{why}; and {JSON_TEXT}"),
    });
    Ok(())
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
            let decoded = percent_decodings(candidate);
            for p in std::iter::once(candidate.to_string()).chain(decoded) {
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
        // A naive server strips `file://` and decodes the rest, host and
        // all: `file://%2Fetc/passwd` is `/etc/passwd` to it.
        if let Some(after) = rest.strip_prefix("//") {
            let whole = after.split(['?', '#']).next().unwrap_or("");
            for decoded in percent_decodings(whole) {
                out.push(rooted(&decoded));
            }
        }
    }
    out
}

/// `%XX` decoded (invalid UTF-8 replaced); what is not an escape stays.
pub(crate) fn percent_decode_lossy(s: &str) -> String {
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
    let parsed = url::Url::parse(raw);
    let why = if raw.trim() != raw || raw.chars().any(char::is_control) {
        Some("with whitespace at either end or a control character (URL parsers strip them)")
    } else if split_scheme(raw).is_some_and(|(_, rest)| !rest.starts_with("//")) {
        Some(
            "of a web scheme without `//` (WHATWG parsers, Node's `fetch` among them, read \
             `https:host/x` as `https://host/x`; others read a path)",
        )
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
    let mut readings = Vec::new();
    if let Ok(u) = &parsed {
        readings.push(Reading::Uri(u.as_str().to_string()));
        let variants = authority_variants(u);
        let same_host: Vec<String> = std::iter::once(u.clone())
            .chain(variants.iter().filter_map(|v| url::Url::parse(v).ok()))
            .flat_map(|v| same_host_variants(&v))
            .collect();
        for variant in variants.into_iter().chain(same_host) {
            push_unique(&mut readings, Reading::Uri(variant));
        }
    }
    let canonical = parsed.ok().map(|u| u.as_str().to_string());
    // What a server that percent-decodes the URI asks for (once, or again
    // after a framework or proxy decoded it first): `secret://vault/%6Bey`
    // is `secret://vault/key` to it, `%2F` a separator, `%2e%2e` a climb.
    let decodings = percent_decodings(raw);
    let why = why.or_else(|| {
        // A `.`, `/` or `\` that only a second decoding reveals.
        decodings
            .iter()
            .take(decodings.len().saturating_sub(1))
            .any(|d| contains_ci(d, "%2e") || contains_ci(d, "%2f") || contains_ci(d, "%5c"))
            .then_some(
                "with a percent-encoded `.`, `/` or `\\` behind a second encoding (servers that \
                 decode twice climb or split where warden's first decoding does not)",
            )
    });
    for decoded in &decodings {
        decoded_uri_readings(&mut readings, decoded);
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
    // The files a server may open for it: these readings are paths, so
    // deny and ask path patterns (and the shipped policies' secret paths)
    // see them, while an `allow` on a path never holds for a URI of
    // another scheme (its URI reading is no path).
    for path in uri_path_readings(raw) {
        push_unique(&mut readings, Reading::Path(path));
    }
    push_joined(&mut readings, ctx, raw);
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

/// Successive percent-decodings of `raw`, each differing from the one
/// before (at most [`MAX_DECODINGS`]: `%25` decoded again and again is the
/// only way a value keeps changing, and every pass makes it shorter).
fn percent_decodings(raw: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last = raw;
    while out.len() < MAX_DECODINGS && last.contains('%') {
        let next = percent_decode_lossy(last);
        if next == last {
            break;
        }
        out.push(next);
        last = out.last().map_or(raw, String::as_str);
    }
    out
}

/// How many times a value is percent-decoded for its readings: a value
/// encoded more often than this is not a URI any server decodes to.
const MAX_DECODINGS: usize = 4;

/// The URI readings of a percent-decoded URI: its canonical form and the
/// spellings of its host (as for the URI as sent), and the naive reading
/// (everything after `scheme://` as one path, so a decoded `..` climbs
/// over the host of a scheme of the server's own).
fn decoded_uri_readings(readings: &mut Vec<Reading>, decoded: &str) {
    match url::Url::parse(decoded) {
        Ok(u) => {
            push_unique(readings, Reading::Uri(u.as_str().to_string()));
            for variant in authority_variants(&u) {
                push_unique(readings, Reading::Uri(variant));
            }
        }
        Err(_) => push_unique(readings, Reading::Uri(decoded.to_string())),
    }
    // Only where decoding made dot segments: otherwise the naive reading
    // is the canonical one with the host's case and port kept, which
    // would cost `https://Example.com/a%20b` its allow.
    if let Some((scheme, _)) = split_scheme(decoded)
        && has_dot_segments(after_scheme(decoded).split(['?', '#']).next().unwrap_or(""))
    {
        let joined = rooted(after_scheme(decoded));
        push_unique(
            readings,
            Reading::Uri(format!(
                "{}://{}",
                scheme.to_ascii_lowercase(),
                joined.trim_start_matches('/')
            )),
        );
    }
}

/// The same URI as servers that read its host through a URL parser see it
/// (Python's `urlparse(uri).hostname` lower-cases it and drops the port
/// and userinfo): WHATWG parsers keep the case and port of a host of a
/// scheme they do not know, so a deny on `secret://vault/**` missed
/// `secret://Vault/key`, `secret://vault:80/key` and
/// `secret://user@vault/key`, which such a server opens as
/// `secret://vault/key`.
fn authority_variants(u: &url::Url) -> Vec<String> {
    let mut out = Vec::new();
    let Some(host) = u.host_str() else {
        return out;
    };
    let mut bare = u.clone();
    let lower = host.to_ascii_lowercase();
    if lower != host && bare.set_host(Some(&lower)).is_err() {
        return out;
    }
    out.push(bare.as_str().to_string());
    let _ = bare.set_port(None);
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    out.push(bare.as_str().to_string());
    out.retain(|v| v != u.as_str());
    out.dedup();
    out
}

/// The same URI with its host spelt as the one it reaches: a domain
/// without its trailing dot (`evil.com.` is the fully qualified
/// `evil.com`; WHATWG keeps the dot, so a deny on `https://evil.com/**`
/// missed it), an IPv4-mapped IPv6 address as its IPv4 address
/// (`[::ffff:127.0.0.1]` connects to `127.0.0.1`), and the unspecified
/// addresses and `localhost` as the loopback addresses they connect to
/// (`http://0.0.0.0:8080/` reaches `127.0.0.1:8080` on Linux).
fn same_host_variants(u: &url::Url) -> Vec<String> {
    let mut out = Vec::new();
    match u.host() {
        Some(url::Host::Domain(domain)) if domain.ends_with('.') => {
            let bare = domain.trim_end_matches('.');
            let mut v = u.clone();
            if !bare.is_empty() && v.set_host(Some(bare)).is_ok() {
                out.push(v.as_str().to_string());
            }
        }
        Some(url::Host::Ipv6(addr)) => {
            if let Some(v4) = addr.to_ipv4_mapped() {
                push_ip(&mut out, u, std::net::IpAddr::V4(v4));
            }
            // `[::]`, like `0.0.0.0`, is this host to `connect()`.
            if addr.is_unspecified() {
                push_loopback(&mut out, u);
            }
        }
        Some(url::Host::Ipv4(addr)) if addr.is_unspecified() => push_loopback(&mut out, u),
        _ => {}
    }
    // `localhost` and `*.localhost` are the loopback addresses (RFC 6761,
    // and every resolver's hosts file).
    if let Some(url::Host::Domain(domain)) = u.host() {
        let bare = domain.trim_end_matches('.');
        if bare.eq_ignore_ascii_case("localhost")
            || bare.to_ascii_lowercase().ends_with(".localhost")
        {
            push_loopback(&mut out, u);
        }
    }
    out
}

/// `u` with its host the address `ip`.
fn push_ip(out: &mut Vec<String>, u: &url::Url, ip: std::net::IpAddr) {
    let mut v = u.clone();
    if v.set_ip_host(ip).is_ok() {
        out.push(v.as_str().to_string());
    }
}

/// `u` at `127.0.0.1` and at `[::1]`: where `0.0.0.0`, `[::]` and
/// `localhost` connect.
fn push_loopback(out: &mut Vec<String>, u: &url::Url) {
    push_ip(out, u, std::net::Ipv4Addr::LOCALHOST.into());
    push_ip(out, u, std::net::Ipv6Addr::LOCALHOST.into());
}

/// The paths a server may open for a URI of a scheme other than `file:`:
/// its path (as Python servers open `url2pathname(urlparse(uri).path)`
/// whatever the scheme: `x:///etc/shadow`, `http://localhost/etc/shadow`),
/// and its host joined with its path (a server of its own scheme that
/// splits by hand: `notes://.ssh/id_rsa` → `.ssh/id_rsa`); each from `/`,
/// normalised, percent-decoded and not, with and without `;params` of the
/// last segment, and with `\` as `/` (WHATWG parsers of web URLs).
fn uri_path_readings(raw: &str) -> Vec<String> {
    let uri = raw.trim_matches(|c: char| c <= ' ');
    let rest = after_scheme(uri);
    let host_end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    let (host, path_all) = rest.split_at(host_end);
    let path = path_all.split(['?', '#']).next().unwrap_or("");
    // The variants a URI has (most have none: one path, one host join),
    // each made only when it differs, so a long URI is copied a few times.
    let mut paths: Vec<String> = vec![path.to_string()];
    let cut = without_params(path);
    if cut.len() != path.len() {
        paths.push(cut.to_string());
    }
    if path.contains('%') {
        for i in 0..paths.len() {
            // Decoded again while it changes (`%2565tc` is `%65tc`, then
            // `etc`): a server behind a decoding framework decodes twice.
            for decoded in percent_decodings(&paths[i]) {
                paths.push(decoded);
            }
        }
    }
    if path.contains('\\') {
        for i in 0..paths.len() {
            let slashed = paths[i].replace('\\', "/");
            paths.push(slashed);
        }
    }
    let mut out = Vec::with_capacity(paths.len() * 2);
    for p in &paths {
        let rooted_path = rooted(p);
        if !out.contains(&rooted_path) {
            out.push(rooted_path);
        }
        if !host.is_empty() {
            let joined = rooted(&format!("{host}/{p}"));
            if !out.contains(&joined) {
                out.push(joined);
            }
        }
    }
    out
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
        } else if raw
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b'$' && (w[1].is_ascii_alphanumeric() || w[1] == b'_' || w[1] == b'{'))
        {
            Some(
                "it contains `$NAME` or `${…}`, which servers that expand environment \
                 variables (`os.path.expandvars`) replace",
            )
        } else if raw.contains(['*', '?', '[', '{']) && raw.contains('/') {
            Some(
                "it contains `*`, `?`, `[` or `{`, which a server that expands globs reads as a \
                 pattern matching other paths",
            )
        } else if raw
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(';'))
        {
            Some(
                "its last segment contains `;`, where URL parsers (Python's `urlparse`) cut it \
                 (`a/..;x` is `a/..`)",
            )
        } else {
            None
        }
    }

    proptest::proptest! {
        #[test]
        fn one_pass_uncertainty_is_the_scans(
            raw in "[a/%4f?#: \\t\\x00\\x7f\\u{80}\\u{9f}\\u{a0}\\u{c2}\\u{2028}é$_{}*\\[;H]{0,12}",
        ) {
            proptest::prop_assert_eq!(plain_uncertainty(&raw), plain_uncertainty_by_scans(&raw));
        }

        /// Long text with a few notable bytes anywhere: the blocks skipped
        /// whole, and a `%4F` or `0xC2 0x85` cut by a block's end.
        #[test]
        fn block_skipping_uncertainty_is_the_scans(
            before in "x{0,80}",
            notable in "[%4f?#\\t\\x00\\x1f\\x7f\\u{80}\\u{85}\\u{9f}é$_{*\\[;/]{0,3}",
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

    proptest::proptest! {
        /// The byte searches of the plain value path answer as `str`'s own
        /// searches, non-ASCII text (whose bytes are all at least 0x80)
        /// included.
        #[test]
        fn byte_searches_are_str_searches(s in "[a/:;.pro\u{80}\u{2f}\u{ff1a}é\u{10000}x]{0,24}") {
            for b in [b'/', b':', b';'] {
                proptest::prop_assert_eq!(has_byte(&s, b), s.contains(char::from(b)));
            }
            for needle in ["//", "proc"] {
                proptest::prop_assert_eq!(has(&s, needle), s.contains(needle));
            }
            let by_str = s.rfind('/').map_or(s.as_str(), |i| &s[i + 1..]);
            proptest::prop_assert_eq!(last_segment(&s), by_str);
            let by_find = s.find(':').and_then(|colon| {
                let scheme = &s[..colon];
                let mut chars = scheme.chars();
                let first = chars.next()?;
                (first.is_ascii_alphabetic()
                    && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
                .then(|| (scheme, &s[colon + 1..]))
            });
            proptest::prop_assert_eq!(split_scheme(&s), by_find);
        }

        /// The run-by-run NFC check is the library's.
        #[test]
        fn nfc_by_runs_is_nfc_anywhere(s in "\\PC{0,16}") {
            proptest::prop_assert_eq!(is_nfc(&s), unicode_normalization::is_nfc(&s));
        }

        #[test]
        fn nfc_by_runs_is_nfc(s in "[ae/\\u{301}\\u{308}\\u{e9}\\u{1100}\\u{1161}\\u{ac00}\\u{212b}\\u{327}x]{0,12}") {
            proptest::prop_assert_eq!(is_nfc(&s), unicode_normalization::is_nfc(&s));
        }
    }

    /// What [`is_nfc`] skips: every character below U+0300 is a starter
    /// (combining class 0) that NFC allows wherever it stands.
    #[test]
    fn characters_below_u0300_are_nfc_starters() {
        use unicode_normalization::char::canonical_combining_class;
        use unicode_normalization::{IsNormalized, is_nfc_quick};
        for c in (0..0x300u32).filter_map(char::from_u32) {
            assert_eq!(canonical_combining_class(c), 0, "{c:?}");
            assert_eq!(is_nfc_quick(std::iter::once(c)), IsNormalized::Yes, "{c:?}");
        }
    }

    const WS: &str = "/w";

    fn c(raw: &str) -> CanonStr {
        canon_str(
            raw,
            &Context {
                workspace: WS,
                home: Some("/home/u"),
                ..Default::default()
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
        // A relative path means the file it names (what the rules read);
        // a single word stays as written.
        let rel = c("src/a.rs");
        assert_eq!(rel.primary, "/w/src/a.rs");
        assert_eq!(paths(&rel), ["/w/src/a.rs"]);
        assert!(rel.is_certain());
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
            ..Default::default()
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
            ..Default::default()
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

    fn in_ctx(raw: &str, ctx: &Context<'_>) -> CanonStr {
        canon_str(raw, ctx)
    }

    /// Class 1: a URI of another scheme also names the file a server may
    /// open for it: its path, and its host joined with its path.
    #[test]
    fn other_schemes_have_path_readings() {
        for (uri, path) in [
            ("x:///tmp/secret", "/tmp/secret"),
            ("x:///proc/self/environ", "/proc/self/environ"),
            ("http://localhost/proc/self/environ", "/proc/self/environ"),
            ("HTTP://LOCALHOST/etc/./shadow", "/etc/shadow"),
            ("notes://.ssh/id_rsa", "/.ssh/id_rsa"),
            ("x:///w/a%20b", "/w/a b"),
            ("x://h/a/%2e%2e/etc/shadow", "/etc/shadow"),
            ("http://localhost/w/public/..;x", "/w"),
            ("x://h/a?q#/../../etc", "/a"),
        ] {
            let u = c(uri);
            assert_eq!(u.shape, Shape::Uri, "{uri}");
            assert!(paths(&u).contains(&path), "{uri}: {u:?}");
            // The URI reading stays first: no path pattern's allow holds.
            assert!(matches!(u.readings[0], Reading::Uri(_)), "{uri}");
        }
        let notes = c("notes://.ssh/id_rsa");
        assert!(notes.is_certain() && notes.primary == "notes://.ssh/id_rsa");
        // A resource URI has no relative-path reading, but these.
        let r = canon_resource_uri(
            "notes://.ssh/id_rsa",
            &Context {
                workspace: WS,
                ..Default::default()
            },
        );
        assert!(paths(&r).contains(&"/.ssh/id_rsa"), "{r:?}");
        assert!(!paths(&r).iter().any(|p| p.starts_with("/w/")), "{r:?}");
        let f = canon_resource_uri(
            "file:///w/a",
            &Context {
                workspace: WS,
                cwd: Some("/w/sub"),
                ..Default::default()
            },
        );
        assert_eq!(paths(&f), ["/w/a"]);
    }

    /// Class 2: JSON text, which the official Python SDK parses for an
    /// argument whose type is not plain `str`.
    #[test]
    fn json_text_is_read_inside() {
        let ctx = Context {
            workspace: WS,
            ..Default::default()
        };
        let canon = |v: Value| canonicalize(&v, &ctx, &Limits::default()).unwrap();
        let got = canon(json!({"p": "[\"secrets/key\"]"}));
        let Some(CanonValue::Str(p)) = got.value.get("p") else {
            panic!("{got:?}")
        };
        assert!(!p.is_certain(), "{p:?}");
        assert!(p.uncertain.as_deref().unwrap().contains("JSON text"));
        assert_eq!(p.shape, Shape::JsonText { paths: true });
        assert!(paths(p).contains(&"/w/secrets/key"), "{p:?}");
        assert_eq!(p.primary, p.raw);
        assert_eq!(got.notable().len(), 1);
        // Python's grammar, not serde_json's: NaN, huge numbers, lone
        // surrogates, escaped `/`, keys.
        for text in [
            r#"[NaN, 1e999, -Infinity, "\ud800", "\/etc\/shadow"]"#,
            r#" {"\/etc\/shadow": 1} "#,
            r#"{"a": {"b": ["x", "/etc/shadow"]}}"#,
        ] {
            let got = canon(json!({ "p": text }));
            let Some(CanonValue::Str(p)) = got.value.get("p") else {
                panic!()
            };
            assert!(paths(p).contains(&"/etc/shadow"), "{text}: {p:?}");
            assert!(p.path_shaped(), "{text}");
        }
        // Text inside is not parsed again (one level).
        let got = canon(json!({"p": r#"["[\"/etc/x\"]"]"#}));
        let Some(CanonValue::Str(p)) = got.value.get("p") else {
            panic!()
        };
        assert!(!paths(p).contains(&"/etc/x"), "{p:?}");
        // Not path-shaped inside: uncertain for path rules, not reported.
        let got = canon(json!({"p": r#"{"limit": 5}"#}));
        assert!(got.notable().is_empty());
        // Not JSON: read as it is.
        for text in [
            "[1,]",
            "[01]",
            "{\"a\" 1}",
            "[\"a\"] x",
            "[",
            "[wip] fix",
            "[\"a\tb\"]",
            "\"a\"",
            "[\"\\x\"]",
        ] {
            assert!(json_text(text).is_none(), "{text}");
        }
        for text in [
            " [ ] ",
            "{}",
            "[-0.5e+3, true, null, {\"k\": []}]",
            "[\"\\u00e9\"]",
        ] {
            assert!(json_text(text).is_some(), "{text}");
        }
        assert_eq!(json_text("[\"\\u00e9\"]").unwrap().strings, ["é"]);
        assert_eq!(json_text("[[[1]], 2]").unwrap().depth, 3);
    }

    /// What is inside JSON text counts against the limits.
    #[test]
    fn json_text_counts_against_the_limits() {
        let ctx = Context {
            workspace: WS,
            ..Default::default()
        };
        let small = |max_bytes, max_depth, max_values| Limits {
            max_bytes,
            max_depth,
            max_values,
        };
        let deep = json!({"a": "[[[1]]]"});
        assert!(canonicalize(&deep, &ctx, &small(100, 4, 100)).is_ok());
        assert!(canonicalize(&deep, &ctx, &small(100, 3, 100)).is_err());
        // The object, the text, and the strings inside; numbers are free.
        let many = json!({"a": r#"["a", "b", "c", 4, 5]"#});
        assert!(canonicalize(&many, &ctx, &small(100, 8, 5)).is_ok());
        assert!(canonicalize(&many, &ctx, &small(100, 8, 4)).is_err());
        // 13 bytes of text, 10 more inside it.
        let text = json!({"a": r#"["0123456789"]"#});
        assert!(canonicalize(&text, &ctx, &small(1 + 14 + 10, 8, 100)).is_ok());
        assert!(canonicalize(&text, &ctx, &small(1 + 14 + 9, 8, 100)).is_err());
    }

    /// Class 3: a decomposed (NFD) name reaches the composed (NFC) file.
    #[test]
    fn unicode_forms_are_readings() {
        let nfc = "/w/donn\u{e9}es/key";
        let nfd = "/w/donne\u{301}es/key";
        let d = c(nfd);
        assert!(!d.is_certain(), "{d:?}");
        assert!(d.uncertain.as_deref().unwrap().contains("NFC"));
        assert!(
            paths(&d).contains(&nfc) && paths(&d).contains(&nfd),
            "{d:?}"
        );
        assert_eq!(d.primary, nfd);
        // A composed value needs no other form: patterns have both.
        let composed = c(nfc);
        assert!(composed.is_certain());
        assert_eq!(composed.primary, nfc);
        assert_eq!(paths(&composed), [nfc]);
        // Mixed: both normal forms.
        let mixed = c("/w/donne\u{301}es/caf\u{e9}");
        assert!(
            paths(&mixed).contains(&"/w/donn\u{e9}es/caf\u{e9}"),
            "{mixed:?}"
        );
        assert!(
            paths(&mixed).contains(&"/w/donne\u{301}es/cafe\u{301}"),
            "{mixed:?}"
        );
        // A relative one, and one inside `~`.
        assert!(paths(&c("donne\u{301}es/key")).contains(&"/w/donn\u{e9}es/key"));
        assert!(paths(&c("~/donne\u{301}es")).contains(&"/home/u/donn\u{e9}es"));
        // ASCII and already-normal non-ASCII text without another form.
        assert_eq!(paths(&c("/w/a")), ["/w/a"]);
        assert_eq!(paths(&c("/w/日本")), ["/w/日本"]);
    }

    /// Class 4: a relative path is opened from the server's working
    /// directory, and by servers that resolve against their root from the
    /// workspace.
    #[test]
    fn relative_paths_are_read_from_the_server_cwd_too() {
        let ctx = Context {
            workspace: WS,
            cwd: Some("/w/secrets"),
            ..Default::default()
        };
        let key = in_ctx("key", &ctx);
        assert_eq!(paths(&key), ["/w/key", "/w/secrets/key"]);
        assert!(key.is_certain());
        assert_eq!(paths(&in_ctx("../x", &ctx)), ["/x", "/w/x"]);
        assert_eq!(paths(&in_ctx("/etc/x", &ctx)), ["/etc/x"]);
        assert!(paths(&in_ctx("~/a", &ctx)).contains(&"/w/secrets/~/a"));
        assert!(paths(&in_ctx("file:///a", &ctx)).contains(&"/w/secrets/file:/a"));
        // The same directory as the workspace: one reading.
        let same = Context {
            workspace: WS,
            cwd: Some(WS),
            ..Default::default()
        };
        assert_eq!(paths(&in_ctx("key", &same)), ["/w/key"]);
    }

    /// Class 5: `~` at every HOME the server may have.
    #[test]
    fn tilde_reads_the_server_homes() {
        let homes = ["/tmp/home".to_string()];
        let ctx = Context {
            workspace: WS,
            home: Some("/root"),
            homes: &homes,
            ..Default::default()
        };
        let h = in_ctx("~/../redteam/outside/victim", &ctx);
        assert!(paths(&h).contains(&"/tmp/redteam/outside/victim"), "{h:?}");
        assert!(paths(&h).contains(&"/redteam/outside/victim"), "{h:?}");
        assert!(paths(&in_ctx("~/.ssh/k", &ctx)).contains(&"/tmp/home/.ssh/k"));
        // `~user` is another user's HOME, not the server's.
        assert!(!paths(&in_ctx("~bob/x", &ctx)).contains(&"/tmp/home/x"));
    }

    /// Class 6: environment variables a server may expand.
    #[test]
    fn variables_are_uncertain_with_their_expansions() {
        let homes = ["/tmp/home".to_string()];
        let ctx = Context {
            workspace: WS,
            home: Some("/home/u"),
            homes: &homes,
            ..Default::default()
        };
        let v = in_ctx("$HOME/../../../../tmp/outside/victim", &ctx);
        assert!(!v.is_certain());
        assert!(v.uncertain.as_deref().unwrap().contains("expandvars"));
        assert!(paths(&v).contains(&"/tmp/outside/victim"), "{v:?}");
        let b = in_ctx("${HOME}/../../proc/self/environ", &ctx);
        assert!(paths(&b).contains(&"/proc/self/environ"), "{b:?}");
        assert!(paths(&in_ctx("${HOME}/../x", &ctx)).contains(&"/tmp/x"));
        assert!(paths(&in_ctx("$HOME/../x", &ctx)).contains(&"/home/x"));
        // Any other variable may hold any path: read at `/`.
        let other = in_ctx("$DATA/etc/shadow", &ctx);
        assert!(paths(&other).contains(&"/etc/shadow"), "{other:?}");
        assert!(paths(&other).contains(&"/w/$DATA/etc/shadow"), "{other:?}");
        assert!(!in_ctx("a/$_x", &ctx).is_certain());
        // Not a variable to `expandvars`.
        for text in ["a$", "a/$-b", "cost $ 5", "a/${x"] {
            assert!(in_ctx(text, &ctx).is_certain() || text == "a/${x", "{text}");
        }
        assert_eq!(expand_vars("a/${x", |_| "/"), "a/${x");
        let named = |n: &str| match n {
            "A" => "1",
            "B" => "2",
            _ => "3",
        };
        assert_eq!(expand_vars("$A$B/${C}x$", named), "12/3x$");
        // After `~` too.
        assert!(!c("~/$HOME").readings.is_empty());
    }

    /// Class 7: globs a server may expand.
    #[test]
    fn globs_are_uncertain_with_their_containers() {
        for (glob, container) in [
            ("/w/secret[s]/key", "/w"),
            ("secret*/key", "/w"),
            ("/proc/self/enviro[n]", "/proc/self"),
            ("/w/*/../../etc/shadow", "/etc/shadow"),
            ("/w/a/**/../../x", "/w/a"),
            ("/w/a/**/../../x", "/x"),
            ("/w/public/{x,..}/secrets/key", "/w/secrets/key"),
            ("/w/public/{x,{..}}/secrets/k", "/w/public"),
            ("/etc/*", "/etc"),
            ("/w/a?/b", "/w"),
        ] {
            let g = c(glob);
            assert!(!g.is_certain(), "{glob}");
            assert!(paths(&g).contains(&container), "{glob}: {g:?}");
            assert!(paths(&g).contains(&g.readings[0].as_str()));
        }
        assert!(
            c("/w/x[1]/y")
                .uncertain
                .as_deref()
                .unwrap()
                .contains("glob")
        );
        // Not path-shaped: text.
        assert!(c("foo*").is_certain() && c("[wip]").is_certain());
        // Many brace groups: at most MAX_BRACE_EXPANSIONS alternatives.
        let many = format!("/w/{}", "{a,b}/".repeat(20));
        assert!(brace_expansions(&many).len() <= MAX_BRACE_EXPANSIONS);
        let wide = format!("/w/{{{}}}", vec!["a"; 10_000].join(","));
        assert_eq!(brace_expansions(&wide).len(), 1);
    }

    /// Class 9: `;params`, which Python's `urlparse` cuts.
    #[test]
    fn params_in_the_last_segment_are_cut() {
        let p = c("/w/public/..;x");
        assert!(!p.is_certain());
        assert!(paths(&p).contains(&"/w"), "{p:?}");
        assert!(paths(&c("a;b")).contains(&"/w/a"));
        // Not in the last segment: `urlparse` keeps it.
        assert!(c("/w/a;b/c").is_certain());
    }

    /// A long argument stays linear: no reading of it is quadratic.
    #[test]
    fn long_values_are_read_in_linear_time() {
        let ctx = Context {
            workspace: WS,
            home: Some("/home/u"),
            ..Default::default()
        };
        for unit in ["a/", "$H/", "*/", "{a,b}/", "é/", "e\u{301}/", "..;/"] {
            let raw = unit.repeat(50_000);
            let started = std::time::Instant::now();
            let got = in_ctx(&raw, &ctx);
            assert!(!got.readings.is_empty());
            assert!(
                started.elapsed() < std::time::Duration::from_secs(2),
                "{unit}: {:?}",
                started.elapsed()
            );
        }
        let json = format!("[{}\"x\"]", "\"a/b\", ".repeat(20_000));
        let started = std::time::Instant::now();
        canonicalize(&json!({ "p": json }), &ctx, &Limits::default()).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// Release-mode timing of long values (not a test: `cargo test
    /// --release -- --ignored --nocapture canon_timing`).
    #[test]
    #[ignore]
    fn canon_timing() {
        let ctx = Context {
            workspace: WS,
            home: Some("/home/u"),
            ..Default::default()
        };
        let prose = "The quick brown fox jumps over the lazy dog. ".repeat(2300);
        let code = "fn main() { let x = a[1] * b; }\n".repeat(3200);
        let path = "src/module/file.rs/".repeat(5400);
        let french = "données à l'étranger ".repeat(4400);
        for (name, raw) in [
            ("prose", &prose),
            ("code", &code),
            ("path", &path),
            ("french", &french),
        ] {
            let n = 200;
            let started = std::time::Instant::now();
            for _ in 0..n {
                std::hint::black_box(canon_str(std::hint::black_box(raw), &ctx));
            }
            println!(
                "{name}: {} bytes, {:?} per value",
                raw.len(),
                started.elapsed() / n
            );
        }
    }
}
