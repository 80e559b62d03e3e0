//! `warden doctor`: is everything in place? Each check is `ok`, `warn` or
//! `fail` with a one-line reason; exit 0 when nothing failed. Checks: the
//! kernel (what `sandbox check` reports, and the default profile really
//! starting), the configuration files, each server (with `--connect`:
//! started, listed and stopped), the policies, the audit log (its folder
//! writable, the existing log verifying), the OAuth logins of remote
//! servers and the pins file.

use std::path::Path;

use serde_json::{Value, json};
use warden_audit::{self as audit, VerifyOptions, VerifyReport};
use warden_policy::Mode;

use super::{GlobalArgs, exit, session};
use crate::config::{Approvals, Config, Scope, TransportConfig, Trust};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Fail,
}

struct Check {
    name: String,
    status: Status,
    reason: String,
}

#[derive(Default)]
struct Report {
    checks: Vec<Check>,
}

impl Report {
    fn add(&mut self, name: impl Into<String>, status: Status, reason: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            status,
            reason: one_line(&reason.into()),
        });
    }
}

/// A multi-line message (a compiler's error with a source excerpt) as one
/// line: its text lines joined, the excerpt's gutter and carets dropped.
fn one_line(text: &str) -> String {
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.chars()
                .all(|c| c.is_ascii_digit() || c.is_whitespace() || "|^-~".contains(c))
        })
        .collect();
    parts.join("; ")
}

pub fn run(global: &GlobalArgs, connect: bool) -> anyhow::Result<u8> {
    let mut report = Report::default();
    kernel(global, &mut report);
    let config = match session::load_config(global) {
        Ok(config) => {
            config_files(global, &config, &mut report);
            Some(config)
        }
        Err(error) => {
            report.add("config", Status::Fail, format!("{error:#}"));
            None
        }
    };
    if let Some(config) = &config {
        servers(config, &mut report);
        logins(config, &mut report);
        policies(global, config, &mut report);
        audit_log(global, config, &mut report);
    }
    pins(global, &mut report);
    if connect && config.is_some() {
        connect_servers(global, &mut report)?;
    }
    let failed = report.checks.iter().any(|c| c.status == Status::Fail);
    if global.json {
        let checks: Vec<Value> = report
            .checks
            .iter()
            .map(|c| json!({"name": c.name, "status": c.status, "reason": c.reason}))
            .collect();
        super::json::print("doctor", json!({"ok": !failed, "checks": checks}))?;
    } else {
        for c in &report.checks {
            let status = match c.status {
                Status::Ok => "ok  ",
                Status::Warn => "warn",
                Status::Fail => "FAIL",
            };
            println!(
                "{status}  {}: {}",
                c.name,
                warden_core::display::line(&crate::scrub::clean(&c.reason))
            );
        }
    }
    Ok(if failed { exit::FAILED } else { exit::OK })
}

/// What `sandbox check` reports, and whether the default profile starts.
fn kernel(global: &GlobalArgs, report: &mut Report) {
    let k = warden_sandbox::support_live();
    let yn = |b: bool| if b { "yes" } else { "no" };
    let cgroups = [
        ("processes", &k.cgroups.pids),
        ("memory", &k.cgroups.memory),
        ("cpu", &k.cgroups.cpu),
    ]
    .iter()
    .filter(|(_, c)| c.is_some())
    .map(|(n, _)| *n)
    .collect::<Vec<_>>();
    let summary = format!(
        "Landlock ABI {}, user namespaces {}, network namespaces {}, seccomp {}, cgroups: {}",
        k.landlock_abi,
        yn(k.user_namespaces),
        yn(k.net_namespaces),
        yn(k.seccomp),
        if cgroups.is_empty() {
            "none".to_string()
        } else {
            cgroups.join(", ")
        }
    );
    // Whether servers can start at all is the `sandbox` check (the default
    // profile really started); here a missing feature is a warning.
    let status = if !k.landlock_fs
        || !k.user_namespaces
        || !k.seccomp
        || k.landlock_abi < 6
        || cgroups.len() < 3
    {
        Status::Warn
    } else {
        Status::Ok
    };
    let reason = match status {
        Status::Ok => summary,
        _ => format!(
            "{summary}: not every layer or limit is exact here (see `warden sandbox check`)"
        ),
    };
    report.add("kernel", status, reason);
    match default_profile_starts(global) {
        Ok(()) => report.add("sandbox", Status::Ok, "the default profile starts"),
        Err(why) => report.add(
            "sandbox",
            Status::Fail,
            format!("the default profile does not start: {why}"),
        ),
    }
}

fn default_profile_starts(global: &GlobalArgs) -> Result<(), String> {
    let runtime = tempfile::tempdir().map_err(|e| e.to_string())?;
    let workspace = session::workspace(global).map_err(|e| format!("{e:#}"))?;
    let ctx = warden_sandbox::LaunchContext::new(workspace, runtime.path());
    let live = warden_sandbox::live_check(&ctx);
    if live.started {
        Ok(())
    } else {
        Err(live.error.unwrap_or_else(|| "it did not start".into()))
    }
}

fn config_files(global: &GlobalArgs, config: &Config, report: &mut Report) {
    if config.sources.is_empty() {
        report.add(
            "config",
            Status::Warn,
            format!(
                "no configuration file: neither {} nor a project .mcp.json (see `warden import`)",
                config.config_dir.join("config.json").display()
            ),
        );
        return;
    }
    let files: Vec<String> = config
        .sources
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let how = if global.config.is_some() {
        " (--config)"
    } else {
        ""
    };
    report.add(
        "config",
        Status::Ok,
        format!("valid{how}: {}", files.join(", ")),
    );
}

fn servers(config: &Config, report: &mut Report) {
    if config.servers.is_empty() {
        report.add("servers", Status::Warn, "no servers configured");
        return;
    }
    let approvals = Approvals::load(&config.config_dir).ok();
    for server in config.servers.values() {
        let name = format!("server {}", server.name);
        let what = match &server.transport {
            TransportConfig::Stdio(s) => format!("stdio {}", s.program.display()),
            TransportConfig::Http(r) => format!("http {}", warden_core::redact::url(&r.url)),
            TransportConfig::Sse(r) => format!("sse {}", warden_core::redact::url(&r.url)),
        };
        let trust = match server.trust {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
            Trust::Blocked => "blocked",
        };
        let (status, note) = if server.disabled {
            (Status::Ok, " (disabled)".to_string())
        } else if server.scope == Scope::Project
            && !approvals.as_ref().is_some_and(|a| a.is_approved(server))
        {
            (
                Status::Warn,
                format!(": needs approval (`warden mcp approve {}`)", server.name),
            )
        } else {
            (Status::Ok, String::new())
        };
        report.add(name, status, format!("{what}, {trust}{note}"));
    }
}

fn policies(global: &GlobalArgs, config: &Config, report: &mut Report) {
    let pipeline = super::policy::pipeline_config(global, Some(config))
        .and_then(|c| warden_policy::Pipeline::load(c).map_err(|e| anyhow::anyhow!("{e}")));
    match pipeline {
        Ok(_) => {
            let rules = config.rules.len();
            let policies = match &config.policies {
                None => "the shipped default policy".to_string(),
                Some(p) if p.is_empty() && !config.default_policy => "no Rego policy".to_string(),
                Some(p) => format!(
                    "{} policy path(s){}",
                    p.len() + global.policies.len(),
                    if config.default_policy {
                        " and the shipped default"
                    } else {
                        ""
                    }
                ),
            };
            report.add(
                "policies",
                Status::Ok,
                format!("compile: {rules} rule(s), {policies}"),
            );
        }
        Err(e) => report.add("policies", Status::Fail, format!("{e:#}")),
    }
}

fn audit_log(global: &GlobalArgs, config: &Config, report: &mut Report) {
    let Some(path) = global.audit.clone().or_else(|| config.audit.path.clone()) else {
        report.add(
            "audit",
            Status::Warn,
            "no audit log configured (`audit.path` or --audit)",
        );
        return;
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        // warden creates the folder when it opens the log; check the nearest
        // existing ancestor instead.
        let mut up = dir;
        while !up.is_dir() {
            match up.parent() {
                Some(p) if !p.as_os_str().is_empty() => up = p,
                _ => break,
            }
        }
        if let Err(e) = tempfile::tempfile_in(up) {
            report.add(
                "audit",
                Status::Fail,
                format!(
                    "{}: cannot create it in {}: {e}",
                    path.display(),
                    up.display()
                ),
            );
        } else {
            report.add(
                "audit",
                Status::Ok,
                format!("{}: will be created", path.display()),
            );
        }
        return;
    }
    if let Err(e) = tempfile::tempfile_in(dir) {
        report.add(
            "audit",
            Status::Fail,
            format!("{}: folder not writable: {e}", dir.display()),
        );
        return;
    }
    if !path.exists() {
        report.add(
            "audit",
            Status::Ok,
            format!("{}: folder writable, log will be created", path.display()),
        );
        return;
    }
    let key = match audit::load_key(None) {
        Ok(key) => key,
        Err(e) => {
            report.add("audit", Status::Fail, format!("audit key: {e}"));
            return;
        }
    };
    let verdict = audit::verify_with(
        &path,
        &VerifyOptions {
            key: key.as_deref(),
            head_file: true,
            heads: Vec::new(),
            keyed: false,
        },
    );
    let name = path.display();
    match verdict {
        VerifyReport::Ok { count, heads, .. } if heads.is_empty() => report.add(
            "audit",
            Status::Warn,
            format!(
                "{name}: {count} record(s) verify, but there is no head file{}",
                if count > 0 {
                    format!(
                        " (warden will not append to it; if it is as it should be: \
                         `warden audit verify {name} --accept-head`)"
                    )
                } else {
                    String::new()
                }
            ),
        ),
        VerifyReport::Ok { count, .. } => report.add(
            "audit",
            Status::Ok,
            format!("{name}: writable, {count} record(s) verify"),
        ),
        VerifyReport::KeyRequired { count, .. } => report.add(
            "audit",
            Status::Warn,
            format!("{name}: keyed log, {count} record(s) linked; set {} to check the hashes", audit::KEY_ENV),
        ),
        VerifyReport::Bad(f) => report.add(
            "audit",
            Status::Fail,
            format!("{name}: does not verify at line {} (seq {}): {:?}; `warden audit verify` says more", f.line, f.seq, f.problem),
        ),
        VerifyReport::Unreadable { message } => {
            report.add("audit", Status::Fail, format!("{name}: {message}"))
        }
    }
}

/// Per http server behind OAuth: is a login stored, and not expired?
/// (Never the token itself.)
fn logins(config: &Config, report: &mut Report) {
    use crate::mcp::oauth::{self, LoginState};
    for server in config.servers.values().filter(|s| !s.disabled) {
        let TransportConfig::Http(remote) = &server.transport else {
            continue;
        };
        if !oauth::uses_oauth(remote) {
            continue;
        }
        let name = &server.name;
        let (status, reason) = match oauth::login_state(remote) {
            LoginState::Valid => (Status::Ok, "logged in".to_string()),
            LoginState::Refreshable => (
                Status::Ok,
                "logged in (the access token has expired; it is refreshed on the next connection)"
                    .to_string(),
            ),
            LoginState::Expired => (
                Status::Warn,
                format!("the login has expired: run `warden mcp login {name}`"),
            ),
            LoginState::Missing => (
                Status::Warn,
                format!("no login: run `warden mcp login {name}`"),
            ),
        };
        report.add(format!("login {name}"), status, reason);
    }
}

fn pins(global: &GlobalArgs, report: &mut Report) {
    let path = match &global.lock {
        Some(path) => path.clone(),
        None => match session::config_dir() {
            Ok(dir) => dir.join("pins.json"),
            Err(e) => {
                report.add("pins", Status::Fail, format!("{e:#}"));
                return;
            }
        },
    };
    if !path.exists() {
        report.add(
            "pins",
            Status::Ok,
            format!("{}: none yet (created on first listing)", path.display()),
        );
        return;
    }
    match crate::pins::PinStore::open(&path) {
        Ok(store) => report.add(
            "pins",
            Status::Ok,
            format!("{}: {} pinned tool(s)", path.display(), store.list().len()),
        ),
        Err(e) => report.add("pins", Status::Fail, format!("{}: {e}", path.display())),
    }
}

/// `--connect`: start every server as `mcp status` does, list, stop.
fn connect_servers(global: &GlobalArgs, report: &mut Report) -> anyhow::Result<()> {
    let options = session::host_options(global, Mode::Interactive)?;
    let slot = std::sync::Arc::new(std::sync::Mutex::new(None));
    let filled = slot.clone();
    let ran = session::run_async(|cancel| async move {
        let host =
            std::sync::Arc::new(crate::host::Host::open(options).map_err(session::host_error)?);
        // As `mcp status`: a server's own requests are decided and recorded.
        host.install_server_requests(warden_audit::Caller::Cli);
        tokio::select! {
            _ = host.connect() => {}
            _ = cancel.cancelled() => {}
        }
        let document = super::mcp::status_document(&host);
        host.shutdown().await;
        if let Ok(mut slot) = filled.lock() {
            *slot = Some(document);
        }
        Ok(exit::OK)
    });
    let document = match ran.map(|_| slot.lock().ok().and_then(|mut s| s.take())) {
        Ok(Some(d)) => d,
        Ok(None) => Value::Null,
        Err(e) => {
            report.add("connect", Status::Fail, format!("{e:#}"));
            return Ok(());
        }
    };
    for server in document["servers"].as_array().into_iter().flatten() {
        let name = format!("connect {}", server["name"].as_str().unwrap_or("?"));
        let state = server["state"].as_str().unwrap_or("?");
        let tools = server["tools"].as_array().map_or(0, Vec::len);
        let error = server["error"].as_str().unwrap_or("");
        let (status, reason) = match state {
            "connected" => (
                Status::Ok,
                format!(
                    "connected ({}), {tools} tool(s)",
                    server["protocol"].as_str().unwrap_or("?")
                ),
            ),
            "disabled" => (Status::Ok, "disabled: not started".to_string()),
            "pending_approval" | "blocked" => (Status::Warn, format!("{state}: not started")),
            _ => (Status::Fail, format!("{state}: {error}")),
        };
        report.add(name, status, reason);
    }
    Ok(())
}
