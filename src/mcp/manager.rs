//! The [`Manager`]: every configured server, its admission, connecting,
//! reconnecting and stopping. The call path is in `call`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use warden_sandbox::LaunchContext;

use super::slot::{Connection, Shared, Slot};
use super::tasks::{self, Monitor};
use super::{Admission, CallError, LifecycleEvent, ServerState, ServerStatus, connect};
use crate::config::ServerConfig;

/// How many upstream notifications a slow receiver may lag behind before
/// it misses some.
const NOTIFICATION_BACKLOG: usize = 1024;

/// All configured servers and their connections. `Send + Sync`; share it
/// behind the `Arc` that [`Manager::new`] returns.
pub struct Manager {
    launch: LaunchContext,
    /// Configured servers, plus those added at run time ([`Manager::add`]).
    /// Never locked across an `.await`: readers clone the `Arc`s out.
    slots: Mutex<Vec<Arc<Slot>>>,
    pub(super) shared: Arc<Shared>,
    events_rx: Mutex<Option<mpsc::UnboundedReceiver<LifecycleEvent>>>,
}

impl Manager {
    pub fn new(servers: Vec<(ServerConfig, Admission)>, launch: LaunchContext) -> Arc<Manager> {
        let (changed, _) = watch::channel(0);
        let (events, events_rx) = mpsc::unbounded_channel();
        let (revive, revive_rx) = mpsc::unbounded_channel();
        let slots = servers
            .into_iter()
            .map(|(config, admission)| Slot::new(config, admission))
            .collect();
        let roots = Arc::new(std::sync::RwLock::new(launch.workspace.clone()));
        let manager = Arc::new(Manager {
            launch,
            slots: Mutex::new(slots),
            shared: Arc::new(Shared {
                changed,
                notifications: tokio::sync::broadcast::channel(NOTIFICATION_BACKLOG).0,
                log_level: Mutex::new(None),
                events,
                shutting_down: AtomicBool::new(false),
                shutdown: CancellationToken::new(),
                server_requests: Mutex::new(None),
                roots,
                revive,
            }),
            events_rx: Mutex::new(Some(events_rx)),
        });
        // Outside a runtime (a synchronous test) nothing is revived.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(revive_dead(Arc::downgrade(&manager), revive_rx));
        }
        manager
    }

    /// Installs what decides servers' `elicitation/create` and
    /// `sampling/createMessage` (connections made from now on use it;
    /// without it both are declined/refused).
    pub fn set_server_requests(&self, handler: Arc<dyn super::ServerRequests>) {
        *self
            .shared
            .server_requests
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(handler);
    }

    /// The folder servers are given as their one root (`roots/list`).
    pub fn roots(&self) -> std::path::PathBuf {
        self.shared
            .roots
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Makes `dir` the one root servers are given, and sends
    /// `notifications/roots/list_changed` to every connected server (all
    /// were told warden's roots can change). Returns the servers told, and
    /// those the notification could not reach, with why.
    pub async fn set_roots(&self, dir: std::path::PathBuf) -> (Vec<String>, Vec<(String, String)>) {
        *self.shared.roots.write().unwrap_or_else(|p| p.into_inner()) = dir;
        let connected: Vec<(String, rmcp::Peer<rmcp::RoleClient>)> = self
            .slots()
            .iter()
            .filter_map(|slot| {
                let inner = slot.lock();
                (inner.state == ServerState::Connected)
                    .then(|| inner.conn.as_ref().map(|c| c.peer.clone()))
                    .flatten()
                    .map(|peer| (slot.config.name.clone(), peer))
            })
            .collect();
        let mut told = Vec::new();
        let mut failed = Vec::new();
        for (name, peer) in connected {
            match peer.notify_roots_list_changed().await {
                Ok(()) => told.push(name),
                Err(error) => failed.push((name, error.to_string())),
            }
        }
        (told, failed)
    }

    fn server_requests(&self) -> Option<Arc<dyn super::ServerRequests>> {
        self.shared
            .server_requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn slots(&self) -> Vec<Arc<Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|s| s.name() == name)
            .cloned()
    }

    /// Adds a server at run time (the repl's `/mcp add`), with its
    /// admission; it is not connected yet (see [`Manager::reconnect`]).
    /// Fails when the name is taken or the manager is shutting down.
    pub fn add(&self, config: ServerConfig, admission: Admission) -> Result<(), String> {
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            return Err("warden is shutting down".into());
        }
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            if slots.iter().any(|s| s.name() == config.name) {
                return Err(format!("a server named `{}` already exists", config.name));
            }
            slots.push(Slot::new(config, admission));
        }
        self.shared.bump();
        Ok(())
    }

    /// Replaces a server that is not connected (e.g. pending approval) by
    /// the same configuration under another admission, keeping its place.
    pub fn readmit(&self, name: &str, admission: Admission) -> Result<(), String> {
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let Some(index) = slots.iter().position(|s| s.name() == name) else {
                return Err(format!("no server named `{name}`"));
            };
            if slots[index].lock().conn.is_some() {
                return Err(format!("server `{name}` is connected"));
            }
            slots[index] = Slot::new(slots[index].config.clone(), admission);
        }
        self.shared.bump();
        Ok(())
    }

    /// Says why a server that is not started (pending approval, say) is
    /// not: shown as its status `error`. Ignored for a started server.
    pub fn note(&self, name: &str, why: String) {
        let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.iter().find(|s| s.name() == name)
            && slot.admission != Admission::Start
        {
            slot.lock().error = Some(why);
        }
        drop(slots);
        self.shared.bump();
    }

    /// Stops a server (gracefully, as at shutdown) and forgets it for the
    /// rest of the session. Returns whether it existed.
    pub async fn remove(&self, name: &str) -> bool {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let Some(index) = slots.iter().position(|s| s.name() == name) else {
                return false;
            };
            slots.remove(index)
        };
        let conn = {
            let _connecting = slot.connecting.lock().await;
            slot.lock().conn.take()
        };
        if let Some(conn) = conn {
            conn.stop("removed by the user").await;
        }
        self.shared.bump();
        true
    }

    /// Connects every admitted server concurrently and returns once every
    /// attempt has settled. Each attempt is bounded by its server's timeout
    /// (per step); one that fails or hangs does not hold up the others.
    /// A server that fails here is tried again in the background, as one
    /// whose connection dies is: a remote server that is down when the
    /// gateway starts, or a server that fails once, would otherwise stay
    /// out of every client's view for the whole session.
    pub async fn connect_all(&self) {
        let slots = self.slots();
        let attempts = slots
            .iter()
            .filter(|slot| slot.admission == Admission::Start)
            .map(|slot| async move {
                let _connecting = slot.connecting.lock().await;
                let connected = slot.lock().conn.as_ref().is_some_and(|c| c.alive());
                if !connected
                    && self.connect_slot(slot).await.is_err()
                    && !self.shared.shutting_down.load(Ordering::SeqCst)
                {
                    let _ = self.shared.revive.send(slot.clone());
                }
            });
        futures::future::join_all(attempts).await;
    }

    /// A snapshot of every configured server, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.slots().iter().map(|slot| status(slot, true)).collect()
    }

    /// The generation of `server`'s live connection, if it has one: a
    /// resource subscription lives on one connection, so a caller notes
    /// it to tell when its subscription ended with a reconnect.
    pub fn subscription_generation(&self, server: &str) -> Option<u64> {
        let slot = self.slot(server)?;
        let inner = slot.lock();
        let conn = inner.conn.as_ref()?;
        (inner.state == ServerState::Connected && conn.alive()).then_some(conn.generation)
    }

    /// One server's status without its tool list (the call path asks this
    /// per call: no copy of every server's tools).
    pub fn status_of(&self, name: &str) -> Option<ServerStatus> {
        self.slot(name).map(|slot| status(&slot, false))
    }

    /// The connected servers and what each declared at its handshake
    /// (cheaper than [`Manager::statuses`]: no tool lists are copied).
    pub fn connected_capabilities(&self) -> Vec<(String, rmcp::model::ServerCapabilities)> {
        self.slots()
            .iter()
            .filter_map(|slot| {
                let inner = slot.lock();
                (inner.state == ServerState::Connected)
                    .then(|| inner.capabilities.clone())
                    .flatten()
                    .map(|caps| (slot.config.name.clone(), caps))
            })
            .collect()
    }

    /// Every server's notifications that are not about one request (log
    /// messages, resource updates, resource and prompt list changes), in
    /// the order each server sent them.
    pub fn notifications(&self) -> tokio::sync::broadcast::Receiver<Arc<super::Upstream>> {
        self.shared.notifications.subscribe()
    }

    /// The lowest log level warden's clients want: asked of servers on
    /// protocol 2026-07-28 in each request's `_meta` (older servers get
    /// `logging/setLevel`, which the caller sends).
    #[allow(deprecated)]
    pub fn set_log_level(&self, level: Option<rmcp::model::LoggingLevel>) {
        *self
            .shared
            .log_level
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = level;
    }

    /// A counter bumped whenever any server's state or tools change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }

    /// The lifecycle events (server started / exited). The first call gets
    /// the stream; later calls get a receiver that yields nothing.
    pub fn take_lifecycle_events(&self) -> mpsc::UnboundedReceiver<LifecycleEvent> {
        self.events_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| mpsc::unbounded_channel().1)
    }

    /// Drops the current connection (gracefully) and connects again, ignoring
    /// the backoff. The caller gets the connect error, if any.
    pub async fn reconnect(&self, name: &str) -> Result<(), CallError> {
        let slot = self.slot(name).ok_or_else(|| CallError::NotConnected {
            server: name.to_string(),
            reason: "no server of that name is configured".into(),
        })?;
        if slot.admission != Admission::Start {
            return Err(CallError::NotConnected {
                server: name.to_string(),
                reason: slot.admission.describe().into(),
            });
        }
        let _connecting = slot.connecting.lock().await;
        let old = {
            let mut inner = slot.lock();
            inner.failures = 0;
            inner.retry_at = None;
            inner.conn.take()
        };
        if let Some(old) = old {
            old.stop("reconnect requested").await;
        }
        self.connect_slot(&slot)
            .await
            .map(|_| ())
            .map_err(|reason| CallError::NotConnected {
                server: name.to_string(),
                reason,
            })
    }

    /// Stops every server gracefully (close stdin, wait, SIGTERM, kill the
    /// group) and waits until their processes are gone. Later calls fail.
    pub async fn shutdown(&self) {
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        self.shared.shutdown.cancel();
        // Connects in flight give up (dropping a half-made connection kills
        // its process group); wait for them, so none survives the shutdown.
        let conns: Vec<Arc<Connection>> = {
            let mut conns = Vec::new();
            for slot in &self.slots() {
                let _connecting = slot.connecting.lock().await;
                let mut inner = slot.lock();
                if let Some(conn) = inner.conn.take() {
                    conns.push(conn);
                }
                if inner.state == ServerState::Connected {
                    inner.state = ServerState::Error;
                    inner.error = Some("stopped: warden shut down".into());
                }
            }
            conns
        };
        futures::future::join_all(conns.iter().map(|c| c.stop("warden shut down"))).await;
        self.shared.bump();
    }

    /// Connects one slot; the caller holds `slot.connecting`.
    pub(super) async fn connect_slot(&self, slot: &Arc<Slot>) -> Result<Arc<Connection>, String> {
        {
            // A server being tried again keeps showing `error` and why it
            // failed last, rather than flickering to `connecting` on each
            // try in the background.
            let mut inner = slot.lock();
            if inner.state != ServerState::Error {
                inner.state = ServerState::Connecting;
            }
        }
        self.shared.bump();
        let result = tokio::select! {
            result = connect::establish(
                &slot.config,
                &self.launch,
                &self.shared.events,
                &self.shared.notifications,
                self.server_requests(),
                self.shared.roots.clone(),
            ) => result,
            () = self.shared.shutdown.cancelled() => {
                Err(connect::Failure::new("warden shut down while connecting"))
            }
        };
        let established = match result {
            Ok(established) => established,
            Err(failure) => {
                tracing::warn!(server = slot.name(), error = %failure.message, "connecting failed");
                {
                    let mut inner = slot.lock();
                    inner.sandbox_unavailable = failure.sandbox_unavailable;
                    inner.oauth_challenged = failure.oauth_challenged;
                    if failure.tools_rejected {
                        inner.tools.clear();
                    }
                    Slot::fail(&mut inner, failure.message.clone());
                }
                self.shared.bump();
                return Err(failure.message);
            }
        };
        let connect::Established {
            running,
            ct,
            protocol,
            tools,
            sandbox,
            pid,
            exit,
            stop_note,
            list_changed,
            transport,
            stop_requested,
            listener,
            router,
            capabilities,
            challenges,
        } = established;
        let (dead_tx, dead_rx) = watch::channel(None);
        let peer = running.peer().clone();
        let conn = {
            let mut inner = slot.lock();
            inner.generation += 1;
            let conn = Arc::new(Connection {
                generation: inner.generation,
                connected_at: tokio::time::Instant::now(),
                peer: peer.clone(),
                router,
                ct: ct.clone(),
                stop_requested: stop_requested.clone(),
                dead: dead_rx,
                monitor: Mutex::new(None),
                listener: Mutex::new(listener),
                resource_listens: Mutex::default(),
                subscribers: tokio::sync::Mutex::default(),
                pid,
                exit: exit.clone(),
                stop_note: stop_note.clone(),
                challenges,
            });
            inner.conn = Some(conn.clone());
            inner.state = ServerState::Connected;
            inner.protocol = Some(protocol.clone());
            inner.error = None;
            inner.sandbox = sandbox;
            inner.sandbox_unavailable = false;
            inner.oauth_challenged = false;
            inner.tools = tools;
            inner.capabilities = Some(capabilities);
            inner.retry_at = None;
            conn
        };
        tracing::info!(server = slot.name(), %protocol, "connected");
        let monitor = tokio::spawn(
            Monitor {
                slot: slot.clone(),
                shared: self.shared.clone(),
                generation: conn.generation,
                running,
                stop_requested,
                dead: dead_tx,
                exit,
                pid,
                transport,
            }
            .run(),
        );
        *conn.monitor.lock().unwrap_or_else(|p| p.into_inner()) = Some(monitor);
        tokio::spawn(tasks::relist(
            slot.clone(),
            self.shared.clone(),
            conn.generation,
            peer,
            list_changed,
        ));
        self.shared.bump();
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            conn.stop("warden shut down").await;
            return Err("warden is shutting down".into());
        }
        Ok(conn)
    }
}

/// Connects again, in the background, each server whose connection died
/// on its own: without this its tools would leave every model's and
/// client's view for the rest of the session, since a call resolves only
/// to the tools of a connected server. Ends with the manager.
async fn revive_dead(manager: Weak<Manager>, mut dead: mpsc::UnboundedReceiver<Arc<Slot>>) {
    while let Some(slot) = dead.recv().await {
        let Some(manager) = manager.upgrade() else {
            return;
        };
        tokio::spawn(async move { manager.revive(slot).await });
    }
}

impl Manager {
    /// Tries to connect `slot` again after each backoff (doubling to
    /// [`super::BACKOFF_MAX`]), until it is connected (by this or anyone),
    /// removed or shut down. Never given up on: a remote server may be
    /// down for an hour, and a try every 30 s costs one start.
    async fn revive(&self, slot: Arc<Slot>) {
        loop {
            let retry_at = slot.lock().retry_at;
            if let Some(at) = retry_at {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = self.shared.shutdown.cancelled() => return,
                }
            }
            // Removed or replaced (readmitted) meanwhile: not ours to connect.
            if !self.slots().iter().any(|s| Arc::ptr_eq(s, &slot)) {
                return;
            }
            let _connecting = slot.connecting.lock().await;
            if self.shared.shutting_down.load(Ordering::SeqCst)
                || slot.lock().conn.as_ref().is_some_and(|c| c.alive())
            {
                return;
            }
            tracing::info!(server = slot.name(), "connecting again");
            if self.connect_slot(&slot).await.is_ok() {
                return;
            }
        }
    }
}

/// A slot's status; its tool list copied only when asked for.
fn status(slot: &Slot, with_tools: bool) -> ServerStatus {
    let inner = slot.lock();
    ServerStatus {
        name: slot.config.name.clone(),
        state: inner.state,
        transport: slot.config.transport.kind(),
        protocol: inner.protocol.clone(),
        error: inner.error.clone(),
        sandbox: inner.sandbox.clone(),
        sandbox_unavailable: inner.sandbox_unavailable,
        oauth_challenged: inner.oauth_challenged,
        pid: inner.conn.as_ref().and_then(|c| c.pid),
        tools: if with_tools {
            inner.tools.clone()
        } else {
            Vec::new()
        },
        capabilities: inner.capabilities.clone(),
    }
}
