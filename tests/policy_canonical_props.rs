//! Property (issue 11): whenever a rule allows a path or `file:` URI under
//! `P/**`, what real servers open for that value lies under `P`.
//!
//! Strings are generated from the pieces attacks are made of (`~`,
//! `file:` URIs with `#`, `?`, `%2e%2e`, `%2f`, `\`, tabs, NUL, `//`,
//! `/./`, `..`, schemes, spaces). Each is decided by warden with only
//! `allow mcp__fs__read(path: P/**)`; every allowed one is then resolved by
//! the real Python (`pathlib.Path(p).expanduser().resolve()`, and
//! `url2pathname(urlparse(u).path)` for URIs) and Node (`path.resolve`
//! with `~` through `os.homedir()`, and `url.fileURLToPath`) code of the
//! fixture servers, in one batched subprocess each (not one per string),
//! as `read_file(path)` and as `read_uri(uri)` would: every result must be
//! under `P` (or an error, which opens nothing).

mod policy_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use warden::config::Trust;
use warden_policy::{Effect, Mode, Pipeline, PipelineConfig, RuleEffect, RuleSource};

/// Generated values per allowed folder (`WARDEN_PROP_CASES` overrides;
/// `WARDEN_PROP_SEED=N` picks another deterministic sequence).
fn cases() -> usize {
    std::env::var("WARDEN_PROP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000)
}

fn venv_python() -> PathBuf {
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/setup-venv.sh"))
        .output()
        .expect("run tests/python/setup-venv.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin/python")
}

/// Runs `program args… --resolve` in `cwd` with `HOME=home`, feeding the
/// batch as JSON; returns `[{"path", "uri"}]`.
fn resolve_batch(
    program: &Path,
    script: &Path,
    cwd: &Path,
    home: &Path,
    batch: &[String],
) -> Vec<Value> {
    use std::io::Write;
    let mut child = Command::new(program)
        .arg(script)
        .arg("--resolve")
        .current_dir(cwd)
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    let input = serde_json::to_vec(batch).expect("json");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("wait");
    writer.join().expect("join").expect("write stdin");
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: Vec<Value> = serde_json::from_slice(&out.stdout).expect("resolver output");
    assert_eq!(parsed.len(), batch.len());
    parsed
}

/// The pieces attack strings are made of.
fn piece(allowed: &str) -> impl Strategy<Value = String> {
    let allowed = allowed.to_string();
    prop_oneof![
        8 => Just("..".to_string()),
        4 => Just(".".to_string()),
        4 => Just(String::new()),
        8 => Just("a".to_string()),
        4 => Just("secret".to_string()),
        6 => Just(allowed.trim_start_matches('/').to_string()),
        6 => Just("public".to_string()),
        1 => Just("%2e%2e".to_string()),
        1 => Just("%2E%2e".to_string()),
        1 => Just(".%2e".to_string()),
        1 => Just("%2f".to_string()),
        1 => Just("%5c".to_string()),
        1 => Just("%00".to_string()),
        1 => Just("%41".to_string()),
        1 => Just("#".to_string()),
        1 => Just("#/..".to_string()),
        1 => Just("?q=/..".to_string()),
        1 => Just("x#".to_string()),
        1 => Just("\\..".to_string()),
        1 => Just("..\\..".to_string()),
        1 => Just("\t".to_string()),
        1 => Just("..\t".to_string()),
        1 => Just("\0".to_string()),
        1 => Just(" ".to_string()),
        1 => Just("s:".to_string()),
        1 => Just("~".to_string()),
        1 => Just("a\\b".to_string()),
        1 => Just("é".to_string()),
    ]
}

fn prefix(allowed: &str, workspace: &str) -> impl Strategy<Value = String> {
    let allowed = allowed.to_string();
    let workspace = workspace.to_string();
    prop_oneof![
        4 => Just(String::new()),
        2 => Just("/".to_string()),
        1 => Just("//".to_string()),
        1 => Just("///".to_string()),
        1 => Just("~/".to_string()),
        1 => Just("~".to_string()),
        1 => Just("./".to_string()),
        1 => Just(" ".to_string()),
        1 => Just("file://".to_string()),
        1 => Just("file:///".to_string()),
        1 => Just("file:".to_string()),
        1 => Just("FILE:///".to_string()),
        1 => Just("file://localhost/".to_string()),
        1 => Just("file://evil/".to_string()),
        1 => Just("http://h/".to_string()),
        6 => Just(format!("{allowed}/")),
        4 => Just(format!("file://{allowed}/")),
        6 => Just(format!("{workspace}/")),
        4 => Just(format!("file://{workspace}/")),
    ]
}

fn value(allowed: &str, workspace: &str) -> impl Strategy<Value = String> {
    (
        prefix(allowed, workspace),
        proptest::collection::vec(piece(allowed), 0..7),
        prop_oneof![8 => Just(""), 2 => Just("/"), 1 => Just("#"), 1 => Just("?x"), 1 => Just(" ")],
    )
        .prop_map(|(p, segs, end)| format!("{p}{}{end}", segs.join("/")))
}

fn under(path: &str, dir: &str) -> bool {
    path == dir || path.starts_with(&format!("{dir}/"))
}

#[test]
fn allowed_paths_resolve_under_the_allowed_folder_in_python_and_node() {
    let world = tempfile::tempdir().expect("tempdir");
    let root = world.path().canonicalize().expect("canon");
    let ws = root.join("ws");
    let home = root.join("home/u");
    for d in [&ws.join("public"), &home] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let ws_s = ws.to_string_lossy().into_owned();
    let python = venv_python();
    let py_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/resolving_server.py");
    let node_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/npm/resolving-server.mjs");
    let mut checked_allowed = 0usize;
    for allowed in [ws_s.clone(), format!("{ws_s}/public")] {
        let pipeline = Pipeline::load(PipelineConfig {
            rules: vec![RuleSource {
                effect: RuleEffect::Allow,
                text: format!("mcp__fs__read(path: {allowed}/**)"),
                scope: warden::config::Scope::User,
                file: "/cfg.json".into(),
                index: 0,
            }],
            policies: Some(vec![]),
            workspace: ws.clone(),
            mode: Mode::Ci,
            ..PipelineConfig::default()
        })
        .expect("load");
        let cases = cases();
        let config = Config {
            cases: cases as u32,
            ..Config::default()
        };
        let mut runner = match std::env::var("WARDEN_PROP_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(seed) => {
                let mut bytes = [0u8; 32];
                bytes[..8].copy_from_slice(&seed.to_le_bytes());
                TestRunner::new_with_rng(
                    config,
                    proptest::test_runner::TestRng::from_seed(
                        proptest::test_runner::RngAlgorithm::ChaCha,
                        &bytes,
                    ),
                )
            }
            None => TestRunner::new(config),
        };
        let strategy = value(&allowed, &ws_s);
        let mut batch = Vec::with_capacity(cases);
        for _ in 0..cases {
            let tree = strategy.new_tree(&mut runner).expect("generate");
            batch.push(tree.current());
        }
        // The cases that matter, whatever the generator picks.
        batch.extend(
            [
                "file://WS/secrets/key#/../../public/x",
                "~/../../../../../../etc/shadow",
                "//etc/shadow",
                "/etc/./shadow",
                "WS/public/..\t/../x",
                "WS/public/a#/../../../x",
                "file://WS/public/a%2f..%2f..%2fx",
                "file://WS/public/a\\..\\..\\x",
                " WS/public/x",
                "s:/../../x",
            ]
            .iter()
            .map(|s| s.replace("WS", &ws_s)),
        );
        let allowed_values: Vec<String> = batch
            .iter()
            .filter(|v| {
                let facts = policy_support::facts(
                    Trust::Untrusted,
                    "read",
                    json!({}),
                    json!({ "path": v }),
                );
                pipeline.decide(&facts).effect == Effect::Allow
            })
            .cloned()
            .collect();
        checked_allowed += allowed_values.len();
        let python_out = resolve_batch(&python, &py_script, &ws, &home, &allowed_values);
        let node_out = resolve_batch(Path::new("node"), &node_script, &ws, &home, &allowed_values);
        let mut failures = Vec::new();
        for (i, v) in allowed_values.iter().enumerate() {
            for (who, out) in [("python", &python_out[i]), ("node", &node_out[i])] {
                for how in ["path", "uri"] {
                    if let Some(p) = out[how].as_str()
                        && !under(p, &allowed)
                    {
                        failures.push(format!(
                            "{v:?}: {who} {how} opens {p:?}, not under {allowed}"
                        ));
                    }
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} allowed values resolve outside {allowed}:\n{}",
            failures.len(),
            allowed_values.len(),
            failures.join("\n")
        );
    }
    assert!(
        checked_allowed > 200,
        "too few allowed values to say much ({checked_allowed})"
    );
    eprintln!("{checked_allowed} allowed values checked against Python and Node");
}
