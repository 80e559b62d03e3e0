//! Resources and prompts (CONTRACT §8): listing (filtered: what can never
//! be allowed is not shown), and resolving `resources/read`,
//! `resources/subscribe` and `prompts/get` to one server before they take
//! the one mediated path ([`Host::mediate`]).
//!
//! Resource URIs are not renamed: a URI belongs to the server that lists
//! it or one of whose templates matches it, even when only one server
//! offers resources. A URI no server claims is refused as
//! `unknown_resource`, one two servers claim as `ambiguous_resource`
//! (never guessed). Prompts are named `prompt__S__P` (rules and policy)
//! and `S__P` in the gateway, like tools.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, Prompt, Reference, Resource, ResourceTemplate,
    ServerResult,
};
#[allow(deprecated)]
use rmcp::model::{ListRootsResult, LoggingLevel, SetLevelRequestParams};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use warden_audit::{Caller, Event, Outcome, RequestKind as AuditKind, RequestRecord};
use warden_core::digest::sha256_json;
use warden_core::{RequestKind, TransportKind};
use warden_policy::{Asker, CallContext, CallFacts, PinState, ServerFacts, ToolFacts};

use super::Host;
use super::call::{CallReport, Refusal, Refused};
use super::mediated::{Mediation, PendingCall, Resolved, elapsed_ms};
use crate::mcp::{
    CallError, Forwarded, Mediated, ProgressSink, SendOptions, ServerState, completion_arguments,
    keep_decided_context,
};

/// At most this many pages are read from one server's listing.
const MAX_PAGES: usize = 100;
/// At most this many items are taken from one server's listing.
const MAX_ITEMS: usize = 10_000;

/// The rule target of a server's resources: `resource__S`.
pub fn resource_target(server: &str) -> String {
    format!("resource__{}", crate::registry::sanitize(server))
}

/// The rule target of a server's prompt: `prompt__S__P`.
pub fn prompt_target(server: &str, prompt: &str) -> String {
    format!(
        "prompt__{}__{}",
        crate::registry::sanitize(server),
        crate::registry::sanitize(prompt)
    )
}

/// A resource as a server listed it.
#[derive(Debug, Clone)]
pub struct ListedResource {
    pub server: String,
    pub resource: Resource,
}

#[derive(Debug, Clone)]
pub struct ListedTemplate {
    pub server: String,
    pub template: ResourceTemplate,
}

/// A prompt as a server listed it, with its target `prompt__S__P`.
#[derive(Debug, Clone)]
pub struct ListedPrompt {
    pub server: String,
    pub qualified: String,
    pub prompt: Prompt,
}

/// A `resources/read` or `resources/subscribe`.
#[derive(Debug, Clone)]
pub struct ResourceRequest {
    pub uri: String,
    /// The server, when the caller names one (the repl); `None`: the
    /// server that owns the URI.
    pub server: Option<String>,
    pub subscribe: bool,
    pub caller: Caller,
}

/// A client's `resources/unsubscribe`.
#[derive(Debug, Clone)]
pub struct UnsubscribeRequest {
    pub uri: String,
    /// The share of the upstream subscription the client holds, if any.
    pub share: Option<Share>,
    pub caller: Caller,
}

/// Where one client's share of an upstream resource subscription is held:
/// the server, and the generation of the connection it was made on (it
/// ends with that connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    pub server: String,
    pub generation: u64,
}

/// How a caller names a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptRef {
    /// `prompt__S__P`.
    Qualified(String),
    /// A server and its own prompt name.
    Remote { server: String, prompt: String },
    /// A name the caller's front end could not map (recorded as asked).
    Unlisted(String),
}

#[derive(Debug, Clone)]
pub struct PromptRequest {
    pub target: PromptRef,
    pub arguments: Option<Map<String, Value>>,
    pub caller: Caller,
}

/// A `completion/complete`: decided like the request it prepares
/// (CONTRACT §8, extended): a prompt's like its `prompts/get` (kind
/// `prompt`, on the arguments known so far), a resource template's like a
/// read of the template (kind `resource`, on `{"uri": TEMPLATE}`).
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    /// The prompt, when `params` completes a prompt's argument (a
    /// template is named by `params` itself).
    pub prompt: Option<PromptRef>,
    /// As asked; a prompt's name is replaced by the server's own when sent.
    pub params: CompleteRequestParams,
    pub caller: Caller,
}

/// The rule-free target of a server's log level in the audit log:
/// `logging__S`.
pub fn logging_target(server: &str) -> String {
    format!("logging__{}", crate::registry::sanitize(server))
}

impl Host {
    /// Connected servers whose handshake declared `has` (a capability).
    pub fn servers_with(
        &self,
        has: impl Fn(&rmcp::model::ServerCapabilities) -> bool,
    ) -> Vec<String> {
        self.manager
            .connected_capabilities()
            .into_iter()
            .filter(|(_, caps)| has(caps))
            .map(|(name, _)| name)
            .collect()
    }

    /// Every page of one listing of one server, within the caps.
    async fn list_all<T>(
        &self,
        server: &str,
        request: impl Fn(Option<String>) -> Forwarded,
        take: impl Fn(ServerResult) -> Option<(Vec<T>, Option<String>)>,
    ) -> Result<Vec<T>, String> {
        let mut items = Vec::new();
        let mut cursor = None;
        let mut seen = HashSet::new();
        for _ in 0..MAX_PAGES {
            let result = self
                .manager
                .forward(server, request(cursor.clone()), SendOptions::default())
                .await
                .map_err(|e| e.to_string())?;
            let Some((page, next)) = take(result) else {
                return Err("the answer is not a listing".into());
            };
            items.extend(page);
            if items.len() > MAX_ITEMS {
                return Err(format!("more than {MAX_ITEMS} items"));
            }
            match next {
                Some(next) if seen.insert(next.clone()) => cursor = Some(next),
                Some(_) => return Err("a page repeated an earlier cursor".into()),
                None => return Ok(items),
            }
        }
        Err(format!("more than {MAX_PAGES} pages"))
    }

    /// One server's resources, all of them (unfiltered).
    async fn server_resources(&self, server: &str) -> Result<Vec<Resource>, String> {
        self.list_all(server, Forwarded::ListResources, |r| match r {
            ServerResult::ListResourcesResult(r) => Some((r.resources, r.next_cursor)),
            _ => None,
        })
        .await
    }

    async fn server_templates(&self, server: &str) -> Result<Vec<ResourceTemplate>, String> {
        self.list_all(server, Forwarded::ListResourceTemplates, |r| match r {
            ServerResult::ListResourceTemplatesResult(r) => {
                Some((r.resource_templates, r.next_cursor))
            }
            _ => None,
        })
        .await
    }

    async fn server_prompts(&self, server: &str) -> Result<Vec<Prompt>, String> {
        self.list_all(server, Forwarded::ListPrompts, |r| match r {
            ServerResult::ListPromptsResult(r) => Some((r.prompts, r.next_cursor)),
            _ => None,
        })
        .await
    }

    /// The resources of every connected server that offers them, without
    /// those a `deny` rule matches and those two servers list (they can
    /// never be read).
    pub async fn list_resources(&self) -> Vec<ListedResource> {
        let mut out: Vec<ListedResource> = Vec::new();
        for server in self.servers_with(|c| c.resources.is_some()) {
            let target = resource_target(&server);
            let dirs = self.server_dirs(&server);
            match self.server_resources(&server).await {
                Ok(resources) => out.extend(
                    resources
                        .into_iter()
                        .filter(|r| !self.pipeline().resource_hidden(&target, &r.uri, &dirs))
                        .map(|resource| ListedResource {
                            server: server.clone(),
                            resource,
                        }),
                ),
                Err(error) => tracing::warn!(%server, %error, "resources/list failed"),
            }
        }
        let mut owners: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
        for r in &out {
            owners
                .entry(r.resource.uri.as_str())
                .or_default()
                .insert(r.server.as_str());
        }
        let ambiguous: HashSet<String> = owners
            .into_iter()
            .filter(|(_, servers)| servers.len() > 1)
            .map(|(uri, _)| uri.to_string())
            .collect();
        out.retain(|r| !ambiguous.contains(&r.resource.uri));
        out
    }

    /// The resource templates of every connected server that offers
    /// resources, without those every expansion of which a `deny` rule
    /// matches (`Pipeline::template_hidden`; a server whose resources a
    /// rule denies outright lists none), as denied tools are not listed.
    pub async fn list_resource_templates(&self) -> Vec<ListedTemplate> {
        let mut out = Vec::new();
        for server in self.servers_with(|c| c.resources.is_some()) {
            if self.resources_denied(&server) {
                continue;
            }
            let target = resource_target(&server);
            let dirs = self.server_dirs(&server);
            match self.server_templates(&server).await {
                Ok(templates) => out.extend(
                    templates
                        .into_iter()
                        .filter(|t| {
                            !self
                                .pipeline()
                                .template_hidden(&target, &t.uri_template, &dirs)
                        })
                        .map(|template| ListedTemplate {
                            server: server.clone(),
                            template,
                        }),
                ),
                Err(error) => tracing::warn!(%server, %error, "resources/templates/list failed"),
            }
        }
        out
    }

    /// Whether a rule denies every prompt `server` has or may list (a
    /// `deny` without conditions on `prompt__S`, `prompt__S__*`, …).
    pub fn prompts_denied(&self, server: &str) -> bool {
        let prefix = format!("prompt__{}__", crate::registry::sanitize(server));
        self.pipeline().denies_every(RequestKind::Prompt, &prefix)
    }

    /// Whether a rule denies all of `server`'s resources outright.
    pub fn resources_denied(&self, server: &str) -> bool {
        self.pipeline()
            .hidden_request(RequestKind::Resource, &resource_target(server))
    }

    /// Whether the rules deny everything `server` offers: each tool it
    /// listed (or none listed), its resources (or it offers none) and its
    /// prompts (or it offers none). Such a server's log messages carry its
    /// data to a model that may see nothing else of it, so the gateway
    /// drops them.
    pub fn denies_everything_of(&self, server: &str) -> bool {
        let pipeline = self.pipeline();
        let view = self.tools();
        let tools = view.all_of(server).all(|t| pipeline.hidden(&t.qualified));
        let offered = self
            .manager
            .status_of(server)
            .and_then(|s| s.capabilities)
            .unwrap_or_default();
        tools
            && (offered.resources.is_none() || self.resources_denied(server))
            && (offered.prompts.is_none() || self.prompts_denied(server))
    }

    /// The prompts of every connected server that offers them, except
    /// those a `deny` rule without conditions matches. Two prompts whose
    /// targets collide (after replacing characters) are both left out.
    pub async fn list_prompts(&self) -> Vec<ListedPrompt> {
        let mut table: BTreeMap<String, ListedPrompt> = BTreeMap::new();
        let mut ambiguous = Vec::new();
        for server in self.servers_with(|c| c.prompts.is_some()) {
            match self.server_prompts(&server).await {
                Ok(prompts) => {
                    for prompt in prompts {
                        let qualified = prompt_target(&server, &prompt.name);
                        if self
                            .pipeline()
                            .hidden_request(RequestKind::Prompt, &qualified)
                        {
                            continue;
                        }
                        let listed = ListedPrompt {
                            server: server.clone(),
                            qualified: qualified.clone(),
                            prompt,
                        };
                        if table.insert(qualified.clone(), listed).is_some() {
                            ambiguous.push(qualified);
                        }
                    }
                }
                Err(error) => tracing::warn!(%server, %error, "prompts/list failed"),
            }
        }
        for name in ambiguous {
            table.remove(&name);
        }
        table.into_values().collect()
    }

    /// Decides, records and performs one `resources/read` or
    /// `resources/subscribe` (CONTRACT §8, kind `resource`).
    pub async fn read_resource(
        &self,
        request: ResourceRequest,
        asker: Option<&dyn Asker>,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> CallReport {
        let started = Instant::now();
        let call_id = uuid::Uuid::new_v4().to_string();
        let arguments = json!({ "uri": request.uri });
        let server = match self.resource_owner(&request).await {
            Ok(server) => server,
            Err(refusal) => {
                return self.refuse(
                    RequestKind::Resource,
                    request.caller,
                    &arguments,
                    Refused {
                        method: if request.subscribe {
                            "resources/subscribe"
                        } else {
                            "resources/read"
                        },
                        call_id,
                        refusal,
                        started,
                    },
                );
            }
        };
        let outbound = if request.subscribe {
            Mediated::Subscribe {
                uri: request.uri.clone(),
            }
        } else {
            Mediated::ReadResource {
                uri: request.uri.clone(),
            }
        };
        self.mediate_resource(
            &server,
            &request.uri,
            outbound,
            request.caller,
            &arguments,
            Mediation {
                asker,
                cancel,
                progress,
                call_id,
                started,
                downstream: None,
            },
        )
        .await
    }

    /// The one decided path of a resource request once its server is
    /// known (read, subscribe, unsubscribe): facts of the URI on that
    /// server, then [`Host::mediate`].
    async fn mediate_resource(
        &self,
        server: &str,
        uri: &str,
        outbound: Mediated,
        caller: Caller,
        arguments: &Value,
        how: Mediation<'_>,
    ) -> CallReport {
        let facts = self.request_facts(
            RequestKind::Resource,
            server,
            uri,
            resource_target(server),
            arguments,
        );
        self.mediate(Resolved { facts, outbound }, caller, arguments, how)
            .await
    }

    /// Decides, records and performs a client's `resources/unsubscribe`
    /// (kind `resource`, like its subscribe: CONTRACT §8). The upstream
    /// share the client holds ([`UnsubscribeRequest::share`]) is let go
    /// only when allowed; the server is unsubscribed after the last
    /// share on its connection. A URI no server claims is refused and
    /// recorded like a read of it.
    pub async fn unsubscribe_resource(
        &self,
        request: UnsubscribeRequest,
        asker: Option<&dyn Asker>,
        cancel: CancellationToken,
    ) -> CallReport {
        let started = Instant::now();
        let call_id = uuid::Uuid::new_v4().to_string();
        let arguments = json!({ "uri": request.uri });
        // A share names the server it is held on; without one the URI's
        // owner is resolved as for a read.
        let server = match &request.share {
            Some(share) => share.server.clone(),
            None => {
                let read = ResourceRequest {
                    uri: request.uri.clone(),
                    server: None,
                    subscribe: false,
                    caller: request.caller,
                };
                match self.resource_owner(&read).await {
                    Ok(server) => server,
                    Err(refusal) => {
                        return self.refuse(
                            RequestKind::Resource,
                            request.caller,
                            &arguments,
                            Refused {
                                method: "resources/unsubscribe",
                                call_id,
                                refusal,
                                started,
                            },
                        );
                    }
                }
            }
        };
        let outbound = Mediated::Unsubscribe {
            uri: request.uri.clone(),
            share: request.share.map(|s| s.generation),
        };
        self.mediate_resource(
            &server,
            &request.uri,
            outbound,
            request.caller,
            &arguments,
            Mediation {
                asker,
                cancel,
                progress: None,
                call_id,
                started,
                downstream: None,
            },
        )
        .await
    }

    /// Lets go of a share of an upstream subscription that no client
    /// asked to end (its client went away, or replaced or lost it):
    /// recorded like `logging/setLevel`, a `request` of kind `resource`
    /// and method `resources/unsubscribe` with `decision: null`, written
    /// ahead (nothing is sent when the log refuses it), then its
    /// `request_result`. Not decided: it only stops data.
    pub async fn release_subscription(&self, share: &Share, uri: &str) -> Result<(), String> {
        let started = Instant::now();
        let call_id = self.write_ahead_undecided(
            AuditKind::Resource,
            &share.server,
            resource_target(&share.server),
            "resources/unsubscribe",
            json!({ "uri": uri }),
            Caller::Gateway,
        )?;
        let recorded = PendingCall::new(self, AuditKind::Resource, &call_id, started);
        let answer = self
            .manager
            .forward(
                &share.server,
                Forwarded::Unsubscribe {
                    uri: uri.to_string(),
                    generation: share.generation,
                },
                SendOptions::default(),
            )
            .await;
        let duration = elapsed_ms(started);
        match answer {
            Ok(result) => {
                let result = serde_json::to_value(&result).ok();
                // Fail-closed: an answer the log could not record is an
                // error to the caller.
                recorded
                    .finish_with(Outcome::Ok, duration, result.as_ref(), None, None)
                    .map_err(|refusal| refusal.to_string())
            }
            Err(error) => {
                let _ = recorded.finish_with(
                    Outcome::RpcError,
                    duration,
                    None,
                    Some(error.to_string()),
                    None,
                );
                Err(error.to_string())
            }
        }
    }

    /// The generation of `server`'s live connection, on which a
    /// subscription made now is held ([`Share`]).
    pub fn subscription_generation(&self, server: &str) -> Option<u64> {
        self.manager.subscription_generation(server)
    }

    /// Decides, records and performs one `prompts/get` (kind `prompt`).
    pub async fn get_prompt(
        &self,
        request: PromptRequest,
        asker: Option<&dyn Asker>,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> CallReport {
        let started = Instant::now();
        let call_id = uuid::Uuid::new_v4().to_string();
        let arguments = request.arguments.clone().map_or(Value::Null, Value::Object);
        let (server, name, qualified) = match self.resolve_prompt(&request.target).await {
            Ok(found) => found,
            Err(refusal) => {
                return self.refuse(
                    RequestKind::Prompt,
                    request.caller,
                    &arguments,
                    Refused {
                        method: "prompts/get",
                        call_id,
                        refusal,
                        started,
                    },
                );
            }
        };
        let facts = self.request_facts(RequestKind::Prompt, &server, &name, qualified, &arguments);
        let outbound = Mediated::GetPrompt {
            name,
            arguments: request.arguments.clone(),
        };
        self.mediate(
            Resolved { facts, outbound },
            request.caller,
            &arguments,
            Mediation {
                asker,
                cancel,
                progress,
                call_id,
                started,
                downstream: None,
            },
        )
        .await
    }

    /// Decides, records and performs one `completion/complete`
    /// ([`CompletionRequest`]): a completion is the server's data (values
    /// it proposes for a prompt argument or a resource URI), so it passes
    /// the same pipeline and write-ahead audit as the request it prepares,
    /// with `method: "completion/complete"`. A prompt or template the
    /// listing does not show (hidden by a deny rule, or unknown) is
    /// refused and recorded like a `prompts/get` or read of it.
    pub async fn complete(
        &self,
        request: CompletionRequest,
        asker: Option<&dyn Asker>,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> CallReport {
        let started = Instant::now();
        let call_id = uuid::Uuid::new_v4().to_string();
        let CompletionRequest {
            prompt,
            mut params,
            caller,
        } = request;
        // What the log keeps: what is decided, and for a template also
        // the template, the value being completed and the context's values
        // (the completion's whole context, so the record shows what was
        // probed).
        let recorded = match &params.r#ref {
            Reference::Resource(template) => {
                let mut recorded = completion_arguments(&params);
                recorded["template"] = json!(template.uri);
                recorded["argument"] =
                    json!({"name": params.argument.name, "value": params.argument.value});
                if let Some(known) = params.context.as_ref().and_then(|c| c.arguments.as_ref()) {
                    recorded["context"] = json!(known);
                }
                recorded
            }
            _ => completion_arguments(&params),
        };
        // What is sent is what is decided: the context's copy of the
        // argument being completed, and a template's context values for
        // names it does not have, are kept on record and not sent.
        keep_decided_context(&mut params);
        let refused = |kind, refusal| {
            self.refuse(
                kind,
                caller,
                &recorded,
                Refused {
                    method: "completion/complete",
                    call_id: call_id.clone(),
                    refusal,
                    started,
                },
            )
        };
        let (kind, server, subject, target) = match (&mut params.r#ref, &prompt) {
            (Reference::Prompt(asked), Some(prompt)) => match self.resolve_prompt(prompt).await {
                Ok((server, name, qualified)) => {
                    asked.name = name.clone();
                    (RequestKind::Prompt, server, name, qualified)
                }
                Err(refusal) => return refused(RequestKind::Prompt, refusal),
            },
            (Reference::Resource(template), _) => match self.template_owner(&template.uri).await {
                Ok(server) => {
                    let target = resource_target(&server);
                    (RequestKind::Resource, server, template.uri.clone(), target)
                }
                Err(refusal) => return refused(RequestKind::Resource, refusal),
            },
            _ => {
                let refusal = Refusal {
                    outcome: Outcome::UnknownPrompt,
                    server: None,
                    tool: None,
                    qualified: "completion/complete".into(),
                    error: "a completion of an unknown kind of reference".into(),
                };
                return refused(RequestKind::Prompt, refusal);
            }
        };
        let offers = self
            .servers_with(|c| c.completions.is_some())
            .contains(&server);
        if !offers {
            // The server completes nothing: nothing is sent to it and
            // nothing comes back, so there is nothing to decide; but the
            // caller asked, so it is recorded (CONTRACT §6), undecided.
            let report = CallReport {
                server: Some(server),
                tool: Some(subject),
                decision: None,
                outcome: Outcome::Ok,
                result: serde_json::to_value(CompleteResult::default()).ok(),
                error: Some(
                    "the server does not offer completions: answered empty, nothing sent".into(),
                ),
                duration_ms: elapsed_ms(started),
                qualified: target,
                call_id,
                kind,
                method: "completion/complete",
            };
            self.audit
                .record(self.request_record(caller, &recorded, &report, None));
            return CallReport {
                error: None,
                ..report
            };
        }
        let arguments = completion_arguments(&params);
        let filler = (kind == RequestKind::Resource).then(|| params.clone());
        let facts = self.request_facts(kind, &server, &subject, target, &arguments);
        let mut report = self
            .mediate(
                Resolved {
                    facts,
                    outbound: Mediated::Complete(Box::new(params)),
                },
                caller,
                &recorded,
                Mediation {
                    asker,
                    cancel,
                    progress,
                    call_id,
                    started,
                    downstream: None,
                },
            )
            .await;
        if let (Some(params), Some(result)) = (filler, report.result.as_mut()) {
            self.drop_denied_completions(&server, &params, result);
        }
        report
    }

    /// Removes from a template completion's answer each value whose URI
    /// (the template filled with it) a `deny` rule matches, as a listing
    /// leaves out what can never be read: the server's own suggestions
    /// must not name a denied resource to the caller.
    fn drop_denied_completions(
        &self,
        server: &str,
        params: &CompleteRequestParams,
        result: &mut Value,
    ) {
        let Some(values) = result
            .pointer_mut("/completion/values")
            .and_then(Value::as_array_mut)
        else {
            return;
        };
        let target = resource_target(server);
        let dirs = self.server_dirs(server);
        let pipeline = self.pipeline();
        let before = values.len();
        values.retain(|v| {
            let Some(value) = v.as_str() else {
                return false;
            };
            let mut filled = params.clone();
            filled.argument.value = value.to_string();
            let uri = completion_arguments(&filled)["uri"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            !pipeline.resource_hidden(&target, &uri, &dirs)
        });
        let dropped = (before - values.len()) as u64;
        if dropped > 0
            && let Some(total) = result.pointer_mut("/completion/total")
            && let Some(n) = total.as_u64()
        {
            *total = json!(n.saturating_sub(dropped));
        }
    }

    /// The one server whose (shown) templates include `template` exactly.
    async fn template_owner(&self, template: &str) -> Result<String, Refusal> {
        let mut owners: Vec<String> = self
            .list_resource_templates()
            .await
            .into_iter()
            .filter(|t| t.template.uri_template == template)
            .map(|t| t.server)
            .collect();
        owners.dedup();
        let refusal = |outcome, error: String| Refusal {
            outcome,
            server: None,
            tool: Some(template.to_string()),
            qualified: "resource__".into(),
            error,
        };
        match owners.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(refusal(
                Outcome::UnknownResource,
                format!("no connected server lists the resource template `{template}`"),
            )),
            many => Err(refusal(
                Outcome::AmbiguousResource,
                format!(
                    "the resource template `{template}` is listed by several servers ({}); \
                     warden does not guess",
                    many.join(", ")
                ),
            )),
        }
    }

    /// Passes `logging/setLevel` on to `server`, recorded (CONTRACT §6,
    /// extended): a `request` of kind `logging` (target `logging__S`,
    /// `decision: null`) written ahead like a decided request's, then its
    /// `request_result`. Not decided: a level only sets how much the
    /// server logs, and what it logs is mediated on the way back (the
    /// gateway drops the log messages of a server whose every tool,
    /// resource and prompt is denied).
    #[allow(deprecated)]
    pub async fn set_log_level(
        &self,
        server: &str,
        level: LoggingLevel,
        caller: Caller,
    ) -> Result<(), String> {
        let started = Instant::now();
        let call_id = self.write_ahead_undecided(
            AuditKind::Logging,
            server,
            logging_target(server),
            "logging/setLevel",
            json!({ "level": level }),
            caller,
        )?;
        let recorded = PendingCall::new(self, AuditKind::Logging, &call_id, started);
        let answer = self
            .manager
            .forward(
                server,
                Forwarded::SetLevel(SetLevelRequestParams::new(level)),
                SendOptions::default(),
            )
            .await;
        let duration = elapsed_ms(started);
        match answer {
            Ok(result) => {
                let result = serde_json::to_value(&result).ok();
                // Fail-closed: an answer the log could not record is an
                // error to the caller.
                recorded
                    .finish_with(Outcome::Ok, duration, result.as_ref(), None, None)
                    .map_err(|refusal| refusal.to_string())
            }
            Err(error) => {
                let outcome = match error {
                    CallError::Timeout(_) => Outcome::Timeout,
                    CallError::Cancelled => Outcome::Cancelled,
                    _ => Outcome::RpcError,
                };
                let _ =
                    recorded.finish_with(outcome, duration, None, Some(error.to_string()), None);
                Err(error.to_string())
            }
        }
    }

    /// Records warden's answer to `server`'s `roots/list` (CONTRACT §6,
    /// extended): a `request` of kind `roots` (target `roots__S`,
    /// `decision: null`), written ahead, then its `request_result` with
    /// the answer's digest and `answered_by: "warden"`. `Err`: the
    /// session fails closed and the server gets no answer.
    // `roots/list` is the session protocol's (2025-11-25); rmcp deprecates
    // it for 2026-07-28 (SEP-2577).
    #[allow(deprecated)]
    pub(super) fn record_roots(
        &self,
        server: &str,
        answer: &ListRootsResult,
        caller: Caller,
    ) -> Result<(), String> {
        let started = Instant::now();
        let call_id = self.write_ahead_undecided(
            AuditKind::Roots,
            server,
            format!("roots__{}", crate::registry::sanitize(server)),
            "roots/list",
            json!({}),
            caller,
        )?;
        let answer = serde_json::to_value(answer).ok();
        PendingCall::new(self, AuditKind::Roots, &call_id, started)
            .finish_with(
                Outcome::Ok,
                elapsed_ms(started),
                answer.as_ref(),
                None,
                Some("warden".into()),
            )
            .map_err(|refusal| refusal.to_string())
    }

    /// Writes ahead the `request` record of something warden passes on
    /// or answers without a decision (`decision: null`); its `call_id`.
    /// `Err`: the log refused it, and the request must not go out.
    fn write_ahead_undecided(
        &self,
        kind: AuditKind,
        server: &str,
        target: String,
        method: &str,
        arguments: Value,
        caller: Caller,
    ) -> Result<String, String> {
        let call_id = uuid::Uuid::new_v4().to_string();
        let pending = Event::Request(RequestRecord {
            call_id: call_id.clone(),
            kind,
            server: Some(server.to_string()),
            target,
            method: Some(method.into()),
            caller,
            args_sha256: sha256_json(&arguments),
            arguments,
            decision: None,
            outcome: Outcome::Pending,
            error: None,
            capped: None,
        });
        self.audit
            .write_ahead(pending)
            .map_err(|refusal| refusal.to_string())?;
        Ok(call_id)
    }

    /// The pipeline's facts for a request of another kind than `tool`.
    pub(super) fn request_facts(
        &self,
        kind: RequestKind,
        server: &str,
        subject: &str,
        target: String,
        arguments: &Value,
    ) -> CallFacts {
        let config = self.server_config(server);
        let config = config.as_ref();
        let call_index = self
            .call_index
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        CallFacts {
            kind,
            server: ServerFacts {
                name: server.to_string(),
                trust: config.map(|s| s.trust).unwrap_or_default(),
                transport: config.map_or(TransportKind::Stdio, |s| s.transport.kind()),
                scope: config.map_or(crate::config::Scope::Project, |s| s.scope),
                dirs: config.map_or_else(Default::default, |s| {
                    crate::launch::server_dirs(s, self.runtime.path())
                }),
            },
            tool: ToolFacts {
                name: subject.to_string(),
                qualified: target,
                annotations: Value::Null,
                input_schema: Value::Null.into(),
                pin: PinState::Pinned,
            },
            arguments: arguments.clone(),
            context: CallContext {
                mode: self.mode,
                session: self.session.clone(),
                call_index,
            },
        }
    }

    /// The server a resource request goes to, or why it is refused.
    async fn resource_owner(&self, request: &ResourceRequest) -> Result<String, Refusal> {
        let uri = &request.uri;
        let refusal = |outcome, server: Option<String>, error: String| Refusal {
            outcome,
            qualified: server
                .as_deref()
                .map_or_else(|| "resource__".to_string(), resource_target),
            server,
            tool: Some(uri.clone()),
            error,
        };
        if let Some(server) = &request.server {
            // One server's state, not every server's status and tool list.
            let Some(status) = self.manager.status_of(server) else {
                return Err(refusal(
                    Outcome::UnknownServer,
                    Some(server.clone()),
                    format!("unknown server `{server}`"),
                ));
            };
            return match status.state {
                // The trust stage denies it.
                ServerState::Blocked | ServerState::Connected => Ok(server.clone()),
                state => Err(refusal(
                    Outcome::ServerUnavailable,
                    Some(server.clone()),
                    format!(
                        "server `{server}` is not available: {}",
                        status.error.unwrap_or_else(|| state.as_str().to_string())
                    ),
                )),
            };
        }
        // Even with one server offering resources, a URI it does not claim
        // is not sent to it on a guess (CONTRACT §8: the lister, or the
        // server whose template matches).
        let candidates = self.servers_with(|c| c.resources.is_some());
        let mut owners = Vec::new();
        for server in &candidates {
            let listed = self
                .server_resources(server)
                .await
                .unwrap_or_default()
                .iter()
                .any(|r| &r.uri == uri);
            let templated = !listed
                && self
                    .server_templates(server)
                    .await
                    .unwrap_or_default()
                    .iter()
                    .any(|t| super::uri_template::matches(&t.uri_template, uri));
            if listed || templated {
                owners.push(server.clone());
            }
        }
        match owners.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(refusal(
                Outcome::UnknownResource,
                None,
                format!("no connected server lists the resource `{uri}` or a template for it"),
            )),
            many => Err(refusal(
                Outcome::AmbiguousResource,
                None,
                format!(
                    "the resource `{uri}` is claimed by several servers ({}); warden does not \
                     guess",
                    many.join(", ")
                ),
            )),
        }
    }

    /// `(server, remote name, prompt__S__P)` of a prompt, or why it is
    /// refused.
    async fn resolve_prompt(
        &self,
        target: &PromptRef,
    ) -> Result<(String, String, String), Refusal> {
        let unknown = |qualified: String, server: Option<String>, error: String| Refusal {
            outcome: Outcome::UnknownPrompt,
            server,
            tool: None,
            qualified,
            error,
        };
        match target {
            PromptRef::Unlisted(name) => Err(unknown(
                name.clone(),
                None,
                format!("unknown prompt `{name}`"),
            )),
            PromptRef::Qualified(qualified) => self
                .list_prompts()
                .await
                .into_iter()
                .find(|p| &p.qualified == qualified)
                .map(|p| (p.server, p.prompt.name, p.qualified))
                .ok_or_else(|| {
                    unknown(
                        qualified.clone(),
                        None,
                        format!("unknown prompt `{qualified}`"),
                    )
                }),
            PromptRef::Remote { server, prompt } => {
                let qualified = prompt_target(server, prompt);
                let blocked = self
                    .manager
                    .status_of(server)
                    .is_some_and(|s| s.state == ServerState::Blocked);
                if blocked {
                    // Never listed; the trust stage denies it.
                    return Ok((server.clone(), prompt.clone(), qualified));
                }
                let found = self.server_prompts(server).await.unwrap_or_default();
                if found.iter().any(|p| &p.name == prompt) {
                    Ok((server.clone(), prompt.clone(), qualified))
                } else {
                    Err(unknown(
                        qualified,
                        Some(server.clone()),
                        format!("server `{server}` has no prompt `{prompt}`"),
                    ))
                }
            }
        }
    }
}
