//! `warden policy check | eval --input FILE | test [PATH…]`, shaped like
//! `opa check`, `opa eval` (with an explanation of every stage) and
//! `opa test`.

use std::path::Path;

use serde_json::{Value, json};

use super::{CliError, GlobalArgs, PolicyCommand, exit};
use crate::config::Config;
use warden_policy::testing::{
    TestOutcome, TestReport, groups_for_paths, run_groups, shipped_groups,
};
use warden_policy::{
    Decision, Effect, Mode, Pipeline, PipelineConfig, RequestKind, Stage, StageVerdict,
};

pub fn run(global: &GlobalArgs, cmd: PolicyCommand) -> anyhow::Result<u8> {
    // `policy test` needs no configuration; the others use the configured
    // rules and policies (plus `--policy`).
    let loaded = match &cmd {
        PolicyCommand::Test { .. } => None,
        _ => Some(super::session::load_config(global)?),
    };
    let pipeline_config = pipeline_config(global, loaded.as_ref())?;
    match cmd {
        PolicyCommand::Check => check(pipeline_config, global.json),
        PolicyCommand::Eval { input } => eval(pipeline_config, &input, global.json),
        PolicyCommand::Test { path } => test(&path, global.json),
    }
}

/// The pipeline configuration for the policy commands: the configured
/// rules and policies plus `--policy` paths when `config` is given; else
/// the `--policy` paths, or the shipped default when there are none. Also
/// `--ci`, `--locked` and `--workspace`.
pub fn pipeline_config(
    global: &GlobalArgs,
    config: Option<&Config>,
) -> anyhow::Result<PipelineConfig> {
    let workspace = match (&global.workspace, config) {
        (_, Some(c)) => c.workspace.clone(),
        (Some(w), None) => w.clone(),
        (None, None) => std::env::current_dir()
            .map_err(|e| CliError::usage(format!("cannot read the current directory: {e}")))?,
    };
    Ok(PipelineConfig {
        rules: config.map(|c| c.rules.clone()).unwrap_or_default(),
        // Without a config: the `--policy` paths alone, else the shipped
        // default. With one: its policies plus `--policy` (as at run time).
        policies: match config {
            Some(c) => c.policies.clone(),
            None if !global.policies.is_empty() => Some(Vec::new()),
            None => None,
        },
        extra_policies: global.policies.clone(),
        data: config.map(|c| c.policy_data.clone()).unwrap_or_default(),
        workspace,
        mode: if global.ci {
            Mode::Ci
        } else {
            Mode::Interactive
        },
        locked: global.locked,
        with_default: config.is_some_and(|c| c.default_policy),
        ..PipelineConfig::default()
    })
}

fn load(config: PipelineConfig) -> anyhow::Result<Pipeline> {
    Pipeline::load(config).map_err(|e| CliError::config(e.to_string()))
}

/// `warden policy check`: compiles rules and policies; prints what was
/// loaded with digests.
pub fn check(config: PipelineConfig, json: bool) -> anyhow::Result<u8> {
    let rules = config.rules.len();
    let pipeline = load(config)?;
    let files = pipeline.loaded_policies();
    if json {
        let out = json!({
            "ok": true,
            "rules": rules,
            "policies": files.iter().map(|(p, h)| json!({"path": p, "sha256": h})).collect::<Vec<_>>(),
            "policy_sha256": pipeline.policy_sha256(),
            "engine": pipeline.rego_engine(),
        });
        super::json::print("policy check", out)?;
    } else {
        for (path, sha) in &files {
            println!("{}  {}", &sha[..12.min(sha.len())], path.display());
        }
        match pipeline.policy_sha256() {
            Some(d) => println!(
                "ok: {} policy/data file(s), {rules} rule(s); policy_sha256 {d}; runs on {}",
                files.len(),
                match pipeline.rego_engine() {
                    Some("vm") => "the bytecode VM",
                    Some("interpreter") => "the interpreter (see README, \"Rego engine\")",
                    _ => "the bytecode VM and the interpreter (see README, \"Rego engine\")",
                }
            ),
            None => println!("ok: no Rego stage, {rules} rule(s)"),
        }
    }
    Ok(exit::OK)
}

fn parse_effect(v: &Value) -> Option<Effect> {
    match v.as_str()? {
        "allow" => Some(Effect::Allow),
        "ask" => Some(Effect::Ask),
        "deny" => Some(Effect::Deny),
        _ => None,
    }
}

/// `warden policy eval --input FILE`: evaluates the Rego stage for a
/// CONTRACT §5 input document, combines it with the stages the input
/// reports, and explains every stage.
pub fn eval(config: PipelineConfig, input: &Path, json: bool) -> anyhow::Result<u8> {
    let text = std::fs::read_to_string(input)
        .map_err(|e| CliError::usage(format!("{}: {e}", input.display())))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{}: not valid JSON: {e}", input.display())))?;
    if !doc.is_object() {
        return Err(CliError::usage(format!(
            "{}: the input must be a JSON object (CONTRACT §5 `input`)",
            input.display()
        )));
    }
    let ci = config.mode == Mode::Ci
        || doc.pointer("/context/mode").and_then(Value::as_str) == Some("ci");
    let pipeline = load(config)?;
    // `input.kind` (CONTRACT §8): only tools have schema, pinning and
    // annotations stages.
    let kind = match doc.get("kind") {
        None => RequestKind::Tool,
        Some(k) => serde_json::from_value::<RequestKind>(k.clone()).map_err(|_| {
            CliError::usage(format!(
                "{}: `kind` must be one of tool, resource, prompt, sampling, elicitation",
                input.display()
            ))
        })?,
    };
    let before_policy: &[Stage] = if kind == RequestKind::Tool {
        &[
            Stage::Trust,
            Stage::Schema,
            Stage::Pinning,
            Stage::Annotations,
            Stage::Rules,
        ]
    } else {
        &[Stage::Trust, Stage::Rules]
    };
    let mut stages = Vec::new();
    for &stage in before_policy {
        let given = doc.pointer(&format!("/stages/{}", stage.as_str()));
        let effect = given.and_then(parse_effect);
        let reasons = if given.is_some_and(|v| !v.is_null()) {
            vec!["from input.stages".into()]
        } else {
            vec![]
        };
        stages.push(StageVerdict::new(stage, effect, reasons));
    }
    if pipeline.policy_sha256().is_some() {
        stages.push(pipeline.policy_verdict_for_input(&doc));
    }
    let decision = pipeline.combine(stages, if ci { Mode::Ci } else { Mode::Interactive });
    if json {
        super::json::print("policy eval", serde_json::to_value(&decision)?)?;
    } else {
        print_decision(&decision);
    }
    Ok(exit::OK)
}

/// Reasons and test messages come from policy files, which a repository
/// can ship: each is one neutralised line.
fn print_decision(d: &Decision) {
    use warden_core::display::line;
    println!("decision: {} (stage `{}`)", d.effect, d.stage);
    for r in &d.reasons {
        println!("  - {}", line(r));
    }
    println!("stages:");
    for s in &d.stages {
        let effect = s.effect.map_or("-", |e| e.as_str());
        println!("  {:<12} {effect}", s.stage.as_str());
        for r in &s.reasons {
            println!("      {}", line(r));
        }
    }
    if let Some(sha) = &d.policy_sha256 {
        println!("policy_sha256: {sha}");
    }
}

/// `warden policy test [PATH…]`: runs `test_` rules; without a path, the
/// shipped policies' own tests. Exit 1 when any test fails.
pub fn test(paths: &[std::path::PathBuf], json: bool) -> anyhow::Result<u8> {
    let groups = if paths.is_empty() {
        shipped_groups()
    } else {
        groups_for_paths(paths).map_err(|e| CliError::usage(e.to_string()))?
    };
    let report = run_groups(&groups).map_err(|e| CliError::config(e.to_string()))?;
    if json {
        super::json::print("policy test", serde_json::to_value(&report)?)?;
    } else {
        print_report(&report);
    }
    Ok(if report.failed() == 0 && !report.results.is_empty() {
        exit::OK
    } else {
        exit::FAILED
    })
}

fn print_report(report: &TestReport) {
    let mut file = "";
    for r in &report.results {
        if r.file != file {
            file = &r.file;
            println!("{}:", warden_core::display::line(file));
        }
        let status = match r.outcome {
            TestOutcome::Pass => "PASS",
            TestOutcome::Fail => "FAIL",
            TestOutcome::Error => "ERROR",
        };
        println!(
            "  {}: {status} ({:.1?})",
            warden_core::display::line(&r.name),
            r.duration
        );
        if let Some(m) = &r.message {
            println!("    {}", warden_core::display::text(m));
        }
        for p in &r.prints {
            println!("    print: {}", warden_core::display::line(p));
        }
    }
    println!("{}", "-".repeat(60));
    if report.results.is_empty() {
        println!("no tests found");
    }
    println!("{} passed, {} failed", report.passed(), report.failed());
}
