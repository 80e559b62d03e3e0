//! warden: a policy-centred secure host for MCP tool servers.
//!
//! Data flows one way: [`config`] → [`mcp`] connections (launched through
//! the `warden-sandbox` crate) → [`registry`] → the `warden-policy` pipeline → call → [`audit`].
//! [`host::Host`] wires these together and owns the single call path;
//! [`agent`], [`gateway`] and [`cli`] are its callers. See ARCHITECTURE.md.

#![forbid(unsafe_code)]

pub mod agent;
pub mod cli;
pub mod config;
pub mod example_servers;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod gateway;
pub mod host;
pub mod launch;
pub mod mcp;
pub mod pins;
mod registry;
pub mod scrub;
pub mod terminal;
