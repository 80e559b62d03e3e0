//! What the pipeline is built from, as the configuration produces it:
//! permission rules as written and Rego policy paths, each with the scope
//! (user, project, explicit) that decides what it may grant.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use warden_core::Scope;

/// Which list of `permissions` a rule is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleEffect {
    Allow,
    Ask,
    Deny,
}

impl RuleEffect {
    /// The list's name: `allow`, `ask`, `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleEffect::Allow => "allow",
            RuleEffect::Ask => "ask",
            RuleEffect::Deny => "deny",
        }
    }
}

/// One permission rule as written, with where it came from. Parsed and
/// checked when the pipeline loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSource {
    pub effect: RuleEffect,
    /// The rule text, `${VAR}`/`${WORKSPACE}` already expanded.
    pub text: String,
    pub scope: Scope,
    pub file: PathBuf,
    /// Index in its list, for error messages (`permissions.allow[2]`).
    pub index: usize,
}

/// A Rego policy file or folder to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySource {
    pub path: PathBuf,
    pub scope: Scope,
}

/// A JSON document the configuration names as Rego data (`policy_data`).
/// Its top-level keys become `data.KEY`; a key under `warden` (or one
/// that would shadow a loaded package) is refused. JSON files are data
/// only when named so: a file beside a policy is never loaded by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSource {
    pub path: PathBuf,
    pub scope: Scope,
}
