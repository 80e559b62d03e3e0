//! `warden gateway`: the enforced tools served as an MCP server (later issue).
