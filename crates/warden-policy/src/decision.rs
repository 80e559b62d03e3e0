//! What the pipeline answers: one verdict per stage, and the combined
//! [`Decision`].

use serde::Serialize;
use warden_core::{Effect, Stage};

/// One stage's verdict: `effect == None` means the stage had no opinion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageVerdict {
    pub stage: Stage,
    pub effect: Option<Effect>,
    pub reasons: Vec<String>,
    /// For the rules stage: the rules that decided, as `LIST rule `TEXT`
    /// (ORIGIN)`, without the values they matched. What an "allow for this
    /// session" answer covers. Not part of any output.
    #[serde(skip)]
    pub matched_rules: Vec<String>,
    /// For the rules stage's `allow`: an operator rule (user scope or
    /// `--config`) naming the tool exactly matched. What CONTRACT §5's
    /// annotations exception requires. Not part of any output.
    #[serde(skip)]
    pub exact_operator_allow: bool,
}

impl StageVerdict {
    /// A verdict without matched rules (every stage but rules).
    pub fn new(stage: Stage, effect: Option<Effect>, reasons: Vec<String>) -> Self {
        StageVerdict {
            stage,
            effect,
            reasons,
            matched_rules: Vec::new(),
            exact_operator_allow: false,
        }
    }
}

/// The pipeline's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub effect: Effect,
    /// The stage that decided (`default` when none did).
    pub stage: Stage,
    pub reasons: Vec<String>,
    /// Every stage's verdict, in order (for `policy eval` and audit).
    pub stages: Vec<StageVerdict>,
    /// Digest of the loaded Rego policies, `None` without a Rego stage.
    pub policy_sha256: Option<String>,
}
