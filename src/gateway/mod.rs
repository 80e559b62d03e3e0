//! `warden gateway`: the session's enforced, aggregated tools served as one
//! MCP server, over stdio or streamable HTTP at `/mcp` (CONTRACT §2, §4, §5).
//!
//! The gateway is a thin [`ServerHandler`] over a [`Host`]:
//!
//! - `tools/list` shows the host's visible tools as `S__T` (the qualified
//!   `mcp__S__T` without its `mcp__` prefix), or under their remote names
//!   with `--no-prefix`, with description, schemas and annotations exactly
//!   as the upstream server listed them, or as pinned while they differ
//!   from the pin (a rug pull: `ToolView::visible`). A name → qualified
//!   table is kept; names are never parsed back.
//! - `tools/call` goes through [`Host::call`] with [`Caller::Gateway`], so
//!   the pipeline decides and the audit log records every call.
//! - Error mapping (what a client sees):
//!   - an unknown tool name → JSON-RPC error `-32602` (invalid params);
//!   - a result the upstream sent (ok or `isError: true`) → passed through
//!     unchanged;
//!   - a denial → a tool result with `isError: true` whose text names the
//!     deciding stage and the reasons ("Denied by warden's rules stage: …"),
//!     so a model can adapt;
//!   - an upstream JSON-RPC error, transport failure, timeout or
//!     cancellation → a tool result with `isError: true` saying what
//!     happened ("warden: the call to `S`/`T` failed (timeout): …"). MCP
//!     clients tend to render protocol errors opaquely; the model should
//!     read why the call failed.
//! - `ask` → when the client declared form elicitation, an elicitation
//!   request naming the server, tool, an arguments summary and the reasons,
//!   with one required enum field `decision`: `allow_once` | `deny`.
//!   Declining, cancelling, timing out or anything else is a deny. A client
//!   without elicitation is never asked: the call is denied, and the text
//!   says the client could not be asked.
//!   An `ask` about a server's sampling request during the client's call
//!   is put to the same client the same way (`server_requests.rs`).
//! - When the host's tools change, every connected client gets
//!   `notifications/tools/list_changed`; so it does after a policy reload
//!   (SIGHUP) that hides or shows a tool (only then: the listing is
//!   compared). A reload also sends the resource and prompt list changes
//!   when a server offers those (always: comparing would mean listing
//!   every upstream).
//!
//! The gateway speaks the session protocol revisions (up to 2025-11-25),
//! which carry server-to-client elicitation and list-changed notifications
//! on the session; stdout of `--stdio` carries protocol messages only.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ConstString, ContentBlock, CustomNotification, CustomRequest, CustomResult,
    DiscoverRequestMethod, DiscoverResult, ElicitRequestParams, ElicitationAction,
    ElicitationSchema, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, PromptsCapability, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ResourcesCapability, ServerCapabilities, ServerConfig, Tool,
};
#[allow(deprecated)]
use rmcp::model::{SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::service::{ElicitationMode, NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_core::RequestKind;

mod auth;
mod clients;
mod malformed;
mod resources;
mod server_requests;
mod unserved;

pub use auth::{Tokens, generate as generate_token, read_token_file};

use crate::host::{CallReport, CallRequest, Caller, Host, Share, ToolRef, ToolView};
use crate::registry::ToolEntry;
use warden_audit::Outcome;
use warden_core::display;
use warden_policy::{AskAnswer, AskPrompt, Asker, Mode};

/// How long a client has to answer an elicitation before the call is denied.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);
/// The elicitation answer that allows the call (once).
pub const ALLOW_ONCE: &str = "allow_once";
/// The elicitation answer that denies the call.
pub const DENY: &str = "deny";

/// The protocol revision the gateway steers clients to (session-based: the
/// elicitation and list-changed messages travel on the session).
const MAX_PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

#[derive(Debug, Clone, Default)]
pub struct GatewayOptions {
    /// Expose remote names instead of `S__T` (one upstream server only).
    pub no_prefix: bool,
    /// `--ask-client` on `--stdio`: the one client is a person's, so `ask`
    /// decisions are put to it (CONTRACT §5). On `--listen` the person's
    /// client is the one presenting the ask-client token instead.
    pub ask_client: bool,
}

/// The MCP server handler over a [`Host`]. Cheap to clone: one per HTTP
/// session, all sharing the host.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
    /// This client's own state (log level, subscriptions): each HTTP
    /// session gets its own ([`Gateway::for_new_client`]).
    client: Arc<clients::ClientState>,
}

struct Inner {
    host: Arc<Host>,
    options: GatewayOptions,
    /// Cancelled when the gateway stops: ends the list-changed watchers.
    stop: CancellationToken,
    clients: clients::Clients,
}

impl Gateway {
    pub fn new(host: Arc<Host>, options: GatewayOptions, stop: CancellationToken) -> Gateway {
        let clients = clients::Clients::default();
        let client = clients.add();
        Gateway {
            inner: Arc::new(Inner {
                host,
                options,
                stop,
                clients,
            }),
            client,
        }
    }

    /// The same gateway for another client (an HTTP session), with state
    /// of its own.
    fn for_new_client(&self) -> Gateway {
        Gateway {
            inner: self.inner.clone(),
            client: self.inner.clients.add(),
        }
    }

    /// What the gateway offers: tools always; resources, prompts,
    /// completions and logging only when a connected upstream offers them
    /// and not everything of theirs is denied outright.
    fn capabilities(&self) -> ServerCapabilities {
        let host = &self.inner.host;
        let pipeline = host.pipeline();
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let resources: Vec<String> = host
            .servers_with(|c| c.resources.is_some())
            .into_iter()
            .filter(|s| {
                !pipeline.hidden_request(RequestKind::Resource, &crate::host::resource_target(s))
            })
            .collect();
        if !resources.is_empty() {
            let subscribe = host
                .servers_with(|c| {
                    c.resources
                        .as_ref()
                        .is_some_and(|r| r.subscribe == Some(true))
                })
                .iter()
                .any(|s| resources.contains(s));
            let mut r = ResourcesCapability::default();
            r.list_changed = Some(true);
            r.subscribe = subscribe.then_some(true);
            caps.resources = Some(r);
        }
        // What a client could never use is not offered: prompts when a
        // rule denies every prompt of every server that has them,
        // completion when every server that completes has all its prompts
        // and resources denied, logging when every server that logs has
        // everything denied (its messages are dropped).
        let prompts: Vec<String> = host
            .servers_with(|c| c.prompts.is_some())
            .into_iter()
            .filter(|s| !host.prompts_denied(s))
            .collect();
        if !prompts.is_empty() {
            let mut p = PromptsCapability::default();
            p.list_changed = Some(true);
            caps.prompts = Some(p);
        }
        let completes = host
            .servers_with(|c| c.completions.is_some())
            .iter()
            .any(|s| prompts.contains(s) || resources.contains(s));
        if completes {
            caps.completions = Some(Default::default());
        }
        let logs = host
            .servers_with(|c| c.logging.is_some())
            .iter()
            .any(|s| !host.denies_everything_of(s));
        if logs {
            caps.logging = Some(Default::default());
        }
        caps
    }

    /// The exposed tools' definitions as shown to clients, by gateway
    /// name. Names that would collide (only possible with `--no-prefix`)
    /// are left out, never guessed.
    fn table(&self) -> BTreeMap<String, Tool> {
        let view = self.inner.host.tools();
        let mut table: BTreeMap<String, Tool> = BTreeMap::new();
        let mut ambiguous = Vec::new();
        for entry in view.visible() {
            let name = if self.inner.options.no_prefix {
                entry.remote.clone()
            } else {
                gateway_name(&entry.qualified)
            };
            let mut definition = entry.definition.clone();
            definition.name = Cow::Owned(name.clone());
            if table.insert(name.clone(), definition).is_some() {
                ambiguous.push(name);
            }
        }
        for name in ambiguous {
            tracing::debug!(tool = %name, "two upstream tools share this gateway name; neither is exposed");
            table.remove(&name);
        }
        table
    }

    /// The exposed tool `name` names, as [`Gateway::table`] would have it,
    /// without building the table (which clones every definition): a call
    /// and rmcp's per-request `get_tool` look up one name.
    fn lookup<'v>(&self, view: &'v ToolView, name: &str) -> Option<&'v ToolEntry> {
        if self.inner.options.no_prefix {
            let mut named = view.visible().filter(|entry| entry.remote == name);
            let entry = named.next()?;
            // Two upstream tools share this name: neither is exposed.
            named.next().is_none().then_some(entry)
        } else {
            // Every qualified name is `mcp__S__T` and its gateway name is
            // `S__T`, so the gateway name says the qualified name.
            view.get_visible(&format!("mcp__{name}"))
                .map(|entry| &**entry)
        }
    }

    /// Lets go of this client's share of the upstream subscription to
    /// `uri` (the server is unsubscribed after the last share; recorded).
    async fn release(&self, share: &Share, uri: &str) {
        if let Err(error) = Box::pin(clients::release(&self.inner.host, share, uri)).await {
            tracing::debug!(%uri, %error, "resources/unsubscribe failed upstream");
        }
    }

    /// A digest of what `tools/list` shows, to notify only on real changes.
    fn listing_signature(&self) -> String {
        let tools: Vec<Value> = self
            .table()
            .values()
            .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
            .collect();
        warden_core::digest::sha256_json(&Value::Array(tools))
    }

    /// The connected servers that offer resources and those that offer
    /// prompts.
    fn offering(&self) -> (Vec<String>, Vec<String>) {
        let host = &self.inner.host;
        (
            host.servers_with(|c| c.resources.is_some()),
            host.servers_with(|c| c.prompts.is_some()),
        )
    }

    /// Sends `notifications/tools/list_changed` to `peer` whenever the
    /// exposed tools change (a server's listing or a policy reload that
    /// hides or shows a tool), and the resource and prompt list changes
    /// when a server offering them comes or goes or a policy reload may
    /// have changed what of theirs is hidden, until the peer goes away or
    /// the gateway stops.
    fn watch_tools(&self, peer: Peer<RoleServer>) {
        let gateway = self.clone();
        let mut changes = self.inner.host.manager().subscribe();
        let mut reloads = self.inner.host.policy_changes();
        let stop = self.inner.stop.clone();
        tokio::spawn(async move {
            let mut last = gateway.listing_signature();
            let mut offering = gateway.offering();
            // A client that went away without a change to tell it about is
            // noticed here, so no watcher outlives its session for long.
            let mut alive = tokio::time::interval(Duration::from_secs(5));
            loop {
                let mut reloaded = false;
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() {
                            break;
                        }
                    }
                    changed = reloads.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        reloaded = true;
                    }
                    _ = alive.tick() => {
                        if peer.is_transport_closed() {
                            break;
                        }
                        continue;
                    }
                    () = stop.cancelled() => break,
                }
                // Servers offering resources or prompts came or went: what
                // the client lists of them may have changed. After a reload
                // the deny rules that hide resources and prompts may have
                // too; telling the client to list again is cheaper than
                // listing every upstream here to compare.
                let now_offering = gateway.offering();
                let (resources, prompts) = if now_offering != offering {
                    (true, true)
                } else if reloaded {
                    (!now_offering.0.is_empty(), !now_offering.1.is_empty())
                } else {
                    (false, false)
                };
                offering = now_offering;
                if let Err(error) = notify_lists(&peer, resources, prompts).await {
                    tracing::debug!(%error, "the client is gone; no more list_changed");
                    break;
                }
                let now = gateway.listing_signature();
                if now == last {
                    continue;
                }
                last = now;
                tracing::info!("tools changed; notifying the client");
                if let Err(error) = peer.notify_tool_list_changed().await {
                    tracing::debug!(%error, "the client is gone; no more list_changed");
                    break;
                }
            }
        });
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // A name the gateway does not list is still recorded (as asked).
        let target = match self.lookup(&self.inner.host.tools(), request.name.as_ref()) {
            Some(entry) => ToolRef::Qualified(entry.qualified.clone()),
            None => ToolRef::Unlisted(request.name.to_string()),
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let asking = self.asking(&context, request.name.as_ref());
        let asker = asking.asker();
        let token = context.meta.get_progress_token();
        let host = &self.inner.host;
        let report = server_requests::with_forwarding(&context, asker, |downstream| {
            clients::with_progress(&context.peer, token, |progress| {
                host.call_typed(
                    CallRequest {
                        target,
                        arguments,
                        caller: Caller::Gateway,
                    },
                    asker,
                    context.ct.clone(),
                    progress,
                    Some(downstream),
                )
            })
        })
        .await;
        let (report, sent) = report;
        if report.outcome == Outcome::UnknownTool {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{}`", request.name),
                None,
            ));
        }
        Ok(result_for_client(&report, sent, asking.cannot_ask))
    }

    /// Who may be asked about a request of this client (CONTRACT §5):
    /// only a client the operator marked as a person's, that declared form
    /// elicitation, on the session protocol; and if none, why.
    pub(super) fn asking(
        &self,
        context: &RequestContext<RoleServer>,
        exposed_name: &str,
    ) -> Asking {
        let session_protocol = context
            .protocol_version()
            .is_none_or(|version| version.has_initialize());
        let can_elicit = session_protocol
            && context
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form);
        // The program that made the call never approves it by default:
        // only the client the operator marked as a person's is asked.
        let person = match context.extensions.get::<axum::http::request::Parts>() {
            Some(parts) => {
                parts.extensions.get::<auth::ClientRole>() == Some(&auth::ClientRole::Person)
            }
            None => self.inner.options.ask_client,
        };
        let gateway_mode = self.inner.host.mode() == Mode::Gateway;
        let cannot_ask = match () {
            () if gateway_mode && !person => Some(
                "no one could be asked: warden asks only the client the operator marked as a \
                 person's (`warden gateway --ask-client`)",
            ),
            () if gateway_mode && !can_elicit => Some(
                "this MCP client did not declare the elicitation capability, so it cannot be \
                 asked to approve the call",
            ),
            () => None,
        };
        Asking {
            elicitor: ElicitationAsker {
                peer: context.peer.clone(),
                cancel: context.ct.clone(),
                exposed_name: exposed_name.to_string(),
            },
            allowed: gateway_mode && can_elicit && person,
            cannot_ask,
        }
    }
}

/// [`Gateway::asking`]'s answer.
pub(super) struct Asking {
    elicitor: ElicitationAsker,
    allowed: bool,
    /// Why no one could be asked (added to a denial that asked).
    pub cannot_ask: Option<&'static str>,
}

impl Asking {
    pub(super) fn asker(&self) -> Option<&dyn Asker> {
        self.allowed.then_some(&self.elicitor as &dyn Asker)
    }
}

/// The gateway name of a qualified `mcp__S__T`: `S__T`.
pub fn gateway_name(qualified: &str) -> String {
    qualified
        .strip_prefix("mcp__")
        .unwrap_or(qualified)
        .to_string()
}

/// What the client receives for a call the host decided.
/// `sent` is the tool result as the server sent it, when there was one.
fn result_for_client(
    report: &CallReport,
    sent: Option<CallToolResult>,
    cannot_ask: Option<&str>,
) -> CallToolResult {
    match report.outcome {
        Outcome::Ok | Outcome::ToolError => match sent {
            Some(result) => result,
            None => CallToolResult::error(vec![ContentBlock::text(format!(
                "warden: the result of `{}` could not be passed on",
                report.qualified
            ))]),
        },
        Outcome::Denied => {
            let mut text = report.denial_text();
            let asked = report
                .decision
                .as_ref()
                .is_some_and(|d| d.reasons.iter().any(|r| r.contains("asked")));
            if let Some(why) = cannot_ask
                && asked
            {
                text.push_str(&format!(" ({why})"));
            }
            CallToolResult::error(vec![ContentBlock::text(
                crate::scrub::clean(&text).into_owned(),
            )])
        }
        _ => {
            let text = format!(
                "warden: the call to `{}` failed ({}): {}",
                report.qualified,
                report.outcome.as_str(),
                report.error.as_deref().unwrap_or("no details")
            );
            CallToolResult::error(vec![ContentBlock::text(
                crate::scrub::clean(&text).into_owned(),
            )])
        }
    }
}

/// Each handler that reaches the host boxes its work: rmcp spawns a task
/// per request whose future holds the largest of these handlers' futures
/// (11 KB for a tool call before boxing), and moving that into the task
/// copied it whole several times per request (issue 15).
impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(self.capabilities())
            .with_server_info(Implementation::new("warden", env!("CARGO_PKG_VERSION")))
            .with_instructions(if self.inner.options.no_prefix {
                "warden gateway: the tools of one MCP server under their own names. Every call \
             is decided by warden's permission pipeline and audited; a denied call returns \
             an error naming the stage and reason."
            } else {
                "warden gateway: tools of the configured MCP servers, named SERVER__TOOL. Every \
             call is decided by warden's permission pipeline and audited; a denied call \
             returns an error naming the stage and reason."
            });
        info.protocol_version = MAX_PROTOCOL;
        info
    }

    /// Every known revision is accepted on the wire, but `server/discover`
    /// is answered like a server from before 2026-07-28 answers it (method
    /// not found), so modern clients fall back to `initialize` and the
    /// session protocol, which carries elicitation and list-changed
    /// notifications. A request made statelessly under 2026-07-28 anyway is
    /// served, but its `ask` decisions are denied: that revision has no
    /// server-to-client elicitation request.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let error = ErrorData::method_not_found::<DiscoverRequestMethod>();
        // Its only parameters are the `_meta` rmcp took out.
        let params = serde_json::to_value(&context.meta)
            .ok()
            .map(|meta| json!({"_meta": meta}));
        unserved::record(
            &self.inner.host,
            DiscoverRequestMethod::VALUE,
            params,
            &error,
        );
        Err(error)
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleServer>,
    ) {
        unserved::custom_notification(&self.inner.host, &notification.method, notification.params);
    }

    /// rmcp reads a request for a method it knows whose parameters are not
    /// that method's as a custom one: answered with invalid params and
    /// recorded (`malformed`), as an unreadable line is.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(malformed::custom_request(&self.inner.host, &request))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tracing::info!("gateway client initialized");
        clients::forward_notifications(self.clone(), context.peer.clone());
        self.watch_tools(context.peer);
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = Box::pin(self.inner.host.list_resources())
            .await
            .into_iter()
            .map(|r| r.resource)
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = Box::pin(self.inner.host.list_resource_templates())
            .await
            .into_iter()
            .map(|t| t.template)
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Box::pin(self.read(request, context, false))
            .await
            .map(|(read, _)| ReadResourceResponse::Complete(read))
    }

    /// Every client's subscription is decided and recorded like a read
    /// of the URI (CONTRACT §8), whether or not another client already
    /// holds it upstream: only the upstream `resources/subscribe` is
    /// shared (`Manager::send`). Updates go only to clients whose own
    /// subscribe was allowed. A repeat is decided again, and the latest
    /// decision holds: denied, the client's earlier subscription ends.
    /// The share is held on the server's current connection: when that
    /// connection ends, so does the subscription, the client told
    /// (`clients::renew_subscriptions`).
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let uri = request.uri.clone();
        let read = ReadResourceRequestParams::new(uri.clone());
        match Box::pin(self.read(read, context, true)).await {
            Ok((_, server)) => {
                let host = &self.inner.host;
                let share = server.and_then(|server| {
                    Some(Share {
                        generation: host.subscription_generation(&server)?,
                        server,
                    })
                });
                // Allowed, the client holds one more upstream share; if it
                // held one already (a repeat, or two at once), one is let go.
                let replaced = match share {
                    Some(share) => self.client.subscribe(&uri, share),
                    // The connection ended as it was made: nothing is held.
                    None => self.client.unsubscribe(&uri),
                };
                if let Some(old) = replaced {
                    self.release(&old.share, &uri).await;
                }
                Ok(())
            }
            Err(error) => {
                if let Some(old) = self.client.unsubscribe(&uri) {
                    self.release(&old.share, &uri).await;
                }
                Err(error)
            }
        }
    }

    /// Decided and recorded like the client's subscribe (CONTRACT §8).
    /// The client's subscription ends here whatever the decision (no
    /// more updates reach it); its share upstream is let go only when
    /// allowed (refused, the upstream subscription lasts until its
    /// connection ends, its updates reaching no one).
    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Box::pin(self.unsubscribe_decided(request.uri, context)).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = Box::pin(self.prompt_table())
            .await
            .into_values()
            .map(|p| p.definition)
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Box::pin(self.prompt(request, context))
            .await
            .map(GetPromptResponse::Complete)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Box::pin(self.completion(request, context)).await
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Box::pin(
            self.inner
                .clients
                .set_level(&self.inner.host, &self.client, request.level),
        )
        .await;
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.table().into_values().collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let view = self.inner.host.tools();
        let entry = self.lookup(&view, name)?;
        let mut definition = entry.definition.clone();
        definition.name = Cow::Owned(name.to_string());
        Some(definition)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Box::pin(self.call(request, context))
            .await
            .map(CallToolResponse::Complete)
    }
}

/// Sends the resource and prompt `list_changed` notifications asked for.
async fn notify_lists(
    peer: &Peer<RoleServer>,
    resources: bool,
    prompts: bool,
) -> Result<(), rmcp::service::ServiceError> {
    if resources {
        peer.notify_resource_list_changed().await?;
    }
    if prompts {
        peer.notify_prompt_list_changed().await?;
    }
    Ok(())
}

/// Puts an `ask` to the MCP client as a form elicitation. Anything but an
/// explicit `allow_once` is a deny; so is the client's request being
/// cancelled while it is asked.
struct ElicitationAsker {
    peer: Peer<RoleServer>,
    cancel: CancellationToken,
    exposed_name: String,
}

impl Asker for ElicitationAsker {
    fn ask<'a>(&'a self, prompt: &'a AskPrompt) -> BoxFuture<'a, AskAnswer> {
        Box::pin(async move {
            let Some(schema) = decision_schema() else {
                tracing::error!("cannot build the elicitation schema; denying");
                return AskAnswer::Deny;
            };
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: elicitation_message(prompt, &self.exposed_name),
                requested_schema: schema,
            };
            let answer = tokio::select! {
                answer = self.peer.create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT)) => answer,
                () = self.cancel.cancelled() => {
                    tracing::info!("the client cancelled the call while it was asked");
                    return AskAnswer::Deny;
                }
            };
            match answer {
                Ok(result) => answer_of(result.action, result.content.as_ref()),
                Err(error) => {
                    tracing::warn!(%error, "elicitation failed; denying");
                    AskAnswer::Deny
                }
            }
        })
    }
}

/// The one field the client fills in: `decision`, `allow_once` or `deny`.
fn decision_schema() -> Option<ElicitationSchema> {
    serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Allow this tool call?",
                "description": "allow_once runs this one call; deny refuses it.",
                "enum": [ALLOW_ONCE, DENY],
                "enumNames": ["Allow once", "Deny"]
            }
        },
        "required": ["decision"]
    }))
    .map_err(|error| tracing::error!(%error, "elicitation schema"))
    .ok()
}

fn answer_of(action: ElicitationAction, content: Option<&Value>) -> AskAnswer {
    let decision = content
        .and_then(|c| c.get("decision"))
        .and_then(Value::as_str);
    match (action, decision) {
        (ElicitationAction::Accept, Some(ALLOW_ONCE)) => AskAnswer::AllowOnce,
        _ => AskAnswer::Deny,
    }
}

fn elicitation_message(prompt: &AskPrompt, exposed_name: &str) -> String {
    // The target says the kind (CONTRACT §8).
    let (what, subject) = if prompt.qualified.starts_with("resource__") {
        ("resource read", "resource")
    } else if prompt.qualified.starts_with("prompt__") {
        ("prompt request", "prompt")
    } else if prompt.qualified.starts_with("sampling__") {
        // A server asks to use the client's model while serving a call.
        (
            "sampling request (the server asks to use your model)",
            "request",
        )
    } else {
        ("tool call", "tool")
    };
    // Every key and every value in full (the pipeline denies rather than
    // asking when they cannot all be shown).
    let args = if prompt.argument_lines.is_empty() {
        " (none)".to_string()
    } else {
        prompt
            .argument_lines
            .iter()
            .map(|l| format!("\n  {}: {}", display::line(&l.key), display::line(&l.value)))
            .collect::<String>()
    };
    // The client shows this to the person who approves: every part a
    // server, model or rule supplied is one neutralised field (as on
    // warden's own terminal, `terminal::render_prompt`).
    format!(
        "warden asks before this {what} runs.\n\
         server: {server}\n{subject}: {tool} (as {exposed})\narguments:{args}\n\
         why warden asks (stage `{stage}`): {reasons}\n\
         Choose allow_once to run this call once, or deny.",
        server = display::line(&prompt.server),
        tool = display::line(&prompt.tool),
        exposed = display::line(exposed_name),
        stage = prompt.stage,
        reasons = display::line(&prompt.reasons.join("; ")),
    )
}

/// Serves one client over stdin/stdout until it disconnects or `stop` is
/// cancelled.
pub async fn serve_stdio(gateway: Gateway, stop: CancellationToken) -> anyhow::Result<()> {
    // Non-blocking pipes when stdin and stdout are pipes (as MCP clients
    // start servers): reads and writes run on the reactor, not one
    // blocking-pool thread hand-off per message each way; anything else
    // (a terminal, a file) falls back to tokio's blocking stdio.
    // Pipes from the client widened as those to servers are
    // (`warden_sandbox::widen_pipe`); a terminal or file is left alone.
    for (name, widened) in [
        (
            "stdin",
            warden_sandbox::widen_pipe(std::io::stdin(), warden_sandbox::STDIO_PIPE_BYTES),
        ),
        (
            "stdout",
            warden_sandbox::widen_pipe(std::io::stdout(), warden_sandbox::STDIO_PIPE_BYTES),
        ),
    ] {
        if let Err(error) = widened {
            tracing::debug!(stream = name, %error, "left at its size");
        }
    }
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    // Every line from the client that cannot be read is answered and
    // recorded (`malformed`), not dropped as rmcp's transport drops it.
    let refusals = malformed::refusals(gateway.inner.host.clone());
    let transport = crate::mcp::wire::WireTransport::new(stdin, stdout, crate::mcp::MAX_LINE)
        .with_refusals(refusals);
    let running = unserved::Recording(gateway).serve(transport).await?;
    let cancel = running.cancellation_token();
    tokio::select! {
        quit = running.waiting() => {
            tracing::info!(reason = ?quit, "the gateway client disconnected");
        }
        () = stop.cancelled() => {
            cancel.cancel();
        }
    }
    Ok(())
}

/// Where to listen, which `Host` names (besides loopback ones) to accept,
/// and which bearer tokens ([`Tokens`]).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// Extra `Host` header names accepted (for `--allow-remote`).
    pub allowed_hosts: Vec<String>,
    pub tokens: Tokens,
}

/// Binds `addr` and returns the bound address and the server future, which
/// serves streamable HTTP at `/mcp` until `stop` is cancelled. Host and
/// Origin headers are checked against loopback names, the bound address
/// and `allowed_hosts`.
pub async fn bind_http(
    gateway: Gateway,
    options: HttpOptions,
    stop: CancellationToken,
) -> anyhow::Result<(
    SocketAddr,
    impl std::future::Future<Output = anyhow::Result<()>>,
)> {
    let listener = tokio::net::TcpListener::bind(options.addr).await?;
    let local = listener.local_addr()?;
    let port = local.port();
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
    if !local.ip().is_unspecified() && !local.ip().is_loopback() {
        hosts.push(match local.ip() {
            std::net::IpAddr::V4(ip) => ip.to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        });
    }
    hosts.extend(options.allowed_hosts.iter().cloned());
    let origins: Vec<String> = hosts.iter().map(|h| format!("http://{h}:{port}")).collect();
    let mut allowed_hosts = hosts.clone();
    allowed_hosts.push("::1".into());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(malformed::MAX_BODY)
        .with_cancellation_token(stop.child_token());
    let host = gateway.inner.host.clone();
    let service: StreamableHttpService<Gateway, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(gateway.for_new_client()), Arc::default(), config);
    // Authentication runs first: a request without a valid token never
    // reaches the MCP service (nor its Host/Origin checks or sessions),
    // nor is a body it sends recorded. Then a body rmcp cannot read is
    // answered with a JSON-RPC error and recorded (`malformed`).
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            host,
            malformed::answer_unreadable,
        ))
        .layer(axum::middleware::from_fn_with_state(
            options.tokens.clone(),
            auth::authenticate,
        ));
    let serve = async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { stop.cancelled_owned().await })
            .await?;
        Ok(())
    };
    Ok((local, serve))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client shows this to the person who approves: what a server
    /// or model supplied cannot drive its terminal, hide, or fake a line.
    #[test]
    fn the_elicitation_text_is_neutralised_field_by_field() {
        let arguments = json!({"p\nserver: trusted": "a\u{202e}b\u{9b}2J", "t": "\u{200b}"});
        let prompt = AskPrompt {
            server: "s".into(),
            tool: "t\u{1b}]0;x\u{7}".into(),
            qualified: "mcp__s__t".into(),
            argument_lines: warden_policy::argument_lines(&arguments).unwrap(),
            arguments,
            stage: warden_core::Stage::Rules,
            reasons: vec!["r\rok".into()],
        };
        let text = elicitation_message(&prompt, "s__t");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("tool: t^[]0;x^G (as s__t)"), "{text}");
        assert!(
            text.contains("/p^Jserver: trusted: \"a<U+202E>b<U+009B>2J\""),
            "{text}"
        );
        assert!(text.contains("/t: \"<U+200B>\""), "{text}");
        assert!(text.contains("r^Mok"), "{text}");
    }

    #[test]
    fn gateway_names_drop_only_the_mcp_prefix() {
        assert_eq!(gateway_name("mcp__notes__read_note"), "notes__read_note");
        assert_eq!(gateway_name("mcp__a__mcp__b"), "a__mcp__b");
    }

    #[test]
    fn only_an_accepted_allow_once_allows() {
        let allow = json!({"decision": "allow_once"});
        let deny = json!({"decision": "deny"});
        assert_eq!(
            answer_of(ElicitationAction::Accept, Some(&allow)),
            AskAnswer::AllowOnce
        );
        assert_eq!(
            answer_of(ElicitationAction::Accept, Some(&deny)),
            AskAnswer::Deny
        );
        assert_eq!(
            answer_of(ElicitationAction::Decline, Some(&allow)),
            AskAnswer::Deny
        );
        assert_eq!(answer_of(ElicitationAction::Cancel, None), AskAnswer::Deny);
        assert_eq!(
            answer_of(ElicitationAction::Accept, Some(&json!({"decision": true}))),
            AskAnswer::Deny
        );
    }

    #[test]
    fn the_decision_schema_is_valid() {
        assert!(decision_schema().is_some());
    }
}
