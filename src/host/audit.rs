//! The session's side of the audit log: write-ahead and fail-closed
//! (CONTRACT §6). [`SessionAudit::write_ahead`] is what a call must pass
//! before it is sent; [`SessionAudit::record`] writes everything else. With
//! `audit.on_failure: "continue"` a failed write-ahead lets the call go on,
//! loudly; in either mode, records that could not be written are counted
//! and an `audit_gap` record says so as soon as the log takes writes again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use warden_audit::{AuditError, AuditLog, Event, FsyncMode, HashMode, OnFailure};

/// The session's audit log, and what to do when it fails.
pub(crate) struct SessionAudit {
    log: Option<Arc<AuditLog>>,
    on_failure: OnFailure,
    /// Why there is no log although one was configured (`continue` only:
    /// a fail-closed session does not start without its log).
    unavailable: Option<String>,
    gap: Mutex<Option<Gap>>,
    /// Records lost in this session, reported by an `audit_gap` or not,
    /// and the first error: what a run's verdict must not hide.
    lost_in_session: Mutex<(u64, Option<String>)>,
    /// The [`crate::scrub::generation`] whose secrets the log has: a value
    /// registered later (an OAuth token refreshed during the session) is
    /// handed to the log before its next record.
    secrets_seen: AtomicU64,
}

/// No generation: the first record hands the log every secret registered
/// so far (those registered between the log's opening and the session's).
const NOT_YET: u64 = u64::MAX;

/// Records lost since the log last took a write.
struct Gap {
    lost: u64,
    since: String,
    error: String,
}

/// The pending record of a call could not be written, and the session
/// fails closed: the call must not be sent.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the audit log could not record the call, so it was not sent: {0}")]
pub struct AuditRefusal(pub String);

/// What `mcp status` shows about the audit log.
#[derive(Debug, Clone, Serialize)]
pub struct AuditStatus {
    /// `None`: no log configured (nor `--audit`).
    pub path: Option<std::path::PathBuf>,
    pub head: Option<std::path::PathBuf>,
    pub fsync: Option<FsyncMode>,
    /// `sha256` or `hmac-sha256`.
    pub mode: Option<&'static str>,
    /// `fail_closed`, or `continue` (calls go on unaudited when the log
    /// fails).
    pub on_failure: OnFailure,
    /// `ok`, `off` (no log), `failing` (records are being lost) or
    /// `unavailable` (`continue` and the log could not be opened).
    pub state: &'static str,
    /// Records lost so far, not yet reported by an `audit_gap` record.
    pub lost: u64,
    pub error: Option<String>,
}

impl SessionAudit {
    pub(crate) fn new(log: Option<AuditLog>, on_failure: OnFailure) -> SessionAudit {
        SessionAudit {
            log: log.map(Arc::new),
            on_failure,
            unavailable: None,
            gap: Mutex::new(None),
            lost_in_session: Mutex::new((0, None)),
            secrets_seen: AtomicU64::new(NOT_YET),
        }
    }

    /// `continue` and the configured log could not be opened: the session
    /// runs unaudited.
    pub(crate) fn unavailable(error: String) -> SessionAudit {
        SessionAudit {
            log: None,
            on_failure: OnFailure::Continue,
            gap: Mutex::new(Some(Gap {
                lost: 0,
                since: now(),
                error: error.clone(),
            })),
            unavailable: Some(error),
            lost_in_session: Mutex::new((0, None)),
            secrets_seen: AtomicU64::new(NOT_YET),
        }
    }

    pub(crate) fn log(&self) -> Option<&Arc<AuditLog>> {
        self.log.as_ref()
    }

    /// Writes `event` so that it is in the file before the caller goes on
    /// (`AuditLog::write_ahead`). `Err`: it is not, and the session fails
    /// closed. With `on_failure: continue` a failure is reported and
    /// counted, and the caller goes on.
    pub(crate) fn write_ahead(&self, event: Event) -> Result<(), AuditRefusal> {
        let Some(log) = &self.log else {
            if self.unavailable.is_some() {
                self.lost(None);
            }
            return Ok(());
        };
        if self.on_failure == OnFailure::FailClosed
            && let Some(why) = log.head_failure()
        {
            // The record could be written, but not vouched for: once the
            // head falls behind, a cut of the log's end after it passes
            // `verify`. Like a record that cannot be written, the call is
            // not sent (CONTRACT §6, "truncation").
            let why = format!("the audit head file could not be kept current: {why}");
            self.lost_because(Some(why.clone()));
            return Err(AuditRefusal(why));
        }
        self.report_gap(log);
        self.learn_secrets(log);
        match blocking(log, || log.write_ahead(event)) {
            Ok(()) => Ok(()),
            Err(error) => {
                self.lost(Some(&error));
                match self.on_failure {
                    OnFailure::FailClosed => Err(AuditRefusal(error.to_string())),
                    OnFailure::Continue => {
                        tracing::error!(%error, "the audit log could not record a call; sending it anyway (audit.on_failure: continue)");
                        Ok(())
                    }
                }
            }
        }
    }

    /// Writes the result record of a sent request. Failing closed it is
    /// in the file when this returns (`AuditLog::write_ahead`: in `batch`
    /// one `write(2)` on this thread, synced with the batch), so a result
    /// is passed on only once it is recorded; `Err`: it is not, and the
    /// caller gets an error instead of the result. With `on_failure:
    /// continue` it is queued like any record ([`SessionAudit::record`]).
    pub(crate) fn write_result(&self, event: Event) -> Result<(), AuditRefusal> {
        if self.on_failure != OnFailure::FailClosed {
            self.record(event);
            return Ok(());
        }
        let Some(log) = &self.log else {
            return Ok(());
        };
        self.report_gap(log);
        self.learn_secrets(log);
        blocking(log, || log.write_ahead(event)).map_err(|error| {
            tracing::error!(%error, "the audit log could not record a result; it is withheld");
            self.lost(Some(&error));
            AuditRefusal(error.to_string())
        })
    }

    /// Writes `event` (queued in `batch`). A failure loses the record: it
    /// is reported and counted, never silent.
    pub(crate) fn record(&self, event: Event) {
        let Some(log) = &self.log else {
            if self.unavailable.is_some() {
                self.lost(None);
            }
            return;
        };
        self.report_gap(log);
        self.learn_secrets(log);
        if let Err(error) = blocking(log, || log.append(event)) {
            tracing::error!(%error, "writing the audit log failed; the record is lost");
            self.lost(Some(&error));
        }
    }

    /// Hands the log the secrets registered since it last looked (the
    /// configured ones it was opened with; one atomic load when nothing
    /// changed).
    fn learn_secrets(&self, log: &AuditLog) {
        let now = crate::scrub::generation();
        if self.secrets_seen.swap(now, Ordering::AcqRel) != now {
            log.add_secrets(&crate::scrub::registered());
        }
    }

    /// Records lost in this session when it fails closed (`None`: none,
    /// or `on_failure: continue`, where running unaudited was chosen):
    /// how many, and the first error.
    pub(crate) fn lost_when_failing_closed(&self) -> Option<(u64, String)> {
        if self.on_failure != OnFailure::FailClosed {
            return None;
        }
        let lost = lock(&self.lost_in_session);
        if lost.0 > 0 {
            return Some((lost.0, lost.1.clone().unwrap_or_default()));
        }
        // No call came after the head fell behind, but the records since
        // could still be cut unnoticed: not a success either.
        let why = self.log.as_ref()?.head_failure()?;
        Some((
            0,
            format!("the audit head file could not be kept current: {why}"),
        ))
    }

    fn lost(&self, error: Option<&AuditError>) {
        self.lost_because(error.map(ToString::to_string));
    }

    fn lost_because(&self, error: Option<String>) {
        {
            let mut total = lock(&self.lost_in_session);
            total.0 += 1;
            if total.1.is_none() {
                total.1.clone_from(&error);
            }
        }
        let mut gap = lock(&self.gap);
        let gap = gap.get_or_insert_with(|| Gap {
            lost: 0,
            since: now(),
            error: error.unwrap_or_else(|| self.unavailable.clone().unwrap_or_default()),
        });
        gap.lost += 1;
    }

    /// The log takes writes (as far as we know): first say what was lost.
    fn report_gap(&self, log: &AuditLog) {
        let mut slot = lock(&self.gap);
        let Some(gap) = slot.as_ref() else {
            return;
        };
        let event = Event::AuditGap {
            lost: gap.lost,
            since: gap.since.clone(),
            error: gap.error.clone(),
        };
        if blocking(log, || log.append(event)).is_ok() {
            tracing::warn!(
                lost = gap.lost,
                "the audit log takes writes again; an audit_gap record says what was lost"
            );
            *slot = None;
        }
    }

    pub(crate) fn status(&self) -> AuditStatus {
        let lost = lock(&self.gap).as_ref().map_or(0, |g| g.lost);
        let gap_error = lock(&self.gap).as_ref().map(|g| g.error.clone());
        match &self.log {
            Some(log) => AuditStatus {
                path: Some(log.path().to_path_buf()),
                head: log.head_path().map(std::path::Path::to_path_buf),
                fsync: Some(log.fsync()),
                mode: Some(match log.mode() {
                    HashMode::Sha256 => "sha256",
                    HashMode::HmacSha256 => "hmac-sha256",
                }),
                on_failure: self.on_failure,
                state: if gap_error.is_some() { "failing" } else { "ok" },
                lost,
                error: gap_error,
            },
            None => AuditStatus {
                path: None,
                head: None,
                fsync: None,
                mode: None,
                on_failure: self.on_failure,
                state: if self.unavailable.is_some() {
                    "unavailable"
                } else {
                    "off"
                },
                lost,
                error: self.unavailable.clone(),
            },
        }
    }
}

/// Runs an audit write off the async workers' backs when it syncs to disk
/// (`fsync: every_record`: an `fdatasync` per record), where the runtime
/// allows it. In `batch` and `never` a write is one `write(2)` to the page
/// cache or a push onto the writer's queue, and runs in place:
/// `block_in_place` is no cheap marker, it hands the worker's queue to
/// another thread each time (two thread wake-ups per call, for a write
/// that takes microseconds).
fn blocking<T>(log: &AuditLog, f: impl FnOnce() -> T) -> T {
    let syncs = log.fsync() == FsyncMode::EveryRecord;
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if syncs && multi_thread {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
