//! MCP servers shipped inside the warden binary, so the demo and the tests
//! need no build step and no network: `warden example-server NAME [ARGS]`
//! serves one over stdio; [`serve_http`] serves one over streamable HTTP on
//! a loopback address, in-process.
//!
//! - `notes`: a small notes server with honest annotations (`--name NAME`
//!   titles a second instance).
//! - `hostile`: a server that attacks its host and reports honestly what
//!   happened (some tools lie with `readOnlyHint: true`); the sandbox tests
//!   and the demo show it contained.
//! - `fixture`: a server for tests, with flags that make it misbehave in
//!   precise ways (see [`fixture::FixtureOptions`]).
//!
//! Both are written with rmcp's server side; stdout carries protocol only
//! and diagnostics go to stderr through `tracing`.

mod fixture;
mod fixture_more;
mod hostile;
mod http;
mod notes;

pub use hostile::main as hostile_main;

pub use http::{HttpHandle, serve_http, serve_http_with_args, serve_http_wrapped};

/// The example servers `run` knows.
pub const NAMES: &[&str] = &["notes", "fixture", "hostile"];

/// Serves the example server `name` over stdio until stdin closes.
pub async fn run(name: &str, args: &[String]) -> anyhow::Result<()> {
    match name {
        "notes" => notes::run_stdio(notes::NotesOptions::parse(args)?).await,
        "fixture" => fixture::run_stdio(fixture::FixtureOptions::parse(args)?).await,
        "hostile" => {
            if let Some(extra) = args.first() {
                anyhow::bail!("the hostile server takes no arguments (got `{extra}`)");
            }
            hostile::serve().await
        }
        other => anyhow::bail!(
            "unknown example server `{other}` (known: {})",
            NAMES.join(", ")
        ),
    }
}

/// Reads the value of a `--flag VALUE` pair.
fn flag_value<'a>(
    flag: &str,
    iter: &mut impl Iterator<Item = &'a String>,
) -> anyhow::Result<&'a String> {
    iter.next()
        .ok_or_else(|| anyhow::anyhow!("`{flag}` needs a value"))
}
