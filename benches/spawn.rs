//! Spawn cost through the launch seam (`warden_sandbox::prepare` + spawn +
//! wait) for `/bin/true`, and time to the first `tools/list` of the hostile
//! example server: plain (trusted, sandbox off), sandboxed with the small
//! `warden-sandbox-exec` helper (every layer: user, pid, IPC, mount and
//! network namespaces, the view with a fresh /proc, per-server cgroups
//! where the host has them, Landlock, seccomp, no capabilities), the same
//! in ports mode (no network namespace; the listen() supervisor), and
//! sandboxed with the whole `warden` binary re-executed as the helper
//! (`__sandbox-exec`, the fallback when the small helper is not
//! installed), side by side in one run. The layering before issue 10 is
//! measured with an older build through `scripts/bench-spawn.sh`.
//!
//! `cargo bench --bench spawn` (helpers of the same build). See BENCHMARKS.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use warden::config::{
    NetworkSpec, SandboxSpec, Scope, ServerConfig, StdioConfig, TransportConfig, Trust,
};
use warden::launch::launch_spec;
use warden_sandbox::{LaunchContext, LaunchSpec, prepare};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");
const HELPER: &str = env!("CARGO_BIN_EXE_warden-sandbox-exec");

fn spec(program: &Path, args: &[&str], sandboxed: bool, ports: bool) -> LaunchSpec {
    let config = ServerConfig {
        name: "bench".into(),
        transport: TransportConfig::Stdio(StdioConfig {
            command: program.display().to_string(),
            program: program.to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
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
            network: if ports {
                NetworkSpec::Ports {
                    connect_tcp: vec![443],
                    bind_tcp: vec![],
                }
            } else {
                NetworkSpec::None
            },
            ..SandboxSpec::default()
        },
        scope: Scope::Explicit,
        source: PathBuf::from("bench"),
        digest: String::new(),
        content: Default::default(),
        approval_digest: String::new(),
    };
    launch_spec(&config).expect("stdio")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let ws = tempfile::tempdir().expect("tempdir");
    let runtime = tempfile::tempdir().expect("tempdir");
    let small = LaunchContext::new(ws.path(), runtime.path()).with_helper(HELPER);
    let reexec = LaunchContext::new(ws.path(), runtime.path()).with_reexec_helper(WARDEN);
    let variants = [
        ("plain", false, false, &small),
        ("sandboxed", true, false, &small),
        ("sandboxed_ports", true, true, &small),
        ("sandboxed_reexec_warden", true, false, &reexec),
    ];

    let mut g = c.benchmark_group("spawn_true");
    g.sample_size(200);
    for (name, sandboxed, ports, ctx) in variants {
        let spec = spec(Path::new("/bin/true"), &[], sandboxed, ports);
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let p = prepare(&spec, ctx).expect("prepare");
                    let mut cmd = tokio::process::Command::from(p.command);
                    let mut guard = p.guard;
                    let mut child = cmd.kill_on_drop(true).spawn().expect("spawn");
                    if let Some(pid) = child.id() {
                        guard.attach(pid);
                    }
                    let st = child.wait().await.expect("wait");
                    assert!(st.success());
                })
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("first_tools_list_hostile");
    g.sample_size(30);
    for (name, sandboxed, ports, ctx) in variants {
        let spec = spec(Path::new(WARDEN), &["__hostile-server"], sandboxed, ports);
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let p = prepare(&spec, ctx).expect("prepare");
                    let mut guard = p.guard;
                    let (t, _) =
                        TokioChildProcess::builder(tokio::process::Command::from(p.command))
                            .stderr(std::process::Stdio::null())
                            .spawn()
                            .expect("spawn");
                    if let Some(pid) = t.id() {
                        guard.attach(pid);
                    }
                    let client = ().serve(t).await.expect("initialize");
                    let tools = client.list_tools(None).await.expect("list");
                    assert!(!tools.tools.is_empty());
                    let _ = client.cancel().await;
                    drop(guard);
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
