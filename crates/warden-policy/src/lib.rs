//! The permission pipeline (CONTRACT §5). Every proposed tool call, whoever
//! proposes it, is decided by [`Pipeline::decide`]; the only way to obtain a
//! [`Permit`], which warden's connection layer requires to send a call, is
//! [`Pipeline::authorize`] on a decision that allows (or an `ask` a person
//! approved). No other crate can construct a `Permit`.
//!
//! Map: `pipeline` (load, the six stages, the Rego input, combination,
//! `authorize`), `rules` (permission-rule grammar, path matching),
//! `rego` (loading and evaluating policies with regorus; the shipped
//! policies are embedded), [`testing`] (`warden policy test`), `facts`
//! and `decision` (what goes in and comes out), `sources` (what the
//! configuration hands over), `ask` (the [`Asker`] interface).
//!
//! Depends on neither warden's configuration nor its connections: facts
//! come in as plain data ([`CallFacts`]), rules and policies as
//! [`RuleSource`]/[`PolicySource`].
//!
//! Invariants: `decide` never fails (an error inside a stage is that
//! stage's deny, with the error as the reason); a stage's `allow` never
//! outweighs another stage's `ask` or `deny`; project-scope rules and
//! policies can only restrict.

#![forbid(unsafe_code)]

mod ask;
mod decision;
mod error;
mod facts;
mod permit;
mod pipeline;
mod rego;
mod rules;
mod sources;
pub mod testing;

pub use ask::{AskAnswer, AskPrompt, Asker};
pub use decision::{Decision, StageVerdict};
pub use error::PolicyError;
pub use facts::{CallContext, CallFacts, PinState, ServerFacts, ToolFacts};
pub use permit::Permit;
pub use pipeline::{Pipeline, PipelineConfig};
pub use rego::DEFAULT_REGO;
pub use rules::RuleError;
pub use sources::{PolicySource, RuleEffect, RuleSource};
pub use warden_core::{Effect, Mode, Stage};
