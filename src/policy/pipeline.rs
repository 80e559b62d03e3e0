//! [`Pipeline`]: the one entry point that decides every tool call.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Value, json};

use super::ask::{AskAnswer, AskPrompt, Asker};
use super::error::PolicyError;
use super::rego::{DEFAULT_REGO, DEFAULT_REGO_NAME, PolicyInput, RegoSet};
use super::rules::{Rule, RuleMatch};
use super::{CallFacts, Decision, Effect, Mode, Permit, PinState, Stage, StageVerdict};
use crate::config::{PolicySource, RuleEffect, RuleSource, Scope, Trust};
use warden_core::digest::{sha256_hex, sha256_json};

/// Everything the pipeline is built from.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Permission rules from every config scope, `${…}` already expanded.
    pub rules: Vec<RuleSource>,
    /// `None`: no `policy` key anywhere, the shipped default applies.
    /// `Some(vec![])`: no Rego stage (unless `extra_policies`).
    pub policies: Option<Vec<PolicySource>>,
    /// `--policy PATH…` (operator scope), added to the above.
    pub extra_policies: Vec<PathBuf>,
    pub workspace: PathBuf,
    pub mode: Mode,
    /// `--locked`: a changed pinned tool is a deny, not an ask.
    pub locked: bool,
    /// Load the shipped default policy even when `policies` lists some:
    /// a project file's policies add to the default, never replace it
    /// ([`crate::config::Config::default_policy`]).
    pub with_default: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            rules: Vec::new(),
            policies: None,
            extra_policies: Vec::new(),
            workspace: PathBuf::from("."),
            mode: Mode::Interactive,
            locked: false,
            with_default: false,
        }
    }
}

type CompiledSchema = Arc<Result<jsonschema::Validator, String>>;

/// The permission pipeline (CONTRACT §5). Immutable after load except for
/// two caches (compiled input schemas, per-session approvals); `Send +
/// Sync`, so one `Arc<Pipeline>` serves every task.
pub struct Pipeline {
    rules: Vec<Rule>,
    rego: Vec<RegoSet>,
    workspace: String,
    mode: Mode,
    locked: bool,
    policy_sha256: Option<String>,
    loaded: Vec<(PathBuf, String)>,
    schemas: RwLock<HashMap<String, (Value, CompiledSchema)>>,
    session_allowed: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("rules", &self.rules.len())
            .field("rego", &self.rego)
            .field("workspace", &self.workspace)
            .field("mode", &self.mode)
            .field("policy_sha256", &self.policy_sha256)
            .finish_non_exhaustive()
    }
}

/// Lexically absolute workspace path, as a string, without a trailing `/`.
fn absolute_workspace(ws: &Path) -> String {
    let s = ws.to_string_lossy();
    let base = if s.starts_with('/') {
        String::new()
    } else {
        std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    super::rules::normalize_path(&s, &base)
}

/// An input used once at load to surface evaluation errors.
fn probe_input(workspace: &str) -> Value {
    json!({
        "server": {"name": "probe", "trust": "untrusted", "transport": "stdio", "scope": "user"},
        "tool": {"name": "probe", "qualified": "mcp__probe__probe", "annotations": {}, "pinned": true},
        "arguments": {"path": format!("{workspace}/README.md")},
        "context": {"mode": "interactive", "session": "probe", "workspace": workspace, "call_index": 0},
        "stages": {"trust": null, "schema": null, "pinning": null, "annotations": null, "rules": null}
    })
}

impl Pipeline {
    /// Compiles rules and policies. Every problem is an error naming the
    /// file and position: a broken policy or rule never starts.
    pub fn load(config: PipelineConfig) -> Result<Pipeline, PolicyError> {
        let workspace = absolute_workspace(&config.workspace);
        let mut rules = Vec::with_capacity(config.rules.len());
        for source in &config.rules {
            rules.push(Rule::compile(source)?);
        }
        let mut trusted: Vec<PolicyInput> = Vec::new();
        let mut project: Vec<PolicyInput> = Vec::new();
        if config.policies.is_none() || config.with_default {
            trusted.push(PolicyInput::Embedded {
                name: DEFAULT_REGO_NAME.into(),
                text: DEFAULT_REGO.into(),
            });
        }
        match &config.policies {
            None => {}
            Some(list) => {
                for p in list {
                    let input = PolicyInput::Path(p.path.clone());
                    if p.scope == Scope::Project {
                        project.push(input);
                    } else {
                        trusted.push(input);
                    }
                }
            }
        }
        trusted.extend(config.extra_policies.iter().cloned().map(PolicyInput::Path));
        let probe = probe_input(&workspace);
        let mut rego = Vec::new();
        if !trusted.is_empty() {
            rego.push(RegoSet::load(&trusted, Scope::User, &probe)?);
        }
        if !project.is_empty() {
            rego.push(RegoSet::load(&project, Scope::Project, &probe)?);
        }
        let loaded: Vec<(PathBuf, String)> = rego
            .iter()
            .flat_map(|s| s.files.iter().map(|f| (f.path.clone(), f.sha256.clone())))
            .collect();
        let policy_sha256 = (!loaded.is_empty()).then(|| {
            let mut text = String::new();
            for (p, h) in &loaded {
                text.push_str(&format!("{}\0{h}\n", p.display()));
            }
            sha256_hex(text.as_bytes())
        });
        tracing::debug!(
            rules = rules.len(),
            policies = loaded.len(),
            "pipeline loaded"
        );
        Ok(Pipeline {
            rules,
            rego,
            workspace,
            mode: config.mode,
            locked: config.locked,
            policy_sha256,
            loaded,
            schemas: RwLock::new(HashMap::new()),
            session_allowed: Mutex::new(HashSet::new()),
        })
    }

    /// Digest of the loaded policies and data (`None` without a Rego stage).
    pub fn policy_sha256(&self) -> Option<&str> {
        self.policy_sha256.as_deref()
    }

    /// Every policy and data file loaded, with its SHA-256.
    pub fn loaded_policies(&self) -> Vec<(PathBuf, String)> {
        self.loaded.clone()
    }

    /// The workspace, lexically absolute.
    pub fn workspace(&self) -> &str {
        &self.workspace
    }

    /// True when a `deny` rule without argument conditions matches: the
    /// tool can never be called, so it is not shown (CONTRACT §4).
    pub fn hidden(&self, qualified: &str) -> bool {
        self.rules.iter().any(|r| {
            r.effect == RuleEffect::Deny && r.is_unconditional() && r.matches_tool(qualified)
        })
    }

    /// Warnings about rules that can never apply to a listed tool: a rule
    /// whose tool glob matches `qualified` but whose conditions name
    /// arguments the tool's `inputSchema` does not have. Call when a
    /// server lists its tools and log the result.
    pub fn check_tool(&self, qualified: &str, input_schema: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for rule in self.rules.iter().filter(|r| r.matches_tool(qualified)) {
            for arg in rule.unknown_arguments(input_schema) {
                out.push(format!(
                    "{} rule `{}` ({}) names argument `{arg}`, which `{qualified}` does not \
                     have: it never applies to this tool",
                    super::rules::list_name(rule.effect),
                    rule.text,
                    rule.origin
                ));
            }
        }
        out
    }

    fn effective_mode(&self, facts: &CallFacts) -> Mode {
        if self.mode == Mode::Ci {
            Mode::Ci
        } else {
            facts.context.mode
        }
    }

    /// Decides one call. Synchronous, never fails: any error inside a
    /// stage is that stage's `deny`, with the error as the reason.
    pub fn decide(&self, facts: &CallFacts) -> Decision {
        let mode = self.effective_mode(facts);
        let mut stages = Vec::with_capacity(6);
        stages.push(stage_trust(facts));
        stages.push(self.stage_schema(facts));
        stages.push(self.stage_pinning(facts));
        stages.push(stage_annotations(facts));
        stages.push(self.stage_rules(facts));
        if !self.rego.is_empty() {
            stages.push(self.stage_policy(facts, mode, &stages));
        }
        combine(stages, mode, self.policy_sha256.clone())
    }

    fn stage_schema(&self, facts: &CallFacts) -> StageVerdict {
        let v = |effect, reason: String| StageVerdict {
            stage: Stage::Schema,
            effect,
            reasons: vec![reason],
        };
        let schema = &facts.tool.input_schema;
        if schema.is_null() {
            return v(None, "the tool declares no inputSchema".into());
        }
        let empty = Value::Object(Default::default());
        let args = match &facts.arguments {
            Value::Null => &empty,
            Value::Object(_) => &facts.arguments,
            _ => {
                return v(Some(Effect::Deny), "arguments must be a JSON object".into());
            }
        };
        let compiled = self.compiled_schema(&facts.tool.qualified, schema);
        match compiled.as_ref() {
            Err(e) => v(
                Some(Effect::Deny),
                format!(
                    "server `{}` sent an invalid inputSchema for `{}`: {e}",
                    facts.server.name, facts.tool.name
                ),
            ),
            Ok(validator) => {
                let errors: Vec<String> = validator
                    .iter_errors(args)
                    .take(3)
                    .map(|e| {
                        let at = e.instance_path().to_string();
                        let at = if at.is_empty() { "/".to_string() } else { at };
                        truncate(&format!("at {at}: {e}"), 200)
                    })
                    .collect();
                if errors.is_empty() {
                    v(None, "arguments match the tool's inputSchema".into())
                } else {
                    v(
                        Some(Effect::Deny),
                        format!(
                            "arguments do not match the tool's inputSchema: {}",
                            errors.join("; ")
                        ),
                    )
                }
            }
        }
    }

    fn compiled_schema(&self, qualified: &str, schema: &Value) -> CompiledSchema {
        if let Ok(cache) = self.schemas.read()
            && let Some((cached, compiled)) = cache.get(qualified)
            && cached == schema
        {
            return compiled.clone();
        }
        let compiled: CompiledSchema = Arc::new(
            jsonschema::options()
                .offline()
                .build(schema)
                .map_err(|e| truncate(&e.to_string(), 300)),
        );
        if let Ok(mut cache) = self.schemas.write() {
            cache.insert(qualified.to_string(), (schema.clone(), compiled.clone()));
        }
        compiled
    }

    fn stage_pinning(&self, facts: &CallFacts) -> StageVerdict {
        let (effect, reasons) = match &facts.tool.pin {
            PinState::Pinned => (None, vec![]),
            PinState::Changed { changes } => {
                let msg = format!(
                    "tool definition changed since approval: {}",
                    changes.join("; ")
                );
                if self.locked {
                    (Some(Effect::Deny), vec![format!("{msg} (--locked)")])
                } else {
                    (Some(Effect::Ask), vec![msg])
                }
            }
            PinState::Unpinned => (
                Some(Effect::Deny),
                vec![format!(
                    "tool `{}` is not in the lock file (--locked)",
                    facts.tool.qualified
                )],
            ),
        };
        StageVerdict {
            stage: Stage::Pinning,
            effect,
            reasons,
        }
    }

    fn stage_rules(&self, facts: &CallFacts) -> StageVerdict {
        let mut hits: [Vec<String>; 3] = Default::default();
        for rule in &self.rules {
            if let RuleMatch::Yes(detail) =
                rule.matches(&facts.tool.qualified, &facts.arguments, &self.workspace)
            {
                let slot = match rule.effect {
                    RuleEffect::Deny => 0,
                    RuleEffect::Ask => 1,
                    RuleEffect::Allow => 2,
                };
                let on = if detail.is_empty() {
                    String::new()
                } else {
                    format!(" on {detail}")
                };
                hits[slot].push(format!(
                    "{} rule `{}` ({}) matched{on}",
                    super::rules::list_name(rule.effect),
                    rule.text,
                    rule.origin
                ));
            }
        }
        let [deny, ask, allow] = hits;
        let (effect, reasons) = if !deny.is_empty() {
            (Some(Effect::Deny), deny)
        } else if !ask.is_empty() {
            (Some(Effect::Ask), ask)
        } else if !allow.is_empty() {
            (Some(Effect::Allow), allow)
        } else {
            (None, vec![])
        };
        StageVerdict {
            stage: Stage::Rules,
            effect,
            reasons,
        }
    }

    /// The Rego `input` document of CONTRACT §5.
    pub fn rego_input(&self, facts: &CallFacts, mode: Mode, stages: &[StageVerdict]) -> Value {
        let mut st = serde_json::Map::new();
        for s in stages {
            st.insert(
                s.stage.as_str().into(),
                s.effect.map_or(Value::Null, |e| Value::from(e.as_str())),
            );
        }
        json!({
            "server": {
                "name": facts.server.name,
                "trust": facts.server.trust.as_str(),
                "transport": facts.server.transport,
                "scope": facts.server.scope,
            },
            "tool": {
                "name": facts.tool.name,
                "qualified": facts.tool.qualified,
                "annotations": facts.tool.annotations,
                "pinned": matches!(facts.tool.pin, PinState::Pinned),
            },
            "arguments": facts.arguments,
            "context": {
                "mode": mode,
                "session": facts.context.session,
                "workspace": self.workspace,
                "call_index": facts.context.call_index,
            },
            "stages": st,
        })
    }

    fn stage_policy(&self, facts: &CallFacts, mode: Mode, stages: &[StageVerdict]) -> StageVerdict {
        self.policy_verdict(self.rego_input_value(facts, mode, stages))
    }

    /// [`Pipeline::rego_input`] built directly as a regorus value (no
    /// serde round trip on the hot path).
    fn rego_input_value(
        &self,
        facts: &CallFacts,
        mode: Mode,
        stages: &[StageVerdict],
    ) -> regorus::Value {
        use super::rego::{rego_object, to_rego};
        use regorus::Value as R;
        let stages = rego_object(stages.iter().map(|s| {
            (
                s.stage.as_str(),
                s.effect.map_or(R::Null, |e| R::from(e.as_str())),
            )
        }));
        let mode = match mode {
            Mode::Interactive => "interactive",
            Mode::Ci => "ci",
            Mode::Gateway => "gateway",
        };
        let scope = match facts.server.scope {
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Explicit => "explicit",
        };
        rego_object([
            (
                "server",
                rego_object([
                    ("name", R::from(facts.server.name.as_str())),
                    ("trust", R::from(facts.server.trust.as_str())),
                    ("transport", R::from(facts.server.transport.as_str())),
                    ("scope", R::from(scope)),
                ]),
            ),
            (
                "tool",
                rego_object([
                    ("name", R::from(facts.tool.name.as_str())),
                    ("qualified", R::from(facts.tool.qualified.as_str())),
                    ("annotations", to_rego(&facts.tool.annotations)),
                    (
                        "pinned",
                        R::from(matches!(facts.tool.pin, PinState::Pinned)),
                    ),
                ]),
            ),
            ("arguments", to_rego(&facts.arguments)),
            (
                "context",
                rego_object([
                    ("mode", R::from(mode)),
                    ("session", R::from(facts.context.session.as_str())),
                    ("workspace", R::from(self.workspace.as_str())),
                    ("call_index", R::from(facts.context.call_index)),
                ]),
            ),
            ("stages", stages),
        ])
    }

    /// Evaluates the Rego stage for a ready `input` document (used by
    /// `warden policy eval`).
    pub fn policy_verdict_for_input(&self, input: &Value) -> StageVerdict {
        self.policy_verdict(super::rego::to_rego(input))
    }

    fn policy_verdict(&self, input: regorus::Value) -> StageVerdict {
        let mut deny = Vec::new();
        let mut ask = Vec::new();
        let mut allow = false;
        for set in &self.rego {
            match set.eval_value(input.clone()) {
                Ok(v) => {
                    deny.extend(v.deny);
                    ask.extend(v.ask);
                    // A project set never reports `allow` (it is ignored).
                    allow |= v.allow;
                }
                Err(e) => deny.push(format!("policy failed to evaluate (fail closed): {e}")),
            }
        }
        let (effect, reasons) = if !deny.is_empty() {
            (Some(Effect::Deny), deny)
        } else if !ask.is_empty() {
            (Some(Effect::Ask), ask)
        } else if allow {
            (Some(Effect::Allow), vec!["policy allows the call".into()])
        } else {
            (None, vec![])
        };
        StageVerdict {
            stage: Stage::Policy,
            effect,
            reasons,
        }
    }

    /// Combines stage verdicts computed elsewhere (e.g. `policy eval`).
    pub fn combine(&self, stages: Vec<StageVerdict>, mode: Mode) -> Decision {
        combine(stages, mode, self.policy_sha256.clone())
    }

    /// Turns a decision into a [`Permit`] or a final denial: `allow` gives
    /// a permit; `ask` goes to `asker` (a session approval is remembered
    /// per session, tool and kind of ask), or is denied when there is
    /// nobody to ask; `deny` is returned as is.
    pub async fn authorize(
        &self,
        facts: &CallFacts,
        decision: Decision,
        asker: Option<&dyn Asker>,
    ) -> Result<Permit, Decision> {
        match decision.effect {
            Effect::Allow => Ok(self.permit(facts, decision)),
            Effect::Deny => Err(decision),
            Effect::Ask => {
                let key = session_key(facts, &decision);
                let remembered = self
                    .session_allowed
                    .lock()
                    .map(|s| s.contains(&key))
                    .unwrap_or(false);
                if remembered {
                    let d = approved(decision, "allowed for this session by the user");
                    return Ok(self.permit(facts, d));
                }
                let Some(asker) = asker else {
                    return Err(denied(
                        decision,
                        "no one could be asked, so `ask` is a deny",
                    ));
                };
                let prompt = AskPrompt {
                    server: facts.server.name.clone(),
                    tool: facts.tool.name.clone(),
                    qualified: facts.tool.qualified.clone(),
                    arguments: facts.arguments.clone(),
                    stage: decision.stage,
                    reasons: decision.reasons.clone(),
                };
                match asker.ask(&prompt).await {
                    AskAnswer::AllowOnce => {
                        let d = approved(decision, "allowed once by the user");
                        Ok(self.permit(facts, d))
                    }
                    AskAnswer::AllowSession => {
                        if let Ok(mut s) = self.session_allowed.lock() {
                            s.insert(key);
                        }
                        let d = approved(decision, "allowed for this session by the user");
                        Ok(self.permit(facts, d))
                    }
                    AskAnswer::Deny => Err(denied(decision, "denied by the user")),
                }
            }
        }
    }

    fn permit(&self, facts: &CallFacts, decision: Decision) -> Permit {
        Permit::new(
            facts.server.name.clone(),
            facts.tool.name.clone(),
            sha256_json(&facts.arguments),
            decision,
        )
    }
}

/// What "allow for this session" covers: the same session, tool and
/// reasons to ask. Rule reasons count without the matched value (so other
/// arguments under the same rule are covered); pinning, annotation and
/// policy reasons count in full, so a new pin change or a different policy
/// concern asks again.
fn session_key(facts: &CallFacts, decision: &Decision) -> String {
    let mut parts = vec![facts.context.session.clone(), facts.tool.qualified.clone()];
    for s in &decision.stages {
        if s.effect == Some(Effect::Ask) {
            parts.push(s.stage.as_str().into());
            for r in &s.reasons {
                let r = match s.stage {
                    Stage::Rules => r.split(" matched").next().unwrap_or(r),
                    _ => r.as_str(),
                };
                parts.push(r.to_string());
            }
        }
    }
    if decision.stage == Stage::Default {
        parts.push("default".into());
    }
    parts.join("\u{1f}")
}

fn approved(mut d: Decision, why: &str) -> Decision {
    d.effect = Effect::Allow;
    d.reasons.push(why.into());
    d
}

fn denied(mut d: Decision, why: &str) -> Decision {
    d.effect = Effect::Deny;
    d.reasons.push(why.into());
    d
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let cut = (0..=max)
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    format!("{}…", &s[..cut])
}

fn stage_trust(facts: &CallFacts) -> StageVerdict {
    let (effect, reasons) = if facts.server.trust == Trust::Blocked {
        (
            Some(Effect::Deny),
            vec![format!("server `{}` is blocked", facts.server.name)],
        )
    } else {
        (None, vec![])
    };
    StageVerdict {
        stage: Stage::Trust,
        effect,
        reasons,
    }
}

fn stage_annotations(facts: &CallFacts) -> StageVerdict {
    let v = |effect, reason: &str| StageVerdict {
        stage: Stage::Annotations,
        effect,
        reasons: vec![reason.to_string()],
    };
    if facts.server.trust != Trust::Trusted {
        return v(
            None,
            "annotations of a server that is not trusted are not believed",
        );
    }
    let ann = &facts.tool.annotations;
    let hint = |k: &str| ann.get(k).and_then(Value::as_bool);
    if hint("readOnlyHint") == Some(true) {
        return v(
            Some(Effect::Allow),
            "trusted server marks the tool read-only",
        );
    }
    match hint("destructiveHint") {
        Some(true) => v(
            Some(Effect::Ask),
            "trusted server marks the tool destructive",
        ),
        None => v(
            Some(Effect::Ask),
            "trusted server gives no readOnlyHint/destructiveHint: by MCP default the tool \
             may write and be destructive",
        ),
        Some(false) => v(
            None,
            "trusted server marks the tool as writing but not destructive",
        ),
    }
}

fn combine(stages: Vec<StageVerdict>, mode: Mode, policy_sha256: Option<String>) -> Decision {
    let pick = |effect: Effect| {
        let deciders: Vec<&StageVerdict> =
            stages.iter().filter(|s| s.effect == Some(effect)).collect();
        deciders.first().map(|first| {
            (
                first.stage,
                deciders
                    .iter()
                    .flat_map(|s| s.reasons.iter().cloned())
                    .collect::<Vec<_>>(),
            )
        })
    };
    let (mut effect, stage, mut reasons) = if let Some((stage, r)) = pick(Effect::Deny) {
        (Effect::Deny, stage, r)
    } else if let Some((stage, r)) = pick(Effect::Ask) {
        (Effect::Ask, stage, r)
    } else if let Some((stage, r)) = pick(Effect::Allow) {
        (Effect::Allow, stage, r)
    } else {
        (
            Effect::Ask,
            Stage::Default,
            vec!["no stage allowed or denied the call".to_string()],
        )
    };
    if effect == Effect::Ask && mode == Mode::Ci {
        effect = Effect::Deny;
        reasons.push("non-interactive (--ci): no one could be asked, so `ask` is a deny".into());
    }
    Decision {
        effect,
        stage,
        reasons,
        stages,
        policy_sha256,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CallContext, ServerFacts, ToolFacts};

    #[test]
    fn direct_rego_input_equals_the_json_input() {
        let p = Pipeline::load(PipelineConfig {
            policies: Some(vec![]),
            workspace: "/srv/repo".into(),
            ..PipelineConfig::default()
        })
        .unwrap();
        let facts = CallFacts {
            server: ServerFacts {
                name: "fs".into(),
                trust: Trust::Trusted,
                transport: "stdio".into(),
                scope: Scope::Project,
            },
            tool: ToolFacts {
                name: "t".into(),
                qualified: "mcp__fs__t".into(),
                annotations: json!({"readOnlyHint": true}),
                input_schema: json!({}),
                pin: PinState::Unpinned,
            },
            arguments: json!({"a": [1, -2, 2.5, null, true, {"b": "c"}], "big": u64::MAX}),
            context: CallContext {
                mode: Mode::Gateway,
                session: "s".into(),
                workspace: "/elsewhere".into(),
                call_index: 7,
            },
        };
        let stages = vec![
            stage_trust(&facts),
            StageVerdict {
                stage: Stage::Rules,
                effect: Some(Effect::Ask),
                reasons: vec![],
            },
        ];
        let json = p.rego_input(&facts, Mode::Gateway, &stages);
        let direct = p.rego_input_value(&facts, Mode::Gateway, &stages);
        assert_eq!(direct, regorus::Value::from(json.clone()));
        assert_eq!(direct, super::super::rego::to_rego(&json));
    }
}
