//! Example MCP servers shipped with warden.

pub mod hostile;
