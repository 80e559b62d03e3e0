//! The command line (CONTRACT §2). Parsing lives here; each command's work
//! lives in its own file and calls into the library. Errors are turned into
//! one clear message and an exit code at this edge, never a backtrace.

mod audit;
mod call;
mod demo;
mod doctor;
mod examples;
mod gateway;
mod import;
mod json;
mod mcp;
mod mcp_config;
mod mcp_login;
mod output;
pub mod pin;
mod policy;
mod repl;
mod run;
mod sandbox;
mod session;

/// The runtime warden's commands run on (benchmarks measure on it too).
pub use session::runtime;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use warden_audit::ApprovalAction;

/// Exit codes of CONTRACT §2.
pub mod exit {
    pub const OK: u8 = 0;
    /// The task or tool failed.
    pub const FAILED: u8 = 1;
    /// Usage or configuration error, unknown server or tool.
    pub const USAGE: u8 = 2;
    /// Denied by the pipeline.
    pub const DENIED: u8 = 3;
    /// The sandbox a server requires is not available on this kernel.
    pub const SANDBOX_UNAVAILABLE: u8 = 4;
}

/// An error that already knows its exit code, its kind (the `kind` of
/// `--json`'s `error` object, or `call`'s `outcome`) and its message.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub code: u8,
    pub kind: &'static str,
    pub message: String,
}

impl CliError {
    /// A usage error (exit 2): bad arguments, unknown names.
    pub fn usage(message: impl Into<String>) -> anyhow::Error {
        Self::kind(exit::USAGE, "usage_error", message)
    }
    /// A configuration, policy or key error (exit 2).
    pub fn config(message: impl Into<String>) -> anyhow::Error {
        Self::kind(exit::USAGE, "config_error", message)
    }
    pub fn with_code(code: u8, message: impl Into<String>) -> anyhow::Error {
        let kind = match code {
            exit::USAGE => "usage_error",
            exit::DENIED => "denied",
            exit::SANDBOX_UNAVAILABLE => "sandbox_unavailable",
            _ => "failed",
        };
        Self::kind(code, kind, message)
    }
    pub fn kind(code: u8, kind: &'static str, message: impl Into<String>) -> anyhow::Error {
        CliError {
            code,
            kind,
            message: message.into(),
        }
        .into()
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "warden",
    version,
    about = "A policy-centred secure host for MCP tool servers and agents",
    long_about = "warden runs MCP tool servers inside a sandbox and decides every tool call \
with one permission pipeline (server trust, schema, pinning, annotations, rules, Rego), \
writing each decision to a tamper-evident audit log.\n\nStart with `warden demo`.",
    after_help = examples::WARDEN
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Use only this configuration file (fully trusted; for CI).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Workspace root (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// A Rego policy file or folder (repeatable; added to the configured ones).
    #[arg(long = "policy", global = true, value_name = "PATH")]
    pub policies: Vec<PathBuf>,
    /// Non-interactive: `ask` becomes `deny`.
    #[arg(long, global = true)]
    pub ci: bool,
    /// Audit log file (overrides the configured path).
    #[arg(long, global = true, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// Machine-readable output on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Tool pin file (a lock file CI can commit) instead of `$WARDEN_CONFIG_DIR/pins.json`.
    #[arg(long, global = true, value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Deny any tool whose definition is missing from or differs from the pin file.
    #[arg(long, global = true)]
    pub locked: bool,
    /// Model: `scripted:FILE`, `openai:MODEL` or `anthropic:MODEL`.
    #[arg(long, global = true, value_name = "SPEC", env = "WARDEN_MODEL")]
    pub model: Option<String>,
    /// Most model turns in one task.
    #[arg(long, global = true, value_name = "N", default_value_t = 20)]
    pub max_turns: u32,
    /// Most tool calls in one task.
    #[arg(long, global = true, value_name = "N", default_value_t = 50)]
    pub max_tool_calls: u32,
    /// Overall time limit of one task, in seconds.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 600.0)]
    pub timeout: f64,
    /// More diagnostics on stderr (repeatable); `RUST_LOG` also works.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print what servers and models wrote exactly, even to a terminal or
    /// a CI log (`call`, `run`). Without it, their text is shown with escape
    /// sequences, control, bidi and invisible characters made visible and
    /// CI workflow commands broken whenever stdout is a terminal or the
    /// log of a `--ci` job; with `GITHUB_ACTIONS` or `TF_BUILD` set only
    /// the workflow commands are broken; another pipe or a file gets it
    /// exactly.
    #[arg(long, global = true)]
    pub raw: bool,
    /// Diagnostics format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Offline end-to-end demo: real servers in the sandbox, the pipeline, the audit chain.
    #[command(after_help = examples::DEMO)]
    Demo,
    /// One tool call through the full pipeline, no model; prints the result.
    #[command(after_help = examples::CALL)]
    Call {
        /// The configured server's name.
        server: String,
        /// The server's own tool name.
        tool: String,
        /// Arguments: a JSON object, or @FILE to read one.
        #[arg(long, value_name = "JSON|@FILE")]
        args: Option<String>,
        /// Answer the server's elicitation (and sampling asks) from this
        /// JSON file instead of the terminal (README, "Answering a server's
        /// questions"); recorded in the audit as answered by the file.
        #[arg(long, value_name = "FILE")]
        answers: Option<PathBuf>,
    },
    /// Run one agent task non-interactively and print the answer (or JSON with --json).
    #[command(after_help = examples::RUN)]
    Run {
        /// The task for the model.
        #[arg(long)]
        task: String,
        /// Exit 3 when any tool call was denied.
        #[arg(long)]
        fail_on_deny: bool,
        /// Answer servers' elicitation (and sampling asks) from this JSON
        /// file instead of the terminal.
        #[arg(long, value_name = "FILE")]
        answers: Option<PathBuf>,
    },
    /// Interactive agent session: type tasks; /mcp, /tools, /policy, /audit, /workspace, /help.
    #[command(after_help = examples::REPL)]
    Repl {
        /// Answer servers' elicitation (and sampling asks) from this JSON
        /// file instead of asking at the prompt.
        #[arg(long, value_name = "FILE")]
        answers: Option<PathBuf>,
    },
    /// Configured MCP servers: list, status, approval.
    #[command(subcommand)]
    #[command(after_help = examples::MCP)]
    Mcp(McpCommand),
    /// The pinned tool definitions (rug-pull detection), and forgetting them.
    #[command(subcommand)]
    #[command(after_help = examples::PIN)]
    Pin(PinCommand),
    /// Inspect and check the sandbox.
    #[command(subcommand)]
    #[command(after_help = examples::SANDBOX)]
    Sandbox(SandboxCommand),
    /// Compile, evaluate and test Rego policies.
    #[command(subcommand)]
    #[command(after_help = examples::POLICY)]
    Policy(PolicyCommand),
    /// Verify and read audit logs.
    #[command(subcommand)]
    #[command(after_help = examples::AUDIT)]
    Audit(AuditCommand),
    /// Serve the enforced, aggregated tools as an MCP server (stdio, or
    /// streamable HTTP at `/mcp`).
    #[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "listen"])))]
    #[command(after_help = examples::GATEWAY)]
    Gateway {
        /// Serve one client over stdin/stdout (stdout carries protocol only).
        #[arg(long)]
        stdio: bool,
        /// Serve streamable HTTP at http://ADDR/mcp (ADDR = IP:PORT; port 0 picks one).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// Allow a non-loopback --listen address (plain HTTP: the token travels unencrypted).
        #[arg(long)]
        allow_remote: bool,
        /// Also accept this `Host` header name (repeatable; with --allow-remote).
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_hosts: Vec<String>,
        /// Expose tools under their own names (only with one upstream server).
        #[arg(long)]
        no_prefix: bool,
        /// Put `ask` decisions to the person's client by elicitation (with --stdio: the
        /// client; with --listen: the one presenting the ask-client token). Without it, ask → deny.
        #[arg(long)]
        ask_client: bool,
        /// With --listen --ask-client: read the person's client token from FILE (mode 0600)
        /// instead of generating one.
        #[arg(long, value_name = "FILE", requires = "ask_client")]
        ask_client_token: Option<PathBuf>,
        /// With --listen: read the clients' bearer token from FILE (mode 0600) instead of
        /// generating one (printed once to stderr).
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// With --listen: accept clients without a token (any local process could call tools).
        #[arg(long, conflicts_with = "token_file")]
        no_auth: bool,
    },
    /// Convert another MCP client's configuration (Claude Code, Codex CLI,
    /// Cursor) to warden's user configuration.
    #[command(long_about = IMPORT_ABOUT)]
    #[command(after_help = examples::IMPORT)]
    Import {
        /// Whose configuration to read.
        #[arg(value_enum)]
        client: import::Client,
        /// The file(s) to read (default: the client's own, see above).
        #[arg(value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Write `$WARDEN_CONFIG_DIR/config.json` (mode 0600) instead of printing.
        #[arg(long)]
        write: bool,
        /// With --write: replace an existing user configuration.
        #[arg(long, requires = "write")]
        force: bool,
    },
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    #[command(after_help = examples::COMPLETIONS)]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Check this host and configuration: kernel support, config files,
    /// servers, policies, the audit log, the pins file; each ok|warn|fail.
    #[command(after_help = examples::DOCTOR)]
    Doctor {
        /// Also start every enabled server, list its tools and stop it.
        #[arg(long)]
        connect: bool,
    },
    /// Serve one of the MCP servers shipped inside warden over stdio
    /// (`notes`, `fixture`); used by the demo and the tests.
    #[command(name = "example-server", hide = true)]
    ExampleServer {
        /// `notes` or `fixture`.
        name: String,
        /// The server's own flags (e.g. `--name work`, `--pages 3`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

const IMPORT_ABOUT: &str = "Read another MCP client's configuration and print the \
equivalent warden user configuration (JSON, on stdout), or write it with --write.

Default FILE: claude: ~/.claude.json (top-level and per-project `mcpServers`) and \
~/.claude/settings.json (`permissions`: the `mcp__` rules); codex: $CODEX_HOME/config.toml \
(default ~/.codex/config.toml); cursor: ~/.cursor/mcp.json. A Claude Code `.mcp.json` or \
`.claude/settings.json`, or a Cursor project `.cursor/mcp.json`, can be given as FILE.

Every imported server is `untrusted` (strict default sandbox). A value that looks like a \
credential is never copied: an `env` value becomes `env_from` (passed from your environment), \
a header, URL or argument value a `${VAR}` placeholder. Each setting with no warden equivalent is \
named in a note on stderr (and in `notes` with --json).";

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// The configured servers, where each comes from, and whether it is approved.
    #[command(after_help = examples::MCP_LIST)]
    List,
    /// Connect to every server and show its state, protocol version and tools.
    #[command(after_help = examples::MCP_STATUS)]
    Status,
    /// Approve a project-scope server's exact configuration (shown in full first).
    #[command(after_help = examples::MCP_APPROVE)]
    Approve {
        name: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Take back an approval.
    #[command(after_help = examples::MCP_REVOKE)]
    Revoke { name: String },
    /// Log in to a streamable-HTTP server behind OAuth: prints the
    /// authorization URL (and runs `$BROWSER` with it when set), waits for
    /// the redirect on 127.0.0.1 and stores the tokens (0600, never shown).
    #[command(after_help = examples::MCP_LOGIN)]
    Login { name: String },
    /// Delete the stored OAuth login of a server.
    #[command(after_help = examples::MCP_LOGOUT)]
    Logout { name: String },
}

#[derive(Debug, Subcommand)]
pub enum PinCommand {
    /// Every pinned tool definition: server, tool, digest, when it was pinned.
    #[command(after_help = examples::PIN_LIST)]
    List,
    /// Forget the pins of one server (or of all), so the next listing pins afresh.
    #[command(after_help = examples::PIN_RESET)]
    Reset { server: Option<String> },
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// What this kernel supports and what warden will enforce.
    #[command(after_help = examples::SANDBOX_CHECK)]
    Check {
        /// Also show the profile a configured server would get.
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
    },
    /// Run any command under a sandbox profile (like `bwrap`).
    #[command(after_help = examples::SANDBOX_EXEC)]
    Exec {
        /// A JSON file with a server `sandbox` object; default: the strict default profile.
        #[arg(long, value_name = "FILE")]
        profile: Option<PathBuf>,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Compile the configured policies and report errors with file:line:col.
    #[command(after_help = examples::POLICY_CHECK)]
    Check,
    /// Evaluate one input document (like `opa eval`).
    #[command(after_help = examples::POLICY_EVAL)]
    Eval {
        #[arg(long, value_name = "FILE")]
        input: PathBuf,
    },
    /// Run `test_` rules (like `opa test`).
    #[command(after_help = examples::POLICY_TEST)]
    Test { path: Vec<PathBuf> },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain, and that the log reaches its head (FILE.head,
    /// or --head).
    #[command(after_help = examples::AUDIT_VERIFY)]
    Verify {
        file: PathBuf,
        /// HMAC key file (default: `WARDEN_AUDIT_KEY` when set).
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// A head kept elsewhere (what `warden audit head` printed): the log
        /// must reach SEQ with this HASH there. Repeatable.
        #[arg(long = "head", value_name = "SEQ:HASH")]
        heads: Vec<String>,
        /// Accept the log's end as it is: when its chain verifies, write a
        /// head file naming its last record (replacing a missing, empty or
        /// damaged one; a valid head the log does not reach is kept).
        /// warden does not append to a log with records and no head.
        #[arg(long)]
        accept_head: bool,
    },
    /// Print the log's head (FILE.head) as SEQ:HASH, to keep elsewhere and
    /// check later with `verify --head`.
    #[command(after_help = examples::AUDIT_HEAD)]
    Head {
        file: PathBuf,
        /// HMAC key file, to authenticate a keyed head (default:
        /// `WARDEN_AUDIT_KEY` when set).
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
    },
    /// Print records as a table, or as JSON with `--json`.
    #[command(after_help = examples::AUDIT_SHOW)]
    Show {
        file: PathBuf,
        #[arg(long)]
        session: Option<String>,
        /// Only tool calls whose qualified name matches this glob.
        #[arg(long, value_name = "GLOB")]
        tool: Option<String>,
        /// Only tool calls with this effect.
        #[arg(long)]
        effect: Option<String>,
    },
}

/// Parses the command line, runs the command, and maps errors to exit codes
/// (and, with `--json`, to the command's one JSON object).
pub fn main() -> ExitCode {
    // Before any thread: the umask servers get, whatever a library (the
    // repl's editor) sets for a moment later (warden_sandbox's umask).
    warden_sandbox::remember_umask();
    block_file_size_signal();
    quiet_on_closed_stdout();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json_requested = json::requested(&args);
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => return parse_error(&args, json_requested, &error),
    };
    init_tracing(&cli.global);
    if launches_servers(&cli.command) {
        // Root's sandboxes cover /proc's owner-only files, found by a walk
        // (a few ms): made while the configuration and policies load.
        warden_sandbox::begin_proc_walk();
    }
    let command = command_path(&cli.command);
    let call_target = match &cli.command {
        Command::Call { server, tool, .. } => Some((server.clone(), tool.clone())),
        _ => None,
    };
    let json_out = cli.global.json;
    let result = if json_out && json::fields(&command).is_empty() {
        Err(CliError::usage(format!(
            "--json is not supported by `warden {command}`: its stdout belongs to {}",
            match command.as_str() {
                "repl" => "the interactive session",
                "gateway" => "the MCP protocol (or it serves HTTP)",
                "sandbox exec" => "the command it runs",
                "completions" => "the completion script",
                _ => "something else",
            }
        )))
    } else {
        dispatch(cli)
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            let (code, kind) = error
                .downcast_ref::<CliError>()
                .map_or((exit::USAGE, "error"), |e| (e.code, e.kind));
            let message = crate::scrub::clean(&format!("{error:#}")).into_owned();
            // Messages quote servers, models and files warden does not
            // control; the JSON object keeps them exact (JSON escaping
            // makes them inert).
            eprintln!("warden: {}", warden_core::display::text(&message));
            if json_out {
                let call = call_target.as_ref().map(|(s, t)| (s.as_str(), t.as_str()));
                json::print_error(&command, call, kind, &message);
            }
            ExitCode::from(code)
        }
    }
}

/// A command line clap refused: its usual message on stderr and, with
/// `--json`, one object on stdout (exit 2); `--help`/`--version` as usual.
fn parse_error(args: &[std::ffi::OsString], json_requested: bool, error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let informational = matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if !json_requested {
        let _ = error.print();
        return ExitCode::from(if error.use_stderr() {
            exit::USAGE
        } else {
            exit::OK
        });
    }
    let (command, words) = json::guess_command(args);
    let rendered = error.render().to_string();
    if informational && !error.use_stderr() {
        let value = serde_json::json!({ "help": rendered });
        if let Err(e) = json::print("", value) {
            eprintln!("warden: {e:#}");
        }
        return ExitCode::from(exit::OK);
    }
    let _ = error.print();
    let message = rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid command line")
        .trim_start_matches("error: ")
        .to_string();
    let call = match words.as_slice() {
        [server, tool] => Some((server.as_str(), tool.as_str())),
        _ => None,
    };
    json::print_error(&command, call, "usage_error", &message);
    ExitCode::from(exit::USAGE)
}

/// Whether `command` may start sandboxed servers (or describe their
/// sandboxes).
fn launches_servers(command: &Command) -> bool {
    matches!(
        command,
        Command::Demo
            | Command::Call { .. }
            | Command::Run { .. }
            | Command::Repl { .. }
            | Command::Gateway { .. }
            | Command::Mcp(McpCommand::Status)
            | Command::Sandbox(_)
            | Command::Doctor { .. }
    )
}

/// The command's path as `--json` names it (`"mcp status"`).
fn command_path(command: &Command) -> String {
    let path = match command {
        Command::Demo => "demo",
        Command::Call { .. } => "call",
        Command::Run { .. } => "run",
        Command::Repl { .. } => "repl",
        Command::Mcp(McpCommand::List) => "mcp list",
        Command::Mcp(McpCommand::Status) => "mcp status",
        Command::Mcp(McpCommand::Approve { .. }) => "mcp approve",
        Command::Mcp(McpCommand::Revoke { .. }) => "mcp revoke",
        Command::Mcp(McpCommand::Login { .. }) => "mcp login",
        Command::Mcp(McpCommand::Logout { .. }) => "mcp logout",
        Command::Pin(PinCommand::List) => "pin list",
        Command::Pin(PinCommand::Reset { .. }) => "pin reset",
        Command::Sandbox(SandboxCommand::Check { .. }) => "sandbox check",
        Command::Sandbox(SandboxCommand::Exec { .. }) => "sandbox exec",
        Command::Policy(PolicyCommand::Check) => "policy check",
        Command::Policy(PolicyCommand::Eval { .. }) => "policy eval",
        Command::Policy(PolicyCommand::Test { .. }) => "policy test",
        Command::Audit(AuditCommand::Verify { .. }) => "audit verify",
        Command::Audit(AuditCommand::Show { .. }) => "audit show",
        Command::Audit(AuditCommand::Head { .. }) => "audit head",
        Command::Gateway { .. } => "gateway",
        Command::Import { .. } => "import",
        Command::Completions { .. } => "completions",
        Command::Doctor { .. } => "doctor",
        Command::ExampleServer { .. } => "example-server",
    };
    path.to_string()
}

fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Demo => demo::run(&cli.global),
        Command::Call {
            server,
            tool,
            args,
            answers,
        } => call::run(
            &cli.global,
            &server,
            &tool,
            args.as_deref(),
            answers.as_deref(),
        ),
        Command::Run {
            task,
            fail_on_deny,
            answers,
        } => run::run(&cli.global, &task, fail_on_deny, answers.as_deref()),
        Command::Repl { answers } => repl::run(&cli.global, answers.as_deref()),
        Command::Pin(cmd) => {
            let path = match &cli.global.lock {
                Some(path) => path.clone(),
                None => crate::pins::path_for(None, &session::config_dir()?),
            };
            let mut store =
                crate::pins::PinStore::open(&path).map_err(|e| CliError::config(e.to_string()))?;
            match cmd {
                PinCommand::List => pin::list(&store, cli.global.json),
                PinCommand::Reset { server } => {
                    pin::reset(&mut store, server.as_deref(), cli.global.json, || {
                        let config = session::load_config(&cli.global)?;
                        session::audit_approval(
                            &cli.global,
                            &config,
                            server.as_deref().unwrap_or("*"),
                            ApprovalAction::PinsReset,
                        )
                    })
                }
            }
        }
        Command::Mcp(McpCommand::Status) => mcp::status(&cli.global),
        Command::Mcp(McpCommand::List) => {
            let config = session::load_config(&cli.global)?;
            mcp_config::list(&config, cli.global.json)
        }
        Command::Mcp(McpCommand::Approve { name, yes }) => {
            let config = session::load_config(&cli.global)?;
            // The approval record is written before the approval is saved.
            let (code, action) =
                mcp_config::approve(&config, &session::config_dir()?, &name, yes, || {
                    session::audit_approval(&cli.global, &config, &name, ApprovalAction::Approved)
                })?;
            approval_json(&cli.global, "mcp approve", &config, &name, action)?;
            Ok(code)
        }
        Command::Mcp(McpCommand::Revoke { name }) => {
            let config = session::load_config(&cli.global)?;
            let (code, action) = mcp_config::revoke(&config, &session::config_dir()?, &name)?;
            if action == "revoked" {
                session::audit_approval(&cli.global, &config, &name, ApprovalAction::Revoked)?;
            }
            approval_json(&cli.global, "mcp revoke", &config, &name, action)?;
            Ok(code)
        }
        Command::Mcp(McpCommand::Login { name }) => mcp_login::login(&cli.global, &name),
        Command::Mcp(McpCommand::Logout { name }) => mcp_login::logout(&cli.global, &name),
        Command::Sandbox(cmd) => sandbox::run(&cli.global, cmd),
        Command::Policy(cmd) => policy::run(&cli.global, cmd),
        Command::Audit(cmd) => audit::run(&cli.global, cmd),
        Command::Gateway {
            stdio,
            listen,
            allow_remote,
            allow_hosts,
            no_prefix,
            ask_client,
            ask_client_token,
            token_file,
            no_auth,
        } => gateway::run(
            &cli.global,
            gateway::GatewayArgs {
                stdio,
                listen,
                allow_remote,
                allow_hosts,
                no_prefix,
                ask_client,
                ask_client_token,
                token_file,
                no_auth,
            },
        ),
        Command::Import {
            client,
            files,
            write,
            force,
        } => import::run(
            &cli.global,
            import::ImportArgs {
                client,
                files,
                write,
                force,
            },
        ),
        Command::Completions { shell } => completions(shell),
        Command::Doctor { connect } => doctor::run(&cli.global, connect),
        Command::ExampleServer { name, args } => run_example_server(&name, &args),
    }
}

/// `mcp approve|revoke --json`: what happened to which configuration.
fn approval_json(
    global: &GlobalArgs,
    command: &str,
    config: &crate::config::Config,
    name: &str,
    action: &str,
) -> anyhow::Result<()> {
    if !global.json {
        return Ok(());
    }
    let digest = config.servers.get(name).map(|s| s.digest.clone());
    json::print(
        command,
        serde_json::json!({"server": name, "action": action, "config_sha256": digest}),
    )
}

/// `warden completions SHELL`: the script on stdout.
fn completions(shell: CompletionShell) -> anyhow::Result<u8> {
    use clap::CommandFactory;
    use clap_complete::Shell;
    let shell = match shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    // Hidden commands (the example servers) are left out: clap_complete
    // would offer them.
    let full = Cli::command();
    let mut command = clap::Command::new("warden")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "warden", &mut script);
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&script).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("writing to stdout: {e}"))
        }
        _ => Ok(exit::OK),
    }
}

/// Blocks SIGXFSZ in this thread, before any other exists (threads inherit
/// the mask). A write past the file size limit (`ulimit -f`) raises it, and
/// its default action ended warden mid-record: a torn line in the audit
/// log and no `audit_failed` for the call. Blocked, the write fails with
/// EFBIG and is refused and cut back like any failed write. Children start
/// with an empty mask (std's spawn resets it), so servers keep the default.
fn block_file_size_signal() {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGXFSZ);
    if let Err(e) = set.thread_block() {
        // Not fatal: the limit then ends warden as before, never silently.
        eprintln!("warden: cannot block SIGXFSZ: {e}");
    }
}

/// A reader that stops early (`warden pin list | head -1`) closes stdout,
/// and `println!` panics on the broken pipe: end quietly instead, with
/// the status a process killed by SIGPIPE has (128 + 13), as other command
/// line tools do. (SIGPIPE itself stays ignored: a server's closed stdin
/// must be an error on that pipe, never the end of warden.) Any other
/// panic is reported as before.
fn quiet_on_closed_stdout() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        previous(info);
    }));
}

/// `warden example-server NAME [ARGS]`: stdout is the MCP protocol only.
fn run_example_server(name: &str, args: &[String]) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(crate::example_servers::run(name, args))?;
    Ok(exit::OK)
}

fn init_tracing(global: &GlobalArgs) {
    use tracing_subscriber::EnvFilter;
    let default = match global.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        // No colour codes: the writer neutralises every escape sequence
        // (log lines quote servers' stderr, errors and names), so it
        // cannot tell tracing's own colours from a server's.
        .with_ansi(false)
        // Every line without credentials in URLs or configured secrets,
        // the libraries' own lines included, and shown as
        // `warden_core::display` decides.
        .with_writer(crate::scrub::Stderr);
    let _ = match global.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every visible command's `--help` ends with an "Examples:" block
    /// whose lines start with `warden` (or a client that runs it).
    #[test]
    fn every_command_has_examples() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let help = command
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            if !help.starts_with("Examples:\n") || !help.contains("warden ") {
                missing.push(path.to_string());
            }
            for sub in command.get_subcommands() {
                if sub.is_hide_set() || sub.get_name() == "help" {
                    continue;
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "warden", &mut missing);
        assert!(missing.is_empty(), "no examples in --help of: {missing:?}");
    }
}
