//! One server's slot (configuration, admission, state, tools) and, while
//! connected, its [`Connection`]; the state shared with connection tasks.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::{Peer, RoleClient};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use warden_sandbox::SandboxSummary;

use super::stdio::{self, ExitInfo};
use super::{Admission, BACKOFF_MAX, BACKOFF_START, LONG_LIVED, LifecycleEvent, ServerState, Tool};
use crate::config::ServerConfig;

/// State shared with the per-connection tasks.
pub(super) struct Shared {
    pub changed: watch::Sender<u64>,
    /// Every server's notifications that are not about one request.
    pub notifications: tokio::sync::broadcast::Sender<Arc<super::Upstream>>,
    /// The log level warden's clients want (`logging/setLevel`), sent in
    /// every request's `_meta` to servers on protocol 2026-07-28, which
    /// log only for requests that ask.
    #[allow(deprecated)]
    pub log_level: Mutex<Option<rmcp::model::LoggingLevel>>,
    pub events: mpsc::UnboundedSender<LifecycleEvent>,
    pub shutting_down: AtomicBool,
    /// Cancelled by `shutdown`: abandons connects still in flight.
    pub shutdown: CancellationToken,
    /// Decides servers' elicitation and sampling requests (the host's).
    pub server_requests: Mutex<Option<Arc<dyn super::ServerRequests>>>,
    /// The one root servers are given (`roots/list`).
    pub roots: super::client::Roots,
    /// Where a slot whose connection died goes to be connected again
    /// (the manager's reviver).
    pub revive: mpsc::UnboundedSender<Arc<Slot>>,
}

impl Shared {
    pub fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// One server: its configuration, admission and state, and while connected
/// its connection.
pub(super) struct Slot {
    pub config: ServerConfig,
    pub admission: Admission,
    inner: Mutex<SlotInner>,
    /// Held while connecting, so one server never has two connects at once.
    pub connecting: tokio::sync::Mutex<()>,
}

pub(super) struct SlotInner {
    pub state: ServerState,
    pub protocol: Option<String>,
    pub error: Option<String>,
    pub sandbox: Option<SandboxSummary>,
    pub sandbox_unavailable: bool,
    /// The last connection attempt met an OAuth challenge.
    pub oauth_challenged: bool,
    pub tools: Vec<Tool>,
    pub capabilities: Option<rmcp::model::ServerCapabilities>,
    pub conn: Option<Arc<Connection>>,
    pub generation: u64,
    /// Consecutive failures (failed connects, deaths); reset by a good call.
    pub failures: u32,
    pub retry_at: Option<Instant>,
}

impl Slot {
    pub(super) fn new(config: ServerConfig, admission: Admission) -> Arc<Slot> {
        Arc::new(Slot {
            config,
            admission,
            inner: Mutex::new(SlotInner {
                state: admission.state(),
                protocol: None,
                error: None,
                sandbox: None,
                sandbox_unavailable: false,
                oauth_challenged: false,
                tools: Vec::new(),
                capabilities: None,
                conn: None,
                generation: 0,
                failures: 0,
                retry_at: None,
            }),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, SlotInner> {
        // Every critical section leaves the slot consistent, so a poisoned
        // lock (a panic elsewhere) still holds usable state.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn name(&self) -> &str {
        &self.config.name
    }

    /// Records a failure and when the next attempt may happen.
    pub(super) fn fail(inner: &mut SlotInner, error: String) {
        inner.state = ServerState::Error;
        inner.failures = inner.failures.saturating_add(1);
        let delay = backoff(inner.failures);
        inner.retry_at = Some(Instant::now() + delay);
        inner.error = Some(error);
    }

    /// The connection of `generation` ended on its own.
    pub(super) fn connection_lost(&self, generation: u64, reason: &str) -> bool {
        let mut inner = self.lock();
        if inner
            .conn
            .as_ref()
            .is_none_or(|c| c.generation != generation)
        {
            return false;
        }
        if inner
            .conn
            .as_ref()
            .is_some_and(|c| c.connected_at.elapsed() >= LONG_LIVED)
        {
            inner.failures = 0;
        }
        inner.conn = None;
        Slot::fail(
            &mut inner,
            format!("disconnected: {reason}; connecting again in the background"),
        );
        true
    }
}

/// The delay before reconnect attempt number `failures` (1-based).
pub(super) fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    BACKOFF_START.saturating_mul(1u32 << exp).min(BACKOFF_MAX)
}

/// One live client session with a server.
pub(super) struct Connection {
    pub generation: u64,
    pub connected_at: Instant,
    pub peer: Peer<RoleClient>,
    /// Routes this connection's progress and other notifications.
    pub router: Arc<super::notify::Router>,
    /// Cancels the rmcp service; its loop then closes the transport. rmcp
    /// also cancels it when the service ends on its own.
    pub ct: CancellationToken,
    /// Cancelled only when warden asks the connection to stop.
    pub stop_requested: CancellationToken,
    /// Set by the monitor once the connection has ended, with the reason.
    pub dead: watch::Receiver<Option<String>>,
    pub monitor: Mutex<Option<JoinHandle<()>>>,
    pub listener: Mutex<Option<JoinHandle<()>>>,
    /// Resource subscriptions as `subscriptions/listen` streams (protocol
    /// 2026-07-28), by URI.
    pub resource_listens:
        Mutex<std::collections::HashMap<String, (CancellationToken, JoinHandle<()>)>>,
    /// How many of warden's callers hold each resource subscription on
    /// this connection: the server is subscribed once, on the first, and
    /// unsubscribed after the last ([`super::Manager::send`]). Held across
    /// the upstream (un)subscribe, so a second subscriber never counts on
    /// a subscription that is still being made, or that failed.
    pub subscribers: tokio::sync::Mutex<std::collections::HashMap<String, usize>>,
    pub pid: Option<u32>,
    pub exit: Option<watch::Receiver<Option<ExitInfo>>>,
    pub stop_note: Option<stdio::SharedStopNote>,
    /// The last 401/403 of an http server (OAuth): what a failed request
    /// tells the user to do.
    pub challenges: super::oauth::Challenges,
}

impl Connection {
    pub(super) fn alive(&self) -> bool {
        self.dead.borrow().is_none() && !self.ct.is_cancelled()
    }

    /// Waits up to `wait` for the monitor to say why the connection ended.
    pub(super) async fn death_reason(&self, wait: Duration) -> Option<String> {
        let mut dead = self.dead.clone();
        tokio::time::timeout(wait, dead.wait_for(Option::is_some))
            .await
            .ok()?
            .ok()?
            .clone()
    }

    /// Graceful stop: cancel the service (which closes stdin, waits,
    /// SIGTERMs and kills the group), then wait for the process to be reaped.
    pub(super) async fn stop(&self, reason: &str) {
        if let Some(note) = &self.stop_note {
            stdio::note(note, |n| n.reason = Some(reason.to_string()));
        }
        self.stop_requested.cancel();
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(listener) = listener {
            let _ = tokio::time::timeout(Duration::from_millis(500), listener).await;
        }
        self.ct.cancel();
        let monitor = self
            .monitor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(monitor) = monitor
            && tokio::time::timeout(Duration::from_secs(15), monitor)
                .await
                .is_err()
            && let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok())
        {
            tracing::warn!(
                pid,
                "server did not stop in time; killing its process group"
            );
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if let Some(exit) = &self.exit {
            let mut exit = exit.clone();
            let _ =
                tokio::time::timeout(Duration::from_secs(3), exit.wait_for(Option::is_some)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(7), Duration::from_secs(30));
        assert_eq!(backoff(1000), Duration::from_secs(30));
    }
}
