//! The vocabulary every layer of warden speaks: canonical JSON and SHA-256
//! digests ([`digest`]), compact JSON written as serde_json writes it but
//! faster ([`json`]), the one lexical path normaliser ([`path`]), the
//! masking of credentials in URLs ([`redact`]), how untrusted text is
//! shown on a terminal ([`display`]), and the
//! small enums that cross crate boundaries (a server's [`Trust`], [`Scope`]
//! and [`TransportKind`]; a decision's [`Effect`], [`Stage`] and [`Mode`]).
//!
//! Tiny on purpose: it depends only on serde, serde_json, sha2 and hex, so
//! every other crate (sandbox, policy, audit) can use it without pulling in
//! anything else. See ARCHITECTURE.md.

#![forbid(unsafe_code)]

pub mod digest;
pub mod display;
pub mod json;
mod kinds;
pub mod path;
pub mod redact;

pub use kinds::{Effect, Mode, RequestKind, Scope, Stage, TransportKind, Trust};

/// Longest qualified tool name (`mcp__S__T`), CONTRACT §4: a longer one is
/// an error for that tool, never truncated. Rules use it to reject tool
/// globs that could never match.
pub const MAX_QUALIFIED_LEN: usize = 64;
