//! Checking a log: [`verify`].

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::{Map, Value};

use crate::chain::Hasher;
use crate::head::{HeadError, head_path, read_head};
use crate::{HashMode, MAX_LINE_BYTES, RECORD_VERSION, ZERO_HASH};
use warden_core::digest::canonical_json;

/// The outcome of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyReport {
    /// Every line is a whole record and the chain is unbroken.
    Ok {
        count: u64,
        /// `hash` of the last record; 64 zeros for an empty log.
        last_hash: String,
        mode: HashMode,
        /// The heads the log was checked against (none: the end of the log
        /// could not be vouched for).
        heads: Vec<ExpectedHead>,
        /// Calls whose outcome the log does not know (a warning, not a
        /// failure: the log itself is intact).
        unfinished: Vec<Unfinished>,
    },
    /// The records are `hmac-sha256` and no key was given: structure,
    /// `seq` and `prev` links of `count` records are whole, the hashes
    /// themselves were not checked.
    KeyRequired {
        count: u64,
        last_hash: String,
        heads: Vec<ExpectedHead>,
        unfinished: Vec<Unfinished>,
    },
    /// The first problem found; nothing after it was checked.
    Bad(VerifyFailure),
    /// The file could not be read.
    Unreadable { message: String },
}

impl VerifyReport {
    pub fn is_ok(&self) -> bool {
        matches!(self, VerifyReport::Ok { .. })
    }
}

/// A call (or request of another kind) written ahead as `pending` with no
/// `tool_result` / `request_result` after it: warden never saw how it
/// ended (it was killed, or the call is still running), so the server may
/// or may not have acted on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// `seq` of the pending record.
    pub seq: u64,
    pub call_id: String,
    /// `tool_call` or `request`.
    pub event: String,
}

/// A head the log must reach: from its head file, or given (`--head
/// SEQ:HASH`, e.g. kept by a CI job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedHead {
    pub seq: u64,
    pub hash: String,
    /// Where it comes from, for messages: the head file's path, or
    /// `--head`.
    pub source: String,
    /// Its own `mac` was checked (a keyed head read without the key: not).
    pub authenticated: bool,
}

impl ExpectedHead {
    /// Parses `SEQ:HASH` (what `warden audit head` prints).
    pub fn parse(spec: &str, source: &str) -> Result<ExpectedHead, String> {
        let (seq, hash) = spec
            .split_once(':')
            .ok_or_else(|| format!("{spec:?} is not SEQ:HASH"))?;
        let seq: u64 = seq
            .trim()
            .parse()
            .map_err(|_| format!("{spec:?}: SEQ is not a number"))?;
        let hash = hash.trim().to_ascii_lowercase();
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("{spec:?}: HASH is not 64 hex digits"));
        }
        Ok(ExpectedHead {
            seq,
            hash,
            source: source.to_string(),
            authenticated: true,
        })
    }
}

/// What [`verify_with`] checks besides the chain.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions<'a> {
    /// With a key, every record must be an HMAC-SHA-256 record under it.
    pub key: Option<&'a [u8]>,
    /// Compare with the head file `FILE.head` when there is one.
    pub head_file: bool,
    /// Heads kept elsewhere (`--head SEQ:HASH`).
    pub heads: Vec<ExpectedHead>,
    /// The log must be keyed (e.g. its head file says so): `sha256`
    /// records are a downgrade.
    pub keyed: bool,
}

/// Where and why a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyFailure {
    /// The `seq` the bad line should have had (= whole records before it + 1).
    pub seq: u64,
    /// 1-based line number.
    pub line: u64,
    pub problem: Problem,
    /// Records verified before the bad one.
    pub verified: u64,
    /// `hash` of the last verified record (64 zeros if none).
    pub last_good_hash: String,
    /// The mode being checked, once known.
    pub mode: Option<HashMode>,
}

/// Why a record is bad.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The recomputed hash differs: the record was altered (or another key).
    HashMismatch,
    /// The line is not the canonical JSON of the record it holds.
    NotCanonical,
    /// A later `seq` where this one was expected: records are missing.
    Gap { found: u64 },
    /// `seq` out of order: records were moved.
    Reordered { found: u64 },
    /// The previous record again.
    Duplicate { found: u64 },
    /// Valid hash, right `seq`, but `prev` does not name the previous record.
    PrevMismatch,
    /// The final line has no newline: a write cut short by a crash.
    TornTail { bytes: u64 },
    /// Not JSON, not an object, or an empty line.
    Unparseable { detail: String },
    /// JSON, but a chain field is missing, has the wrong type or an
    /// unsupported value.
    Malformed { detail: String },
    /// The record's `alg` is not the one being verified (e.g. `sha256`
    /// records checked with a key: re-forged without the key).
    ModeMismatch { found: String, expected: HashMode },
    /// The log ends before its head: records `first..=head_seq` were cut
    /// off.
    Truncated {
        first: u64,
        head_seq: u64,
        source: String,
    },
    /// The record at the head's `seq` is not the one the head names: the
    /// log was rewritten.
    HeadMismatch { head_hash: String, source: String },
    /// The head file cannot be read or does not verify.
    HeadInvalid { detail: String },
    /// A line longer than [`MAX_LINE_BYTES`]: no record warden writes is,
    /// and it was not read whole.
    TooLong { limit: usize },
}

impl Problem {
    /// A stable short name, for `--json` and scripts.
    pub fn kind(&self) -> &'static str {
        match self {
            Problem::HashMismatch => "hash_mismatch",
            Problem::NotCanonical => "not_canonical",
            Problem::Gap { .. } => "gap",
            Problem::Reordered { .. } => "reordered",
            Problem::Duplicate { .. } => "duplicate",
            Problem::PrevMismatch => "prev_mismatch",
            Problem::TornTail { .. } => "torn_tail",
            Problem::Unparseable { .. } => "unparseable",
            Problem::Malformed { .. } => "malformed",
            Problem::ModeMismatch { .. } => "mode_mismatch",
            Problem::Truncated { .. } => "truncated",
            Problem::HeadMismatch { .. } => "head_mismatch",
            Problem::HeadInvalid { .. } => "head_invalid",
            Problem::TooLong { .. } => "too_long",
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::HashMismatch => f.write_str(
                "hash mismatch: the record was altered, or it was written under another key",
            ),
            Problem::NotCanonical => {
                f.write_str("the line is not the canonical JSON of its record: it was edited")
            }
            Problem::Gap { found } => write!(f, "gap: found seq {found}; records are missing"),
            Problem::Reordered { found } => {
                write!(f, "reordering: found seq {found}; records were moved")
            }
            Problem::Duplicate { found } => write!(f, "duplicate: seq {found} appears again"),
            Problem::PrevMismatch => f.write_str(
                "prev mismatch: `prev` is not the previous record's hash (chain spliced or forked)",
            ),
            Problem::TornTail { bytes } => write!(
                f,
                "torn tail: the last line ({bytes} bytes) is incomplete, a write cut short by a crash; \
                 the records before it are intact"
            ),
            Problem::Unparseable { detail } => write!(f, "unparseable line: {detail}"),
            Problem::Malformed { detail } => write!(f, "malformed record: {detail}"),
            Problem::ModeMismatch { found, expected } => write!(
                f,
                "record is `{found}` but the log is checked as {expected}{}",
                if *expected == HashMode::HmacSha256 {
                    " (a chain recomputed without the key, or the wrong log)"
                } else {
                    ""
                }
            ),
            Problem::Truncated {
                first,
                head_seq,
                source,
            } => {
                let missing = if first == head_seq {
                    format!("record seq {first} is")
                } else {
                    format!("records seq {first} to {head_seq} are")
                };
                write!(
                    f,
                    "truncated: {missing} missing: the log ends before the head ({source}) \
                     names seq {head_seq}; records were cut off its end"
                )
            }
            Problem::HeadMismatch { head_hash, source } => write!(
                f,
                "not the record the head ({source}) names (hash {head_hash}): the log was rewritten"
            ),
            Problem::HeadInvalid { detail } => write!(f, "head file: {detail}"),
            Problem::TooLong { limit } => write!(
                f,
                "a line longer than {limit} bytes: no record warden writes comes near that \
                 (not read further)"
            ),
        }
    }
}

/// Verifies the log at `path` and compares it with its head file when it
/// has one; with `key`, every record must be an HMAC-SHA-256 record under
/// that key.
pub fn verify(path: &Path, key: Option<&[u8]>) -> VerifyReport {
    verify_with(
        path,
        &VerifyOptions {
            key,
            head_file: true,
            ..VerifyOptions::default()
        },
    )
}

/// [`verify`] with every option: heads kept elsewhere, a key expected.
///
/// A head (from the head file or `opts.heads`) must be reached: a log that
/// ends before its `seq` is [`Problem::Truncated`] (the failure's `seq` is
/// the first missing record), and the record at its `seq` must have its
/// `hash` ([`Problem::HeadMismatch`]). A head file that says the log is
/// keyed makes `sha256` records a [`Problem::ModeMismatch`], as a key does.
pub fn verify_with(path: &Path, opts: &VerifyOptions<'_>) -> VerifyReport {
    let mut opts = opts.clone();
    let mut head_problem = None;
    let mut file_head_mode = None;
    if opts.head_file {
        match read_head(path, opts.key) {
            Ok(None) => {}
            Ok(Some(read)) => {
                opts.keyed |= read.head.mode == HashMode::HmacSha256;
                file_head_mode = Some(read.head.mode);
                opts.heads.insert(
                    0,
                    ExpectedHead {
                        seq: read.head.seq,
                        hash: read.head.hash,
                        source: head_path(path).display().to_string(),
                        authenticated: read.authenticated,
                    },
                );
            }
            Err(HeadError::Unreadable { path, detail }) => {
                return VerifyReport::Unreadable {
                    message: format!("head file {path}: {detail}"),
                };
            }
            Err(e @ HeadError::Invalid { .. }) => head_problem = Some(e.to_string()),
        }
    }
    let report = match File::open(path) {
        Ok(file) => verify_reader_with(BufReader::new(file), &opts),
        Err(e) => {
            return VerifyReport::Unreadable {
                message: format!("{}: {e}", path.display()),
            };
        }
    };
    if let Some(head_mode) = file_head_mode {
        let log_mode = match &report {
            VerifyReport::Ok { mode, .. } => Some(*mode),
            VerifyReport::KeyRequired { .. } => Some(HashMode::HmacSha256),
            _ => None,
        };
        if head_problem.is_none() && log_mode.is_some_and(|m| m != head_mode) {
            head_problem = Some(format!(
                "it says the log is {head_mode} but the records are {}: it was replaced",
                log_mode.map_or("?", HashMode::as_str)
            ));
        }
    }
    let Some(detail) = head_problem else {
        return report;
    };
    // A problem of the log itself is reported first; else the head's.
    let (count, last_hash, mode) = match report {
        VerifyReport::Ok {
            count,
            last_hash,
            mode,
            ..
        } => (count, last_hash, Some(mode)),
        VerifyReport::KeyRequired {
            count, last_hash, ..
        } => (count, last_hash, Some(HashMode::HmacSha256)),
        other => return other,
    };
    VerifyReport::Bad(VerifyFailure {
        seq: count + 1,
        line: count + 1,
        problem: Problem::HeadInvalid { detail },
        verified: count,
        last_good_hash: last_hash,
        mode,
    })
}

/// One line as read: its bytes without `\n`, and whether it had one.
struct RawLine {
    bytes: Vec<u8>,
    terminated: bool,
    /// Longer than [`MAX_LINE_BYTES`]: only its first bytes were read.
    too_long: bool,
}

/// The next line, reading at most [`MAX_LINE_BYTES`] + 1 bytes of it: a
/// longer one is [`RawLine::too_long`], the rest of it unread.
fn read_line<R: BufRead>(reader: &mut R) -> std::io::Result<Option<RawLine>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let limit = MAX_LINE_BYTES as u64 + 1;
    if (&mut *reader).take(limit).read_until(b'\n', &mut bytes)? == 0 {
        return Ok(None);
    }
    let terminated = bytes.last() == Some(&b'\n');
    if terminated {
        bytes.pop();
    }
    let too_long = !terminated && bytes.len() > MAX_LINE_BYTES;
    if too_long {
        bytes = Vec::new();
    }
    Ok(Some(RawLine {
        bytes,
        terminated,
        too_long,
    }))
}

/// [`verify`] over any reader (e.g. `&bytes[..]`), without a head.
pub fn verify_reader<R: BufRead>(reader: R, key: Option<&[u8]>) -> VerifyReport {
    verify_reader_with(
        reader,
        &VerifyOptions {
            key,
            ..VerifyOptions::default()
        },
    )
}

/// [`verify_with`] over any reader; `opts.head_file` is ignored.
pub fn verify_reader_with<R: BufRead>(mut reader: R, opts: &VerifyOptions<'_>) -> VerifyReport {
    let key = opts.key;
    let keyed = match key.map(|k| Hasher::new(Some(k))).transpose() {
        Ok(h) => h,
        Err(e) => {
            return VerifyReport::Unreadable {
                message: e.to_string(),
            };
        }
    };
    let mut mode: Option<HashMode> = keyed
        .as_ref()
        .map(Hasher::mode)
        .or(opts.keyed.then_some(HashMode::HmacSha256));
    let plain = Hasher::Plain;
    // Pending calls not yet followed by their result: call_id → (seq, event).
    let mut pending: HashMap<String, (u64, String)> = HashMap::new();
    let mut count: u64 = 0;
    let mut last_hash = ZERO_HASH.to_string();
    let mut line_no: u64 = 0;

    macro_rules! read_next {
        () => {
            match read_line(&mut reader) {
                Ok(l) => l,
                Err(e) => {
                    return VerifyReport::Unreadable {
                        message: format!("read error after line {line_no}: {e}"),
                    };
                }
            }
        };
    }

    while let Some(line) = read_next!() {
        line_no += 1;
        let expected = count + 1;
        let fail = |problem: Problem, mode: Option<HashMode>, last_hash: &str| {
            VerifyReport::Bad(VerifyFailure {
                seq: expected,
                line: line_no,
                problem,
                verified: count,
                last_good_hash: last_hash.to_string(),
                mode,
            })
        };
        if line.too_long {
            return fail(
                Problem::TooLong {
                    limit: MAX_LINE_BYTES,
                },
                mode,
                &last_hash,
            );
        }
        if !line.terminated {
            return fail(
                Problem::TornTail {
                    bytes: line.bytes.len() as u64,
                },
                mode,
                &last_hash,
            );
        }
        let record = match parse_record(&line.bytes) {
            Ok(r) => r,
            Err(problem) => return fail(problem, mode, &last_hash),
        };
        let rec_mode = match HashMode::from_alg(&record.alg) {
            Some(m) => m,
            None => {
                return fail(
                    Problem::Malformed {
                        detail: format!("unknown `alg` {:?}", record.alg),
                    },
                    mode,
                    &last_hash,
                );
            }
        };
        let expected_mode = *mode.get_or_insert(rec_mode);
        if rec_mode != expected_mode {
            return fail(
                Problem::ModeMismatch {
                    found: record.alg.clone(),
                    expected: expected_mode,
                },
                mode,
                &last_hash,
            );
        }
        let hasher = match (expected_mode, &keyed) {
            (HashMode::HmacSha256, Some(k)) => Some(k),
            (HashMode::Sha256, _) => Some(&plain),
            (HashMode::HmacSha256, None) => None,
        };
        let call = call_of(&record.map);
        if let Some(hasher) = hasher
            && hasher.hash_record(record.map) != record.hash
        {
            return fail(Problem::HashMismatch, mode, &last_hash);
        }
        if record.seq > expected {
            // Missing records, or the expected one comes later: look ahead.
            let next = read_next!();
            let next_seq = next
                .as_ref()
                .and_then(|l| parse_record(&l.bytes).ok())
                .map(|r| r.seq);
            let problem = if next_seq == Some(expected) {
                Problem::Reordered { found: record.seq }
            } else {
                Problem::Gap { found: record.seq }
            };
            return fail(problem, mode, &last_hash);
        }
        if record.seq < expected {
            let problem = if record.seq == count && record.hash == last_hash {
                Problem::Duplicate { found: record.seq }
            } else {
                Problem::Reordered { found: record.seq }
            };
            return fail(problem, mode, &last_hash);
        }
        if record.prev != last_hash {
            return fail(Problem::PrevMismatch, mode, &last_hash);
        }
        if let Some(head) = opts
            .heads
            .iter()
            .find(|h| h.seq == record.seq && h.hash != record.hash)
        {
            return fail(
                Problem::HeadMismatch {
                    head_hash: head.hash.clone(),
                    source: head.source.clone(),
                },
                mode,
                &last_hash,
            );
        }
        count += 1;
        last_hash = record.hash;
        match call {
            Some(Call::Pending { call_id, event }) => {
                pending.insert(call_id, (record.seq, event));
            }
            Some(Call::Ended { call_id }) => {
                pending.remove(&call_id);
            }
            None => {}
        }
    }
    let mut unfinished: Vec<Unfinished> = pending
        .into_iter()
        .map(|(call_id, (seq, event))| Unfinished {
            seq,
            call_id,
            event,
        })
        .collect();
    unfinished.sort_by_key(|u| u.seq);
    if let Some(head) = opts
        .heads
        .iter()
        .filter(|h| h.seq > count)
        .max_by_key(|h| h.seq)
    {
        return VerifyReport::Bad(VerifyFailure {
            seq: count + 1,
            line: line_no + 1,
            problem: Problem::Truncated {
                first: count + 1,
                head_seq: head.seq,
                source: head.source.clone(),
            },
            verified: count,
            last_good_hash: last_hash,
            mode,
        });
    }
    // A head at seq 0 names the empty log.
    if let Some(head) = opts
        .heads
        .iter()
        .find(|h| h.seq == 0 && h.hash != ZERO_HASH)
    {
        return VerifyReport::Bad(VerifyFailure {
            seq: 0,
            line: 0,
            problem: Problem::HeadMismatch {
                head_hash: head.hash.clone(),
                source: head.source.clone(),
            },
            verified: count,
            last_good_hash: last_hash,
            mode,
        });
    }
    let heads = opts.heads.clone();
    match (mode, keyed.is_some()) {
        (Some(HashMode::HmacSha256), false) => VerifyReport::KeyRequired {
            count,
            last_hash,
            heads,
            unfinished,
        },
        (m, _) => VerifyReport::Ok {
            count,
            last_hash,
            mode: m.unwrap_or(HashMode::Sha256),
            heads,
            unfinished,
        },
    }
}

/// What a record says about a call's write-ahead pair.
enum Call {
    /// A `tool_call` / `request` written ahead (`outcome: "pending"`).
    Pending { call_id: String, event: String },
    /// A `tool_result` / `request_result`.
    Ended { call_id: String },
}

fn call_of(record: &Map<String, Value>) -> Option<Call> {
    let event = record.get("event")?.as_str()?;
    let call_id = record.get("call_id")?.as_str()?.to_string();
    match event {
        "tool_call" | "request"
            if record.get("outcome").and_then(Value::as_str) == Some("pending") =>
        {
            Some(Call::Pending {
                call_id,
                event: event.to_string(),
            })
        }
        "tool_result" | "request_result" => Some(Call::Ended { call_id }),
        _ => None,
    }
}

struct Parsed {
    map: Map<String, Value>,
    seq: u64,
    prev: String,
    hash: String,
    alg: String,
}

fn parse_record(bytes: &[u8]) -> Result<Parsed, Problem> {
    if bytes.is_empty() {
        return Err(Problem::Unparseable {
            detail: "empty line".into(),
        });
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| Problem::Unparseable {
        detail: e.to_string(),
    })?;
    if canonical_json(&value).as_bytes() != bytes {
        // Checked before anything else: any edit that still parses lands here
        // or in the hash check.
        if !value.is_object() {
            return Err(Problem::Unparseable {
                detail: "not a JSON object".into(),
            });
        }
        return Err(Problem::NotCanonical);
    }
    let Value::Object(map) = value else {
        return Err(Problem::Unparseable {
            detail: "not a JSON object".into(),
        });
    };
    let malformed = |detail: &str| Problem::Malformed {
        detail: detail.to_string(),
    };
    if map.get("v").and_then(Value::as_u64) != Some(RECORD_VERSION) {
        return Err(malformed("`v` is not 1 (unsupported record version)"));
    }
    let seq = map
        .get("seq")
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
        .ok_or_else(|| malformed("`seq` is not a positive integer"))?;
    let text = |name: &str| {
        map.get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| malformed(&format!("`{name}` is missing or not a string")))
    };
    let hash = text("hash")?;
    let prev = text("prev")?;
    let alg = text("alg")?;
    for name in ["ts", "session", "event"] {
        text(name)?;
    }
    Ok(Parsed {
        map,
        seq,
        prev,
        hash,
        alg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem_of(input: &[u8]) -> Problem {
        match verify_reader(input, None) {
            VerifyReport::Bad(f) => f.problem,
            other => panic!("{other:?}"),
        }
    }

    /// The limit is exact: a line of `MAX_LINE_BYTES` is read (and found
    /// not to be a record), one byte more is not read further.
    #[test]
    fn a_line_longer_than_the_limit_is_too_long_and_one_at_it_is_read() {
        let mut at_limit = vec![b'x'; MAX_LINE_BYTES];
        at_limit.push(b'\n');
        assert!(matches!(problem_of(&at_limit), Problem::Unparseable { .. }));
        let mut over = vec![b'x'; MAX_LINE_BYTES + 1];
        over.push(b'\n');
        assert_eq!(
            problem_of(&over),
            Problem::TooLong {
                limit: MAX_LINE_BYTES
            }
        );
        // Without its newline too (not a torn tail: nothing warden writes).
        over.pop();
        assert_eq!(problem_of(&over).kind(), "too_long");
    }
}
