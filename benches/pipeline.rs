//! Decision latency of the permission pipeline (`Pipeline::decide`).
//!
//! `cargo bench --bench pipeline` runs criterion on four setups, then a
//! percentile pass (median, p99, decisions/s on one thread) printed as a
//! table for BENCHMARKS.md. Also measured: `decide_within` (the decision on
//! an evaluation thread with its deadline, as every call runs it: the cost
//! of the hand-off), and the floor of an evaluator *process* (one pipe
//! round trip of the Rego input to a child and back, no evaluation), which
//! a hard CPU/memory cap on evaluation would need.

/// The allocator of the `warden` binary (src/main.rs), so the figures are
/// the shipped ones.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use serde_json::json;
use warden::config::{Scope, Trust};
use warden_policy::{
    CallContext, CallFacts, Mode, PinState, Pipeline, PipelineConfig, ServerFacts, ToolFacts,
};
use warden_policy::{PolicySource, RuleEffect, RuleSource};

const WS: &str = "/srv/repo";

const GATHER: &str = r#"package warden__internal
import rego.v1
default deny := set()
deny := data.warden.deny
default ask := set()
ask := data.warden.ask
default allow := false
allow := data.warden.allow
decision := {"deny": deny, "ask": ask, "allow": allow}
"#;

fn rule(effect: RuleEffect, text: &str, index: usize) -> RuleSource {
    RuleSource {
        effect,
        text: text.replace("${WORKSPACE}", WS),
        scope: Scope::User,
        file: PathBuf::from("/home/u/.config/warden/config.json"),
        index,
    }
}

/// A realistic user rule set (12 rules).
fn typical_rules() -> Vec<RuleSource> {
    let allow = [
        "mcp__fs__read_text_file(path: ${WORKSPACE}/**)",
        "mcp__fs__list_directory(path: ${WORKSPACE}/**)",
        "mcp__fs__read_multiple_files(paths: ${WORKSPACE}/**)",
        "mcp__time__*",
        "mcp__git__git_status",
        "mcp__git__git_log",
    ];
    let ask = [
        "mcp__fs__write_file(path: ${WORKSPACE}/**)",
        "mcp__git__git_commit",
    ];
    let deny = [
        "mcp__*__*(path: **/.ssh/**)",
        "mcp__*__*(path: **/.env)",
        "mcp__fs__move_file",
        "mcp__*__*(path: /etc/**)",
    ];
    let mut out = Vec::new();
    for (i, r) in allow.iter().enumerate() {
        out.push(rule(RuleEffect::Allow, r, i));
    }
    for (i, r) in ask.iter().enumerate() {
        out.push(rule(RuleEffect::Ask, r, i));
    }
    for (i, r) in deny.iter().enumerate() {
        out.push(rule(RuleEffect::Deny, r, i));
    }
    out
}

/// 50 permission rules over 10 servers.
fn fifty_rules() -> Vec<RuleSource> {
    let mut out = typical_rules();
    let mut i = 0;
    while out.len() < 50 {
        let server = format!("srv{}", i % 10);
        out.push(match i % 3 {
            0 => rule(
                RuleEffect::Allow,
                &format!("mcp__{server}__get_*(id: item-*)"),
                i,
            ),
            1 => rule(RuleEffect::Ask, &format!("mcp__{server}__update_{i}"), i),
            _ => rule(
                RuleEffect::Deny,
                &format!("mcp__{server}__*(path: **/secret{i}/**)"),
                i,
            ),
        });
        i += 1;
    }
    out
}

/// A 50-rule Rego policy: 25 deny, 20 ask, 5 allow rules over the input.
fn fifty_rule_rego() -> String {
    let mut s = String::from("package warden\n\nimport rego.v1\n\n");
    for i in 0..25 {
        s.push_str(&format!(
            "deny contains \"blocked tool {i}\" if input.tool.name == \"blocked_{i}\"\n\n"
        ));
    }
    for i in 0..20 {
        if i % 2 == 0 {
            s.push_str(&format!(
                "ask contains \"path rule {i}\" if {{\n\tglob.match(\"/srv/other{i}/**\", [\"/\"], input.arguments.path)\n}}\n\n"
            ));
        } else {
            s.push_str(&format!(
                "ask contains \"server rule {i}\" if {{\n\tinput.server.name == \"srv{i}\"\n\tinput.tool.annotations.readOnlyHint != true\n}}\n\n"
            ));
        }
    }
    for i in 0..5 {
        s.push_str(&format!(
            "allow if {{\n\tinput.server.trust == \"trusted\"\n\tinput.tool.name == \"tool_{i}\"\n}}\n\n"
        ));
    }
    s
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
                "properties": {
                    "path": {"type": "string"},
                    "head": {"type": "number"},
                    "tail": {"type": "number"}
                },
                "required": ["path"],
                "additionalProperties": false
            })
            .into(),
            pin: PinState::Pinned,
        },
        arguments: json!({"path": format!("{WS}/src/policy/pipeline.rs")}),
        context: CallContext {
            mode: Mode::Interactive,
            session: "bench".into(),
            call_index: 1,
        },
    }
}

/// A call at both inline caps: 254 strings under 4-byte keys (255
/// values), as long as the text cap allows.
fn largest_inline_facts() -> CallFacts {
    let values = warden_policy::INLINE_MAX_VALUES - 1;
    let each = (warden_policy::INLINE_MAX_TEXT - (values - 1) * 4) / (values - 1);
    let chunk = "~/.ssh/id_rsa/../%2e%2e/AKIAIOSFODNN7EXAMPLE\\/ghp_";
    let text: String = chunk.chars().cycle().take(each).collect();
    let args: serde_json::Map<String, serde_json::Value> = (0..values - 1)
        .map(|i| (format!("a{i:03}"), json!(text.clone())))
        .collect();
    let mut f = facts();
    f.tool.input_schema = json!({"type": "object"}).into();
    f.arguments = serde_json::Value::Object(args);
    f
}

fn setups(dir: &std::path::Path) -> Vec<(&'static str, Pipeline)> {
    let rego50 = dir.join("fifty.rego");
    std::fs::write(&rego50, fifty_rule_rego()).expect("write bench policy");
    let load = |rules, policies| {
        Pipeline::load(PipelineConfig {
            rules,
            policies,
            workspace: WS.into(),
            ..PipelineConfig::default()
        })
        .expect("bench pipeline loads")
    };
    vec![
        ("rules_only_12", load(typical_rules(), Some(vec![]))),
        ("rules_only_50", load(fifty_rules(), Some(vec![]))),
        ("default_rego", load(typical_rules(), None)),
        (
            "rego_50_rules",
            load(
                typical_rules(),
                Some(vec![PolicySource {
                    path: rego50,
                    scope: Scope::User,
                }]),
            ),
        ),
    ]
}

fn setups_again(dir: &std::path::Path) -> Vec<(&'static str, Pipeline)> {
    setups(dir)
}

fn percentiles(name: &str, p: &Pipeline, f: &CallFacts) {
    let n = 20_000;
    for _ in 0..500 {
        black_box(p.decide(f));
    }
    let mut samples: Vec<Duration> = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        black_box(p.decide(black_box(f)));
        samples.push(t.elapsed());
    }
    let total = start.elapsed();
    samples.sort();
    let median = samples[n / 2];
    let p99 = samples[n * 99 / 100];
    let per_sec = n as f64 / total.as_secs_f64();
    println!(
        "| {name:<14} | {:>9.1} µs | {:>9.1} µs | {:>10.0} |",
        median.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        per_sec
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let setups = setups(dir.path());
    let f = facts();
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    {
        let mut group = c.benchmark_group("decide");
        for (name, p) in &setups {
            group.bench_function(*name, |b| b.iter(|| black_box(p.decide(black_box(&f)))));
        }
        group.finish();
    }
    {
        // The longest decision warden makes in place (pipeline::inline):
        // the most values and text it allows, every string full of what
        // `default.rego` and `canon` look for (home paths, `..`, percent
        // escapes, key ids, tokens). This is how long such a call holds a
        // runtime thread.
        let p = Pipeline::load(PipelineConfig {
            rules: typical_rules(),
            workspace: WS.into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let worst = largest_inline_facts();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let shared = std::sync::Arc::new(p);
        // The first decision compiles the schema (on the pool).
        runtime.block_on(shared.decide_within(std::sync::Arc::new(worst.clone())));
        assert!(
            shared.decides_inline(&worst),
            "the bench's call is decided in place"
        );
        let mut group = c.benchmark_group("decide_in_place");
        group.bench_function("largest_allowed", |b| {
            b.iter(|| black_box(shared.decide(black_box(&worst))))
        });
        group.finish();
    }
    {
        // The decision as the host runs it: `decide_within`, which makes
        // these small calls in place (pipeline::inline) after the first;
        // the difference to `decide` is the check that it may.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let shared = std::sync::Arc::new(f.clone());
        let mut group = c.benchmark_group("decide_within");
        for (name, p) in setups.into_iter().take(3) {
            let p = std::sync::Arc::new(p);
            group.bench_function(name, |b| {
                b.iter(|| black_box(runtime.block_on(p.decide_within(shared.clone()))))
            });
        }
        group.finish();
    }
    {
        // The floor of an evaluator process: the Rego input (as JSON) to a
        // child over a pipe and back, nothing evaluated.
        use std::io::{BufRead, Write};
        let p = Pipeline::load(PipelineConfig {
            rules: typical_rules(),
            workspace: WS.into(),
            ..PipelineConfig::default()
        })
        .expect("load");
        let d = p.decide(&f);
        let line = serde_json::to_string(&p.rego_input_json(&f, Mode::Interactive, &d.stages[..5]))
            .expect("json")
            + "\n";
        let mut child = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn cat");
        let mut to = child.stdin.take().expect("stdin");
        let mut from = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut back = String::new();
        let mut group = c.benchmark_group("evaluator_process");
        group.bench_function("pipe_round_trip_of_the_input", |b| {
            b.iter(|| {
                to.write_all(line.as_bytes()).expect("write");
                to.flush().expect("flush");
                back.clear();
                from.read_line(&mut back).expect("read");
                black_box(back.len())
            })
        });
        group.finish();
        drop(to);
        let _ = child.wait();
    }
    let setups = setups_again(dir.path());
    {
        // How to run regorus: clone the prepared engine and eval_rule, or
        // a CompiledPolicy with eval_with_input (same policy and input).
        let p = &setups[2].1;
        let d = p.decide(&f);
        let input = p.rego_input(&f, Mode::Interactive, &d.stages[..5]);
        let input_json = p.rego_input_json(&f, Mode::Interactive, &d.stages[..5]);
        let mut engine = regorus::Engine::new();
        engine
            .add_policy("default.rego".into(), warden_policy::DEFAULT_REGO.into())
            .expect("default.rego");
        engine
            .add_policy("gather.rego".into(), GATHER.into())
            .expect("gather");
        let compiled = engine
            .clone()
            .compile_with_entrypoint(&"data.warden__internal.decision".into())
            .expect("compile");
        let mut group = c.benchmark_group("regorus");
        group.bench_function("engine_clone_eval_rule", |b| {
            b.iter(|| {
                let mut e = engine.clone();
                e.set_input(input.clone());
                black_box(e.eval_rule("data.warden__internal.decision".into()))
            })
        });
        let mut prepared = engine.clone();
        prepared.set_input(input.clone());
        prepared
            .eval_rule("data.warden__internal.decision".into())
            .expect("prepare");
        group.bench_function("prepared_engine_clone_eval_rule", |b| {
            b.iter(|| {
                let mut e = prepared.clone();
                e.set_input(input.clone());
                black_box(e.eval_rule("data.warden__internal.decision".into()))
            })
        });
        group.bench_function("compiled_eval_with_input", |b| {
            b.iter(|| black_box(compiled.eval_with_input(input.clone())))
        });
        // What the pipeline does: build the input as a regorus value.
        group.bench_function("rego_input_direct", |b| {
            b.iter(|| black_box(p.rego_input(&f, Mode::Interactive, &d.stages[..5])))
        });
        // What it avoids: converting a JSON document through serde.
        group.bench_function("json_to_rego_input", |b| {
            b.iter(|| black_box(regorus::Value::from(input_json.clone())))
        });
        group.finish();
    }
    c.final_summary();
    println!("\n| setup          |    median |       p99 | decisions/s |");
    println!("|----------------|-----------|-----------|------------|");
    for (name, p) in &setups {
        percentiles(name, p, &f);
    }
}
