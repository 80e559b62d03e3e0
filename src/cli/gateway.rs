//! `warden gateway --stdio | --listen ADDR`: the enforced, aggregated tools
//! served as one MCP server (the work is in [`crate::gateway`]).

use std::net::SocketAddr;
use std::sync::Arc;

use super::{CliError, GlobalArgs, exit, session};
use crate::gateway::{Gateway, GatewayOptions, HttpOptions, Tokens};
use crate::host::Host;
use crate::mcp::ServerState;
use warden_policy::Mode;

/// The parsed `gateway` flags.
#[derive(Debug, Clone)]
pub struct GatewayArgs {
    pub stdio: bool,
    pub listen: Option<String>,
    pub allow_remote: bool,
    pub allow_hosts: Vec<String>,
    pub no_prefix: bool,
    /// `--ask-client`: `ask` decisions are put to the person's client.
    pub ask_client: bool,
    /// `--ask-client-token FILE` (with `--listen`): how the person's
    /// client is recognised; generated when absent.
    pub ask_client_token: Option<std::path::PathBuf>,
    /// `--token-file FILE`: the clients' bearer token; generated when absent.
    pub token_file: Option<std::path::PathBuf>,
    /// `--no-auth`: accept requests without a token.
    pub no_auth: bool,
}

/// The tokens of `--listen`, read or generated; generated ones are printed
/// once to stderr.
fn tokens(args: &GatewayArgs) -> anyhow::Result<Tokens> {
    let read =
        |path: &std::path::Path| crate::gateway::read_token_file(path).map_err(CliError::usage);
    let client = match (&args.token_file, args.no_auth) {
        (Some(_), true) => {
            return Err(CliError::usage(
                "--token-file and --no-auth exclude each other",
            ));
        }
        (Some(path), false) => Some(read(path)?),
        (None, true) => None,
        (None, false) => {
            let token = crate::gateway::generate_token();
            eprintln!(
                "warden gateway: bearer token (send `Authorization: Bearer TOKEN`; shown once): {token}"
            );
            Some(token)
        }
    };
    let person = match (&args.ask_client_token, args.ask_client) {
        (Some(_), false) => return Err(CliError::usage("--ask-client-token needs --ask-client")),
        (Some(path), true) => Some(read(path)?),
        (None, true) => {
            let token = crate::gateway::generate_token();
            eprintln!(
                "warden gateway: ask-client token (give it only to the client a person answers \
                 questions in; shown once): {token}"
            );
            Some(token)
        }
        (None, false) => None,
    };
    if client.is_some() && client == person {
        return Err(CliError::usage(
            "the ask-client token must differ from the clients' token",
        ));
    }
    if args.no_auth {
        eprintln!(
            "warden gateway: WARNING: --no-auth: clients are NOT authenticated; any local process \
             (another user's included) can call the served tools under your policy"
        );
    }
    Ok(Tokens::new(client.as_deref(), person.as_deref()))
}

pub fn run(global: &GlobalArgs, args: GatewayArgs) -> anyhow::Result<u8> {
    let listen = match (&args.listen, args.stdio) {
        (Some(addr), false) => Some(parse_listen(addr, args.allow_remote)?),
        (None, true) => None,
        _ => {
            return Err(CliError::usage(
                "give exactly one of --stdio and --listen ADDR",
            ));
        }
    };
    if !args.allow_hosts.is_empty() && !args.allow_remote {
        return Err(CliError::usage("--allow-host needs --allow-remote"));
    }
    if listen.is_none()
        && (args.token_file.is_some() || args.no_auth || args.ask_client_token.is_some())
    {
        return Err(CliError::usage(
            "--token-file, --no-auth and --ask-client-token are for --listen",
        ));
    }
    let tokens = match listen {
        Some(_) => Some(tokens(&args)?),
        None => None,
    };
    let mut options = session::host_options(global, Mode::Gateway)?;
    // The tokens that let a client in: no server may read or write them
    // (what is hidden is protected too).
    options.hide.extend(
        args.token_file
            .iter()
            .chain(&args.ask_client_token)
            .cloned(),
    );
    // SIGHUP reloads the policy (spawn_reload_on_hangup), never stops.
    session::run_async_with(
        session::Stops::HangupHandledElsewhere,
        |cancel| async move {
            // A signal, or the gateway ending: calls in flight are given up and
            // recorded as `abandoned` (a client's own cancel is `cancelled`).
            options.exit = Some(cancel.clone());
            let host = Arc::new(Host::open(options).map_err(session::host_error)?);
            host.install_server_requests(warden_audit::Caller::Gateway);
            spawn_reload_on_hangup(Arc::clone(&host), cancel.clone());
            tokio::select! {
                () = host.connect() => {}
                () = cancel.cancelled() => {
                    host.shutdown().await;
                    return Ok(exit::FAILED);
                }
            }
            for status in host.statuses() {
                if status.state != ServerState::Connected {
                    tracing::warn!(
                        server = %status.name,
                        state = ?status.state,
                        error = status.error.as_deref().unwrap_or(""),
                        "upstream server is not available; its tools are not served"
                    );
                }
            }
            if args.no_prefix {
                let connected: Vec<String> = host
                    .statuses()
                    .into_iter()
                    .filter(|s| s.state == ServerState::Connected)
                    .map(|s| s.name)
                    .collect();
                if connected.len() != 1 {
                    host.shutdown().await;
                    return Err(CliError::usage(format!(
                        "--no-prefix needs exactly one connected upstream server, not {} ({})",
                        connected.len(),
                        if connected.is_empty() {
                            "none".to_string()
                        } else {
                            connected.join(", ")
                        }
                    )));
                }
            }
            let gateway = Gateway::new(
                host.clone(),
                GatewayOptions {
                    no_prefix: args.no_prefix,
                    ask_client: args.ask_client,
                },
                cancel.clone(),
            );
            let result = match (listen, tokens) {
                (Some(addr), Some(tokens)) => {
                    serve_http(
                        gateway,
                        addr,
                        args.allow_remote,
                        args.allow_hosts,
                        tokens,
                        cancel.clone(),
                    )
                    .await
                }
                _ => crate::gateway::serve_stdio(gateway, cancel.clone()).await,
            };
            cancel.cancel();
            host.shutdown().await;
            // Fail-closed: a gateway whose log lost records ends with exit
            // 1 however its clients fared.
            if let Some(lost) = session::lost_records(&host, "gateway session") {
                if let Err(error) = &result {
                    tracing::error!("gateway: {error:#}");
                }
                return Err(lost);
            }
            result
                .map(|()| exit::OK)
                .map_err(|e| match e.downcast::<CliError>() {
                    Ok(cli) => cli.into(),
                    Err(other) => CliError::with_code(exit::FAILED, format!("gateway: {other:#}")),
                })
        },
    )
}

async fn serve_http(
    gateway: Gateway,
    addr: SocketAddr,
    remote: bool,
    allowed_hosts: Vec<String>,
    tokens: Tokens,
    cancel: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let (local, serve) = crate::gateway::bind_http(
        gateway,
        HttpOptions {
            addr,
            allowed_hosts,
            tokens,
        },
        cancel,
    )
    .await
    .map_err(|e| CliError::usage(format!("--listen {addr}: {e}")))?;
    eprintln!("warden gateway: listening on http://{local}/mcp");
    if remote {
        eprintln!(
            "warden gateway: WARNING: listening on a non-loopback address over plain HTTP: \
             the bearer token travels unencrypted; put TLS in front for other hosts"
        );
    }
    serve.await
}

/// `--listen ADDR`: an IP address and port; a non-loopback address only
/// with `--allow-remote`.
fn parse_listen(addr: &str, allow_remote: bool) -> anyhow::Result<SocketAddr> {
    let parsed: SocketAddr = addr.parse().map_err(|_| {
        CliError::usage(format!(
            "--listen {addr}: expected IP:PORT, e.g. 127.0.0.1:8765"
        ))
    })?;
    if !parsed.ip().is_loopback() && !allow_remote {
        return Err(CliError::usage(format!(
            "--listen {addr}: not a loopback address; the gateway speaks plain HTTP (its bearer \
             token travels unencrypted), so pass --allow-remote to accept connections from \
             other hosts"
        )));
    }
    Ok(parsed)
}

/// SIGHUP: load the rules and policies again ([`Host::reload_policy`];
/// a failure keeps the current ones, and either way is logged and audited).
fn spawn_reload_on_hangup(host: Arc<Host>, stop: tokio_util::sync::CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => hangup,
        Err(error) => {
            tracing::warn!(%error, "cannot install the SIGHUP handler: no policy reload");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                got = hangup.recv() => {
                    if got.is_none() {
                        return;
                    }
                    // Loading reads files and compiles policies: off the runtime.
                    let host = Arc::clone(&host);
                    let _ = tokio::task::spawn_blocking(move || host.reload_policy()).await;
                }
            }
        }
    });
}
