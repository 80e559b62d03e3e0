//! The head file `FILE.head`: the last `seq` and `hash` of the log, so that
//! records cut off its end are noticed (CONTRACT §6, "truncation").
//!
//! # Format
//!
//! Two fixed-size slots of [`SLOT_SIZE`] bytes; each holds one canonical
//! JSON object, padded with spaces, ending in `\n` (so `cat FILE.head`
//! is readable):
//!
//! ```text
//! {"alg":"sha256","file":"warden-audit-head","gen":7,"hash":"…","mac":"…","seq":41,"v":1}
//! ```
//!
//! `alg` is the log's mode (`hmac-sha256`: the log is keyed), `gen` counts
//! updates, `mac` is SHA-256 — or HMAC-SHA-256 under the audit key when the
//! log is keyed — of the canonical JSON without `mac`. An update reads both
//! slots, takes the valid one with the highest `gen` as current, and
//! rewrites the *other* slot in place with `gen + 1` (one `pwrite`, no
//! rename, no fsync: a head may lag behind its log, never run ahead of
//! it). A write torn by a crash damages only the slot being written; the
//! other still holds the previous head, so the file is never without a
//! valid head.
//!
//! # When it is updated
//!
//! Only with records already in the file (and, where the mode syncs, synced
//! first): `every_record` after each record's `fdatasync`; `never` after
//! each write; `batch` after each `fdatasync` of the writer thread (at most
//! [`crate::BATCH_INTERVAL`] apart) and at close. Updates never move the
//! head backwards: several processes appending to one log (under its
//! `flock`) each move it to their own last record only if that is further,
//! under an exclusive `flock` of the head file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nix::fcntl::Flock;
use serde_json::{Map, Value, json};

use crate::chain::Hasher;
use crate::{AuditError, HashMode};
use warden_core::digest::canonical_json;

/// Bytes per slot; the file is two slots.
pub const SLOT_SIZE: usize = 512;
/// The `file` field of every slot.
const FILE_TAG: &str = "warden-audit-head";
const HEAD_VERSION: u64 = 1;

/// The head file's path for a log: `FILE.head`.
pub fn head_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_os_string();
    name.push(".head");
    PathBuf::from(name)
}

/// What a head file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// `seq` of the last record the log had (0: none yet).
    pub seq: u64,
    /// That record's `hash` (64 zeros when `seq` is 0).
    pub hash: String,
    /// The log's mode: `HmacSha256` means the log is keyed.
    pub mode: HashMode,
    /// Update counter.
    pub generation: u64,
}

impl Head {
    /// `SEQ:HASH`, as `warden audit head` prints it and `verify --head`
    /// takes it.
    pub fn spec(&self) -> String {
        format!("{}:{}", self.seq, self.hash)
    }
}

/// A head read from a file, and how far it could be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadRead {
    pub head: Head,
    /// The `mac` was checked: SHA-256 for an unkeyed head, the HMAC with
    /// the key for a keyed one. `false`: a keyed head read without the key.
    pub authenticated: bool,
}

/// Why a head file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("head file {path}: cannot read it: {detail}")]
    Unreadable { path: String, detail: String },
    #[error(
        "head file {path} holds no valid head ({detail}): it was altered or damaged, \
         or written under another key"
    )]
    Invalid { path: String, detail: String },
}

/// Reads `FILE.head` beside `log`. `Ok(None)`: there is none. An empty
/// head file is [`HeadError::Invalid`], like a zeroed one: warden writes a
/// slot as soon as it creates the file, so an empty one was emptied (or
/// its creation interrupted), and treating it as "no head" would let a
/// cut log pass. With `key`, a keyed head must carry the HMAC under that
/// key.
pub fn read_head(log: &Path, key: Option<&[u8]>) -> Result<Option<HeadRead>, HeadError> {
    let path = head_path(log);
    let shown = path.display().to_string();
    let unreadable = |e: io::Error| HeadError::Unreadable {
        path: shown.clone(),
        detail: e.to_string(),
    };
    // Non-blocking, so that a FIFO put in the head's place cannot hang
    // `verify`; it is refused below like any file that is not regular.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unreadable(e)),
    };
    if !file.metadata().map_err(unreadable)?.file_type().is_file() {
        return Err(HeadError::Invalid {
            path: shown,
            detail: "it is not a regular file".into(),
        });
    }
    let mut bytes = Vec::new();
    io::Read::read_to_end(
        &mut io::Read::take(&file, 2 * SLOT_SIZE as u64 + 1),
        &mut bytes,
    )
    .map_err(unreadable)?;
    if bytes.is_empty() {
        return Err(HeadError::Invalid {
            path: shown,
            detail: "the file is empty".into(),
        });
    }
    let keyed =
        key.map(|k| Hasher::new(Some(k)))
            .transpose()
            .map_err(|e| HeadError::Unreadable {
                path: shown.clone(),
                detail: e.to_string(),
            })?;
    read_slots(&bytes, keyed.as_ref())
        .map(|found| found.map(|(_, read)| read))
        .map_err(|detail| HeadError::Invalid {
            path: shown,
            detail,
        })
}

/// The current head of a head file's bytes and the slot holding it:
/// `Ok(None)` for an empty file (the writer's view: one it is about to
/// write; readers refuse an empty file first, see [`read_head`]).
fn read_slots(bytes: &[u8], keyed: Option<&Hasher>) -> Result<Option<(usize, HeadRead)>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let mut best: Option<(usize, HeadRead)> = None;
    let mut problems = Vec::new();
    for (i, slot) in bytes.chunks(SLOT_SIZE).take(2).enumerate() {
        if slot.iter().all(|&b| b == 0) {
            continue;
        }
        match parse_slot(slot, keyed) {
            Ok(read) => {
                if best
                    .as_ref()
                    .is_none_or(|(_, b)| read.head.generation > b.head.generation)
                {
                    best = Some((i, read));
                }
            }
            Err(problem) => problems.push(format!("slot {}: {problem}", i + 1)),
        }
    }
    match best {
        Some(found) => Ok(Some(found)),
        None if problems.is_empty() => Err("no slot is written".into()),
        None => Err(problems.join("; ")),
    }
}

fn parse_slot(slot: &[u8], keyed: Option<&Hasher>) -> Result<HeadRead, String> {
    if slot.len() != SLOT_SIZE || slot.last() != Some(&b'\n') {
        return Err("incomplete".into());
    }
    let text = std::str::from_utf8(slot).map_err(|_| "not UTF-8".to_string())?;
    let value: Value =
        serde_json::from_str(text.trim_end()).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut map) = value else {
        return Err("not a JSON object".into());
    };
    let field = |map: &Map<String, Value>, name: &str| -> Result<Value, String> {
        map.get(name).cloned().ok_or(format!("no `{name}`"))
    };
    if field(&map, "file")?.as_str() != Some(FILE_TAG) {
        return Err("not a warden head".into());
    }
    if field(&map, "v")?.as_u64() != Some(HEAD_VERSION) {
        return Err("unsupported version".into());
    }
    let mac = field(&map, "mac")?
        .as_str()
        .ok_or("`mac` is not a string")?
        .to_string();
    let seq = field(&map, "seq")?
        .as_u64()
        .ok_or("`seq` is not a number")?;
    let generation = field(&map, "gen")?
        .as_u64()
        .ok_or("`gen` is not a number")?;
    let hash = field(&map, "hash")?
        .as_str()
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or("`hash` is not 64 hex digits")?
        .to_string();
    let mode = field(&map, "alg")?
        .as_str()
        .and_then(HashMode::from_alg)
        .ok_or("unknown `alg`")?;
    map.remove("mac");
    let canonical = canonical_json(&Value::Object(map));
    let authenticated = match (mode, keyed) {
        (HashMode::Sha256, _) => {
            if Hasher::Plain.hash(canonical.as_bytes()) != mac {
                return Err("checksum mismatch".into());
            }
            true
        }
        (HashMode::HmacSha256, Some(hasher)) => {
            if hasher.hash(canonical.as_bytes()) != mac {
                return Err("HMAC mismatch under the given key".into());
            }
            true
        }
        (HashMode::HmacSha256, None) => false,
    };
    Ok(HeadRead {
        head: Head {
            seq,
            hash,
            mode,
            generation,
        },
        authenticated,
    })
}

/// One slot's bytes for `head`, authenticated with `hasher`.
fn slot_bytes(head: &Head, hasher: &Hasher) -> Vec<u8> {
    let mut value = json!({
        "alg": head.mode.as_str(),
        "file": FILE_TAG,
        "gen": head.generation,
        "hash": head.hash,
        "seq": head.seq,
        "v": HEAD_VERSION,
    });
    let mac = hasher.hash(canonical_json(&value).as_bytes());
    value["mac"] = Value::String(mac);
    let mut bytes = canonical_json(&value).into_bytes();
    // The longest slot (u64::MAX twice, 64-hex hash and mac) is ~230 bytes.
    bytes.resize(SLOT_SIZE - 1, b' ');
    bytes.push(b'\n');
    bytes
}

/// The writer's handle on `FILE.head`.
pub(crate) struct HeadWriter {
    path: PathBuf,
    file: File,
    /// Device and inode of `file`, checked against `path` before each
    /// update.
    identity: (u64, u64),
    hasher: Hasher,
    /// Serialises this process's updates; the `flock` serialises processes
    /// (a `flock` is shared by every thread using the same descriptor).
    lock: Mutex<Seen>,
}

/// What this handle last saw in the file, so that an update finding the
/// same bytes again (no other process moved the head since) skips parsing
/// and checking both slots.
#[derive(Default)]
struct Seen {
    /// The file's bytes after our last read or write; empty: unknown.
    bytes: Vec<u8>,
    /// The current head of those bytes and its slot.
    current: Option<(usize, Head)>,
    /// That head is one this handle wrote, or found in the log itself: a
    /// record its writer's chain extends. Any other (another process
    /// moved the head) is looked up in the log before the head moves past
    /// it.
    trusted: bool,
    /// A duplicate of the descriptor for the `flock`, kept between
    /// updates (a flock belongs to the open file description, which the
    /// duplicate shares).
    lock_fd: Option<File>,
}

impl HeadWriter {
    /// Opens the head file of `log`, creating it (mode 0600) when `create`;
    /// `Ok(None)`: it does not exist and `create` is false. A head path
    /// that is not a regular file is refused (a head in `/dev/null` would
    /// read back as "no head").
    pub(crate) fn open(
        log: &Path,
        hasher: Hasher,
        create: bool,
    ) -> Result<Option<HeadWriter>, AuditError> {
        let path = head_path(log);
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY);
        // Created only where its path says, never through a link.
        let opened = if create {
            crate::create::open_or_create(&path, &options)
        } else {
            options.open(&path)
        };
        let file = match opened {
            Ok(file) => file,
            Err(e) if !create && e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(AuditError::Io {
                    path,
                    action: "open the head file",
                    source,
                });
            }
        };
        let meta = file.metadata().map_err(|source| AuditError::Io {
            path: path.clone(),
            action: "stat the head file",
            source,
        })?;
        if !meta.file_type().is_file() {
            return Err(AuditError::NotRegular {
                path,
                kind: crate::log::file_kind(&meta),
            });
        }
        use std::os::unix::fs::MetadataExt;
        Ok(Some(HeadWriter {
            identity: (meta.dev(), meta.ino()),
            path,
            file,
            hasher,
            lock: Mutex::new(Seen::default()),
        }))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn io_err(&self, action: &'static str, source: io::Error) -> AuditError {
        AuditError::Io {
            path: self.path.clone(),
            action,
            source,
        }
    }

    /// The current head, under the caller's locks: parsed and checked
    /// unless the file holds what `seen` last saw.
    fn current(&self, seen: &mut Seen) -> Result<Option<(usize, Head)>, AuditError> {
        let mut bytes = [0u8; 2 * SLOT_SIZE];
        let mut filled = 0;
        while filled < bytes.len() {
            match self.file.read_at(&mut bytes[filled..], filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_err("read the head file", e)),
            }
        }
        let bytes = &bytes[..filled];
        if !seen.bytes.is_empty() && seen.bytes == bytes {
            return Ok(seen.current.clone());
        }
        let keyed = (self.hasher.mode() == HashMode::HmacSha256).then_some(&self.hasher);
        // Changed by someone else: whatever it names is checked afresh.
        seen.trusted = false;
        match read_slots(bytes, keyed) {
            Ok(found) => {
                let current = found.map(|(slot, read)| (slot, read.head));
                seen.bytes.clear();
                seen.bytes.extend_from_slice(bytes);
                seen.current.clone_from(&current);
                Ok(current)
            }
            Err(detail) => {
                seen.bytes.clear();
                Err(AuditError::HeadInvalid {
                    path: self.path.clone(),
                    detail,
                })
            }
        }
    }

    /// Reads the current head (for `open`'s checks).
    pub(crate) fn read(&self) -> Result<Option<Head>, AuditError> {
        let mut seen = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let flock = self.flock(&mut seen)?;
        let current = self.current(&mut seen);
        self.unlock(&mut seen, flock);
        Ok(current?.map(|(_, head)| head))
    }

    /// Moves the head to `seq`/`hash` (a record of `log`'s chain) unless it
    /// is already there or further (another process's later record).
    ///
    /// The chain must extend the head, not replace it: the head is not
    /// moved past a `seq` whose record in the log is no longer the one the
    /// head names ([`AuditError::HeadMismatch`]). Else a log cut and
    /// written on from the cut would, once past the old head, get a head
    /// that vouches for it, and the cut records would be gone without a
    /// trace. `log_hash_at(seq)` gives the `hash` of record `seq` in the
    /// log (`None`: not there); it is asked only about a head this handle
    /// did not write or check itself.
    pub(crate) fn advance(
        &self,
        seq: u64,
        hash: &str,
        log_hash_at: impl FnOnce(u64) -> Result<Option<String>, AuditError>,
    ) -> Result<(), AuditError> {
        let mut seen = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let flock = self.flock(&mut seen)?;
        let result = self
            .check_path()
            .and_then(|()| self.advance_locked(&mut seen, seq, hash, log_hash_at));
        self.unlock(&mut seen, flock);
        result
    }

    /// The head's path must still name the file this writer updates:
    /// writes through the descriptor to a head renamed or removed, or
    /// whose path now is a directory or a link to `/dev/full`, succeed,
    /// and `verify` would find no head (or an old copy put back) where
    /// it looks.
    fn check_path(&self) -> Result<(), AuditError> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&self.path) {
            Ok(now) if (now.dev(), now.ino()) == self.identity => Ok(()),
            Ok(_) => Err(AuditError::HeadMoved {
                path: self.path.clone(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(AuditError::HeadMoved {
                path: self.path.clone(),
            }),
            Err(e) => Err(self.io_err("stat the head file's path", e)),
        }
    }

    fn advance_locked(
        &self,
        seen: &mut Seen,
        seq: u64,
        hash: &str,
        log_hash_at: impl FnOnce(u64) -> Result<Option<String>, AuditError>,
    ) -> Result<(), AuditError> {
        let mismatch = |at| AuditError::HeadMismatch {
            path: log_of_head(&self.path),
            seq: at,
        };
        let (slot, generation) = match self.current(seen)? {
            Some((_, head)) if head.seq > seq => return Ok(()),
            Some((_, head)) if head.seq == seq && head.hash == hash => {
                seen.trusted = true;
                return Ok(());
            }
            Some((_, head)) if head.seq == seq => return Err(mismatch(head.seq)),
            Some((index, head)) => {
                let on_our_chain = seen.trusted
                    || if head.seq == 0 {
                        head.hash == crate::ZERO_HASH
                    } else {
                        log_hash_at(head.seq)?.as_deref() == Some(head.hash.as_str())
                    };
                if !on_our_chain {
                    return Err(mismatch(head.seq));
                }
                (usize::from(index == 0), head.generation + 1)
            }
            None => (0, 1),
        };
        let head = Head {
            seq,
            hash: hash.to_string(),
            mode: self.hasher.mode(),
            generation,
        };
        let bytes = slot_bytes(&head, &self.hasher);
        let offset = slot * SLOT_SIZE;
        if let Err(e) = self.file.write_all_at(&bytes, offset as u64) {
            seen.bytes.clear();
            return Err(self.io_err("write the head file", e));
        }
        // The file now holds what it held, with this slot rewritten.
        if seen.bytes.len() < offset + SLOT_SIZE {
            seen.bytes.resize(offset + SLOT_SIZE, 0);
        }
        seen.bytes[offset..offset + SLOT_SIZE].copy_from_slice(&bytes);
        seen.current = Some((slot, head));
        seen.trusted = true;
        Ok(())
    }

    /// Replaces whatever the head file holds (nothing valid: `accept_head`
    /// checked) by a head at `seq`/`hash`: slot 1 written, slot 2 zeroed.
    pub(crate) fn reset(&self, seq: u64, hash: &str) -> Result<(), AuditError> {
        let mut seen = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let flock = self.flock(&mut seen)?;
        let head = Head {
            seq,
            hash: hash.to_string(),
            mode: self.hasher.mode(),
            generation: 1,
        };
        let mut bytes = slot_bytes(&head, &self.hasher);
        bytes.resize(2 * SLOT_SIZE, 0);
        let result = self
            .file
            .write_all_at(&bytes, 0)
            .and_then(|()| self.file.set_len(bytes.len() as u64))
            .and_then(|()| self.file.sync_data())
            .map_err(|e| self.io_err("write the head file", e));
        seen.bytes.clear();
        self.unlock(&mut seen, flock);
        result
    }

    fn flock(&self, seen: &mut Seen) -> Result<Flock<File>, AuditError> {
        let dup = match seen.lock_fd.take() {
            Some(dup) => dup,
            None => self
                .file
                .try_clone()
                .map_err(|e| self.io_err("lock the head file", e))?,
        };
        match crate::flock::lock_within(dup, true, crate::flock::LOCK_WAIT) {
            Ok(held) => Ok(held),
            Err((back, e)) => {
                seen.lock_fd = Some(back);
                Err(self.io_err("lock the head file", e))
            }
        }
    }

    /// Unlocks, keeping the duplicate descriptor for the next update (a
    /// failed unlock drops it, which unlocks again and closes it).
    fn unlock(&self, seen: &mut Seen, flock: Flock<File>) {
        seen.lock_fd = flock.unlock().ok();
    }
}

/// The log a head file belongs to (`FILE.head` → `FILE`), for errors.
fn log_of_head(head: &Path) -> PathBuf {
    match head.as_os_str().as_bytes().strip_suffix(b".head") {
        Some(log) => PathBuf::from(std::ffi::OsStr::from_bytes(log)),
        None => head.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(seq: u64, generation: u64, mode: HashMode) -> Head {
        Head {
            seq,
            hash: format!("{seq:064x}"),
            mode,
            generation,
        }
    }

    #[test]
    fn a_slot_round_trips_and_the_newest_valid_slot_wins() {
        let plain = Hasher::Plain;
        let a = slot_bytes(&head(3, 1, HashMode::Sha256), &plain);
        let b = slot_bytes(&head(9, 2, HashMode::Sha256), &plain);
        assert_eq!(a.len(), SLOT_SIZE);
        let both = [a.clone(), b.clone()].concat();
        let (index, read) = read_slots(&both, None).unwrap().unwrap();
        assert_eq!((index, read.head.seq), (1, 9));
        assert!(read.authenticated);
        // A torn second slot leaves the first one.
        let mut torn = both.clone();
        torn[SLOT_SIZE + 40] = b'#';
        assert_eq!(read_slots(&torn, None).unwrap().unwrap().1.head.seq, 3);
        // Both damaged: an error, never "no head".
        let mut bad = torn.clone();
        bad[20] = b'#';
        assert!(read_slots(&bad, None).is_err());
        // The longest possible slot still fits.
        let max = Head {
            seq: u64::MAX,
            hash: "f".repeat(64),
            mode: HashMode::HmacSha256,
            generation: u64::MAX,
        };
        let keyed = Hasher::new(Some(b"k")).unwrap();
        let slot = slot_bytes(&max, &keyed);
        assert_eq!(slot.len(), SLOT_SIZE);
        assert_eq!(parse_slot(&slot, Some(&keyed)).unwrap().head, max);
    }

    #[test]
    fn a_keyed_head_needs_its_key_and_an_edit_is_caught() {
        let keyed = Hasher::new(Some(b"key one")).unwrap();
        let other = Hasher::new(Some(b"key two")).unwrap();
        let slot = slot_bytes(&head(5, 1, HashMode::HmacSha256), &keyed);
        assert!(parse_slot(&slot, Some(&keyed)).unwrap().authenticated);
        assert!(parse_slot(&slot, Some(&other)).is_err());
        assert!(!parse_slot(&slot, None).unwrap().authenticated);
        // Re-labelled as an unkeyed head: its `mac` is no SHA-256 of it.
        let text = String::from_utf8(slot)
            .unwrap()
            .replace("hmac-sha256", "sha256");
        let mut relabelled = text.into_bytes();
        relabelled.resize(SLOT_SIZE - 1, b' ');
        relabelled.push(b'\n');
        assert!(parse_slot(&relabelled, None).is_err());
    }
}
