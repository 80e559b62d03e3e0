//! Hashing of records and reading the last record of a log file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::{AuditError, HashMode, MAX_LINE_BYTES};
use warden_core::digest::canonical_json;

type HmacSha256 = Hmac<Sha256>;

/// Computes `hash` fields: plain SHA-256, or HMAC-SHA-256 under a key
/// (the keyed state is prepared once and cloned per record).
#[derive(Clone)]
pub(crate) enum Hasher {
    Plain,
    Keyed(Box<HmacSha256>),
}

impl Hasher {
    pub(crate) fn new(key: Option<&[u8]>) -> Result<Self, AuditError> {
        match key {
            None => Ok(Hasher::Plain),
            Some(key) => HmacSha256::new_from_slice(key)
                .map(|mac| Hasher::Keyed(Box::new(mac)))
                .map_err(|e| AuditError::Key {
                    origin: "the given key".into(),
                    detail: e.to_string(),
                }),
        }
    }

    pub(crate) fn mode(&self) -> HashMode {
        match self {
            Hasher::Plain => HashMode::Sha256,
            Hasher::Keyed(_) => HashMode::HmacSha256,
        }
    }

    pub(crate) fn hash(&self, canonical: &[u8]) -> String {
        match self {
            Hasher::Plain => hex::encode(Sha256::digest(canonical)),
            Hasher::Keyed(mac) => {
                let mut mac = (**mac).clone();
                mac.update(canonical);
                hex::encode(mac.finalize().into_bytes())
            }
        }
    }

    /// [`Hasher::hash`] as 64 lowercase hex digits in a fixed array (no
    /// allocation, for the writer).
    pub(crate) fn hash_hex(&self, canonical: &[u8]) -> [u8; 64] {
        let digest: [u8; 32] = match self {
            Hasher::Plain => Sha256::digest(canonical).into(),
            Hasher::Keyed(mac) => {
                let mut mac = (**mac).clone();
                mac.update(canonical);
                mac.finalize().into_bytes().into()
            }
        };
        let mut hex = [0u8; 64];
        // 32 bytes always fit 64 hex digits.
        let _ = hex::encode_to_slice(digest, &mut hex);
        hex
    }

    /// The hash a parsed record should carry: over the canonical JSON of
    /// the record without its `hash` field.
    pub(crate) fn hash_record(&self, mut record: Map<String, Value>) -> String {
        record.remove("hash");
        self.hash(canonical_json(&Value::Object(record)).as_bytes())
    }
}

/// What the end of a log file holds.
#[derive(Debug)]
pub(crate) enum Tail {
    Empty,
    /// The last record: its `seq`, `hash`, and the byte offset its line
    /// starts at (so a writer can later check it is still there).
    Last {
        seq: u64,
        hash: String,
        start: u64,
    },
}

/// Reads the last whole record of `file` (size `size`) and checks that it
/// verifies under `hasher`, so that a session never extends a chain it
/// could not itself verify (wrong key, other mode, altered tail).
pub(crate) fn read_tail(
    file: &File,
    path: &Path,
    size: u64,
    hasher: &Hasher,
) -> Result<Tail, AuditError> {
    let io_err = |source| AuditError::Io {
        path: path.to_path_buf(),
        action: "read the last record",
        source,
    };
    if size == 0 {
        return Ok(Tail::Empty);
    }
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, size - 1).map_err(io_err)?;
    let too_long = || AuditError::CorruptTail {
        path: path.to_path_buf(),
        offset: size.saturating_sub(MAX_LINE_BYTES as u64 + 1),
        detail: format!(
            "it starts before that offset and is longer than {MAX_LINE_BYTES} bytes: \
             not a record warden writes"
        ),
    };
    if last[0] != b'\n' {
        let start = line_start(file, size)
            .map_err(io_err)?
            .ok_or_else(too_long)?;
        return Err(AuditError::TornTail {
            path: path.to_path_buf(),
            offset: start,
            len: size - start,
        });
    }
    let start = line_start(file, size - 1)
        .map_err(io_err)?
        .ok_or_else(too_long)?;
    let len = usize::try_from(size - 1 - start).map_err(|_| AuditError::CorruptTail {
        path: path.to_path_buf(),
        offset: start,
        detail: "the line is too long".into(),
    })?;
    let mut line = vec![0u8; len];
    file.read_exact_at(&mut line, start).map_err(io_err)?;
    let corrupt = |detail: String| AuditError::CorruptTail {
        path: path.to_path_buf(),
        offset: start,
        detail,
    };
    let record: Map<String, Value> =
        serde_json::from_slice(&line).map_err(|e| corrupt(format!("not a JSON object: {e}")))?;
    let seq = record
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| corrupt("no integer `seq`".into()))?;
    let hash = record
        .get("hash")
        .and_then(Value::as_str)
        .ok_or_else(|| corrupt("no `hash`".into()))?
        .to_string();
    let alg = record
        .get("alg")
        .and_then(Value::as_str)
        .ok_or_else(|| corrupt("no `alg`".into()))?;
    if HashMode::from_alg(alg) != Some(hasher.mode()) {
        return Err(AuditError::ModeMismatch {
            path: path.to_path_buf(),
            log_mode: alg.to_string(),
            ours: hasher.mode(),
        });
    }
    if hasher.hash_record(record) != hash {
        return Err(AuditError::TailMismatch {
            path: path.to_path_buf(),
            seq,
            mode: hasher.mode(),
        });
    }
    Ok(Tail::Last { seq, hash, start })
}

/// The two chain fields a check of a record's identity needs; serde skips
/// the rest of the line (and nested `seq`/`hash` keys inside arguments are
/// not top-level, so they never match).
#[derive(Deserialize)]
struct SeqHash {
    seq: u64,
    hash: String,
}

/// Whether the line `file[start..end]` is the record `seq`/`hash`: a whole
/// line (preceded by a `\n` or the start of the file, ending in `\n`)
/// whose top-level `seq` and `hash` are those.
pub(crate) fn line_is(file: &File, start: u64, end: u64, seq: u64, hash: &str) -> io::Result<bool> {
    let Some(len) = end.checked_sub(start).and_then(|n| usize::try_from(n).ok()) else {
        return Ok(false);
    };
    if !(2..=MAX_LINE_BYTES + 1).contains(&len) {
        return Ok(false);
    }
    if start > 0 {
        let mut before = [0u8; 1];
        file.read_exact_at(&mut before, start - 1)?;
        if before[0] != b'\n' {
            return Ok(false);
        }
    }
    let mut line = vec![0u8; len];
    match file.read_exact_at(&mut line, start) {
        Ok(()) => {}
        // The file is shorter than `end` now: not that line.
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(e) => return Err(e),
    }
    if line.pop() != Some(b'\n') {
        return Ok(false);
    }
    Ok(serde_json::from_slice::<SeqHash>(&line).is_ok_and(|r| r.seq == seq && r.hash == hash))
}

/// The `hash` of record `seq` in the first `size` bytes of `file`, looked
/// for from the end backwards (the records a head lags behind are the last
/// ones, so this reads little). `None`: no whole record with that `seq`
/// (cut off, or the lines before it are not records).
pub(crate) fn hash_at(file: &File, size: u64, seq: u64) -> io::Result<Option<String>> {
    let mut end = size;
    if end > 0 {
        // A line still being written by another process (no `\n` yet) is
        // not a record to compare with.
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, end - 1)?;
        if last[0] != b'\n' {
            let Some(start) = line_start(file, end)? else {
                return Ok(None);
            };
            end = start;
        }
    }
    let mut line = Vec::new();
    while end > 0 {
        // `end` is just past a line's `\n`; its line starts after the
        // previous `\n`.
        let Some(start) = line_start(file, end - 1)? else {
            return Ok(None);
        };
        let Ok(len) = usize::try_from(end - 1 - start) else {
            return Ok(None);
        };
        line.resize(len, 0);
        file.read_exact_at(&mut line, start)?;
        match serde_json::from_slice::<SeqHash>(&line) {
            Ok(record) if record.seq == seq => return Ok(Some(record.hash)),
            // Records before it have lower `seq`s: it would have been met.
            Ok(record) if record.seq < seq => return Ok(None),
            Ok(_) => {}
            Err(_) => return Ok(None),
        }
        end = start;
    }
    Ok(None)
}

/// Where the line ending just before `end` starts: after the last `\n`
/// before `end`, or 0. Looked for at most [`MAX_LINE_BYTES`] + 1 bytes
/// back, scanning backwards: `None` when the line is longer (no record
/// warden writes is; a 1 GB line is not read through).
fn line_start(file: &File, end: u64) -> io::Result<Option<u64>> {
    const CHUNK: u64 = 8192;
    let floor = end.saturating_sub(MAX_LINE_BYTES as u64 + 1);
    let mut at = end;
    let mut buf = vec![0u8; CHUNK as usize];
    while at > floor {
        let start = at.saturating_sub(CHUNK).max(floor);
        // The chunk is at most CHUNK bytes, so the cast cannot truncate.
        let chunk = &mut buf[..(at - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(pos) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(Some(start + pos as u64 + 1));
        }
        at = start;
    }
    Ok((floor == 0).then_some(0))
}
