//! What a call costs on each path, measured in one run (issue 15):
//! npm `@modelcontextprotocol/server-everything`'s `echo` called
//!
//! - `direct`: an rmcp client → the server (node, no warden);
//! - `rmcp passthrough`: the same client → this binary as a bare rmcp
//!   proxy (`tools/list` and `tools/call` forwarded, nothing decided or
//!   recorded) → the server: the floor of any proxy built on rmcp;
//! - `gateway`: the same client → `warden gateway --stdio` → the server;
//! - `host`: `Host::call` in this process (the agent and `warden call` path),
//!
//! with the server trusted and unsandboxed (`plain`) or untrusted in the
//! default sandbox (`sandbox`), `default.rego`, an allow rule and audit
//! `fsync: batch`; at 16 B, 10 KB and 100 KB of arguments. Per setup:
//! per-call latency of sequential calls (median, p90, p99, interleaved
//! rounds so a noisy neighbour hits all setups alike) and throughput with
//! 1, 8 and 64 concurrent callers on one connection. Also: server start
//! (`/bin/true` spawned plainly, through warden's launch seam unsandboxed
//! and sandboxed, and under bwrap with similar restrictions), and the RSS
//! of a gateway with 10 servers connected, then its peak during a run of
//! 10,000 calls (64 concurrent callers; `BENCH_RSS_CALLERS=N`: N, which
//! shows what each call in flight holds).
//!
//! Results are JSON lines on stdout (one object per measurement);
//! `scripts/bench.sh` runs this with the cold-start and build figures and
//! prints the one table. `BENCH_QUICK=1`: a smoke run. Needs
//! `scripts/test-deps.sh` (server-everything under tests/npm) and node.
//!
//! `cargo bench --bench calls` (HOME and WARDEN_CONFIG_DIR: set them to a
//! temporary folder; bench.sh does).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use warden::config::{
    LoadOptions, NetworkSpec, SandboxSpec, Scope, ServerConfig, StdioConfig, TransportConfig, Trust,
};
use warden::host::{CallRequest, Caller, Host, HostOptions, ToolRef};
use warden::launch::launch_spec;
use warden_audit::Outcome;
use warden_policy::Mode;
use warden_sandbox::{LaunchContext, prepare};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");
const HELPER: &str = env!("CARGO_BIN_EXE_warden-sandbox-exec");
const SIZES: [usize; 3] = [16, 10 * 1024, 100 * 1024];
const CONCURRENCY: [usize; 3] = [1, 8, 64];

/// The server's real path: the sandbox grants the install prefix found
/// from the command, so a symlinked `node_modules` would not be granted.
fn everything() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/.bin/mcp-server-everything");
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// How much to measure: the full run or a smoke run.
#[derive(Clone, Copy)]
struct Scale {
    rounds: usize,
    latency_calls: usize,
    throughput_calls: usize,
    spawns: usize,
    rss_calls: usize,
}

impl Scale {
    fn from_env() -> Scale {
        if std::env::var_os("BENCH_QUICK").is_some_and(|v| v != "0") {
            Scale {
                rounds: 1,
                latency_calls: 30,
                throughput_calls: 128,
                spawns: 20,
                rss_calls: 1_000,
            }
        } else {
            Scale {
                rounds: 3,
                latency_calls: 150,
                throughput_calls: 640,
                spawns: 150,
                rss_calls: 10_000,
            }
        }
    }
}

/// The number in environment variable `name`, or `default`.
fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One measurement, printed as a JSON line.
fn emit(value: Value) {
    println!("{value}");
}

/// A private world for one warden configuration: config file, config
/// dir, workspace and audit log in a temporary folder.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn with_config(servers: Value, allow: Vec<String>) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["config", "home", "workspace"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        let config = json!({
            "mcpServers": servers,
            "permissions": {"allow": allow},
            "audit": {"path": dir.path().join("audit.jsonl"), "fsync": "batch"},
        });
        std::fs::write(
            dir.path().join("warden.json"),
            serde_json::to_vec_pretty(&config).expect("json"),
        )
        .expect("write config");
        World { dir }
    }

    fn new(servers: usize, sandboxed: bool) -> World {
        let mut map = Map::new();
        let mut allow = Vec::new();
        for i in 0..servers {
            let name = if servers == 1 {
                "everything".to_string()
            } else {
                format!("everything{i}")
            };
            let mut entry = json!({
                "command": everything().display().to_string(),
                "args": ["stdio"],
            });
            if !sandboxed {
                entry["trust"] = json!("trusted");
                entry["sandbox"] = json!(false);
            }
            allow.push(format!("mcp__{name}__echo"));
            map.insert(name, entry);
        }
        World::with_config(Value::Object(map), allow)
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// `warden gateway --stdio` of this build, or of `warden` (another
    /// build, for a before/after in one run), under `wrap` (e.g. valgrind).
    fn gateway_of(&self, warden: &str, wrap: &[String]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(warden);
        cmd.arg("--config")
            .arg(self.path("warden.json"))
            .arg("--workspace")
            .arg(self.path("workspace"))
            .args(["gateway", "--stdio"])
            .env("WARDEN_CONFIG_DIR", self.path("config"))
            .env("HOME", self.path("home"))
            .env("TMPDIR", self.dir.path())
            .env_remove("RUST_LOG");
        under(wrap, cmd)
    }

    fn gateway(&self) -> tokio::process::Command {
        self.gateway_of(WARDEN, &[])
    }

    fn host(&self) -> Host {
        Host::open(HostOptions {
            load: LoadOptions {
                config_file: Some(self.path("warden.json")),
                workspace: self.path("workspace"),
                config_dir: self.path("config"),
            },
            extra_policies: Vec::new(),
            mode: Mode::Ci,
            audit_path: None,
            lock: None,
            locked: false,
            protect: Vec::new(),
            hide: Vec::new(),
            only_servers: Vec::new(),
            sandbox_helper: Some(HELPER.into()),
            exit: None,
        })
        .expect("host")
    }
}

/// An MCP client over a child process's stdio (the child is killed when
/// this is dropped).
struct Client {
    service: RunningService<RoleClient, ()>,
    child: tokio::process::Child,
}

impl Client {
    async fn start(mut cmd: tokio::process::Command) -> Client {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take().expect("stdin");
        let service = tokio::time::timeout(Duration::from_secs(120), ().serve((stdout, stdin)))
            .await
            .expect("initialize in time")
            .expect("initialize");
        Client { service, child }
    }

    /// VmRSS and VmHWM of the child, in kB.
    fn memory_kb(&self) -> (u64, u64) {
        let field = self.status();
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// The resident memory's anonymous and file-backed parts (the binary's
    /// pages are most of the second).
    fn rss_parts_kb(&self) -> (u64, u64) {
        let field = self.status();
        (field("RssAnon:"), field("RssFile:"))
    }

    /// A field of the gateway's `/proc/PID/status`, in kB (0 if absent).
    fn status(&self) -> impl Fn(&str) -> u64 + use<> {
        let status = self
            .child
            .id()
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .unwrap_or_default();
        move |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
                .unwrap_or(0)
        }
    }

    async fn stop(self) {
        let _ = self.service.cancel().await;
        let mut child = self.child;
        let _ = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
    }
}

/// Something that calls `echo`.
#[derive(Clone)]
enum Echo {
    Peer {
        peer: rmcp::Peer<RoleClient>,
        tool: String,
    },
    Host(Arc<Host>),
}

impl Echo {
    async fn echo(&self, message: &Arc<str>) {
        match self {
            Echo::Peer { peer, tool } => {
                let mut args = Map::new();
                args.insert("message".into(), Value::String(message.to_string()));
                let params = CallToolRequestParams::new(tool.clone()).with_arguments(args);
                let result = peer.call_tool(params).await.expect("call");
                assert_ne!(result.is_error, Some(true), "{result:?}");
            }
            Echo::Host(host) => {
                let report = host
                    .call(
                        CallRequest {
                            target: ToolRef::Remote {
                                server: "everything".into(),
                                tool: "echo".into(),
                            },
                            arguments: json!({ "message": message.to_string() }),
                            caller: Caller::Model,
                        },
                        None,
                        CancellationToken::new(),
                    )
                    .await;
                assert_eq!(report.outcome, Outcome::Ok, "{:?}", report.error);
            }
        }
    }
}

/// A small deterministic shuffle (no `rand` dependency for one bench).
fn shuffle<T>(items: &mut [T], seed: &mut u64) {
    for i in (1..items.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let j = (*seed % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn stats(mut samples: Vec<f64>) -> Value {
    samples.sort_by(f64::total_cmp);
    json!({
        "n": samples.len(),
        "median_us": percentile(&samples, 0.5),
        "p90_us": percentile(&samples, 0.9),
        "p99_us": percentile(&samples, 0.99),
    })
}

fn message(size: usize) -> Arc<str> {
    "x".repeat(size).into()
}

/// Calls per second with `callers` concurrent callers making `total` calls.
async fn throughput(caller: &Echo, message: &Arc<str>, callers: usize, total: usize) -> f64 {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let caller = caller.clone();
            let message = message.clone();
            let next = next.clone();
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    caller.echo(&message).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("caller");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

async fn calls(scale: Scale) {
    let plain = World::new(1, false);
    let sandboxed = World::new(1, true);
    let direct = Client::start({
        let mut cmd = tokio::process::Command::new(everything());
        cmd.arg("stdio")
            .env("HOME", plain.path("home"))
            .current_dir(plain.path("workspace"));
        cmd
    })
    .await;
    let bare = Client::start(passthrough_command(&plain)).await;
    let gw_plain = Client::start(plain.gateway()).await;
    let gw_sandbox = Client::start(sandboxed.gateway()).await;
    // BENCH_BEFORE=path/to/an/older/warden: its gateway measured too.
    let before = match std::env::var("BENCH_BEFORE") {
        Ok(path) if !path.is_empty() => Some(Client::start(plain.gateway_of(&path, &[])).await),
        _ => None,
    };
    let host_plain = Arc::new(plain.host());
    host_plain.connect().await;
    let host_sandbox = Arc::new(sandboxed.host());
    host_sandbox.connect().await;

    let peer = |client: &Client, tool: &str| Echo::Peer {
        peer: client.service.peer().clone(),
        tool: tool.to_string(),
    };
    let mut setups: Vec<(&str, &str, Echo)> = vec![
        ("direct", "-", peer(&direct, "echo")),
        ("rmcp passthrough", "-", peer(&bare, "echo")),
        ("gateway", "plain", peer(&gw_plain, "everything__echo")),
        ("gateway", "sandbox", peer(&gw_sandbox, "everything__echo")),
        ("host", "plain", Echo::Host(host_plain.clone())),
        ("host", "sandbox", Echo::Host(host_sandbox.clone())),
    ];
    if let Some(before) = &before {
        setups.push((
            "gateway (before)",
            "plain",
            peer(before, "everything__echo"),
        ));
    }
    let messages: Vec<Arc<str>> = SIZES.iter().map(|&s| message(s)).collect();

    // Warm-up: every path, every size.
    for (_, _, caller) in &setups {
        for m in &messages {
            for _ in 0..10 {
                caller.echo(m).await;
            }
        }
    }

    // Latency: interleaved rounds of sequential calls.
    let mut samples: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    let mut order: Vec<(usize, usize)> = (0..setups.len())
        .flat_map(|s| (0..SIZES.len()).map(move |z| (s, z)))
        .collect();
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    for _ in 0..scale.rounds {
        shuffle(&mut order, &mut seed);
        for &(s, z) in &order {
            let caller = &setups[s].2;
            let out = samples.entry((s, z)).or_default();
            for _ in 0..scale.latency_calls {
                let t = Instant::now();
                caller.echo(&messages[z]).await;
                out.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    // Throughput: the same interleaving, per concurrency.
    let mut rates: BTreeMap<(usize, usize, usize), Vec<f64>> = BTreeMap::new();
    let mut order: Vec<(usize, usize, usize)> = (0..setups.len())
        .flat_map(|s| {
            (0..SIZES.len()).flat_map(move |z| (0..CONCURRENCY.len()).map(move |c| (s, z, c)))
        })
        .collect();
    for _ in 0..scale.rounds.min(2) {
        shuffle(&mut order, &mut seed);
        for &(s, z, c) in &order {
            // Fewer calls at 100 KB: the same wall time per measurement.
            let total = if SIZES[z] > 50_000 {
                scale.throughput_calls / 2
            } else {
                scale.throughput_calls
            };
            let rate = throughput(&setups[s].2, &messages[z], CONCURRENCY[c], total).await;
            rates.entry((s, z, c)).or_default().push(rate);
        }
    }
    for ((s, z), v) in samples {
        let (path, sandbox, _) = &setups[s];
        let mut row = stats(v);
        row["kind"] = json!("call");
        row["path"] = json!(path);
        row["sandbox"] = json!(sandbox);
        row["bytes"] = json!(SIZES[z]);
        for (c, callers) in CONCURRENCY.iter().enumerate() {
            let r = &rates[&(s, z, c)];
            // The best round: the least disturbed by other load.
            let best = r.iter().copied().fold(0.0, f64::max);
            row[format!("calls_per_s_{callers}")] = json!(best);
        }
        emit(row);
    }
    drop(setups);
    direct.stop().await;
    bare.stop().await;
    gw_plain.stop().await;
    gw_sandbox.stop().await;
    if let Some(before) = before {
        before.stop().await;
    }
    host_plain.shutdown().await;
    host_sandbox.shutdown().await;
}

/// A `/bin/true` server spec for the launch seam.
fn true_config(sandboxed: bool) -> ServerConfig {
    ServerConfig {
        name: "bench".into(),
        transport: TransportConfig::Stdio(StdioConfig {
            command: "/bin/true".into(),
            program: PathBuf::from("/bin/true"),
            args: Vec::new(),
            env: BTreeMap::new(),
            env_from: Vec::new(),
            cwd: None,
        }),
        timeout: Duration::from_secs(30),
        protocol: Default::default(),
        sampling: Default::default(),
        elicitation: Default::default(),
        disabled: false,
        trust: if sandboxed {
            Trust::Untrusted
        } else {
            Trust::Trusted
        },
        sandbox: SandboxSpec {
            enabled: sandboxed,
            network: NetworkSpec::None,
            ..SandboxSpec::default()
        },
        scope: Scope::Explicit,
        source: PathBuf::from("bench"),
        digest: String::new(),
        content: Default::default(),
        approval_digest: String::new(),
    }
}

/// bwrap with the restrictions of the plan warden's helper receives for
/// the same server (`plan`, the helper's argument): user, pid, net, ipc
/// and mount namespaces, every read grant of the view bound read-only
/// (the merged-/usr links as links), its hidden folders as empty tmpfs
/// and hidden files as `/dev/null`, /dev, a fresh /proc with the same
/// owner-only files covered (for root), a tmpfs /tmp. What bwrap cannot
/// do (Landlock, the seccomp filter, cgroups, rlimits) warden adds on top.
fn bwrap(plan: &Value) -> Option<Vec<String>> {
    let bwrap = which::which("bwrap").ok()?;
    let mut args: Vec<String> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        "/tmp/home",
        "--setenv",
        "TMPDIR",
        "/tmp",
    ]
    .map(String::from)
    .to_vec();
    let view = &plan["view"];
    for bind in view["binds"].as_array().into_iter().flatten() {
        let Some(src) = bind["src"].as_str() else {
            continue;
        };
        let path = Path::new(src);
        if bind["kind"] == "hidden" {
            cover(&mut args, src, path.is_dir());
        } else if let (Ok(target), true) = (
            std::fs::read_link(path),
            path.parent() == Some(Path::new("/")),
        ) {
            args.extend(["--symlink".into(), target.display().to_string(), src.into()]);
        } else {
            args.extend(["--ro-bind-try".into(), src.into(), src.into()]);
        }
    }
    args.extend(["--dev", "/dev", "--proc", "/proc"].map(String::from));
    let covers: Vec<(String, bool)> = view["proc_root_only"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((format!("/proc/{}", e[0].as_str()?), e[1].as_bool()?)))
        .collect();
    // bwrap refuses a cover over what its fresh /proc lacks (the host's
    // own network devices' files): keep those one probe finds.
    let present = present_in_fresh_proc(&bwrap, &covers);
    for (path, is_dir) in covers.iter().filter(|(p, _)| present.contains(p)) {
        cover(&mut args, path, *is_dir);
    }
    args.extend(
        [
            "--size",
            "268435456",
            "--tmpfs",
            "/tmp",
            "--dir",
            "/tmp/home",
            "--chdir",
            "/tmp",
            "/bin/true",
        ]
        .map(String::from),
    );
    args.insert(0, bwrap.display().to_string());
    Some(args)
}

/// bwrap's arguments covering `path` as warden does: a folder by an empty
/// read-only tmpfs, a file by `/dev/null` (bwrap's binds are `nodev`).
fn cover(args: &mut Vec<String>, path: &str, is_dir: bool) {
    let path = path.to_string();
    if is_dir {
        args.extend(["--tmpfs".into(), path.clone(), "--remount-ro".into(), path]);
    } else {
        args.extend(["--ro-bind".into(), "/dev/null".into(), path]);
    }
}

/// Which of `covers` exist in a /proc like the one bwrap mounts.
fn present_in_fresh_proc(bwrap: &Path, covers: &[(String, bool)]) -> Vec<String> {
    if covers.is_empty() {
        return Vec::new();
    }
    let mut probe = std::process::Command::new(bwrap);
    probe.args([
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "/bin/sh",
        "-c",
        r#"for f; do [ -e "$f" ] && echo "$f"; done; true"#,
        "sh",
    ]);
    probe.args(covers.iter().map(|(p, _)| p));
    let out = probe.output().expect("bwrap probe");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// The plan a prepared sandboxed launch hands its helper (its last
/// argument).
fn helper_plan(command: &std::process::Command) -> Value {
    let arg = command.get_args().last().expect("the plan argument");
    serde_json::from_str(&arg.to_string_lossy()).expect("the plan is JSON")
}

/// `/bin/true` started and waited for, four ways, interleaved.
async fn server_start(scale: Scale) {
    let ws = tempfile::tempdir().expect("tempdir");
    let runtime = tempfile::tempdir().expect("tempdir");
    let ctx = LaunchContext::new(ws.path(), runtime.path()).with_helper(HELPER);
    let plain_spec = launch_spec(&true_config(false)).expect("stdio");
    let sandbox_spec = launch_spec(&true_config(true)).expect("stdio");
    let bwrap_same = prepare(&sandbox_spec, &ctx)
        .ok()
        .and_then(|p| bwrap(&helper_plan(&p.command)));
    // bwrap's floor: the namespaces, /usr and its links, /dev, /proc,
    // /tmp; no /etc, nothing hidden or covered.
    let floor_binds: Vec<Value> = ["/usr", "/bin", "/sbin", "/lib", "/lib64"]
        .iter()
        .map(|p| json!({"src": p, "kind": "read_exec"}))
        .collect();
    let bwrap_floor = bwrap(&json!({"view": {"binds": floor_binds}}));
    let mut names = vec!["plain", "seam_plain", "seam_sandbox"];
    if bwrap_same.is_some() && bwrap_floor.is_some() {
        names.extend(["bwrap", "bwrap_floor"]);
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut order: Vec<usize> = (0..names.len()).collect();
    let mut seed = 0x2545_F491_4F6C_DD1D_u64;
    for round in 0..scale.spawns + 5 {
        shuffle(&mut order, &mut seed);
        for &i in &order {
            let t = Instant::now();
            let status = match names[i] {
                "plain" => tokio::process::Command::new("/bin/true")
                    .status()
                    .await
                    .expect("spawn"),
                bwrap @ ("bwrap" | "bwrap_floor") => {
                    let args = if bwrap == "bwrap" {
                        &bwrap_same
                    } else {
                        &bwrap_floor
                    };
                    let args = args.as_deref().expect("bwrap");
                    tokio::process::Command::new(&args[0])
                        .args(&args[1..])
                        .status()
                        .await
                        .expect("bwrap")
                }
                seam => {
                    let spec = if seam == "seam_plain" {
                        &plain_spec
                    } else {
                        &sandbox_spec
                    };
                    let p = prepare(spec, &ctx).expect("prepare");
                    let mut guard = p.guard;
                    let mut child = tokio::process::Command::from(p.command)
                        .kill_on_drop(true)
                        .spawn()
                        .expect("spawn");
                    if let Some(pid) = child.id() {
                        guard.attach(pid);
                    }
                    child.wait().await.expect("wait")
                }
            };
            assert!(status.success(), "{}: {status}", names[i]);
            if round >= 5 {
                samples[i].push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    for (name, v) in names.iter().zip(samples) {
        let mut row = stats(v);
        row["kind"] = json!("start");
        row["path"] = json!(name);
        emit(row);
    }
}

/// RSS of a gateway with 10 servers connected, then its peak during
/// `rss_calls` calls (64 concurrent callers, 16 B).
async fn memory(scale: Scale) {
    let world = World::new(10, false);
    let gateway = Client::start(world.gateway()).await;
    let tools = gateway.service.list_all_tools().await.expect("list");
    assert!(tools.len() >= 10, "{} tools", tools.len());
    let (connected, _) = gateway.memory_kb();
    let (anon, file) = gateway.rss_parts_kb();
    let caller = Echo::Peer {
        peer: gateway.service.peer().clone(),
        tool: "everything3__echo".into(),
    };
    let started = Instant::now();
    let callers = env_number("BENCH_RSS_CALLERS", 64);
    let rate = throughput(&caller, &message(16), callers, scale.rss_calls).await;
    let (after, peak) = gateway.memory_kb();
    emit(json!({
        "kind": "rss",
        "servers": 10,
        "tools": tools.len(),
        "rss_connected_kb": connected,
        "rss_connected_anon_kb": anon,
        "rss_connected_file_kb": file,
        "rss_after_kb": after,
        "peak_kb": peak,
        "calls": scale.rss_calls,
        "callers": callers,
        "calls_per_s": rate,
        "seconds": started.elapsed().as_secs_f64(),
    }));
    drop(caller);
    gateway.stop().await;
}

/// Registry build and listing, and the per-call lookup, with 10, 100 and
/// 10,000 tools: the fixture server with `--extra-tools N`, through the
/// gateway (connect = start → initialized → first full `tools/list`) and
/// through `Host::call` (a server and tool name, as `warden call` and the
/// agent's `Remote` names resolve).
async fn growth(scale: Scale) {
    let calls = scale.latency_calls;
    for tools in [10usize, 100, 10_000] {
        // A server may list at most `warden::mcp::MAX_TOOLS` (1000): more
        // tools come from more servers.
        let servers = tools.div_ceil(warden::mcp::MAX_TOOLS);
        let mut config = Map::new();
        let mut allow = Vec::new();
        for i in 0..servers {
            let name = if i == 0 {
                "fixture".to_string()
            } else {
                format!("fixture{i}")
            };
            let extra = (tools / servers).saturating_sub(20);
            config.insert(
                name.clone(),
                json!({
                    "command": WARDEN,
                    "args": ["example-server", "fixture", "--name", &name, "--extra-tools", extra.to_string()],
                    "trust": "trusted",
                    "sandbox": false,
                }),
            );
            allow.push(format!("mcp__{name}__echo"));
        }
        let world = World::with_config(Value::Object(config), allow);
        let started = Instant::now();
        let gateway = Client::start(world.gateway()).await;
        let listed = gateway.service.list_all_tools().await.expect("list");
        let connect_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut list_us = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let again = gateway.service.list_all_tools().await.expect("list");
            list_us.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(again.len(), listed.len());
        }
        let sample = |out: &mut Vec<f64>, t: Instant| out.push(t.elapsed().as_secs_f64() * 1e6);
        let peer = gateway.service.peer().clone();
        let mut gw_us = Vec::new();
        for i in 0..calls + 10 {
            let mut args = Map::new();
            args.insert("message".into(), json!("hi"));
            let params = CallToolRequestParams::new("fixture__echo").with_arguments(args);
            let t = Instant::now();
            let result = peer.call_tool(params).await.expect("call");
            assert_ne!(result.is_error, Some(true), "{result:?}");
            if i >= 10 {
                sample(&mut gw_us, t);
            }
        }
        gateway.stop().await;
        let host = world.host();
        host.connect().await;
        let mut host_us = Vec::new();
        for i in 0..calls + 10 {
            let t = Instant::now();
            let report = host
                .call(
                    CallRequest {
                        target: ToolRef::Remote {
                            server: "fixture".into(),
                            tool: "echo".into(),
                        },
                        arguments: json!({"message": "hi"}),
                        caller: Caller::Cli,
                    },
                    None,
                    CancellationToken::new(),
                )
                .await;
            assert_eq!(report.outcome, Outcome::Ok, "{:?}", report.error);
            if i >= 10 {
                sample(&mut host_us, t);
            }
        }
        host.shutdown().await;
        let median = |v: Vec<f64>| stats(v)["median_us"].clone();
        emit(json!({
            "kind": "growth",
            "tools": tools,
            "servers": servers,
            "listed": listed.len(),
            "connect_ms": connect_ms,
            "list_median_us": median(list_us),
            "gateway_call_median_us": median(gw_us),
            "host_call_median_us": median(host_us),
        }));
    }
}

/// `inner` run under `wrap` (e.g. `valgrind --tool=callgrind`), with
/// `inner`'s environment and working folder; `inner` itself when `wrap`
/// is empty.
fn under(wrap: &[String], inner: tokio::process::Command) -> tokio::process::Command {
    let Some((first, rest)) = wrap.split_first() else {
        return inner;
    };
    let inner = inner.as_std();
    let mut cmd = tokio::process::Command::new(first);
    cmd.args(rest)
        .arg(inner.get_program())
        .args(inner.get_args());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    if let Some(dir) = inner.get_current_dir() {
        cmd.current_dir(dir);
    }
    cmd
}

/// `BENCH_CALLS` calls of `BENCH_BYTES` (sequential, or spread over
/// `BENCH_CALLERS` concurrent callers) through a plain gateway started
/// under `BENCH_WRAP` (e.g. `valgrind --tool=callgrind`):
/// run twice with different counts, the difference of the two profiles is
/// the cost of the calls alone. `BENCH_TARGET=proxy` or `direct` runs the
/// same calls through the bare rmcp passthrough or to the server itself.
async fn profile() {
    let calls = env_number("BENCH_CALLS", 200);
    let bytes = env_number("BENCH_BYTES", 16);
    let wrap: Vec<String> = std::env::var("BENCH_WRAP")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let warden = std::env::var("BENCH_WARDEN").unwrap_or_else(|_| WARDEN.to_string());
    let world = World::new(1, false);
    // BENCH_TARGET: what is called (gateway, the default; proxy: the bare
    // rmcp passthrough; direct: the server itself), so a profile or a
    // timing of warden can be set against its floor the same way.
    let target = std::env::var("BENCH_TARGET").unwrap_or_else(|_| "gateway".into());
    let (command, tool) = match target.as_str() {
        "gateway" => (world.gateway_of(&warden, &wrap), "everything__echo"),
        "proxy" => (under(&wrap, passthrough_command(&world)), "echo"),
        "direct" => {
            let mut cmd = tokio::process::Command::new(everything());
            cmd.arg("stdio");
            (under(&wrap, cmd), "echo")
        }
        other => panic!("BENCH_TARGET={other}: gateway, proxy or direct"),
    };
    let gateway = Client::start(command).await;
    let caller = Echo::Peer {
        peer: gateway.service.peer().clone(),
        tool: tool.into(),
    };
    let callers = env_number("BENCH_CALLERS", 1);
    let m = message(bytes);
    let started = Instant::now();
    if callers > 1 {
        throughput(&caller, &m, callers, calls).await;
    } else {
        for _ in 0..calls {
            caller.echo(&m).await;
        }
    }
    emit(json!({
        "kind": "profile",
        "target": target,
        "calls": calls,
        "callers": callers,
        "bytes": bytes,
        "seconds": started.elapsed().as_secs_f64(),
    }));
    drop(caller);
    gateway.stop().await;
}

/// The floor of any rmcp proxy: this process serves MCP on its stdio and
/// forwards `tools/list` and `tools/call` to server-everything through an
/// rmcp client, with nothing in between (no policy, no audit, no
/// sandbox), on the same kind of runtime as warden. `passthrough` in
/// `calls` runs it, so a run shows what rmcp and tokio cost on their own.
#[derive(Clone)]
struct Passthrough {
    upstream: rmcp::Peer<RoleClient>,
}

impl rmcp::ServerHandler for Passthrough {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        self.upstream
            .list_tools(request)
            .await
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        self.upstream
            .call_tool(request)
            .await
            .map(rmcp::model::CallToolResponse::Complete)
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }
}

/// This bench binary in its `passthrough` mode, in `world`'s folders.
fn passthrough_command(world: &World) -> tokio::process::Command {
    let exe = std::env::current_exe().expect("the bench's own path");
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("passthrough")
        .env("HOME", world.path("home"))
        .current_dir(world.path("workspace"));
    cmd
}

async fn passthrough() {
    let upstream = Client::start({
        let mut cmd = tokio::process::Command::new(everything());
        cmd.arg("stdio");
        cmd
    })
    .await;
    let proxy = Passthrough {
        upstream: upstream.service.peer().clone(),
    };
    let running = proxy
        .serve(rmcp::transport::stdio_pipes())
        .await
        .expect("serve stdio");
    let _ = running.waiting().await;
    // server-everything outlives its stdin's end: no grace period here.
    let Client { service, mut child } = upstream;
    let _ = service.cancel().await;
    let _ = child.kill().await;
}

fn main() {
    // `cargo bench` passes `--bench`; a filter word picks one part.
    let parts: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |p: &str| parts.is_empty() || parts.iter().any(|a| a == p);
    if !everything().exists() {
        eprintln!(
            "{} is missing: run scripts/test-deps.sh",
            everything().display()
        );
        std::process::exit(2);
    }
    let scale = Scale::from_env();
    // warden's own runtime (one worker unless TOKIO_WORKER_THREADS says
    // otherwise): the in-process `Host::call` path runs as `warden run`
    // does, the passthrough proxy as the gateway does, and every path's
    // client alike.
    let rt = warden::cli::runtime().expect("runtime");
    rt.block_on(async {
        if parts.iter().any(|a| a == "passthrough") {
            return passthrough().await;
        }
        if parts.iter().any(|a| a == "profile") {
            return profile().await;
        }
        if want("start") {
            server_start(scale).await;
        }
        if want("calls") {
            calls(scale).await;
        }
        if want("rss") {
            memory(scale).await;
        }
        if want("growth") {
            growth(scale).await;
        }
    });
}
