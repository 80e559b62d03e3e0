//! Spawn cost through the launch seam (`sandbox::prepare` + spawn + wait),
//! plain vs sandboxed, for `/bin/true`, and time to the first `tools/list`
//! of the hostile example server, plain vs sandboxed.
//!
//! `cargo bench --bench spawn` (uses the `warden` binary of the same build
//! as the sandbox helper). See BENCHMARKS.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use warden::config::{SandboxSpec, Scope, ServerConfig, StdioConfig, TransportConfig, Trust};
use warden::sandbox::{LaunchContext, prepare};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn config(program: &Path, args: &[&str], sandboxed: bool) -> ServerConfig {
    ServerConfig {
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
        disabled: false,
        trust: if sandboxed {
            Trust::Untrusted
        } else {
            Trust::Trusted
        },
        sandbox: SandboxSpec {
            enabled: sandboxed,
            ..SandboxSpec::default()
        },
        scope: Scope::Explicit,
        source: PathBuf::from("bench"),
        digest: String::new(),
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let ws = tempfile::tempdir().expect("tempdir");
    let runtime = tempfile::tempdir().expect("tempdir");
    let ctx = LaunchContext::new(ws.path(), runtime.path()).with_helper(WARDEN);

    let mut g = c.benchmark_group("spawn_true");
    g.sample_size(200);
    for sandboxed in [false, true] {
        let cfg = config(Path::new("/bin/true"), &[], sandboxed);
        let name = if sandboxed { "sandboxed" } else { "plain" };
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let p = prepare(&cfg, &ctx).expect("prepare");
                    let mut cmd = p.command;
                    let mut guard = p.guard;
                    let mut child = cmd.spawn().expect("spawn");
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
    for sandboxed in [false, true] {
        let cfg = config(Path::new(WARDEN), &["__hostile-server"], sandboxed);
        let name = if sandboxed { "sandboxed" } else { "plain" };
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let p = prepare(&cfg, &ctx).expect("prepare");
                    let mut guard = p.guard;
                    let (t, _) = TokioChildProcess::builder(p.command)
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
