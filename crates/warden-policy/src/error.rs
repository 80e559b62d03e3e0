//! Load-time errors of the pipeline. Decision-time problems never surface as
//! errors: they become a `deny` that says why (fail closed).

use std::path::PathBuf;

use crate::rules::RuleError;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A malformed permission rule (file, `permissions.<list>[i]`, column).
    #[error("{0}")]
    Rule(#[from] RuleError),
    /// A Rego syntax or compile error; regorus's message carries
    /// `file:line:col` and a caret.
    #[error("invalid policy {file}:\n{}", message.trim())]
    Rego { file: String, message: String },
    /// A policy compiled but fails when evaluated (e.g. an unknown function).
    #[error("policy {files} fails to evaluate: {message}")]
    RegoEval { files: String, message: String },
    #[error("policy {path}: {message}")]
    Io { path: PathBuf, message: String },
    /// A `data` document beside a policy is not valid JSON or conflicts.
    #[error("policy data {path}: {message}")]
    Data { path: PathBuf, message: String },
    /// A policy file is not in package `warden` (it would never be consulted).
    #[error("policy {file}: package `{package}` is never consulted; warden reads package `warden`")]
    Package { file: String, package: String },
}
