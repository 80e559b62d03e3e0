//! The permission pipeline (CONTRACT §5). Every proposed tool call, whoever
//! proposes it, is decided by [`Pipeline::decide`]; the only way to obtain a
//! [`Permit`], which warden's connection layer requires to send a call, is
//! [`Pipeline::authorize`] on a decision that allows (or an `ask` a person
//! approved). No other crate can construct a `Permit`.
//!
//! Map: `pipeline` (load, the six stages, the Rego input, combination,
//! `authorize`, decisions off the caller's task with a deadline unless
//! bounded small), `canon`
//! (one canonical form per argument value: paths, `file:` URIs, `~`,
//! numbers; what is uncertain and why), `rules` (permission-rule grammar
//! for every request kind of CONTRACT §8, matching canonical values),
//! [`schema_guard`] (input schemas refused before anything validates
//! against them), `rego` (loading and evaluating policies with regorus;
//! the shipped policies are embedded; data only from named files), `vm`
//! (regorus's bytecode VM for a policy it runs as the interpreter would),
//! `bounded` (builtins that could allocate without bound, made bounded),
//! [`testing`] (`warden policy test`), `facts` and `decision` (what goes
//! in and comes out), `sources` (what the configuration hands over), `ask`
//! (the [`Asker`] interface).
//!
//! Depends on neither warden's configuration nor its connections: facts
//! come in as plain data ([`CallFacts`]), rules and policies as
//! [`RuleSource`]/[`PolicySource`].
//!
//! Invariants: `decide` never fails (an error inside a stage is that
//! stage's deny, with the error as the reason); a stage's `allow` never
//! outweighs another stage's `ask` or `deny` (except CONTRACT §5's one
//! exception: an operator rule naming the tool exactly overrides an ask
//! that comes only from annotations); project-scope rules and policies
//! can only restrict; a value warden cannot read with certainty never
//! satisfies an `allow` on paths or URIs.

#![forbid(unsafe_code)]

mod ask;
mod bounded;
mod canon;
mod decision;
mod error;
mod facts;
mod functions;
mod parse_cost;
mod patterns;
mod permit;
mod pipeline;
mod proc_links;
mod python_urls;
mod rego;
mod rules;
pub mod schema_guard;
mod sources;
#[cfg(test)]
mod strategies;
pub mod testing;
mod user_homes;
mod vm;

pub use ask::{
    ArgumentLine, AskAnswer, AskPrompt, Asker, MAX_ARGUMENT_LINES, MAX_KEY_CHARS, MAX_SHOWN_CHARS,
    MAX_VALUE_CHARS, argument_lines,
};
pub use decision::{Decision, StageVerdict};
pub use error::PolicyError;
pub use facts::{
    CallContext, CallFacts, PIN_CHANGED, PinState, ServerDirs, ServerFacts, ToolFacts,
};
pub use permit::Permit;
pub use pipeline::{
    ArgumentLimits, DEFAULT_DEADLINE, INLINE_MAX_TEXT, INLINE_MAX_VALUES, MAX_THREADS, Pipeline,
    PipelineConfig, pool_threads,
};
pub use rego::DEFAULT_REGO;
pub use rules::RuleError;
pub use schema_guard::SchemaLimits;
pub use sources::{DataSource, PolicySource, RuleEffect, RuleSource};
pub use warden_core::{Effect, Mode, RequestKind, Stage};

/// Compiles one permission rule alone: `Ok` when its text is valid rule
/// syntax (`warden import` checks rules it converts from other clients).
pub fn check_rule(source: &RuleSource) -> Result<(), RuleError> {
    rules::Rule::compile(source).map(|_| ())
}
