//! [`Pipeline`]: the one entry point that decides every tool call.
//!
//! Map: this file (load, `decide`, combination), `stages` (the six
//! stages), `input` (the Rego `input` document), `authorize` (decision →
//! [`Permit`], asking when needed, per-session approvals).

mod authorize;
mod input;
mod stages;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;
use warden_core::digest::sha256_hex;
use warden_core::{Effect, Mode, Scope, Stage};

use crate::decision::{Decision, StageVerdict};
use crate::error::PolicyError;
use crate::facts::CallFacts;
use crate::rego::{DEFAULT_REGO, DEFAULT_REGO_NAME, PolicyInput, RegoSet};
use crate::rules::Rule;
use crate::sources::{PolicySource, RuleEffect, RuleSource};

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
    /// a project file's policies add to the default, never replace it.
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
            let input = PolicyInput::Path(p.path.clone());
            if p.scope == Scope::Project {
                project.push(input);
            } else {
                trusted.push(input);
            }
        }
        trusted.extend(config.extra_policies.iter().cloned().map(PolicyInput::Path));
        let probe = input::probe(&workspace);
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
    /// stage is that stage's `deny`, with the error as the reason.
    pub fn decide(&self, facts: &CallFacts) -> Decision {
        let mode = self.effective_mode(facts);
        let mut stages = Vec::with_capacity(6);
        stages.push(stages::trust(facts));
        stages.push(self.stage_schema(facts));
        stages.push(self.stage_pinning(facts));
        stages.push(stages::annotations(facts));
        stages.push(self.stage_rules(facts));
        if !self.rego.is_empty() {
            let input = self.rego_input(facts, mode, &stages);
            stages.push(self.policy_verdict(input));
        }
        combine(stages, mode, self.policy_sha256.clone())
    }

    /// Evaluates the Rego stage for a ready `input` document (used by
    /// `warden policy eval`).
    pub fn policy_verdict_for_input(&self, input: &Value) -> StageVerdict {
        self.policy_verdict(crate::rego::to_rego(input))
    }

    /// Combines stage verdicts computed elsewhere (e.g. `policy eval`).
    pub fn combine(&self, stages: Vec<StageVerdict>, mode: Mode) -> Decision {
        combine(stages, mode, self.policy_sha256.clone())
    }
}

/// Any deny → deny; else any ask → ask; else any allow → allow; else the
/// default stage asks. With `--ci` an ask becomes a deny.
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
