//! How costs grow (issue 15, item 3): decision latency with 10, 100 and
//! 1000 permission rules and with 1, 10 and 100 Rego files; `audit verify`
//! of 10k and 50k records. Each should grow at most linearly: criterion's
//! estimates per size, divided by the size, should stay flat (or fall).
//! Registry build, listing and the per-call lookup with 10, 100 and 10,000
//! tools are measured end to end by `cargo bench --bench calls -- growth`.
//!
//! `cargo bench --bench growth`. See BENCHMARKS.md.

/// The allocator of the `warden` binary (src/main.rs), so the figures are
/// the shipped ones.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use serde_json::json;
use warden::config::{Scope, Trust};
use warden_audit::{
    AuditLog, AuditOptions, DecisionRecord, Event, FsyncMode, Outcome, ToolCallRecord, verify,
};
use warden_core::{Effect, Stage};
use warden_policy::{
    CallContext, CallFacts, Mode, PinState, Pipeline, PipelineConfig, PolicySource, RuleEffect,
    RuleSource, ServerFacts, ToolFacts,
};

const WS: &str = "/srv/repo";

fn rule(effect: RuleEffect, text: String, index: usize) -> RuleSource {
    RuleSource {
        effect,
        text,
        scope: Scope::User,
        file: PathBuf::from("/home/u/.config/warden/config.json"),
        index,
    }
}

/// `n` rules over 50 servers, none matching the benched call until the
/// last (an allow), so every rule is looked at.
fn rules(n: usize) -> Vec<RuleSource> {
    let mut out: Vec<RuleSource> = (0..n.saturating_sub(1))
        .map(|i| {
            let server = format!("srv{}", i % 50);
            match i % 3 {
                0 => rule(
                    RuleEffect::Allow,
                    format!("mcp__{server}__get_*(id: item-*)"),
                    i,
                ),
                1 => rule(RuleEffect::Ask, format!("mcp__{server}__update_{i}"), i),
                _ => rule(
                    RuleEffect::Deny,
                    format!("mcp__*__*(path: **/secret{i}/**)"),
                    i,
                ),
            }
        })
        .collect();
    out.push(rule(
        RuleEffect::Allow,
        format!("mcp__fs__read_text_file(path: {WS}/**)"),
        n,
    ));
    out
}

/// `files` Rego files of package `warden`, 10 rules each (deny, ask and
/// allow over the input; none fires for the benched call).
fn rego_files(dir: &Path, files: usize) -> Vec<PolicySource> {
    (0..files)
        .map(|f| {
            let mut s = String::from("package warden\n\nimport rego.v1\n\n");
            for i in 0..4 {
                s.push_str(&format!(
                    "deny contains \"blocked {f}/{i}\" if input.tool.name == \"blocked_{f}_{i}\"\n\n"
                ));
            }
            for i in 0..4 {
                s.push_str(&format!(
                    "ask contains \"path {f}/{i}\" if {{\n\tglob.match(\"/srv/other{f}_{i}/**\", [\"/\"], input.arguments.path)\n}}\n\n"
                ));
            }
            for i in 0..2 {
                s.push_str(&format!(
                    "allow if {{\n\tinput.server.trust == \"trusted\"\n\tinput.tool.name == \"tool_{f}_{i}\"\n}}\n\n"
                ));
            }
            let path = dir.join(format!("p{f}.rego"));
            std::fs::write(&path, s).expect("write policy");
            PolicySource {
                path,
                scope: Scope::User,
            }
        })
        .collect()
}

fn facts() -> CallFacts {
    CallFacts {
        kind: warden_core::RequestKind::Tool,
        server: ServerFacts {
            name: "fs".into(),
            trust: Trust::Untrusted,
            transport: warden_core::TransportKind::Stdio,
            scope: Scope::User,
            dirs: Default::default(),
        },
        tool: ToolFacts {
            name: "read_text_file".into(),
            qualified: "mcp__fs__read_text_file".into(),
            annotations: json!({"readOnlyHint": true}),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": false
            })
            .into(),
            pin: PinState::Pinned,
        },
        arguments: json!({"path": format!("{WS}/src/main.rs")}),
        context: CallContext {
            mode: Mode::Interactive,
            session: "bench".into(),
            call_index: 1,
        },
    }
}

fn load(rules: Vec<RuleSource>, policies: Option<Vec<PolicySource>>) -> Pipeline {
    Pipeline::load(PipelineConfig {
        rules,
        policies,
        workspace: WS.into(),
        ..PipelineConfig::default()
    })
    .expect("bench pipeline loads")
}

fn decisions(c: &mut Criterion) {
    let f = facts();
    let mut group = c.benchmark_group("growth_decide_rules");
    for n in [10, 100, 1000] {
        let p = load(rules(n), Some(vec![]));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &p, |b, p| {
            b.iter(|| black_box(p.decide(black_box(&f))))
        });
    }
    group.finish();

    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("growth_decide_rego_files");
    for files in [1, 10, 100] {
        let p = load(rules(10), Some(rego_files(dir.path(), files)));
        group.throughput(Throughput::Elements(files as u64));
        group.bench_with_input(BenchmarkId::from_parameter(files), &p, |b, p| {
            b.iter(|| black_box(p.decide(black_box(&f))))
        });
    }
    group.finish();
}

fn record(i: usize) -> Event {
    let args = json!({"path": format!("/srv/repo/src/{i}.rs"), "head": 40});
    Event::ToolCall(ToolCallRecord {
        call_id: format!("call-{i}"),
        server: Some("fs".into()),
        tool: Some("read_text_file".into()),
        qualified: "mcp__fs__read_text_file".into(),
        caller: warden_audit::Caller::Model,
        args_sha256: warden_audit::args_digest(&args),
        arguments: args,
        decision: Some(DecisionRecord {
            effect: Effect::Allow,
            stage: Stage::Rules,
            reasons: vec!["allow: mcp__fs__read_text_file(path: /srv/repo/**)".into()],
            policy_sha256: None,
        }),
        outcome: Outcome::Pending,
        error: None,
    })
}

fn audit_verify(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("growth_audit_verify");
    group.sample_size(10);
    for n in [10_000, 50_000] {
        let path = dir.path().join(format!("audit-{n}.jsonl"));
        let log = AuditLog::open(
            &path,
            AuditOptions {
                session: "bench".into(),
                fsync: FsyncMode::Never,
                ..AuditOptions::default()
            },
        )
        .expect("open");
        for i in 0..n {
            log.append(record(i)).expect("append");
        }
        log.close().expect("close");
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &path, |b, path| {
            b.iter(|| assert!(verify(path, None).is_ok()))
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    decisions(&mut c);
    audit_verify(&mut c);
    c.final_summary();
}
