//! Enums that cross crate boundaries, serialised exactly as CONTRACT.md
//! spells them (`"untrusted"`, `"project"`, `"stdio"`, `"ask"`, …).

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! names {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// The name used in configuration, JSON output, Rego and audit.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// How far warden believes a server (CONTRACT §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Annotations are believed; the sandbox may be relaxed.
    Trusted,
    /// The default: annotations ignored, strict sandbox.
    #[default]
    Untrusted,
    /// Never started; every call denied.
    Blocked,
}
names!(Trust { Trusted => "trusted", Untrusted => "untrusted", Blocked => "blocked" });

/// Where a piece of configuration came from; decides what it may grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `$WARDEN_CONFIG_DIR/config.json`: the user's own file.
    User,
    /// A `.mcp.json` found in the workspace: shipped by a repository, so it
    /// may only restrict (add servers that need approval, `ask`, `deny`).
    Project,
    /// `--config FILE`: the operator's file, fully trusted, used alone.
    Explicit,
}
names!(Scope { User => "user", Project => "project", Explicit => "explicit" });

/// A server's transport (configuration `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// A local process speaking over stdin/stdout, launched in the sandbox.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// Legacy HTTP+SSE.
    Sse,
}
names!(TransportKind { Stdio => "stdio", Http => "http", Sse => "sse" });

/// What a pipeline stage (or the whole pipeline) says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Allow,
    Ask,
    Deny,
}
names!(Effect { Allow => "allow", Ask => "ask", Deny => "deny" });

/// Pipeline stages, in evaluation order, named as in `stage` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Trust,
    Schema,
    Pinning,
    Annotations,
    Rules,
    Policy,
    Default,
}
names!(Stage {
    Trust => "trust",
    Schema => "schema",
    Pinning => "pinning",
    Annotations => "annotations",
    Rules => "rules",
    Policy => "policy",
    Default => "default",
});

/// Who is deciding: changes what happens to `ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A person at the terminal answers `ask`.
    Interactive,
    /// Nobody can answer: `ask` becomes `deny`.
    Ci,
    /// The MCP client is asked by elicitation when it supports it, else deny.
    Gateway,
}
names!(Mode { Interactive => "interactive", Ci => "ci", Gateway => "gateway" });

/// What kind of MCP request is decided (CONTRACT §8): each kind has its
/// own rule target (`mcp__S__T`, `resource__S`, `prompt__S__P`,
/// `sampling__S`, `elicitation__S`) and Rego `input.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestKind {
    /// `tools/call`.
    Tool,
    /// `resources/read`, `resources/subscribe`.
    Resource,
    /// `prompts/get`.
    Prompt,
    /// A server's `sampling/createMessage`.
    Sampling,
    /// A server's `elicitation/create`.
    Elicitation,
}
names!(RequestKind {
    Tool => "tool",
    Resource => "resource",
    Prompt => "prompt",
    Sampling => "sampling",
    Elicitation => "elicitation",
});

impl RequestKind {
    /// Every kind, in CONTRACT §8's order.
    pub const ALL: [RequestKind; 5] = [
        RequestKind::Tool,
        RequestKind::Resource,
        RequestKind::Prompt,
        RequestKind::Sampling,
        RequestKind::Elicitation,
    ];

    /// The literal start of this kind's rule targets and qualified names:
    /// `mcp__`, `resource__`, `prompt__`, `sampling__`, `elicitation__`.
    pub fn target_prefix(self) -> &'static str {
        match self {
            RequestKind::Tool => "mcp__",
            RequestKind::Resource => "resource__",
            RequestKind::Prompt => "prompt__",
            RequestKind::Sampling => "sampling__",
            RequestKind::Elicitation => "elicitation__",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde() {
        for (v, s) in [
            (
                serde_json::to_value(Trust::Untrusted),
                Trust::Untrusted.as_str(),
            ),
            (
                serde_json::to_value(Scope::Explicit),
                Scope::Explicit.as_str(),
            ),
            (
                serde_json::to_value(TransportKind::Sse),
                TransportKind::Sse.as_str(),
            ),
            (serde_json::to_value(Effect::Ask), Effect::Ask.as_str()),
            (
                serde_json::to_value(Stage::Annotations),
                Stage::Annotations.as_str(),
            ),
            (serde_json::to_value(Mode::Ci), Mode::Ci.as_str()),
            (
                serde_json::to_value(RequestKind::Elicitation),
                RequestKind::Elicitation.as_str(),
            ),
        ] {
            assert_eq!(v.ok(), Some(serde_json::Value::from(s)));
        }
    }
}
