//! Checking a log: [`verify`].

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::{Map, Value};

use crate::chain::Hasher;
use crate::{HashMode, RECORD_VERSION, ZERO_HASH};
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
    },
    /// The records are `hmac-sha256` and no key was given: structure,
    /// `seq` and `prev` links of `count` records are whole, the hashes
    /// themselves were not checked.
    KeyRequired { count: u64, last_hash: String },
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
        }
    }
}

/// Verifies the log at `path`; with `key`, every record must be an
/// HMAC-SHA-256 record under that key.
pub fn verify(path: &Path, key: Option<&[u8]>) -> VerifyReport {
    match File::open(path) {
        Ok(file) => verify_reader(BufReader::new(file), key),
        Err(e) => VerifyReport::Unreadable {
            message: format!("{}: {e}", path.display()),
        },
    }
}

/// One line as read: its bytes without `\n`, and whether it had one.
struct RawLine {
    bytes: Vec<u8>,
    terminated: bool,
}

fn read_line<R: BufRead>(reader: &mut R) -> std::io::Result<Option<RawLine>> {
    let mut bytes = Vec::new();
    if reader.read_until(b'\n', &mut bytes)? == 0 {
        return Ok(None);
    }
    let terminated = bytes.last() == Some(&b'\n');
    if terminated {
        bytes.pop();
    }
    Ok(Some(RawLine { bytes, terminated }))
}

/// [`verify`] over any reader (e.g. `&bytes[..]`).
pub fn verify_reader<R: BufRead>(mut reader: R, key: Option<&[u8]>) -> VerifyReport {
    let keyed = match key.map(|k| Hasher::new(Some(k))).transpose() {
        Ok(h) => h,
        Err(e) => {
            return VerifyReport::Unreadable {
                message: e.to_string(),
            };
        }
    };
    let mut mode: Option<HashMode> = keyed.as_ref().map(Hasher::mode);
    let plain = Hasher::Plain;
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
        count += 1;
        last_hash = record.hash;
    }
    match (mode, keyed.is_some()) {
        (Some(HashMode::HmacSha256), false) => VerifyReport::KeyRequired { count, last_hash },
        (m, _) => VerifyReport::Ok {
            count,
            last_hash,
            mode: m.unwrap_or(HashMode::Sha256),
        },
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
