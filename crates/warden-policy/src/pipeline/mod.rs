//! [`Pipeline`]: the one entry point that decides every tool call.
//!
//! Map: this file (load, `decide`, combination), `stages` (the six
//! stages), `input` (the Rego `input` document), `authorize` (decision →
//! [`Permit`], asking when needed, per-session approvals), `deadline`
//! (decisions on an evaluation thread, denied at a deadline), `inline`
//! (a decision bounded small before it starts, made in place).
//!
//! One decision, in order: the arguments are canonicalised once
//! ([`crate::canon`]; too large or too deep → the schema stage denies and
//! nothing else evaluates them); trust; schema (raw arguments, against a
//! schema [`crate::schema_guard`] accepted); pinning; annotations; rules
//! (canonical arguments); Rego (`input.arguments` canonical,
//! `input.raw_arguments` as sent); combination.

mod authorize;
mod deadline;
mod defaults;
mod inline;
mod input;
mod stages;

pub use deadline::{DEFAULT_DEADLINE, MAX_THREADS, pool_threads};
pub use inline::{MAX_TEXT as INLINE_MAX_TEXT, MAX_VALUES as INLINE_MAX_VALUES};

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::Value;
use warden_core::digest::sha256_hex;
use warden_core::{Effect, Mode, RequestKind, Scope, Stage};

use crate::canon::{self, Canonical};
use crate::decision::{Decision, StageVerdict};
use crate::error::PolicyError;
use crate::facts::{CallFacts, ServerDirs};
use crate::rego::{DEFAULT_REGO, DEFAULT_REGO_NAME, PolicyInput, RegoSet};
use crate::rules::{Rule, RuleIndex};
use crate::schema_guard::SchemaLimits;
use crate::sources::{DataSource, PolicySource, RuleEffect, RuleSource};
use deadline::Progress;

pub use crate::canon::Limits as ArgumentLimits;

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
    /// JSON documents the configuration names as Rego data (`policy_data`).
    pub data: Vec<DataSource>,
    pub workspace: PathBuf,
    pub mode: Mode,
    /// `--locked`: a changed pinned tool is a deny, not an ask.
    pub locked: bool,
    /// Load the shipped default policy even when `policies` lists some:
    /// a project file's policies add to the default, never replace it.
    pub with_default: bool,
    /// Caps on arguments, checked before anything evaluates them.
    pub argument_limits: ArgumentLimits,
    /// Caps on input schemas (also checked when servers list tools).
    pub schema_limits: SchemaLimits,
    /// How long [`Pipeline::decide_within`] waits before it denies.
    pub deadline: Duration,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            rules: Vec::new(),
            policies: None,
            extra_policies: Vec::new(),
            data: Vec::new(),
            workspace: PathBuf::from("."),
            mode: Mode::Interactive,
            locked: false,
            with_default: false,
            argument_limits: ArgumentLimits::default(),
            schema_limits: SchemaLimits::default(),
            deadline: DEFAULT_DEADLINE,
        }
    }
}

type CompiledSchema = Arc<Result<jsonschema::Validator, String>>;

/// A tool's input schema as the schema stage last compiled it.
#[derive(Clone)]
struct SchemaEntry {
    schema: Arc<Value>,
    compiled: CompiledSchema,
    /// Nodes visited to validate one value plus the values of the
    /// document (`enum` entries are compared, not visited), when
    /// validation runs no regular expression
    /// ([`crate::schema_guard::uses_regexes`]); `None` otherwise (such a
    /// schema is never validated inline).
    inline_cost: Option<u64>,
}

/// The permission pipeline (CONTRACT §5). Immutable after load except for
/// two caches (compiled input schemas, per-session approvals); `Send +
/// Sync`, so one `Arc<Pipeline>` serves every task.
pub struct Pipeline {
    rules: Vec<Rule>,
    /// Which of `rules` can match a request's target.
    rule_index: RuleIndex,
    rego: Vec<RegoSet>,
    workspace: String,
    mode: Mode,
    locked: bool,
    policy_sha256: Option<String>,
    loaded: Vec<(PathBuf, String)>,
    schemas: RwLock<HashMap<String, SchemaEntry>>,
    session_allowed: Mutex<HashSet<String>>,
    /// The host's HOME: one plausible reading of `~` (for deny rules).
    home: Option<String>,
    argument_limits: ArgumentLimits,
    schema_limits: SchemaLimits,
    deadline: Duration,
    /// The Rego VM's timer for a decision made on the caller's task.
    inline_budget: Duration,
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
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    warden_core::path::absolutize(&Path::new("/").join(base), ws)
        .to_string_lossy()
        .into_owned()
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
        for p in config.policies.iter().flatten() {
            if p.scope == Scope::Project {
                project.push(PolicyInput::Confined(p.path.clone()));
            } else {
                trusted.push(PolicyInput::Path(p.path.clone()));
            }
        }
        trusted.extend(config.extra_policies.iter().cloned().map(PolicyInput::Path));
        // Data joins the group of its scope; data alone makes no Rego stage.
        for d in &config.data {
            let group = if d.scope == Scope::Project {
                &mut project
            } else {
                &mut trusted
            };
            if group.iter().any(|p| !matches!(p, PolicyInput::Data(_))) {
                group.push(PolicyInput::Data(d.path.clone()));
            } else {
                return Err(PolicyError::Data {
                    path: d.path.clone(),
                    message: "policy data is named, but no policy of that scope uses it \
                              (`policy_data` needs a `policy`)"
                        .into(),
                });
            }
        }
        let probes = input::probes(&workspace);
        let mut rego = Vec::new();
        if !trusted.is_empty() {
            rego.push(RegoSet::load(&trusted, Scope::User, &probes)?);
        }
        if !project.is_empty() {
            rego.push(RegoSet::load(&project, Scope::Project, &probes)?);
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
            rule_index: RuleIndex::new(&rules),
            rules,
            rego,
            workspace,
            mode: config.mode,
            locked: config.locked,
            policy_sha256,
            loaded,
            schemas: RwLock::new(HashMap::new()),
            session_allowed: Mutex::new(HashSet::new()),
            home: std::env::var("HOME").ok().filter(|h| h.starts_with('/')),
            argument_limits: config.argument_limits,
            schema_limits: config.schema_limits,
            deadline: config.deadline,
            inline_budget: inline::BUDGET,
        })
    }

    /// The rules stage for a request of any kind of CONTRACT §8 (`kind`,
    /// its target `name` such as `resource__S` or `prompt__S__P`, and its
    /// arguments; a resource's are `{"uri": …}`, read as a URI: a `file:`
    /// URI as its canonical path, other schemes as the canonical URI).
    /// Refused arguments are the rules stage's deny.
    /// The server is taken to work in the workspace with no HOME of its
    /// own ([`ServerDirs::default`]); [`Pipeline::decide_rules_at`] names
    /// its directories.
    pub fn decide_rules(&self, kind: RequestKind, name: &str, arguments: &Value) -> StageVerdict {
        self.decide_rules_at(kind, name, arguments, &ServerDirs::default())
    }

    /// [`Pipeline::decide_rules`] for a server with these directories.
    pub fn decide_rules_at(
        &self,
        kind: RequestKind,
        name: &str,
        arguments: &Value,
        dirs: &ServerDirs,
    ) -> StageVerdict {
        match self.canonical_for(kind, arguments, dirs) {
            Ok(canonical) => self.rules_verdict(kind, name, &canonical.value),
            Err(why) => StageVerdict::new(
                Stage::Rules,
                Some(Effect::Deny),
                vec![format!("arguments refused before evaluation: {why}")],
            ),
        }
    }

    /// The canonical form of a request's arguments, for a server with
    /// these directories: a resource's `uri` read as a URI
    /// ([`canon::canon_resource_uri`]: a `file:` URI as its canonical
    /// path), anything else as tool arguments are.
    pub fn canonical_for(
        &self,
        kind: RequestKind,
        arguments: &Value,
        dirs: &ServerDirs,
    ) -> Result<Canonical, String> {
        let ctx = self.context(dirs);
        if kind != RequestKind::Resource {
            return canon::canonicalize(arguments, &ctx, &self.argument_limits);
        }
        let uri = match arguments {
            Value::Object(map) if map.len() == 1 => map.get("uri").and_then(Value::as_str),
            _ => None,
        };
        let Some(uri) = uri else {
            return Err("a resource request's arguments must be exactly {\"uri\": STRING}".into());
        };
        if uri.len() > self.argument_limits.max_bytes {
            return Err("the resource URI is too long".into());
        }
        let mut map = std::collections::BTreeMap::new();
        map.insert(
            "uri".to_string(),
            canon::CanonValue::Str(Box::new(canon::canon_resource_uri(uri, &ctx))),
        );
        Ok(Canonical {
            value: canon::CanonValue::Object(map),
        })
    }

    /// Whether there is a Rego stage.
    pub fn has_policy(&self) -> bool {
        !self.rego.is_empty()
    }

    /// Why a tool's `inputSchema` cannot be used (too deep, too many
    /// `$ref`s, too much combinator fan-out, an unresolvable `$ref`), if it
    /// cannot: such a tool is skipped when its server lists it.
    pub fn check_input_schema(&self, input_schema: &Value) -> Result<(), String> {
        crate::schema_guard::check(input_schema, &self.schema_limits)
    }

    /// The canonical form of a call's arguments ([`crate::canon`]), or why
    /// they are refused before evaluation, for a server working in the
    /// workspace with no HOME of its own ([`Pipeline::canonical_for`]
    /// names the server's directories).
    pub fn canonicalize(&self, arguments: &Value) -> Result<Canonical, String> {
        self.canonical_for(RequestKind::Tool, arguments, &ServerDirs::default())
    }

    /// What canonicalisation knows of the world for a server with `dirs`.
    fn context<'a>(&'a self, dirs: &'a ServerDirs) -> canon::Context<'a> {
        canon::Context {
            workspace: &self.workspace,
            home: self.home.as_deref(),
            cwd: dirs.cwd.as_deref(),
            homes: &dirs.homes,
        }
    }

    /// Digest of the loaded policies and data (`None` without a Rego stage).
    pub fn policy_sha256(&self) -> Option<&str> {
        self.policy_sha256.as_deref()
    }

    /// Every policy and data file loaded, with its SHA-256.
    /// How the Rego stage runs: `"vm"` (every policy group on regorus's
    /// bytecode VM), `"interpreter"`, or `"vm+interpreter"` (groups
    /// differ); `None` without a Rego stage.
    pub fn rego_engine(&self) -> Option<&'static str> {
        let on_vm = self.rego.iter().filter(|set| set.on_vm()).count();
        match (self.rego.len(), on_vm) {
            (0, _) => None,
            (all, vm) if all == vm => Some("vm"),
            (_, 0) => Some("interpreter"),
            _ => Some("vm+interpreter"),
        }
    }

    pub fn loaded_policies(&self) -> Vec<(PathBuf, String)> {
        self.loaded.clone()
    }

    /// The rules whose target may match `kind` and `name`, in order.
    pub(crate) fn rules_for(&self, kind: RequestKind, name: &str) -> impl Iterator<Item = &Rule> {
        self.indexed_rules_for(kind, name).map(|(_, rule)| rule)
    }

    /// [`Pipeline::rules_for`] with each rule's position (its slot in the
    /// index's joined path conditions).
    pub(crate) fn indexed_rules_for(
        &self,
        kind: RequestKind,
        name: &str,
    ) -> impl Iterator<Item = (usize, &Rule)> {
        self.rule_index
            .candidates(kind, name)
            .into_iter()
            .filter_map(|i| self.rules.get(i).map(|rule| (i, rule)))
    }

    /// True when a `deny` rule without argument conditions matches: the
    /// tool can never be called, so it is not shown (CONTRACT §4).
    pub fn hidden(&self, qualified: &str) -> bool {
        self.hidden_request(RequestKind::Tool, qualified)
    }

    /// [`Pipeline::hidden`] for a request target of any kind
    /// (`resource__S`, `prompt__S__P`, …).
    pub fn hidden_request(&self, kind: RequestKind, target: &str) -> bool {
        self.rules_for(kind, target).any(|r| {
            r.effect == RuleEffect::Deny && r.is_unconditional() && r.matches_target(kind, target)
        })
    }

    /// True when a listed resource can never be read: a `deny` rule
    /// matches its target and URI (rules do not change during a session,
    /// and a rule's deny is final), so it is not listed (CONTRACT §8).
    pub fn resource_hidden(&self, target: &str, uri: &str, dirs: &ServerDirs) -> bool {
        let v = self.decide_rules_at(
            RequestKind::Resource,
            target,
            &serde_json::json!({ "uri": uri }),
            dirs,
        );
        v.effect == Some(Effect::Deny)
    }

    /// True when a `deny` rule without conditions matches every target
    /// of `kind` that starts with `prefix` (`prompt__S__`: every prompt of
    /// server S, including those it has not listed yet). Used to hide what
    /// a server offers as a whole (the gateway's `prompts` capability).
    pub fn denies_every(&self, kind: RequestKind, prefix: &str) -> bool {
        self.rules
            .iter()
            .any(|r| r.denies_every_target_from(kind, prefix))
    }

    /// True when every URI a listed resource template can expand to is
    /// denied by a rule, so the template is not listed (CONTRACT §8: what
    /// can never be allowed is not shown): the server's resources denied
    /// outright, or a `deny` URI pattern `BASE**` under which the
    /// template's literal start lies (`secret://**` covers
    /// `secret://vault/{name}`). A template without expressions is one
    /// URI, hidden as a listed resource is. Anything less certain is
    /// shown: each read through it is still decided.
    pub fn template_hidden(&self, target: &str, template: &str, dirs: &ServerDirs) -> bool {
        if self.hidden_request(RequestKind::Resource, target) {
            return true;
        }
        let Some((fixed, _)) = template.split_once('{') else {
            return self.resource_hidden(target, template, dirs);
        };
        self.rules
            .iter()
            .any(|r| r.denies_every_uri_from(target, fixed))
    }

    /// Warnings about rules that can never apply to a listed tool: a rule
    /// whose tool glob matches `qualified` but whose conditions name
    /// arguments the tool's `inputSchema` does not have. Call when a
    /// server lists its tools and log the result.
    pub fn check_tool(&self, qualified: &str, input_schema: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for rule in self
            .rules_for(RequestKind::Tool, qualified)
            .filter(|r| r.matches_tool(qualified))
        {
            for arg in rule.unknown_arguments(input_schema) {
                out.push(format!(
                    "{} rule `{}` ({}) names argument `{arg}`, which `{qualified}` does not \
                     have: it never applies to this tool",
                    rule.effect.as_str(),
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
    /// stage is that stage's `deny`, with the error as the reason. Callers
    /// on an async task use [`Pipeline::decide_within`], which runs this off
    /// the task with a deadline.
    pub fn decide(&self, facts: &CallFacts) -> Decision {
        self.decide_tracked(facts, &Progress::default())
    }

    pub(crate) fn decide_tracked(&self, facts: &CallFacts, progress: &Progress) -> Decision {
        self.decide_run(facts, progress, None).unwrap_or_else(|| {
            // Only an inline run (a `Some` plan) can come back empty.
            self.failed(
                Stage::Policy,
                "the policy stage gave no answer (fail closed)".into(),
            )
        })
    }

    /// The stages in order. `inline` (a decision on the caller's task,
    /// [`inline`]): the schema it checked is the one validated against,
    /// and the Rego stage runs on the bytecode VM alone with its timer at
    /// the inline budget; `None` means the VM did not answer in time.
    fn decide_run(
        &self,
        facts: &CallFacts,
        progress: &Progress,
        inline: Option<&inline::Inline>,
    ) -> Option<Decision> {
        let mode = self.effective_mode(facts);
        let mut stages = Vec::with_capacity(6);
        progress.enter(Stage::Trust);
        stages.push(stages::trust(facts));
        progress.enter(Stage::Schema);
        let canonical = match self.canonical_for(facts.kind, &facts.arguments, &facts.server.dirs) {
            Ok(c) => c,
            Err(why) => {
                stages.push(StageVerdict::new(
                    Stage::Schema,
                    Some(Effect::Deny),
                    vec![format!("arguments refused before evaluation: {why}")],
                ));
                for stage in [
                    Stage::Pinning,
                    Stage::Annotations,
                    Stage::Rules,
                    Stage::Policy,
                ] {
                    let tool_only = matches!(stage, Stage::Pinning | Stage::Annotations);
                    if (stage != Stage::Policy || self.has_policy())
                        && (!tool_only || facts.kind == RequestKind::Tool)
                    {
                        stages.push(StageVerdict::new(stage, None, vec!["not evaluated".into()]));
                    }
                }
                return Some(combine(stages, mode, self.policy_sha256.clone()));
            }
        };
        // Only tools have a schema, a pinned definition and annotations;
        // the other kinds (CONTRACT §8) are decided by trust, rules and
        // the policy, and otherwise by the default stage.
        if facts.kind == RequestKind::Tool {
            stages.push(self.stage_schema(facts, inline.and_then(|i| i.schema.as_ref())));
            progress.enter(Stage::Pinning);
            stages.push(self.stage_pinning(facts));
            progress.enter(Stage::Annotations);
            stages.push(stages::annotations(facts));
        }
        progress.enter(Stage::Rules);
        stages.push(self.stage_rules(facts, &canonical));
        if !self.rego.is_empty() {
            progress.enter(Stage::Policy);
            let input = self.rego_input_canonical(facts, &canonical, mode, &stages);
            stages.push(match inline {
                None => self.policy_verdict(input),
                Some(_) => self.policy_verdict_within(input, self.inline_budget)?,
            });
        }
        Some(combine(stages, mode, self.policy_sha256.clone()))
    }

    /// Evaluates the Rego stage for a ready `input` document (used by
    /// `warden policy eval`). A document without `raw_arguments` is taken
    /// to hold the arguments as sent: warden adds their canonical form
    /// (`arguments`), `raw_arguments`, `readings` and `uncertain`, as it
    /// does for every call.
    pub fn policy_verdict_for_input(&self, input: &Value) -> StageVerdict {
        self.policy_verdict(crate::rego::to_rego(&self.complete_input(input)))
    }

    /// `input` with the canonical argument keys added when it has no
    /// `raw_arguments` (see [`Pipeline::policy_verdict_for_input`]), and
    /// `strings` / `raw_strings` when it has none.
    pub fn complete_input(&self, input: &Value) -> Value {
        let Value::Object(map) = input else {
            return input.clone();
        };
        let mut out = if map.contains_key("raw_arguments") {
            map.clone()
        } else {
            self.add_canonical(map)
        };
        for (index, of) in [("strings", "arguments"), ("raw_strings", "raw_arguments")] {
            if !out.contains_key(index) {
                let strings = out.get(of).map_or_else(
                    || Value::Object(Default::default()),
                    |v| {
                        serde_json::to_value(input::strings_by_pointer(&crate::rego::to_rego(v)))
                            .unwrap_or(Value::Null)
                    },
                );
                out.insert(index.into(), strings);
            }
        }
        Value::Object(out)
    }

    fn add_canonical(
        &self,
        map: &serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        let raw = map
            .get("arguments")
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        let kind = map
            .get("kind")
            .and_then(|k| serde_json::from_value::<RequestKind>(k.clone()).ok())
            .unwrap_or(RequestKind::Tool);
        let mut out = map.clone();
        out.entry("kind")
            .or_insert_with(|| Value::String(kind.as_str().to_string()));
        // `policy eval`: no server, so none of its directories.
        let Ok(canonical) = self.canonical_for(kind, &raw, &ServerDirs::default()) else {
            return out;
        };
        let notable = canonical.notable();
        out.insert("arguments".into(), canonical.arguments_json());
        out.insert("raw_arguments".into(), raw);
        out.insert(
            "readings".into(),
            Value::Object(
                notable
                    .iter()
                    .map(|(p, s)| {
                        (
                            p.clone(),
                            Value::Array(
                                s.readings
                                    .iter()
                                    .map(|r| Value::String(r.as_str().to_string()))
                                    .collect(),
                            ),
                        )
                    })
                    .collect(),
            ),
        );
        out.insert(
            "uncertain".into(),
            Value::Object(
                notable
                    .iter()
                    .filter_map(|(p, s)| {
                        s.uncertain
                            .as_ref()
                            .map(|w| (p.clone(), Value::String(w.clone())))
                    })
                    .collect(),
            ),
        );
        out
    }

    /// Combines stage verdicts computed elsewhere (e.g. `policy eval`).
    pub fn combine(&self, stages: Vec<StageVerdict>, mode: Mode) -> Decision {
        combine(stages, mode, self.policy_sha256.clone())
    }
}

/// Any deny → deny; else any ask → ask; else any allow → allow; else the
/// default stage asks. With `--ci` an ask becomes a deny.
///
/// CONTRACT §5's one exception: an `ask` that comes only from the
/// annotations stage is overridden by an operator `allow` rule that names
/// the tool exactly (the rules stage's `exact_operator_allow`). A wildcard
/// allow does not override it, nor does anything override a deny or an
/// ask from rules, pinning or the policy.
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
    let only_annotations_ask = stages
        .iter()
        .filter(|s| s.effect == Some(Effect::Ask))
        .all(|s| s.stage == Stage::Annotations);
    let exact_allow = stages.iter().find(|s| {
        s.stage == Stage::Rules && s.effect == Some(Effect::Allow) && s.exact_operator_allow
    });
    let (mut effect, stage, mut reasons) = if let Some((stage, r)) = pick(Effect::Deny) {
        (Effect::Deny, stage, r)
    } else if let Some((stage, r)) = pick(Effect::Ask) {
        match exact_allow {
            Some(rules) if only_annotations_ask => {
                let mut reasons = rules.reasons.clone();
                reasons.push(format!(
                    "overrides the annotations stage's ask ({}): an operator rule names \
                     this tool exactly",
                    r.join("; ")
                ));
                (Effect::Allow, Stage::Rules, reasons)
            }
            _ => (Effect::Ask, stage, r),
        }
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
    use crate::facts::{CallContext, PinState, ServerFacts, ToolFacts};
    use proptest::prelude::*;
    use serde_json::json;
    use warden_core::{TransportKind, Trust};

    /// A user's rule of `effect` from `/c.json`.
    fn rule(effect: RuleEffect, text: &str) -> RuleSource {
        RuleSource {
            effect,
            text: text.into(),
            scope: Scope::User,
            file: "/c.json".into(),
            index: 0,
        }
    }

    fn facts(schema: Value, args: Value) -> CallFacts {
        CallFacts {
            kind: warden_core::RequestKind::Tool,
            server: ServerFacts {
                name: "s".into(),
                trust: Trust::Untrusted,
                transport: TransportKind::Stdio,
                scope: Scope::User,
                dirs: Default::default(),
            },
            tool: ToolFacts {
                name: "t".into(),
                qualified: "mcp__s__t".into(),
                annotations: Value::Null,
                input_schema: schema.into(),
                pin: PinState::Pinned,
            },
            arguments: args,
            context: CallContext {
                mode: Mode::Interactive,
                session: "x".into(),
                call_index: 1,
            },
        }
    }

    fn pipeline(deadline: Duration, limits: SchemaLimits) -> Arc<Pipeline> {
        Arc::new(
            Pipeline::load(PipelineConfig {
                policies: Some(vec![]),
                workspace: "/w".into(),
                deadline,
                schema_limits: limits,
                ..PipelineConfig::default()
            })
            .expect("load"),
        )
    }

    /// A schema the static caps let through (they are lifted here) takes
    /// longer than the deadline: the caller gets a deny at the deadline,
    /// from the stage that had not finished.
    #[tokio::test]
    async fn the_deadline_denies_and_abandons_runaway_validation() {
        let lifted = SchemaLimits {
            max_expanded: u64::MAX,
            ..SchemaLimits::default()
        };
        let p = pipeline(Duration::from_millis(300), lifted);
        let f = Arc::new(facts(
            crate::schema_guard::exponential_schema(26),
            json!({}),
        ));
        let started = std::time::Instant::now();
        let d = p.decide_within(f).await;
        let took = started.elapsed();
        assert_eq!(d.effect, Effect::Deny, "{d:?}");
        assert_eq!(d.stage, Stage::Schema, "{d:?}");
        assert!(d.reasons[0].contains("did not finish"), "{d:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        // Other decisions are not held up by the abandoned one.
        let quick = Arc::new(facts(json!({"type": "object"}), json!({})));
        let started = std::time::Instant::now();
        let d = p.decide_within(quick).await;
        assert_ne!(d.effect, Effect::Deny, "{d:?}");
        assert!(started.elapsed() < Duration::from_millis(250));
    }

    /// The shipped default policy (on the bytecode VM), no rules.
    fn with_default_policy() -> Pipeline {
        let p = Pipeline::load(PipelineConfig {
            workspace: "/w".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        assert!(p.rego.iter().all(|set| set.on_vm()), "{:?}", p.rego);
        p
    }

    /// Small calls of a schema compiled before, each decided inline after
    /// its first (pool) decision, exactly as the pool decides them: allows,
    /// asks and the default policy's denies (secret paths, credentials,
    /// `..` in a path, a non-object), with and without a schema.
    #[tokio::test]
    async fn an_inline_decision_is_the_pools_decision() {
        let p = Arc::new(with_default_policy());
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        let cases = [
            (schema.clone(), json!({"path": "/w/src/main.rs"})),
            (schema.clone(), json!({"path": "~/.ssh/id_rsa"})),
            (schema.clone(), json!({"path": "/w/../etc/shadow"})),
            (schema.clone(), json!({"path": "AKIAIOSFODNN7EXAMPLE"})),
            (schema.clone(), json!({"path": 7})),
            (schema.clone(), json!(["not", "an", "object"])),
            (
                Value::Null,
                json!({"token": "ghp_0123456789abcdefghijklmnopqrstuvwxyz"}),
            ),
            (Value::Null, json!({})),
        ];
        let mut effects = HashSet::new();
        for (schema, args) in cases {
            let f = Arc::new(facts(schema.clone(), args.clone()));
            let pooled = p.decide(&f);
            // The first decision compiles the schema (on the pool).
            assert_eq!(p.decide_within(Arc::clone(&f)).await, pooled, "{args}");
            assert!(p.decides_inline(&f), "{args}");
            let inline = p.decide_inline(&f).expect("an inline answer");
            assert_eq!(inline, pooled, "{args}");
            assert_eq!(p.decide_within(f).await, pooled, "{args}");
            effects.insert(format!("{:?}/{:?}", pooled.effect, pooled.stage));
        }
        assert!(effects.len() >= 3, "too few kinds of decision: {effects:?}");
    }

    /// What is not bounded small before it runs goes to the pool: a
    /// schema not compiled yet, one whose validation runs regexes or
    /// visits too many nodes for the values, arguments past the caps, a
    /// policy group on the interpreter.
    #[tokio::test]
    async fn unbounded_decisions_go_to_the_pool() {
        let p = Arc::new(with_default_policy());
        let plain = json!({"type": "object"});
        let small = json!({"a": "b"});
        let f = Arc::new(facts(plain.clone(), small.clone()));
        assert!(!p.decides_inline(&f), "not compiled yet");
        p.decide_within(Arc::clone(&f)).await;
        assert!(p.decides_inline(&f));
        let big_text = json!({ "a": "x".repeat(inline::MAX_TEXT + 1) });
        assert!(!p.decides_inline(&facts(plain.clone(), big_text)));
        let many: Vec<u32> = (0..inline::MAX_VALUES as u32).collect();
        assert!(!p.decides_inline(&facts(plain.clone(), json!({ "a": many }))));
        for schema in [
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}),
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}),
        ] {
            let f = Arc::new(facts(schema.clone(), small.clone()));
            p.decide_within(Arc::clone(&f)).await;
            assert!(!p.decides_inline(&f), "{schema}");
        }
        // 12 branches of 12 branches (157 nodes to visit, 316 values in
        // the document) for 60 values: within the value cap, over the cost.
        let wide: Vec<Value> = (0..12)
            .map(
                |_| json!({"anyOf": (0..12).map(|_| json!({"type": "array"})).collect::<Vec<_>>()}),
            )
            .collect();
        let costly = json!({"type": "object", "additionalProperties": {"anyOf": wide}});
        let values: serde_json::Map<String, Value> =
            (0..59).map(|i| (format!("k{i}"), json!(i))).collect();
        let f = Arc::new(facts(costly.clone(), Value::Object(values)));
        p.decide_within(Arc::clone(&f)).await;
        assert!(!p.decides_inline(&f), "expanded size times values");
        assert!(p.decides_inline(&facts(costly, json!({"k": 1}))));
        // Cheap to expand, costly to compare with: a long `enum`.
        let long_enum: Vec<u32> = (0..20_000).collect();
        let listed = json!({"type": "object", "properties": {"a": {"enum": long_enum}}});
        let f = Arc::new(facts(listed, json!({"a": 7})));
        p.decide_within(Arc::clone(&f)).await;
        assert!(!p.decides_inline(&f), "the document's size");

        let dir = tempfile::tempdir().expect("tempdir");
        let user = dir.path().join("p.rego");
        std::fs::write(
            &user,
            "package warden\nimport rego.v1\ndeny contains \"x\" if input.arguments.x\n",
        )
        .expect("write");
        let interpreted = Arc::new(
            Pipeline::load(PipelineConfig {
                policies: Some(vec![crate::sources::PolicySource {
                    path: user,
                    scope: Scope::User,
                }]),
                workspace: "/w".into(),
                ..PipelineConfig::default()
            })
            .expect("load"),
        );
        let f = Arc::new(facts(plain, small));
        interpreted.decide_within(Arc::clone(&f)).await;
        assert!(
            !interpreted.decides_inline(&f),
            "a policy on the interpreter"
        );
    }

    fn shared_default_policy() -> &'static Pipeline {
        static P: std::sync::OnceLock<Pipeline> = std::sync::OnceLock::new();
        P.get_or_init(with_default_policy)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Differential: whatever the arguments, trust and schema, a call
        /// decided in place is decided as the pool decides it.
        #[test]
        fn in_place_and_pool_decide_alike(
            args in prop::collection::btree_map(
                "[a-z~/]{1,6}",
                prop_oneof![
                    crate::strategies::argument_text().prop_map(Value::from),
                    any::<i64>().prop_map(Value::from),
                    any::<bool>().prop_map(Value::from),
                    prop::collection::vec(crate::strategies::argument_text(), 0..4)
                        .prop_map(Value::from),
                ],
                0..6,
            ),
            trusted in any::<bool>(),
            read_only in any::<bool>(),
            with_schema in any::<bool>(),
        ) {
            let p = shared_default_policy();
            let schema = if with_schema {
                json!({"type": "object", "additionalProperties": {"type": ["string", "integer", "boolean", "array"]}})
            } else {
                Value::Null
            };
            let mut f = facts(schema, Value::Object(args.into_iter().collect()));
            f.server.trust = if trusted { Trust::Trusted } else { Trust::Untrusted };
            f.tool.annotations = json!({"readOnlyHint": read_only});
            let _ = p.decide(&f);
            prop_assert!(p.decides_inline(&f), "small calls are decided in place");
            // `Ok(false)` only if the VM's 10 ms timer ran out (a loaded machine).
            if let Err(e) = p.inline_agrees(&f) {
                prop_assert!(false, "{}", e);
            }
        }
    }

    /// A policy evaluation that runs out of the inline budget gives no
    /// inline answer, and the call is decided on the pool, the same.
    #[tokio::test]
    async fn an_inline_overrun_is_decided_on_the_pool() {
        let mut p = with_default_policy();
        p.inline_budget = Duration::ZERO;
        let p = Arc::new(p);
        let f = Arc::new(facts(
            Value::Null,
            json!({"path": "~/.ssh/id_rsa", "n": [1, 2, 3]}),
        ));
        assert!(p.decides_inline(&f));
        assert!(p.decide_inline(&f).is_none(), "the VM's timer stopped it");
        let d = p.decide_within(Arc::clone(&f)).await;
        assert_eq!(d, p.decide(&f));
        assert_eq!(d.effect, Effect::Deny, "{d:?}");
    }

    #[test]
    fn refused_schemas_and_arguments_deny_without_evaluation() {
        let p = pipeline(DEFAULT_DEADLINE, SchemaLimits::default());
        let d = p.decide(&facts(
            crate::schema_guard::exponential_schema(40),
            json!({}),
        ));
        assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Schema), "{d:?}");
        assert!(d.reasons[0].contains("too complex"), "{d:?}");
        let mut deep = json!("x");
        for _ in 0..40 {
            deep = json!([deep]);
        }
        let d = p.decide(&facts(json!({"type": "object"}), json!({ "a": deep })));
        assert_eq!((d.effect, d.stage), (Effect::Deny, Stage::Schema), "{d:?}");
        assert!(d.reasons[0].contains("nested deeper"), "{d:?}");
    }

    #[test]
    fn rules_of_other_kinds_decide_through_the_pipeline() {
        let p = Pipeline::load(PipelineConfig {
            rules: vec![RuleSource {
                effect: RuleEffect::Deny,
                text: "resource__fs(uri: /w/secrets/**)".into(),
                scope: Scope::User,
                file: "/c.json".into(),
                index: 0,
            }],
            policies: Some(vec![]),
            workspace: "/w".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let v = p.decide_rules(
            RequestKind::Resource,
            "resource__fs",
            &json!({"uri": "file:///w/public/../secrets/k"}),
        );
        assert_eq!(v.effect, Some(Effect::Deny), "{v:?}");
        let v = p.decide_rules(
            RequestKind::Resource,
            "resource__fs",
            &json!({"uri": "file:///w/a"}),
        );
        assert_eq!(v.effect, None, "{v:?}");
    }

    /// `x://notes/../secret/k` is `x://notes/secret/k` to a URL parser but
    /// `x://secret/k` to a server that joins paths: an allow on `notes`
    /// does not cover it, a deny on `secret` does.
    #[test]
    fn resource_uris_with_dot_segments_are_never_allowed() {
        let p = Pipeline::load(PipelineConfig {
            rules: vec![
                rule(RuleEffect::Allow, "resource__fx(uri: x://notes/**)"),
                rule(RuleEffect::Deny, "resource__fx(uri: x://secret/**)"),
            ],
            policies: Some(vec![]),
            workspace: "/w".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let decide = |uri: &str| {
            p.decide_rules(
                RequestKind::Resource,
                "resource__fx",
                &json!({ "uri": uri }),
            )
            .effect
        };
        assert_eq!(decide("x://notes/a"), Some(Effect::Allow));
        assert_eq!(decide("x://notes/../secret/k"), Some(Effect::Deny));
        assert_eq!(decide("x://notes/./a"), Some(Effect::Ask));
        assert!(p.resource_hidden("resource__fx", "x://secret/k", &ServerDirs::default()));
        assert!(!p.resource_hidden("resource__fx", "x://notes/a", &ServerDirs::default()));
    }

    /// The shipped policy decides on the readings canonicalisation gives
    /// (not hand-written ones): the other schemes' paths, JSON text,
    /// variables and globs, and the server's directories.
    #[test]
    fn the_default_policy_sees_every_new_reading() {
        let p = with_default_policy();
        let decide = |args: Value, dirs: ServerDirs| {
            let mut f = facts(json!({"type": "object"}), args);
            f.server.dirs = dirs;
            p.decide(&f)
        };
        for args in [
            json!({"uri": "x:///proc/self/environ"}),
            json!({"uri": "http://localhost/etc/shadow"}),
            json!({"uri": "notes://.ssh/id_rsa"}),
            json!({"paths": "[\"/proc/self/environ\"]"}),
            json!({"path": "${HOME}/../../proc/self/environ"}),
            json!({"path": "/w/{x,..}/../etc/shadow"}),
        ] {
            let d = decide(args.clone(), ServerDirs::default());
            assert_eq!(d.effect, Effect::Deny, "{args}: {d:?}");
            assert!(
                d.reasons.iter().any(|r| r.contains("secret file")),
                "{args}: {d:?}"
            );
        }
        // `~/..` from the sandbox's HOME, a relative path from a `cwd`.
        let dirs = ServerDirs {
            cwd: Some("/home/u".into()),
            homes: vec!["/tmp/home".into()],
        };
        for args in [
            json!({"path": "~/../../etc/shadow"}),
            json!({"path": ".ssh/id_rsa"}),
        ] {
            let d = decide(args.clone(), dirs.clone());
            assert_eq!(d.effect, Effect::Deny, "{args}: {d:?}");
        }
        // Uncertain, not secret: asked about.
        for args in [
            json!({"path": "/w/secret[s]/key"}),
            json!({"path": "$DATA/x"}),
            json!({"path": "/w/public/..;x"}),
            json!({"path": "/w/donne\u{301}es/key"}),
            json!({"paths": "[\"a/b\"]"}),
        ] {
            let d = decide(args.clone(), ServerDirs::default());
            assert_eq!(d.effect, Effect::Ask, "{args}: {d:?}");
            assert!(
                d.reasons
                    .iter()
                    .any(|r| r.contains("cannot be read with certainty")),
                "{args}: {d:?}"
            );
        }
        // A relative path's canonical form in Rego is the file it names.
        let f = facts(
            json!({"type": "object"}),
            json!({"path": "src/a.rs", "w": "read"}),
        );
        let input = p.rego_input_json(&f, Mode::Interactive, &[]);
        assert_eq!(
            input["arguments"],
            json!({"path": "/w/src/a.rs", "w": "read"})
        );
        assert_eq!(input["strings"]["/path"], "/w/src/a.rs");
        assert_eq!(input["raw_arguments"]["path"], "src/a.rs");
    }

    /// A template is hidden only when every URI it can expand to is
    /// denied: under a `deny` URI pattern `BASE**` (checked against the
    /// rules on expansions a client could send), or with the server's
    /// resources denied outright; a path pattern or a narrower glob
    /// leaves it shown (each read is still decided).
    /// A red-team finding: a server that reads a URI's host through a URL
    /// parser (Python's `urlparse(uri).hostname`) opens `secret://vault/key`
    /// for `secret://Vault/key`, `secret://vault:80/key` and
    /// `secret://user@vault/key`, and a naive one `/etc/passwd` for
    /// `file://%2Fetc/passwd`; the denies on those must fire, and the
    /// allows must keep holding for what they allow.
    #[test]
    fn a_deny_on_a_uri_covers_every_spelling_of_its_host_and_a_decoded_file_host() {
        let p = Pipeline::load(PipelineConfig {
            rules: vec![
                rule(RuleEffect::Allow, "resource__hs"),
                rule(RuleEffect::Deny, "resource__hs(uri: secret://vault/**)"),
                rule(RuleEffect::Deny, "resource__hs(uri: /etc/**)"),
                rule(RuleEffect::Allow, "mcp__hs__fetch"),
                rule(
                    RuleEffect::Deny,
                    "mcp__hs__fetch(url: https://internal.example/**)",
                ),
            ],
            policies: Some(vec![]),
            workspace: "/w".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let resource = |uri: &str| {
            p.decide_rules(
                RequestKind::Resource,
                "resource__hs",
                &json!({ "uri": uri }),
            )
            .effect
        };
        for uri in [
            "secret://vault/key",
            "secret://Vault/key",
            "Secret://VAULT/key",
            "secret://vault:80/key",
            "secret://user@vault/key",
            "secret://user:pw@VAULT:8080/key",
            "file:///etc/passwd",
            "file://%2Fetc/passwd",
            "file://%2fetc%2fpasswd",
        ] {
            assert_eq!(resource(uri), Some(Effect::Deny), "{uri}");
        }
        for uri in ["notes://vault/key", "secret://other/key", "file:///w/notes"] {
            assert_eq!(resource(uri), Some(Effect::Allow), "{uri}");
        }
        let fetch = |url: &str| {
            p.decide_rules(RequestKind::Tool, "mcp__hs__fetch", &json!({ "url": url }))
                .effect
        };
        for url in [
            "https://internal.example/a",
            "https://INTERNAL.example/a",
            "https://internal.example:443/a",
            "https://user@internal.example/a",
        ] {
            assert_eq!(fetch(url), Some(Effect::Deny), "{url}");
        }
    }

    #[test]
    fn templates_are_hidden_only_when_a_deny_covers_every_expansion() {
        let p = Pipeline::load(PipelineConfig {
            rules: vec![
                rule(RuleEffect::Allow, "resource__hs(uri: notes://**)"),
                rule(RuleEffect::Deny, "resource__hs(uri: secret://**)"),
                rule(RuleEffect::Deny, "resource__hs(uri: x://vault/keys/**)"),
                rule(RuleEffect::Deny, "resource__hs(uri: /etc/**)"),
                rule(RuleEffect::Deny, "resource__hs(uri: y://a/*)"),
                rule(RuleEffect::Deny, "resource__gone"),
            ],
            policies: Some(vec![]),
            workspace: "/w".into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        for template in [
            "secret://vault/{name}",
            "secret://{host}/{+path}",
            "x://vault/keys/{id}",
            "x://vault/keys/{+rest}{?q}",
        ] {
            assert!(
                p.template_hidden("resource__hs", template, &ServerDirs::default()),
                "{template}"
            );
            // What the hiding promises: every expansion is denied.
            let fixed = template.split('{').next().unwrap_or_default();
            for tail in [
                "",
                "k",
                "a/b",
                "..",
                "../../other",
                "%2e%2e/x",
                "?q=1",
                "#f",
            ] {
                let uri = format!("{fixed}{tail}");
                let v = p.decide_rules(
                    RequestKind::Resource,
                    "resource__hs",
                    &json!({ "uri": uri }),
                );
                assert_eq!(v.effect, Some(Effect::Deny), "{uri}: {v:?}");
            }
        }
        for template in [
            "notes://{path}",
            "x://vault/{id}",
            "file:///etc/{+path}",
            "y://a/{id}",
            "{+any}",
            "SECRET://vault/{name}",
        ] {
            assert!(
                !p.template_hidden("resource__hs", template, &ServerDirs::default()),
                "{template}"
            );
        }
        assert!(p.template_hidden("resource__hs", "secret://vault/key", &ServerDirs::default()));
        assert!(p.template_hidden("resource__gone", "notes://{path}", &ServerDirs::default()));
    }

    /// Every prompt of a server is denied only by a rule whose glob is a
    /// literal start then `*` that covers the server's prefix.
    #[test]
    fn every_target_of_a_server_is_denied_only_by_a_covering_glob() {
        let load = |text: &str| {
            Pipeline::load(PipelineConfig {
                rules: vec![RuleSource {
                    effect: RuleEffect::Deny,
                    text: text.into(),
                    scope: Scope::User,
                    file: "/c.json".into(),
                    index: 0,
                }],
                policies: Some(vec![]),
                workspace: "/w".into(),
                ..PipelineConfig::default()
            })
            .expect("load")
        };
        for covering in ["prompt__hs", "prompt__hs__*", "prompt__*", "prompt__h*"] {
            assert!(
                load(covering).denies_every(RequestKind::Prompt, "prompt__hs__"),
                "{covering}"
            );
        }
        for partial in [
            "prompt__hs__secret",
            "prompt__hs__s*",
            "prompt__hs__?",
            "prompt__hs__[*]",
            "prompt__hs__x(topic: *)",
            "prompt__other",
            "mcp__hs",
        ] {
            assert!(
                !load(partial).denies_every(RequestKind::Prompt, "prompt__hs__"),
                "{partial}"
            );
        }
    }
}
