//! Decisions off the caller's task, with a deadline.
//!
//! (A decision bounded small before it starts is made in place instead:
//! [`super::inline`]. Everything below is about the others.)
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
//! The pool holds as many threads as the machine has cores (at least
//! two); beyond that it grows only for a decision that has run longer
//! than [`STUCK`] (a runaway), up to [`MAX_THREADS`], so one runaway
//! never delays another caller for more than [`STUCK`], while decisions
//! that merely queue behind a busy CPU do not each get a thread (64
//! concurrent callers grew it to 64 threads, each with its own malloc
//! arena and pattern caches: 77 MB instead of 25). A caller whose
//! decision has not finished re-checks every [`STUCK`]. Idle threads
//! beyond the first two exit after a minute. Static caps (arguments,
//! schemas, builtins) keep runaway work exceptional; the deadline is the
//! backstop.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

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
/// How long a decision runs before the pool treats it as a runaway and
/// starts another thread for the decisions queued behind it.
pub const STUCK: Duration = Duration::from_millis(20);

/// Threads the pool starts without a runaway: one per core, at least two.
fn base_threads() -> usize {
    static BASE: OnceLock<usize> = OnceLock::new();
    *BASE.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(MIN_THREADS, usize::from)
            .clamp(MIN_THREADS, MAX_THREADS)
    })
}

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Pool {
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
    threads: AtomicUsize,
    idle: AtomicUsize,
    /// When each running job started, by job number.
    running: Mutex<BTreeMap<u64, Instant>>,
    jobs: AtomicU64,
}

fn pool() -> &'static Arc<Pool> {
    static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        Arc::new(Pool {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            threads: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            running: Mutex::new(BTreeMap::new()),
            jobs: AtomicU64::new(0),
        })
    })
}

impl Pool {
    fn submit(self: &Arc<Self>, job: Job) -> Result<(), String> {
        {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.push_back(job);
        }
        if self.may_grow()
            && (self.threads.load(Ordering::Acquire) < base_threads() || self.stuck())
        {
            self.spawn()?;
        }
        self.ready.notify_one();
        Ok(())
    }

    /// No thread is idle and the pool is below [`MAX_THREADS`]: a queued
    /// job would wait unless a thread is started.
    fn may_grow(&self) -> bool {
        self.idle.load(Ordering::Acquire) == 0 && self.threads.load(Ordering::Acquire) < MAX_THREADS
    }

    /// Whether a running decision has run longer than [`STUCK`].
    fn stuck(&self) -> bool {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        // At most MAX_THREADS entries.
        running.values().any(|since| since.elapsed() >= STUCK)
    }

    /// Called by a caller still waiting after [`STUCK`]: starts a thread
    /// when jobs are queued, none is idle and a running one is a runaway.
    fn nudge(self: &Arc<Self>) {
        let queued = !self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty();
        if queued && self.may_grow() && self.stuck() && self.spawn().is_ok() {
            self.ready.notify_one();
        }
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
                    let n = self.jobs.fetch_add(1, Ordering::Relaxed);
                    self.running
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(n, Instant::now());
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    self.running
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&n);
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
    /// is abandoned. Blocks the calling task only for a decision bounded
    /// small before it starts (`pipeline::inline`: about 10 ms at most);
    /// cancel-safe (dropping the future abandons the decision too).
    pub async fn decide_within(self: &Arc<Self>, facts: Arc<CallFacts>) -> Decision {
        // A decision that cannot run away is made here, without the hop.
        if let Some(decision) = self.decide_inline(&facts) {
            return decision;
        }
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
            return self.failed(Stage::Trust, format!("{e} (fail closed)"));
        }
        // Waiting, the caller nudges the pool every STUCK: a decision
        // queued behind a runaway gets a thread of its own.
        let wait = async move {
            let mut rx = rx;
            loop {
                match tokio::time::timeout(STUCK, &mut rx).await {
                    Ok(done) => break done,
                    Err(_) => pool().nudge(),
                }
            }
        };
        match tokio::time::timeout(self.deadline, wait).await {
            Ok(Ok(decision)) => decision,
            Ok(Err(_)) => self.failed(
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
    pub(super) fn failed(&self, stage: Stage, reason: String) -> Decision {
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
