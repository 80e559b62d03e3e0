//! Decisions off the caller's task, with a deadline.
//!
//! Schema validation (jsonschema has no step limit) and Rego (regorus
//! checks its timer only between steps) can run long inside one call. So
//! [`Pipeline::decide_within`] runs the whole decision on a thread of a
//! small pool owned by this module, never on the caller's (async) task,
//! and waits at most the deadline: past it, the caller gets a `deny`
//! naming the stage that had not finished, and the work is *abandoned*
//! (Rust cannot stop a thread; the runaway thread finishes or dies with
//! the process, and does not hold up shutdown: the pool's threads are
//! plain detached threads, not a runtime's blocking pool, which a runtime
//! waits for when it shuts down).
//!
//! The pool grows when every thread is busy (so one runaway decision never
//! delays another caller) up to [`MAX_THREADS`], and idle threads beyond
//! the first two exit after a minute. Static caps (arguments, schemas,
//! builtins) keep runaway work exceptional; the deadline is the backstop.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use warden_core::{Effect, Stage};

use super::Pipeline;
use crate::decision::{Decision, StageVerdict};
use crate::facts::CallFacts;

/// Threads kept even when idle.
const MIN_THREADS: usize = 2;
/// Most threads at once; beyond it a decision waits (and may hit its
/// deadline, which denies).
pub const MAX_THREADS: usize = 64;
const IDLE_EXIT: Duration = Duration::from_secs(60);

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Pool {
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
    threads: AtomicUsize,
    idle: AtomicUsize,
}

fn pool() -> &'static Arc<Pool> {
    static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        Arc::new(Pool {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            threads: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
        })
    })
}

impl Pool {
    fn submit(self: &Arc<Self>, job: Job) -> Result<(), String> {
        {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.push_back(job);
        }
        if self.idle.load(Ordering::Acquire) == 0
            && self.threads.load(Ordering::Acquire) < MAX_THREADS
        {
            self.spawn()?;
        }
        self.ready.notify_one();
        Ok(())
    }

    fn spawn(self: &Arc<Self>) -> Result<(), String> {
        let n = self.threads.fetch_add(1, Ordering::AcqRel);
        let pool = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("warden-decide-{n}"))
            .spawn(move || pool.work());
        if let Err(e) = spawned {
            self.threads.fetch_sub(1, Ordering::AcqRel);
            return Err(format!("cannot start an evaluation thread: {e}"));
        }
        Ok(())
    }

    fn work(self: Arc<Self>) {
        loop {
            let job = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(job) = queue.pop_front() {
                        break Some(job);
                    }
                    self.idle.fetch_add(1, Ordering::AcqRel);
                    let (q, timeout) = self
                        .ready
                        .wait_timeout(queue, IDLE_EXIT)
                        .unwrap_or_else(|e| e.into_inner());
                    queue = q;
                    self.idle.fetch_sub(1, Ordering::AcqRel);
                    if timeout.timed_out()
                        && queue.is_empty()
                        && self.threads.load(Ordering::Acquire) > MIN_THREADS
                    {
                        break None;
                    }
                }
            };
            match job {
                // A panic inside a decision is that decision's deny (the
                // caller sees its reply channel closed); the thread lives on.
                Some(job) => {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
                None => break,
            }
        }
        self.threads.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The stage a decision is in, for the deadline's reason.
#[derive(Debug, Default)]
pub(crate) struct Progress(AtomicU8);

impl Progress {
    pub(crate) fn enter(&self, stage: Stage) {
        self.0.store(stage as u8, Ordering::Release);
    }

    fn stage(&self) -> Stage {
        match self.0.load(Ordering::Acquire) {
            0 => Stage::Trust,
            1 => Stage::Schema,
            2 => Stage::Pinning,
            3 => Stage::Annotations,
            4 => Stage::Rules,
            _ => Stage::Policy,
        }
    }
}

/// How long a decision may take before it is a deny.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(3);

impl Pipeline {
    /// [`Pipeline::decide`] on an evaluation thread, waiting at most the
    /// pipeline's deadline (`PipelineConfig::deadline`): at the deadline
    /// the caller gets a `deny` naming the unfinished stage, and the work
    /// is abandoned. Never blocks the calling task; cancel-safe (dropping
    /// the future abandons the decision too).
    pub async fn decide_within(self: &Arc<Self>, facts: Arc<CallFacts>) -> Decision {
        let (tx, rx) = futures::channel::oneshot::channel();
        let progress = Arc::new(Progress::default());
        let job: Job = {
            let pipeline = Arc::clone(self);
            let facts = Arc::clone(&facts);
            let progress = Arc::clone(&progress);
            Box::new(move || {
                let decision = pipeline.decide_tracked(&facts, &progress);
                let _ = tx.send(decision);
            })
        };
        if let Err(e) = pool().submit(job) {
            return self.failed(&facts, Stage::Trust, format!("{e} (fail closed)"));
        }
        match tokio::time::timeout(self.deadline, rx).await {
            Ok(Ok(decision)) => decision,
            Ok(Err(_)) => self.failed(
                &facts,
                progress.stage(),
                "the decision failed inside warden (fail closed)".into(),
            ),
            Err(_) => {
                let stage = progress.stage();
                tracing::warn!(
                    tool = %facts.tool.qualified,
                    %stage,
                    deadline_ms = self.deadline.as_millis() as u64,
                    "decision abandoned at its deadline"
                );
                self.failed(
                    &facts,
                    stage,
                    format!(
                        "the {stage} stage did not finish within {:.1} s, so the call is denied \
                         (the evaluation was abandoned)",
                        self.deadline.as_secs_f64()
                    ),
                )
            }
        }
    }

    /// A deny from `stage` with `reason`, every other stage unevaluated.
    fn failed(&self, facts: &CallFacts, stage: Stage, reason: String) -> Decision {
        let _ = facts;
        let stages = [
            Stage::Trust,
            Stage::Schema,
            Stage::Pinning,
            Stage::Annotations,
            Stage::Rules,
            Stage::Policy,
        ]
        .into_iter()
        .filter(|s| *s != Stage::Policy || self.has_policy())
        .map(|s| {
            if s == stage {
                StageVerdict::new(s, Some(Effect::Deny), vec![reason.clone()])
            } else {
                StageVerdict::new(s, None, vec!["not evaluated".into()])
            }
        })
        .collect();
        Decision {
            effect: Effect::Deny,
            stage,
            reasons: vec![reason],
            stages,
            policy_sha256: self.policy_sha256().map(str::to_string),
        }
    }
}

/// Threads the pool holds now (for tests and diagnostics).
pub fn pool_threads() -> usize {
    pool().threads.load(Ordering::Acquire)
}
