//! The gateway's resources, prompts and completion (CONTRACT §8):
//! listing through the host (filtered), `resources/read`,
//! `resources/subscribe`, `prompts/get` and `completion/complete` through
//! the host's one mediated path, and what a client sees when one is
//! refused.
//!
//! Error mapping: a refused resource read or prompt is a JSON-RPC error
//! whose message says why ("Denied by warden's rules stage: …"); a URI or
//! prompt that resolves to no server is `-32602` (invalid params), as MCP
//! prescribes for an unknown resource; an upstream error keeps its code.
#![allow(deprecated)]

use std::borrow::Cow;
use std::collections::BTreeMap;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, ErrorCode, GetPromptRequestParams, GetPromptResult,
    Prompt, ReadResourceRequestParams, ReadResourceResult, Reference,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use warden_audit::Outcome;

use super::Gateway;
use super::clients::with_progress;
use crate::host::{
    CallReport, Caller, CompletionRequest, ListedPrompt, PromptRef, PromptRequest, ResourceRequest,
    UnsubscribeRequest,
};

/// A prompt as the gateway shows it, and where it comes from.
pub(super) struct ExposedPrompt {
    pub listed: ListedPrompt,
    pub definition: Prompt,
}

impl Gateway {
    /// The prompts shown, by gateway name (`S__P`, or the remote name with
    /// `--no-prefix`); names that would collide are left out.
    pub(super) async fn prompt_table(&self) -> BTreeMap<String, ExposedPrompt> {
        let mut table = BTreeMap::new();
        let mut ambiguous = Vec::new();
        for listed in self.inner.host.list_prompts().await {
            let name = if self.inner.options.no_prefix {
                listed.prompt.name.clone()
            } else {
                listed
                    .qualified
                    .strip_prefix("prompt__")
                    .unwrap_or(&listed.qualified)
                    .to_string()
            };
            let mut definition = listed.prompt.clone();
            definition.name = name.clone();
            if table
                .insert(name.clone(), ExposedPrompt { listed, definition })
                .is_some()
            {
                ambiguous.push(name);
            }
        }
        for name in ambiguous {
            table.remove(&name);
        }
        table
    }

    /// A `resources/read` or `resources/subscribe`: the answer, and the
    /// server it went to.
    pub(super) async fn read(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
        subscribe: bool,
    ) -> Result<(ReadResourceResult, Option<String>), ErrorData> {
        let token = context.meta.get_progress_token();
        let host = &self.inner.host;
        let uri = request.uri.clone();
        let asking = self.asking(&context, &uri);
        let report = with_progress(&context.peer, token, |progress| {
            host.read_resource(
                ResourceRequest {
                    uri: uri.clone(),
                    server: None,
                    subscribe,
                    caller: Caller::Gateway,
                },
                asking.asker(),
                context.ct.clone(),
                progress,
            )
        })
        .await;
        let server = report.server.clone();
        match refused(&report, asking.cannot_ask) {
            Some(error) => Err(error),
            // subscribe's answer is empty.
            None if subscribe => Ok((ReadResourceResult::new(Vec::new()), server)),
            None => answer(&report)
                .map(|read| (read, server))
                .ok_or_else(|| unusable(&report)),
        }
    }

    /// A client's `resources/unsubscribe` (see `ServerHandler::unsubscribe`).
    pub(super) async fn unsubscribe_decided(
        &self,
        uri: String,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let held = self.client.unsubscribe(&uri);
        let asking = self.asking(&context, &uri);
        let report = self
            .inner
            .host
            .unsubscribe_resource(
                UnsubscribeRequest {
                    uri,
                    share: held.map(|h| h.share),
                    caller: Caller::Gateway,
                },
                asking.asker(),
                context.ct.clone(),
            )
            .await;
        match refused(&report, asking.cannot_ask) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    pub(super) async fn prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResult, ErrorData> {
        let table = self.prompt_table().await;
        let target = match table.get(&request.name) {
            Some(exposed) => PromptRef::Qualified(exposed.listed.qualified.clone()),
            None => PromptRef::Unlisted(request.name.clone()),
        };
        let token = context.meta.get_progress_token();
        let host = &self.inner.host;
        let asking = self.asking(&context, &request.name);
        let report = with_progress(&context.peer, token, |progress| {
            host.get_prompt(
                PromptRequest {
                    target,
                    arguments: request.arguments.clone(),
                    caller: Caller::Gateway,
                },
                asking.asker(),
                context.ct.clone(),
                progress,
            )
        })
        .await;
        match refused(&report, asking.cannot_ask) {
            Some(error) => Err(error),
            None => answer(&report).ok_or_else(|| unusable(&report)),
        }
    }

    /// `completion/complete`, decided and recorded like the request it
    /// prepares (`Host::complete`), then passed on to the server that
    /// owns the prompt or resource template, with that server's own
    /// prompt name.
    pub(super) async fn completion(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let prompt = match &request.r#ref {
            Reference::Prompt(prompt) => {
                let table = self.prompt_table().await;
                Some(match table.get(&prompt.name) {
                    Some(exposed) => PromptRef::Qualified(exposed.listed.qualified.clone()),
                    None => PromptRef::Unlisted(prompt.name.clone()),
                })
            }
            Reference::Resource(_) => None,
            _ => return Err(ErrorData::invalid_params("unknown reference type", None)),
        };
        let token = context.meta.get_progress_token();
        let host = &self.inner.host;
        // Never put to the person: a client completes as its user types,
        // so they would be asked at every keystroke. An `ask` is a deny,
        // saying so; an `allow` rule lets completions through.
        let report = with_progress(&context.peer, token, |progress| {
            host.complete(
                CompletionRequest {
                    prompt,
                    params: request,
                    caller: Caller::Gateway,
                },
                None,
                context.ct.clone(),
                progress,
            )
        })
        .await;
        let cannot_ask = Some(
            "a completion is never put to the person, who would be asked at every keystroke: an \
             `allow` rule for the prompt or resource lets its completions through",
        );
        match refused(&report, cannot_ask) {
            Some(error) => Err(error),
            None => answer(&report).ok_or_else(|| unusable(&report)),
        }
    }
}

/// The server's answer in a report, parsed back as the type it was.
fn answer<T: serde::de::DeserializeOwned>(report: &CallReport) -> Option<T> {
    report
        .result
        .clone()
        .and_then(|v| serde_json::from_value::<T>(v).ok())
}

/// The error a client gets for a request that was not answered: refused
/// (unknown, ambiguous, denied, not recorded) or failed upstream.
fn refused(report: &CallReport, cannot_ask: Option<&str>) -> Option<ErrorData> {
    let clean = |text: &str| crate::scrub::clean(text).into_owned();
    match report.outcome {
        Outcome::Ok | Outcome::ToolError => None,
        Outcome::UnknownResource
        | Outcome::AmbiguousResource
        | Outcome::UnknownPrompt
        | Outcome::UnknownServer => Some(ErrorData::invalid_params(
            clean(report.error.as_deref().unwrap_or("unknown")),
            None,
        )),
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
            Some(ErrorData::new(
                ErrorCode::INVALID_REQUEST,
                clean(&text),
                None,
            ))
        }
        Outcome::RpcError => Some(upstream_error(&clean(
            report.error.as_deref().unwrap_or("the server failed"),
        ))),
        _ => Some(ErrorData::internal_error(
            clean(&format!(
                "warden: the request for `{}` failed ({}): {}",
                report.tool.as_deref().unwrap_or(&report.qualified),
                report.outcome.as_str(),
                report.error.as_deref().unwrap_or("no details")
            )),
            None,
        )),
    }
}

/// An upstream JSON-RPC error, with its code when the message carries it
/// (`JSON-RPC error CODE: MESSAGE`).
fn upstream_error(text: &str) -> ErrorData {
    let parsed = text
        .strip_prefix("JSON-RPC error ")
        .and_then(|rest| rest.split_once(": "))
        .and_then(|(code, message)| Some((code.parse::<i32>().ok()?, message)));
    match parsed {
        Some((code, message)) => ErrorData::new(ErrorCode(code), message.to_string(), None),
        None => ErrorData::internal_error(text.to_string(), None),
    }
}

fn unusable(report: &CallReport) -> ErrorData {
    ErrorData::internal_error(
        Cow::Owned(format!(
            "warden: the answer for `{}` could not be passed on",
            report.qualified
        )),
        None,
    )
}
