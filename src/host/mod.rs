//! The host wires one session together, in the one direction data flows:
//! config → connections ([`crate::mcp::Manager`], launched through
//! `warden_sandbox`) → [`crate::registry`] (+ pins) → [`warden_policy::Pipeline`]
//! → call → `warden_audit`. Every caller (the CLI, the agent loop, the repl,
//! the gateway) reaches servers only through the one mediated path
//! (`mediated.rs`): [`Host::call`] for tools, [`Host::read_resource`] and
//! [`Host::get_prompt`] for resources and prompts (CONTRACT §8); what is
//! passed on undecided (listings, completion, log level) goes through
//! [`crate::mcp::Manager::forward`].

pub mod answers;
mod audit;
mod call;
pub mod elicitation;
mod malformed;
mod mediated;
mod requests;
mod sampling_model;
mod server_requests;
mod tools;
mod uri_template;
pub mod url_site;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::{self, Config, Scope, Trust};
use crate::mcp::{Admission, LifecycleEvent, Manager, ServerState, ServerStatus};
use crate::pins::PinStore;
use tokio_util::sync::CancellationToken;
use warden_audit::{AuditError, AuditLog, AuditOptions, Event, OnFailure};
use warden_policy::{Mode, Pipeline, PipelineConfig};
use warden_sandbox::{Helper, LaunchContext};

pub use audit::{AuditRefusal, AuditStatus};
pub use call::{CallReport, CallRequest, Caller, DecisionSummary, ToolRef};
pub use requests::{
    CompletionRequest, ListedPrompt, ListedResource, ListedTemplate, PromptRef, PromptRequest,
    ResourceRequest, Share, UnsubscribeRequest, logging_target, prompt_target, resource_target,
};
pub use server_requests::{ServerRequestsSetup, elicitation_target, sampling_target};
pub use tools::ToolView;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Policy(#[from] warden_policy::PolicyError),
    /// The audit configuration is wrong (a bad key or redact pointer).
    #[error(transparent)]
    Audit(warden_audit::AuditError),
    /// The audit log cannot be opened or its `session_start` cannot be
    /// written: a fail-closed session does not start.
    #[error("the audit log cannot record this session, so it does not start: {0}")]
    AuditFailed(String),
    #[error("{0}")]
    Setup(String),
}

/// How to start a session.
#[derive(Debug, Clone)]
pub struct HostOptions {
    pub load: config::LoadOptions,
    /// `--policy` paths (operator scope).
    pub extra_policies: Vec<PathBuf>,
    pub mode: Mode,
    /// `--audit FILE`, overriding the configured path.
    pub audit_path: Option<PathBuf>,
    /// `--lock FILE` instead of `$WARDEN_CONFIG_DIR/pins.json`.
    pub lock: Option<PathBuf>,
    pub locked: bool,
    /// Files this command reads that no server may write (e.g. `--answers`),
    /// besides the ones the session knows (configuration, policies, pins,
    /// the audit log: [`crate::launch::protected_paths`]).
    pub protect: Vec<PathBuf>,
    /// Credential files this command reads that no server may see even
    /// inside a read grant (the gateway's token files), besides the
    /// configuration folder ([`crate::launch::hidden_paths`]); protected
    /// as well.
    pub hide: Vec<PathBuf>,
    /// Only these servers are started (all when empty): `warden call` needs one.
    pub only_servers: Vec<String>,
    /// The `warden-sandbox-exec` binary that applies the sandbox (`None`:
    /// the one beside this executable, else this executable re-executed;
    /// see [`warden_sandbox::Helper`]). Embedders and tests set it.
    pub sandbox_helper: Option<PathBuf>,
    /// Cancelled when warden is exiting (SIGTERM, SIGINT of a
    /// non-interactive command): calls still in flight are given up and
    /// recorded as `abandoned`. `None`: only [`Host::shutdown`] does that.
    pub exit: Option<CancellationToken>,
}

/// What [`Host::reload_policy`] put in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyReloaded {
    pub policy_sha256: Option<String>,
    pub previous_sha256: Option<String>,
    pub rules: usize,
}

/// The parts of [`HostOptions`] the pipeline is built from.
#[derive(Debug, Clone)]
struct ReloadInputs {
    load: config::LoadOptions,
    extra_policies: Vec<PathBuf>,
    mode: Mode,
    locked: bool,
}

impl ReloadInputs {
    fn pipeline(&self, config: &Config) -> Result<Pipeline, warden_policy::PolicyError> {
        Pipeline::load(PipelineConfig {
            rules: config.rules.clone(),
            policies: config.policies.clone(),
            extra_policies: self.extra_policies.clone(),
            data: config.policy_data.clone(),
            workspace: config.workspace.clone(),
            mode: self.mode,
            locked: self.locked,
            with_default: config.default_policy,
            ..PipelineConfig::default()
        })
    }
}

/// Counters for `session_end` (`tool_calls` counts every decided request,
/// resources and prompts included).
#[derive(Debug, Default)]
struct Stats {
    calls: AtomicU64,
    denied: AtomicU64,
}

pub struct Host {
    config: Config,
    session: String,
    mode: Mode,
    manager: Arc<Manager>,
    /// Swapped whole by [`Host::reload_policy`]; a call takes one `Arc`
    /// when it starts and decides and authorizes with it.
    pipeline: std::sync::RwLock<Arc<Pipeline>>,
    /// What the pipeline is built from, again, on a reload.
    reload: ReloadInputs,
    /// Bumped by every reload that put a new pipeline in force (the
    /// gateway tells its clients when what they may list changed).
    policy_generation: tokio::sync::watch::Sender<u64>,
    audit: Arc<audit::SessionAudit>,
    /// Cancelled when the session ends: calls in flight become `abandoned`.
    exiting: CancellationToken,
    /// Calls whose pending record was written and whose result was not.
    in_flight: AtomicUsize,
    settled: tokio::sync::Notify,
    pins: Mutex<PinStore>,
    locked: bool,
    tools: Mutex<tools::Cache>,
    call_index: AtomicU64,
    stats: Stats,
    forwarder: Mutex<Option<(CancellationToken, tokio::task::JoinHandle<()>)>>,
    /// Servers added for this session only ([`Host::add_server`]).
    session_servers: Mutex<std::collections::BTreeMap<String, config::ServerConfig>>,
    // Removed when the host is dropped: private HOME/TMPDIR of every server
    // (and where a server without a view has its HOME: `server_dirs`).
    runtime: tempfile::TempDir,
}

impl Host {
    /// Loads and validates everything, opens the audit log and creates the
    /// connection manager. Servers are not contacted yet: call
    /// [`Host::connect`] (the repl does it in the background).
    pub fn open(opts: HostOptions) -> Result<Host, HostError> {
        let config = config::load(&opts.load)?;
        let reload = ReloadInputs {
            load: opts.load.clone(),
            extra_policies: opts.extra_policies.clone(),
            mode: opts.mode,
            locked: opts.locked,
        };
        let pipeline = reload.pipeline(&config)?;
        let session = uuid::Uuid::new_v4().to_string();
        let audit_path = opts.audit_path.as_ref().or(config.audit.path.as_ref());
        let audit = open_audit(audit_path.map(PathBuf::as_path), &config, &session)?;
        let pins_path = crate::pins::path_for(opts.lock.as_deref(), &opts.load.config_dir);
        let mut pins = PinStore::open(&pins_path).map_err(|e| HostError::Setup(e.to_string()))?;
        // Before any server starts, so that the sandbox can protect it (a
        // `--locked` session writes no pins, so it creates nothing).
        if !opts.locked
            && let Err(error) = pins.create_if_missing()
        {
            tracing::warn!(%error, "the pin file cannot be created; new pins will not be saved");
        }
        remove_stale_runtime_dirs();
        let runtime = tempfile::Builder::new()
            .prefix(&format!("{RUNTIME_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| HostError::Setup(format!("cannot create a runtime folder: {e}")))?;
        let approvals = config::Approvals::load(&opts.load.config_dir)?;
        let servers: Vec<_> = config
            .servers
            .values()
            .filter(|s| opts.only_servers.is_empty() || opts.only_servers.contains(&s.name))
            .map(|server| {
                let admission = if server.trust == Trust::Blocked {
                    Admission::Blocked
                } else if server.disabled {
                    Admission::Disabled
                } else if server.scope == Scope::Project && !approvals.is_approved(server) {
                    Admission::PendingApproval
                } else {
                    Admission::Start
                };
                (server.clone(), admission)
            })
            .collect();
        let pending: Vec<(String, String)> = servers
            .iter()
            .filter(|(_, a)| *a == Admission::PendingApproval)
            .map(|(s, _)| (s.name.clone(), approvals.why_pending(s)))
            .collect();
        let manager = Manager::new(
            servers,
            LaunchContext {
                workspace: config.workspace.clone(),
                runtime_dir: runtime.path().to_path_buf(),
                helper: opts.sandbox_helper.clone().map(Helper::Standalone),
                protect: crate::launch::protected_paths(
                    &config,
                    &opts.extra_policies,
                    audit_path.map(PathBuf::as_path),
                    &crate::pins::files_of(&pins_path),
                    &opts.protect,
                ),
                hide: crate::launch::hidden_paths(
                    &config,
                    audit_path.map(PathBuf::as_path),
                    &crate::pins::files_of(&pins_path),
                    &opts.hide,
                ),
            },
        );
        for (name, why) in pending {
            manager.note(&name, why);
        }
        let host = Host {
            session,
            mode: opts.mode,
            manager,
            pipeline: std::sync::RwLock::new(Arc::new(pipeline)),
            reload,
            policy_generation: tokio::sync::watch::Sender::new(0),
            audit: Arc::new(audit),
            exiting: opts.exit.clone().unwrap_or_default(),
            in_flight: AtomicUsize::new(0),
            settled: tokio::sync::Notify::new(),
            pins: Mutex::new(pins),
            locked: opts.locked,
            tools: Mutex::new(tools::Cache::default()),
            call_index: AtomicU64::new(0),
            stats: Stats::default(),
            forwarder: Mutex::new(None),
            session_servers: Mutex::new(Default::default()),
            runtime,
            config,
        };
        // Written ahead like a call: a session that cannot be recorded
        // does not start (unless `on_failure: continue`).
        host.audit
            .write_ahead(Event::SessionStart {
                warden_version: env!("CARGO_PKG_VERSION").to_string(),
                config_sha256: host.config.digest.clone(),
                policy_sha256: host.pipeline().policy_sha256().map(str::to_string),
                mode: host.mode,
                workspace: host.config.workspace.display().to_string(),
            })
            .map_err(|refusal| HostError::AuditFailed(refusal.0))?;
        host.forward_lifecycle_events();
        Ok(host)
    }

    /// Connects every admitted server concurrently; returns when every
    /// attempt has settled.
    pub async fn connect(&self) {
        self.manager.connect_all().await;
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The pipeline in force now (a reload replaces it; this one stays
    /// valid for as long as it is held).
    pub fn pipeline(&self) -> Arc<Pipeline> {
        match self.pipeline.read() {
            Ok(p) => Arc::clone(&p),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Loads the permission rules and Rego policies again from the
    /// configuration files (servers are not touched) and, when everything
    /// loads, decides every later call with them. When something does not
    /// (a file unreadable, invalid JSON, a bad rule or policy), the session
    /// keeps the pipeline it had. Either way a `policy_reload` record is
    /// written. "Allow for this session" answers carry over, but only for
    /// what the new pipeline still asks about for the same reasons
    /// ([`Pipeline::keep_session_approvals`]): a new deny wins. An answer
    /// given by a call still deciding under the old pipeline while the
    /// swap happens may be lost (the person is asked again).
    pub fn reload_policy(&self) -> Result<PolicyReloaded, String> {
        let previous = self.pipeline();
        let loaded = config::load(&self.reload.load)
            .map_err(|e| e.to_string())
            .and_then(|config| {
                self.reload
                    .pipeline(&config)
                    .map(|p| (p, config.rules.len()))
                    .map_err(|e| e.to_string())
            });
        match loaded {
            Ok((pipeline, rules)) => {
                let pipeline = Arc::new(pipeline);
                let reloaded = PolicyReloaded {
                    policy_sha256: pipeline.policy_sha256().map(str::to_string),
                    previous_sha256: previous.policy_sha256().map(str::to_string),
                    rules,
                };
                {
                    let mut current = match self.pipeline.write() {
                        Ok(p) => p,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    pipeline.keep_session_approvals(&current);
                    *current = pipeline;
                }
                self.invalidate_tools();
                self.policy_generation.send_modify(|n| *n += 1);
                tracing::info!(
                    rules,
                    policy_sha256 = reloaded.policy_sha256.as_deref().unwrap_or(""),
                    "policy reloaded"
                );
                self.audit.record(Event::PolicyReload {
                    ok: true,
                    policy_sha256: reloaded.policy_sha256.clone(),
                    previous_sha256: reloaded.previous_sha256.clone(),
                    rules: rules as u64,
                    error: None,
                });
                Ok(reloaded)
            }
            Err(error) => {
                let error = crate::scrub::clean(&error).into_owned();
                tracing::error!("policy reload refused, the previous policy stays: {error}");
                self.audit.record(Event::PolicyReload {
                    ok: false,
                    policy_sha256: previous.policy_sha256().map(str::to_string),
                    previous_sha256: previous.policy_sha256().map(str::to_string),
                    rules: 0,
                    error: Some(error.clone()),
                });
                Err(error)
            }
        }
    }

    /// A counter bumped whenever a reload puts a new policy in force.
    pub fn policy_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.policy_generation.subscribe()
    }

    pub fn manager(&self) -> &Arc<Manager> {
        &self.manager
    }

    /// The workspace the session started with: configuration, rules'
    /// `${WORKSPACE}`, sandbox grants and the policy's `context.workspace`
    /// are all made for it.
    pub fn workspace(&self) -> &Path {
        &self.config.workspace
    }

    /// Narrows the one root servers are given (`roots/list`) to `dir`, the
    /// session's workspace or a folder inside it, and tells connected
    /// servers (`notifications/roots/list_changed`). Nothing else changes:
    /// rules, policy and sandbox grants stay those of the workspace the
    /// session started with, so a root can only narrow what servers were
    /// already given, never widen it. Returns the servers told, and those
    /// the notification did not reach.
    pub async fn set_roots(
        &self,
        dir: &Path,
    ) -> Result<(Vec<String>, Vec<(String, String)>), String> {
        let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !dir.is_dir() {
            return Err(format!("{} is not a folder", dir.display()));
        }
        if !dir.starts_with(&self.config.workspace) {
            return Err(format!(
                "{} is outside the workspace this session started with ({}); start warden \
                 with --workspace DIR to work there",
                dir.display(),
                self.config.workspace.display()
            ));
        }
        Ok(self.manager.set_roots(dir).await)
    }

    /// The session's audit log file, when there is one.
    pub fn audit_path(&self) -> Option<PathBuf> {
        self.audit.log().map(|a| a.path().to_path_buf())
    }

    /// The audit log's state for `mcp status`: path, mode, fail-closed or
    /// `on_failure: continue`, records lost.
    pub fn audit_status(&self) -> AuditStatus {
        self.audit.status()
    }

    /// Records the audit log lost in this session although it fails
    /// closed (a full disk mid-run): how many, and the first error. A run
    /// with lost records is not a success, whatever the model said.
    pub fn audit_records_lost(&self) -> Option<(u64, String)> {
        self.audit.lost_when_failing_closed()
    }

    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.manager.statuses()
    }

    /// A server's configuration: from the configuration files, or added for
    /// this session with [`Host::add_server`].
    pub fn server_config(&self, name: &str) -> Option<config::ServerConfig> {
        self.with_server_config(name, config::ServerConfig::clone)
    }

    /// Where server `name` opens the paths it is given
    /// ([`crate::launch::server_dirs`]), for a request's facts.
    pub(crate) fn server_dirs(&self, name: &str) -> warden_policy::ServerDirs {
        self.with_server_config(name, |s| crate::launch::server_dirs(s, self.runtime.path()))
            .unwrap_or_default()
    }

    /// `f` of a server's configuration, without copying it (a call's facts
    /// need three fields of it).
    pub(crate) fn with_server_config<R>(
        &self,
        name: &str,
        f: impl FnOnce(&config::ServerConfig) -> R,
    ) -> Option<R> {
        if let Some(server) = lock(&self.session_servers).get(name) {
            return Some(f(server));
        }
        self.config.servers.get(name).map(f)
    }

    /// Adds a server for this session only (the repl's `/mcp add`) and
    /// connects it. The configuration must already be validated (trust,
    /// sandbox). Returns the connect error, if any; the server stays listed.
    pub async fn add_server(&self, server: config::ServerConfig) -> Result<(), HostError> {
        let name = server.name.clone();
        if self.manager.status_of(&name).is_some() {
            return Err(HostError::Setup(format!(
                "a server named `{name}` already exists in this session"
            )));
        }
        lock(&self.session_servers).insert(name.clone(), server.clone());
        let admission = if server.trust == Trust::Blocked {
            Admission::Blocked
        } else {
            Admission::Start
        };
        if let Err(message) = self.manager.add(server, admission) {
            lock(&self.session_servers).remove(&name);
            return Err(HostError::Setup(message));
        }
        if admission == Admission::Start {
            self.manager
                .reconnect(&name)
                .await
                .map_err(|e| HostError::Setup(e.to_string()))?;
        }
        Ok(())
    }

    /// Stops a server and forgets it for the rest of this session (the
    /// configuration files are not touched). Returns whether it existed.
    pub async fn remove_server(&self, name: &str) -> bool {
        let removed = self.manager.remove(name).await;
        if removed {
            lock(&self.session_servers).remove(name);
        }
        removed
    }

    /// Lets a project server that was pending approval start (after the
    /// caller recorded the approval), and connects it.
    pub async fn admit_server(&self, name: &str) -> Result<(), HostError> {
        self.manager
            .readmit(name, Admission::Start)
            .map_err(HostError::Setup)?;
        self.manager
            .reconnect(name)
            .await
            .map_err(|e| HostError::Setup(e.to_string()))
    }

    /// Whether `server` failed to start because its sandbox is unavailable.
    pub fn sandbox_unavailable(&self, server: &str) -> bool {
        self.manager
            .status_of(server)
            .is_some_and(|s| s.state == ServerState::Error && s.sandbox_unavailable)
    }

    /// Writes one audit event; a failing audit log is reported, never silent.
    pub(crate) fn audit_event(&self, event: Event) {
        self.audit.record(event);
    }

    /// Writes `event` ahead of what it records (an approval before it is
    /// saved): `Err` when the log could not take it, and the caller must
    /// not go on (fail closed, unless `on_failure: continue`).
    pub(crate) fn audit_ahead(&self, event: Event) -> Result<(), audit::AuditRefusal> {
        self.audit.write_ahead(event)
    }

    /// Writes server start/exit events to the audit log as they happen.
    /// [`Host::shutdown`] stops the forwarder after draining what is left.
    fn forward_lifecycle_events(&self) {
        let audit = Arc::clone(&self.audit);
        let mut events = self.manager.take_lifecycle_events();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let handle = tokio::spawn(async move {
            let write = |event: LifecycleEvent| audit.record(lifecycle_record(event));
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(event) => write(event),
                        None => break,
                    },
                    _ = stopped.cancelled() => {
                        while let Ok(event) = events.try_recv() {
                            write(event);
                        }
                        break;
                    }
                }
            }
        });
        *lock(&self.forwarder) = Some((stop, handle));
    }

    /// Gives up the calls still in flight (recorded as `abandoned`),
    /// stops every server and closes the audit log with `session_end`.
    pub async fn shutdown(&self) {
        self.exiting.cancel();
        let settled = async {
            loop {
                let notified = self.settled.notified();
                if self.in_flight.load(Ordering::SeqCst) == 0 {
                    break;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(SETTLE_TIMEOUT, settled).await.is_err() {
            tracing::warn!(
                calls = self.in_flight.load(Ordering::SeqCst),
                "calls still in flight at shutdown; their results are not recorded"
            );
        }
        self.manager.shutdown().await;
        let forwarder = lock(&self.forwarder).take();
        if let Some((stop, handle)) = forwarder {
            stop.cancel();
            let _ = handle.await;
        }
        self.audit_event(Event::SessionEnd {
            tool_calls: self.stats.calls.load(Ordering::Relaxed),
            denied: self.stats.denied.load(Ordering::Relaxed),
        });
    }
}

/// How long [`Host::shutdown`] waits for abandoned calls to write their
/// results.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens the configured audit log (or `--audit FILE`). Fail-closed: any
/// failure stops the session; `on_failure: continue`: a log that cannot be
/// opened leaves the session unaudited, loudly.
fn open_audit(
    path: Option<&Path>,
    config: &Config,
    session: &str,
) -> Result<audit::SessionAudit, HostError> {
    let on_failure = config.audit.on_failure;
    if on_failure == OnFailure::Continue {
        tracing::warn!(
            "audit.on_failure is \"continue\": when the audit log cannot be written, calls are \
             still sent, unrecorded (an `audit_gap` record says so once the log works again)"
        );
    }
    let Some(path) = path else {
        return Ok(audit::SessionAudit::new(None, on_failure));
    };
    let key = warden_audit::load_key(None).map_err(HostError::Audit)?;
    let opened = AuditLog::open(
        path,
        AuditOptions {
            session: session.to_string(),
            fsync: config.audit.fsync,
            key,
            redact: config.audit.redact.clone(),
            secrets: crate::config::secrets_of(config),
            max_value_bytes: config.audit.max_value_bytes,
        },
    );
    match opened {
        Ok(log) => Ok(audit::SessionAudit::new(Some(log), on_failure)),
        Err(error @ (AuditError::Key { .. } | AuditError::BadPointer { .. })) => {
            Err(HostError::Audit(error))
        }
        Err(error) if on_failure == OnFailure::Continue => {
            tracing::error!(%error, "the audit log cannot be opened; this session runs UNAUDITED (audit.on_failure: continue)");
            Ok(audit::SessionAudit::unavailable(error.to_string()))
        }
        Err(error) => Err(HostError::AuditFailed(error.to_string())),
    }
}

/// Runtime folders are `$TMPDIR/warden-session-<pid>-XXXXXX`; the pid lets
/// a later session remove what a killed one (`kill -9`) could not.
const RUNTIME_PREFIX: &str = "warden-session-";

/// Removes runtime folders of warden processes that no longer exist.
fn remove_stale_runtime_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(RUNTIME_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        // A live process with that pid (warden or a reuse of the pid):
        // leave it alone.
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        // Only folders we own; never follow a link planted in /tmp.
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw()
        });
        if ours && let Err(error) = std::fs::remove_dir_all(&path) {
            tracing::debug!(path = %path.display(), %error, "could not remove a stale runtime folder");
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lifecycle_record(event: LifecycleEvent) -> Event {
    match event {
        LifecycleEvent::Started {
            server,
            pid,
            transport,
            sandbox,
        } => Event::ServerStart {
            server,
            transport,
            pid,
            sandbox: serde_json::to_value(sandbox).unwrap_or_default(),
        },
        LifecycleEvent::Exited {
            server,
            pid,
            code,
            signal,
            reason,
        } => Event::ServerExit {
            server,
            pid,
            status: code,
            signal,
            reason,
        },
    }
}
