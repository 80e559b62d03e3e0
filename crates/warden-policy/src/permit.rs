//! The capability that lets a call reach a server.

use std::sync::Arc;

use serde_json::Value;

use crate::decision::Decision;
use crate::facts::CallFacts;

/// Proof that the pipeline allowed one specific call (server, tool and
/// argument digest). Constructed only inside this crate, by
/// [`crate::Pipeline::authorize`]; consumed by warden's connection layer
/// when the call is sent, so it cannot be reused.
///
/// No other crate can make one, not even with the fields at hand (the
/// constructor is private to this crate and the fields are private):
///
/// ```compile_fail,E0624
/// use warden_policy::{Decision, Effect, Permit, Stage};
/// let decision = Decision {
///     effect: Effect::Allow,
///     stage: Stage::Rules,
///     reasons: vec![],
///     stages: vec![],
///     policy_sha256: None,
/// };
/// let _ = Permit::new("fs".into(), "write_file".into(), String::new(), decision, None);
/// ```
///
/// ```compile_fail,E0451
/// use warden_policy::{Decision, Effect, Permit, Stage};
/// let decision = Decision {
///     effect: Effect::Allow,
///     stage: Stage::Rules,
///     reasons: vec![],
///     stages: vec![],
///     policy_sha256: None,
/// };
/// let _ = Permit { server: "fs".into(), tool: "t".into(), args_sha256: String::new(), decision, facts: None };
/// ```
///
/// It is not `Clone` either, so one permit is one call.
#[derive(Debug)]
pub struct Permit {
    server: String,
    tool: String,
    args_sha256: String,
    decision: Decision,
    /// The facts decided (their arguments are what the permit covers);
    /// `None` only for a test permit, which names a digest alone.
    facts: Option<Arc<CallFacts>>,
}

impl Permit {
    pub(crate) fn new(
        server: String,
        tool: String,
        args_sha256: String,
        decision: Decision,
        facts: Option<Arc<CallFacts>>,
    ) -> Self {
        Permit {
            server,
            tool,
            args_sha256,
            decision,
            facts,
        }
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's own (remote) tool name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    pub fn args_sha256(&self) -> &str {
        &self.args_sha256
    }

    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The arguments the pipeline decided, exactly (the digest is of
    /// these). The connection layer compares what it sends with them
    /// instead of hashing a large request again. `None` for a test permit.
    pub fn arguments(&self) -> Option<&Value> {
        self.facts.as_deref().map(|f| &f.arguments)
    }

    /// A permit that no pipeline issued, for tests of the connection layer
    /// only. Exists only with this crate's `test-permit` feature, which only
    /// the root package's `[dev-dependencies]` turn on: no release build
    /// has it.
    #[cfg(feature = "test-permit")]
    #[doc(hidden)]
    pub fn for_tests(server: &str, tool: &str, args_sha256: &str) -> Self {
        Permit::new(
            server.to_string(),
            tool.to_string(),
            args_sha256.to_string(),
            Decision {
                effect: warden_core::Effect::Allow,
                stage: warden_core::Stage::Default,
                reasons: vec!["test permit (feature `test-permit`)".to_string()],
                stages: Vec::new(),
                policy_sha256: None,
            },
            None,
        )
    }
}
