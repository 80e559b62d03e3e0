//! `warden sandbox check` and `warden sandbox exec`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use warden_core::display;

use serde::{Deserialize, Serialize};

use super::{CliError, GlobalArgs, SandboxCommand, exit};
use crate::config::{
    ExplicitLimits, Limits, NetworkSpec, SandboxSpec, Scope, ServerConfig, StdioConfig,
    TransportConfig, Trust,
};
use crate::launch::launch_spec;
use warden_sandbox::{
    self as sandbox, LaunchContext, LaunchSpec, LiveCheck, SandboxError, SandboxSummary, Support,
};

pub fn run(global: &GlobalArgs, cmd: SandboxCommand) -> anyhow::Result<u8> {
    match cmd {
        SandboxCommand::Check { server } => check(global, server),
        SandboxCommand::Exec { profile, command } => exec(global, profile.as_deref(), &command),
    }
}

#[derive(Serialize)]
struct CheckReport<'a> {
    kernel: &'a Support,
    /// What the default (untrusted) profile enforces on this kernel.
    default_profile: Option<SandboxSummary>,
    /// Why the default profile would not start, if it would not.
    unsupported: Option<String>,
    /// The default profile really started (`/bin/sh` under the helper).
    live: Option<LiveCheck>,
}

fn check(global: &GlobalArgs, server: Option<String>) -> anyhow::Result<u8> {
    if let Some(name) = server {
        return check_server(global, &name);
    }
    let k = &sandbox::support_live();
    let probe = exec_spec(
        vec!["/bin/true".into()],
        SandboxSpec::default(),
        Trust::Untrusted,
    )?;
    let runtime = tempfile::tempdir()?;
    let workspace = workspace(global)?;
    let ctx = LaunchContext::new(workspace, runtime.path());
    let (summary, unsupported) = match sandbox::prepare(&probe, &ctx) {
        Ok(p) => (Some(p.summary), None),
        Err(e) => (None, Some(e.to_string())),
    };
    // Start it for real: namespaces, view, cgroups, Landlock, seccomp.
    let live = summary.as_ref().map(|_| sandbox::live_check(&ctx));
    let code = if unsupported.is_some() || live.as_ref().is_some_and(|l| !l.started) {
        exit::SANDBOX_UNAVAILABLE
    } else {
        exit::OK
    };
    if global.json {
        let report = CheckReport {
            kernel: k,
            default_profile: summary,
            unsupported,
            live,
        };
        super::json::print("sandbox check", serde_json::to_value(&report)?)?;
    } else {
        let yn = |b: bool| if b { "yes" } else { "no" };
        println!("kernel support");
        println!("  Landlock ABI:                 {}", k.landlock_abi);
        println!("  Landlock filesystem rules:    {}", yn(k.landlock_fs));
        println!("  Landlock TCP port rules:      {}", yn(k.landlock_net));
        println!(
            "  Landlock scoping (signals, abstract unix sockets): {}",
            yn(k.landlock_scope)
        );
        println!("  user namespaces:              {}", yn(k.user_namespaces));
        println!("  pid namespaces:               {}", yn(k.pid_namespaces));
        println!("  network namespaces:           {}", yn(k.net_namespaces));
        println!("  seccomp filters:              {}", yn(k.seccomp));
        println!(
            "  per-namespace pid_max:        {}",
            yn(k.pid_max_per_namespace)
        );
        println!("  mount API (the view):         {}", yn(k.mount_api));
        println!(
            "  listen() supervision:         {}",
            yn(k.listen_supervision)
        );
        println!("  kcmp (the epoll quota):       {}", yn(k.kcmp));
        println!(
            "  RLIMIT_NPROC per user ns:     {}",
            yn(k.nproc_per_user_namespace)
        );
        let cg = |c: &Option<String>| c.clone().unwrap_or_else(|| "none".into());
        println!("  cgroup for processes:         {}", cg(&k.cgroups.pids));
        println!("  cgroup for memory:            {}", cg(&k.cgroups.memory));
        println!("  cgroup for CPU time:          {}", cg(&k.cgroups.cpu));
        for why in &k.cgroups.missing {
            println!("    (no cgroup for {why})");
        }
        println!("  running as uid:               {}", k.euid);
        println!();
        match (&summary, &unsupported) {
            (Some(s), _) => {
                match &live {
                    Some(LiveCheck {
                        started: true,
                        proc,
                        ..
                    }) => println!(
                        "default profile for an untrusted server: ENFORCED (started; /proc: {})",
                        proc.as_deref().unwrap_or("?")
                    ),
                    Some(LiveCheck { error, .. }) => println!(
                        "default profile for an untrusted server: NOT AVAILABLE: {}",
                        error.as_deref().unwrap_or("it did not start")
                    ),
                    None => {}
                }
                print_summary(s);
            }
            (None, Some(why)) => {
                println!("default profile for an untrusted server: NOT AVAILABLE: {why}")
            }
            (None, None) => {}
        }
    }
    Ok(code)
}

/// Prints what a sandbox summary enforces (also for `--server NAME`).
/// `sandbox check --server NAME`: the profile one configured server gets.
fn check_server(global: &GlobalArgs, name: &str) -> anyhow::Result<u8> {
    let config = super::session::load_config(global)?;
    let Some(server) = config.servers.get(name) else {
        return Err(super::session::unknown_server(&config, name));
    };
    let Some(spec) = launch_spec(server) else {
        return Err(CliError::usage(format!(
            "server `{name}` is a {} server: only stdio servers are sandboxed",
            server.transport.kind()
        )));
    };
    let runtime = tempfile::tempdir()?;
    // The files a session would protect from its servers, as it would.
    let pins = crate::pins::path_for(global.lock.as_deref(), &config.config_dir);
    let audit = global.audit.as_ref().or(config.audit.path.as_ref());
    let protect = crate::launch::protected_paths(
        &config,
        &global.policies,
        audit.map(std::path::PathBuf::as_path),
        &crate::pins::files_of(&pins),
        &[],
    );
    let ctx = LaunchContext::new(config.workspace.clone(), runtime.path())
        .with_protected(protect)
        .with_hidden(crate::launch::hidden_paths(
            &config,
            audit.map(std::path::PathBuf::as_path),
            &crate::pins::files_of(&pins),
            &[],
        ));
    match sandbox::describe(&spec, &ctx) {
        Ok(summary) => {
            if global.json {
                super::json::print(
                    "sandbox check",
                    serde_json::json!({"server": name, "profile": summary}),
                )?;
            } else {
                println!(
                    "server `{name}`: {}",
                    if summary.enabled {
                        "sandboxed"
                    } else {
                        "NOT sandboxed (trusted, \"sandbox\": false)"
                    }
                );
                print_summary(&summary);
            }
            Ok(exit::OK)
        }
        Err(error @ SandboxError::Unsupported { .. }) => Err(CliError::with_code(
            exit::SANDBOX_UNAVAILABLE,
            error.to_string(),
        )),
        Err(error) => Err(CliError::usage(error.to_string())),
    }
}

pub fn print_summary(s: &SandboxSummary) {
    println!("  mechanisms: {}", s.mechanisms.join(", "));
    println!("  network:    {}", s.network);
    if !s.layers.is_empty() {
        println!("  layers:");
        for l in &s.layers {
            println!(
                "    [{}] {}: {}",
                if l.enforced { "on " } else { "off" },
                l.layer,
                l.detail
            );
            println!("          answers: {}", l.answers);
        }
    }
    if !s.limit_report.is_empty() {
        println!("  limits:");
        for l in &s.limit_report {
            println!("    {}", l.line());
        }
    }
    if s.install_prefix_reasons.is_empty() {
        println!(
            "  install prefix (read+exec): {}",
            join_paths(&s.install_prefix)
        );
    } else {
        println!("  install prefix (read+exec):");
        for g in &s.install_prefix_reasons {
            println!(
                "    {} ({})",
                display::line(&g.path.display().to_string()),
                g.reason
            );
        }
    }
    println!("  read:       {}", join_paths(&s.read));
    println!("  write:      {}", join_paths(&s.write));
    for n in &s.notes {
        println!("  note: {}", display::text(n));
    }
    for g in &s.gaps {
        println!("  GAP: {}", display::text(g));
    }
}

/// Paths a project file may have named: each one neutralised field.
fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| display::line(&p.display().to_string()).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A profile file: a server's `sandbox` value (`false`, `true`, or an object).
#[derive(Debug)]
enum ProfileFile {
    Flag(bool),
    Spec(Box<ProfileSpec>),
}

impl ProfileFile {
    /// `true`/`false`, else the object, whose errors then name the line,
    /// column and key (an untagged enum said only that nothing matched).
    fn parse(text: &str) -> serde_json::Result<ProfileFile> {
        match serde_json::from_str::<bool>(text) {
            Ok(flag) => Ok(ProfileFile::Flag(flag)),
            Err(_) => serde_json::from_str(text).map(ProfileFile::Spec),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ProfileSpec {
    read: Vec<String>,
    write: Vec<String>,
    network: Option<ProfileNetwork>,
    env: Vec<String>,
    limits: Option<ProfileLimits>,
    best_effort: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ProfileNetwork {
    Word(String),
    Ports {
        #[serde(default)]
        connect_tcp: Vec<u16>,
        #[serde(default)]
        bind_tcp: Vec<u16>,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileLimits {
    memory_mb: Option<u64>,
    processes: Option<u64>,
    open_files: Option<u64>,
    cpu_seconds: Option<u64>,
    file_size_mb: Option<u64>,
    private_mb: Option<u64>,
}

fn workspace(global: &GlobalArgs) -> anyhow::Result<PathBuf> {
    let ws = match &global.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir()?,
    };
    ws.canonicalize()
        .map_err(|e| CliError::usage(format!("workspace {}: {e}", ws.display())))
}

/// Reads a profile file into a spec; `${WORKSPACE}` expands to the workspace.
fn load_profile(file: &Path, ws: &Path) -> anyhow::Result<SandboxSpec> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::usage(format!("profile {}: {e}", file.display())))?;
    let parsed = ProfileFile::parse(&text)
        .map_err(|e| CliError::usage(format!("profile {}: {e}", file.display())))?;
    let spec = match parsed {
        ProfileFile::Flag(enabled) => SandboxSpec {
            enabled,
            ..SandboxSpec::default()
        },
        ProfileFile::Spec(p) => {
            let p = *p;
            // Relative paths are relative to the profile's folder.
            // A bare file name's parent is "", which `absolute` refuses.
            let folder = file
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let base = std::path::absolute(folder)?;
            let path = |s: &String| -> PathBuf {
                let s = s.replace("${WORKSPACE}", &ws.display().to_string());
                warden_core::path::absolutize(&base, Path::new(&s))
            };
            let network = match p.network {
                None => NetworkSpec::None,
                Some(ProfileNetwork::Word(w)) if w == "none" => NetworkSpec::None,
                Some(ProfileNetwork::Word(w)) if w == "host" => NetworkSpec::Host,
                Some(ProfileNetwork::Word(w)) => {
                    return Err(CliError::usage(format!(
                        "profile {}: network must be \"none\", \"host\" or {{\"connect_tcp\": [...], \"bind_tcp\": [...]}}, not {w:?}",
                        file.display()
                    )));
                }
                Some(ProfileNetwork::Ports {
                    connect_tcp,
                    bind_tcp,
                }) => {
                    // Port 0 is "any port": a bind rule for it lets the
                    // kernel pick (auto-bind) a port no grant names. The
                    // configuration refuses it; so does a profile.
                    for (key, ports) in [("connect_tcp", &connect_tcp), ("bind_tcp", &bind_tcp)] {
                        if ports.contains(&0) {
                            return Err(CliError::usage(format!(
                                "profile {}: network.{key}: port out of range (TCP ports are whole numbers from 1 to 65535)",
                                file.display()
                            )));
                        }
                    }
                    NetworkSpec::Ports {
                        connect_tcp,
                        bind_tcp,
                    }
                }
            };
            let d = Limits::default();
            let l = p.limits.unwrap_or_default();
            SandboxSpec {
                enabled: true,
                read: p.read.iter().map(path).collect(),
                write: p.write.iter().map(path).collect(),
                network,
                env: p.env,
                limits: Limits {
                    memory_mb: l.memory_mb.unwrap_or(d.memory_mb),
                    processes: l.processes.unwrap_or(d.processes),
                    open_files: l.open_files.unwrap_or(d.open_files),
                    cpu_seconds: l.cpu_seconds.unwrap_or(d.cpu_seconds),
                    file_size_mb: l.file_size_mb.unwrap_or(d.file_size_mb),
                    private_mb: l.private_mb.unwrap_or(d.private_mb),
                    explicit: ExplicitLimits {
                        memory_mb: l.memory_mb.is_some(),
                        processes: l.processes.is_some(),
                        open_files: l.open_files.is_some(),
                        cpu_seconds: l.cpu_seconds.is_some(),
                        file_size_mb: l.file_size_mb.is_some(),
                        private_mb: l.private_mb.is_some(),
                    },
                },
                best_effort: p.best_effort,
            }
        }
    };
    Ok(spec)
}

/// The launch of `command` under `spec`, as if it were a configured server.
fn exec_spec(command: Vec<String>, spec: SandboxSpec, trust: Trust) -> anyhow::Result<LaunchSpec> {
    let Some((first, rest)) = command.split_first() else {
        return Err(CliError::usage("no command given"));
    };
    let path_var = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let program = sandbox::which_in(first, &path_var)
        .ok_or_else(|| CliError::usage(format!("command not found: {first}")))?;
    let program = if program.is_absolute() {
        program
    } else {
        std::env::current_dir()?.join(program)
    };
    let server = ServerConfig {
        name: "exec".into(),
        transport: TransportConfig::Stdio(StdioConfig {
            command: first.clone(),
            program,
            args: rest.to_vec(),
            env: BTreeMap::new(),
            env_from: Vec::new(),
            cwd: None,
        }),
        timeout: Duration::from_secs(30),
        protocol: Default::default(),
        sampling: Default::default(),
        elicitation: Default::default(),
        disabled: false,
        trust,
        sandbox: spec,
        scope: Scope::Explicit,
        source: PathBuf::from("<sandbox exec>"),
        digest: String::new(),
        content: Default::default(),
        approval_digest: String::new(),
    };
    launch_spec(&server).ok_or_else(|| CliError::usage("not a stdio command"))
}

fn runtime_dir() -> PathBuf {
    let uid = nix::unistd::getuid();
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(|d| PathBuf::from(d).join("warden"))
        .unwrap_or_else(|| std::env::temp_dir().join(format!("warden-{uid}")))
}

fn exec(global: &GlobalArgs, profile: Option<&Path>, command: &[String]) -> anyhow::Result<u8> {
    let ws = workspace(global)?;
    let spec = match profile {
        Some(f) => load_profile(f, &ws)?,
        None => SandboxSpec::default(),
    };
    // The operator runs this command line: the profile is theirs, so it may
    // use `"host"` or `false` (like a trusted server).
    let spec = exec_spec(command.to_vec(), spec, Trust::Trusted)?;
    let ctx = LaunchContext::new(ws, runtime_dir());
    let to_cli = |e: SandboxError| match e {
        SandboxError::Unsupported { .. } => {
            CliError::with_code(exit::SANDBOX_UNAVAILABLE, e.to_string())
        }
        other => CliError::usage(other.to_string()),
    };
    if spec.enabled {
        // Same plan and helper as a server launch; warden becomes the
        // helper (like bwrap), so the exit status is the command's.
        return Err(to_cli(sandbox::exec_in_place(&spec, &ctx)));
    }
    let prepared = sandbox::prepare(&spec, &ctx).map_err(to_cli)?;
    let mut command = prepared.command;
    let mut guard = prepared.guard;
    command
        .stdin(std::process::Stdio::inherit())
        .stdout(std::process::Stdio::inherit())
        .stderr(std::process::Stdio::inherit());
    let mut child = command.spawn().map_err(|e| {
        CliError::with_code(
            exit::FAILED,
            format!(
                "spawning {}: {e}",
                spec.argv0.as_deref().unwrap_or(&spec.name)
            ),
        )
    })?;
    guard.attach(child.id());
    let status = child
        .wait()
        .map_err(|e| CliError::with_code(exit::FAILED, format!("waiting: {e}")))?;
    drop(guard);
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mistyped profile once said only "did not match any variant of
    /// untagged enum ProfileFile"; the error names the key and where it is.
    #[test]
    fn a_bad_profile_names_the_key_and_its_place() {
        assert!(matches!(
            ProfileFile::parse("false"),
            Ok(ProfileFile::Flag(false))
        ));
        assert!(matches!(
            ProfileFile::parse(r#"{"write": ["/x"]}"#),
            Ok(ProfileFile::Spec(_))
        ));
        let error = ProfileFile::parse("{\n  \"filesystem\": {}\n}")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("unknown field `filesystem`") && error.contains("line 2"),
            "{error}"
        );
    }
}
