//! The next variants of the fail-open classes (audit log, policy loading,
//! configuration), each attempted against the real `warden` binary.
//!
//! - A project's policy folder (`.mcp.json` → `"policy": ["policy"]`) holding
//!   a link to a file outside it: warden read the target as a policy and its
//!   parse error printed the target's first line, so a repository checked
//!   out in CI had `warden call --ci` print `/proc/self/environ` (every
//!   secret of the job) to the CI log.
//! - A policy file that is a FIFO made the session wait forever for a writer;
//!   one of any size was read whole.
//! - A policy whose `deny` is in a package warden never reads (`package
//!   wardn`, `package warden.extra`) loaded beside another policy, and the
//!   calls it was written to stop were sent.
//! - A user's policy calling `print(input.arguments.x)` had regorus write
//!   the caller's text raw to stderr (terminal escapes, `::stop-commands::`
//!   in a CI log); `warden policy test` did the same, and read a link in
//!   the folder it was given wherever it pointed, quoting the target.

mod cli_support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cli_support::{World, calls_received};
use serde_json::json;

/// `warden ARGS…` in `world` with the user file and the project
/// `.mcp.json` (no `--config`, which would replace both).
fn warden_in_project(world: &World, args: &[&str]) -> Command {
    let mut cmd = Command::new(cli_support::WARDEN);
    cmd.arg("--workspace")
        .arg(&world.workspace)
        .args(args)
        .env("WARDEN_CONFIG_DIR", &world.config_dir)
        .env("HOME", &world.home)
        .env("TMPDIR", world.dir.path())
        .env_remove("RUST_LOG")
        .env_remove("WARDEN_AUDIT_KEY")
        .current_dir(&world.workspace);
    cmd
}

/// A configuration with the counting fixture `fx`, allowed, and the
/// fixture's call counter.
fn fx_allowed(world: &World) -> (serde_json::Value, std::path::PathBuf) {
    let (fixture, counter) = world.counting_fixture();
    let config = json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": world.path("audit.jsonl")},
    });
    (config, counter)
}

/// The user's own file: the counting fixture `fx`, allowed.
fn user_config(world: &World) -> std::path::PathBuf {
    let (config, counter) = fx_allowed(world);
    std::fs::write(
        world.config_dir.join("config.json"),
        serde_json::to_string_pretty(&config).unwrap(),
    )
    .unwrap();
    counter
}

/// `warden --config FILE`'s file: the counting fixture `fx`, allowed.
fn given_config(world: &World) -> std::path::PathBuf {
    let (config, counter) = fx_allowed(world);
    world.write_config(&config);
    counter
}

/// Runs `cmd`, killing it after `limit`: `None` when it had to be killed.
fn output_within(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden");
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().expect("wait").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    None
}

fn all_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const DENY_NOTHING: &str = "package warden\nimport rego.v1\ndeny contains \"never\" if false\n";

#[test]
fn a_project_policy_folder_link_to_a_file_outside_is_not_read_or_shown() {
    let world = World::new();
    let counter = user_config(&world);
    let canary = format!("canary-{}", world.marker);
    let policy = world.workspace.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(policy.join("a.rego"), DENY_NOTHING).unwrap();
    std::fs::write(
        world.workspace.join(".mcp.json"),
        json!({"policy": ["policy"]}).to_string(),
    )
    .unwrap();
    // Outside the repository: the job's environment, a credentials file,
    // and a folder of them.
    let outside = world.path("outside");
    std::fs::create_dir_all(outside.join("creds")).unwrap();
    std::fs::write(outside.join("credentials"), format!("token = {canary}\n")).unwrap();
    std::fs::write(
        outside.join("creds/key.rego"),
        format!("secret = {canary}\n"),
    )
    .unwrap();
    let links: [(&str, &Path); 3] = [
        ("env.rego", Path::new("/proc/self/environ")),
        ("creds.rego", &outside.join("credentials")),
        ("sub", &outside.join("creds")),
    ];
    for (name, target) in links {
        let link = policy.join(name);
        std::os::unix::fs::symlink(target, &link).unwrap();
        let out = warden_in_project(&world, &["call", "--ci", "fx", "echo", "--args"])
            .arg(json!({"message": "hi"}).to_string())
            .env("WARDEN_TEST_CANARY", &canary)
            .output()
            .expect("run warden");
        let text = all_text(&out);
        assert!(!out.status.success(), "{name}: {text}");
        assert!(
            !text.contains(&canary),
            "{name}: the target was shown: {text}"
        );
        assert!(text.contains("outside the policy folder"), "{name}: {text}");
        assert!(
            calls_received(&counter).is_empty(),
            "{name}: a call was sent"
        );
        std::fs::remove_file(&link).unwrap();
    }
    // A link that stays inside the folder is read as before.
    std::fs::create_dir_all(policy.join("real")).unwrap();
    std::fs::write(
        policy.join("real/deny.rego.txt"),
        "package warden\nimport rego.v1\ndeny contains \"linked\" if input.arguments.message == \"stop\"\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("real/deny.rego.txt", policy.join("linked.rego")).unwrap();
    let out = warden_in_project(&world, &["call", "--ci", "fx", "echo", "--args"])
        .arg(json!({"message": "stop"}).to_string())
        .output()
        .expect("run warden");
    let text = all_text(&out);
    assert!(text.contains("linked"), "{text}");
    assert!(calls_received(&counter).is_empty(), "{text}");
}

#[test]
fn a_policy_that_is_a_fifo_is_refused_not_waited_for() {
    let world = World::new();
    let counter = given_config(&world);
    let policy = world.path("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(policy.join("a.rego"), DENY_NOTHING).unwrap();
    let fifo = policy.join("b.rego");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let mut cmd = world.warden(&["call", "--ci", "fx", "echo", "--policy"]);
    cmd.arg(&policy)
        .arg("--args")
        .arg(json!({"message": "hi"}).to_string());
    let out = output_within(cmd, Duration::from_secs(20))
        .expect("warden waited for a writer of the FIFO policy");
    let text = all_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("b.rego") && text.contains("not a regular file"),
        "{text}"
    );
    assert!(calls_received(&counter).is_empty(), "{text}");
}

#[test]
fn a_policy_file_larger_than_the_bound_is_refused() {
    let world = World::new();
    let counter = given_config(&world);
    let big = world.path("big.rego");
    let mut text = String::from(DENY_NOTHING);
    let comment = format!("# {}\n", "x".repeat(1000));
    while text.len() <= 4 << 20 {
        text.push_str(&comment);
    }
    std::fs::write(&big, text).unwrap();
    let mut cmd = world.warden(&["call", "--ci", "fx", "echo", "--policy"]);
    cmd.arg(&big)
        .arg("--args")
        .arg(json!({"message": "hi"}).to_string());
    let out = cmd.output().expect("run warden");
    let text = all_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("larger than 4 MiB"), "{text}");
    assert!(calls_received(&counter).is_empty(), "{text}");
}

#[test]
fn a_deny_in_a_package_warden_never_reads_is_refused_at_load() {
    for package in ["wardn", "warden.extra", "policies.warden"] {
        let world = World::new();
        let counter = given_config(&world);
        let file = world.path("stop.rego");
        std::fs::write(
            &file,
            format!(
                "package {package}\nimport rego.v1\n\n\
                 deny contains \"no evidence\" if input.arguments.message == \"EVIDENCE\"\n"
            ),
        )
        .unwrap();
        // Beside the shipped default (package `warden`), as any `--policy`.
        let mut cmd = world.warden(&["call", "--ci", "fx", "echo", "--policy"]);
        cmd.arg(&file)
            .arg("--args")
            .arg(json!({"message": "EVIDENCE"}).to_string());
        let out = cmd.output().expect("run warden");
        let text = all_text(&out);
        assert!(!out.status.success(), "{package}: {text}");
        assert!(
            calls_received(&counter).is_empty(),
            "{package}: the call its deny was written to stop was sent: {text}"
        );
        assert!(
            text.contains("stop.rego:4") && text.contains("never consulted"),
            "{package}: {text}"
        );
    }
}

#[test]
fn a_deny_in_a_package_that_package_warden_reads_still_applies() {
    let world = World::new();
    let counter = given_config(&world);
    let policy = world.path("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(
        policy.join("lib.rego"),
        "package lib\nimport rego.v1\ndeny contains \"from lib\" if input.arguments.message == \"EVIDENCE\"\n",
    )
    .unwrap();
    std::fs::write(
        policy.join("main.rego"),
        "package warden\nimport rego.v1\ndeny contains m if some m in data.lib.deny\n",
    )
    .unwrap();
    let mut cmd = world.warden(&["call", "--ci", "fx", "echo", "--policy"]);
    cmd.arg(&policy)
        .arg("--args")
        .arg(json!({"message": "EVIDENCE"}).to_string());
    let out = cmd.output().expect("run warden");
    let text = all_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("from lib"), "{text}");
    assert!(calls_received(&counter).is_empty(), "{text}");
}

#[test]
fn a_project_policy_may_not_print_to_the_terminal_or_the_ci_log() {
    let world = World::new();
    let counter = user_config(&world);
    let policy = world.workspace.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    // regorus prints straight to stderr: a terminal's title, and a workflow
    // command that would stop the runner reading the commands after it.
    std::fs::write(
        policy.join("p.rego"),
        "package warden\nimport rego.v1\n\ndeny contains \"x\" if {\n  print(\"\\u001b]0;owned\\u0007\\n::stop-commands::tok\")\n  false\n}\n",
    )
    .unwrap();
    std::fs::write(
        world.workspace.join(".mcp.json"),
        json!({"policy": ["policy"]}).to_string(),
    )
    .unwrap();
    let out = warden_in_project(&world, &["call", "--ci", "fx", "echo", "--args"])
        .arg(json!({"message": "hi"}).to_string())
        .output()
        .expect("run warden");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(
        !stderr.lines().any(|l| l.starts_with("::stop-commands::")),
        "{stderr:?}"
    );
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("p.rego:5") && stderr.contains("`print` in a project policy"),
        "{stderr}"
    );
    assert!(calls_received(&counter).is_empty(), "{stderr}");
}

#[test]
fn a_policy_holding_control_characters_is_refused_before_regorus_quotes_it() {
    let world = World::new();
    let _counter = user_config(&world);
    let policy = world.workspace.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(
        world.workspace.join(".mcp.json"),
        json!({"policy": ["policy"]}).to_string(),
    )
    .unwrap();
    // regorus warns about `import input` on stderr itself, quoting the
    // line; a file's name reaches the same warning.
    let cases = [
        (
            "p.rego",
            "package warden\nimport input # \u{1b}]0;owned\u{7} x\n".to_string(),
        ),
        (
            "q\n::stop-commands::tok\n.rego",
            "package warden\nimport input\n".to_string(),
        ),
    ];
    for (name, text) in cases {
        let file = policy.join(name);
        std::fs::write(&file, text).unwrap();
        let out = warden_in_project(&world, &["call", "--ci", "fx", "echo", "--args"])
            .arg(json!({"message": "hi"}).to_string())
            .output()
            .expect("run warden");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains('\u{1b}'), "{name:?}: {stderr:?}");
        assert!(
            !stderr.lines().any(|l| l.starts_with("::stop-commands::")),
            "{name:?}: {stderr:?}"
        );
        assert!(!out.status.success(), "{name:?}: {stderr}");
        std::fs::remove_file(&file).unwrap();
    }
}

#[test]
fn a_policy_folder_of_looping_links_is_read_once_not_forever() {
    let world = World::new();
    let counter = user_config(&world);
    let policy = world.workspace.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(
        policy.join("main.rego"),
        "package warden\nimport rego.v1\ndeny contains \"looped\" if input.arguments.message == \"stop\"\n",
    )
    .unwrap();
    for name in ["a", "b"] {
        std::os::unix::fs::symlink(".", policy.join(name)).unwrap();
    }
    std::fs::write(
        world.workspace.join(".mcp.json"),
        json!({"policy": ["policy"]}).to_string(),
    )
    .unwrap();
    let mut cmd = warden_in_project(&world, &["call", "--ci", "fx", "echo", "--args"]);
    cmd.arg(json!({"message": "stop"}).to_string());
    let out = output_within(cmd, Duration::from_secs(20))
        .expect("warden was still walking the policy folder's links");
    let text = all_text(&out);
    assert!(text.contains("looped"), "{text}");
    assert!(calls_received(&counter).is_empty(), "{text}");
}

/// Text a tool's caller chose, for a policy that prints it: a terminal
/// title (ESC … BEL) and, on a line of its own, a workflow command that
/// stops a CI runner reading the commands after it.
const PRINTED: &str = "\u{1b}]0;owned\u{7}\n::stop-commands::x";

/// Asserts `stderr` holds nothing raw of [`PRINTED`].
fn nothing_raw(stderr: &str, what: &str) {
    assert!(!stderr.contains('\u{1b}'), "{what}: {stderr:?}");
    assert!(!stderr.contains('\u{7}'), "{what}: {stderr:?}");
    assert!(
        !stderr
            .lines()
            .any(|l| l.trim_start().starts_with("::stop-commands::")),
        "{what}: {stderr:?}"
    );
}

#[test]
fn a_user_policy_printing_an_argument_does_not_reach_stderr_raw() {
    let world = World::new();
    let counter = given_config(&world);
    let policy = world.path("policy");
    std::fs::create_dir_all(&policy).unwrap();
    // `print(x)` and the spelling with a blank before the parenthesis.
    std::fs::write(
        policy.join("p.rego"),
        "package warden\nimport rego.v1\n\ndeny contains \"never\" if {\n  print(input.arguments.message)\n  print (\"second\", input.arguments.message)\n  false\n}\n",
    )
    .unwrap();
    for verbose in [false, true] {
        let mut cmd = world.warden(&["call", "--ci", "fx", "echo", "--policy"]);
        cmd.arg(&policy);
        if verbose {
            cmd.arg("-v");
        }
        let out = cmd
            .arg("--args")
            .arg(json!({"message": PRINTED}).to_string())
            .output()
            .expect("run warden");
        let stderr = String::from_utf8_lossy(&out.stderr);
        nothing_raw(&stderr, &format!("verbose {verbose}"));
        // The user's own policy may print: the call still goes, and with
        // -v the prints are shown, neutralised.
        assert!(out.status.success(), "{stderr}");
        if verbose {
            assert!(
                stderr.contains("p.rego:5") && stderr.contains("^[]0;owned^G"),
                "{stderr}"
            );
        }
    }
    assert_eq!(calls_received(&counter).len(), 2);
}

#[test]
fn warden_policy_test_prints_nothing_raw() {
    let world = World::new();
    let dir = world.path("tests");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("p.rego"),
        "package p\nimport rego.v1\nmsg := input.m\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("p_test.rego"),
        format!(
            "package p\nimport rego.v1\ntest_m if {{\n  print(msg) with input as {{\"m\": {}}}\n}}\n",
            serde_json::to_string(PRINTED).unwrap()
        ),
    )
    .unwrap();
    let out = world.run(&["policy", "test", dir.to_str().unwrap()]);
    let text = all_text(&out);
    nothing_raw(&text, "policy test");
    assert!(
        text.contains("print: ") && text.contains("^[]0;owned^G"),
        "{text}"
    );
}

#[test]
fn warden_policy_test_does_not_read_links_out_of_its_folder() {
    let world = World::new();
    let canary = format!("canary-{}", world.marker);
    let outside = world.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // Not Rego: the parse error would quote it.
    std::fs::write(outside.join("secret"), format!("{canary} = not rego\n")).unwrap();
    std::fs::write(outside.join("secret.json"), format!("{{{canary}\n")).unwrap();
    let cases: [(&str, &str, &str); 4] = [
        ("a test", "x_test.rego", "secret"),
        ("the tested policy", "x.rego", "secret"),
        ("data beside the tests", "d.json", "secret.json"),
        ("a folder", "sub", ""),
    ];
    for (name, link, target) in cases {
        let dir = world.path(&format!("repo-{}", link.replace('.', "-")));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("ok_test.rego"),
            "package ok\nimport rego.v1\ntest_ok if true\n",
        )
        .unwrap();
        if link == "sub" {
            std::fs::write(
                outside.join("y_test.rego"),
                format!("{canary} = not rego\n"),
            )
            .unwrap();
        } else if link == "x.rego" {
            std::fs::write(
                dir.join("x_test.rego"),
                "package x\nimport rego.v1\ntest_x if true\n",
            )
            .unwrap();
        }
        let target = if target.is_empty() {
            outside.clone()
        } else {
            outside.join(target)
        };
        std::os::unix::fs::symlink(&target, dir.join(link)).unwrap();
        let out = world.run(&["policy", "test", dir.to_str().unwrap()]);
        let text = all_text(&out);
        assert!(!out.status.success(), "{name}: {text}");
        assert!(
            !text.contains(&canary),
            "{name}: the target was shown: {text}"
        );
        assert!(text.contains("outside the policy folder"), "{name}: {text}");
    }
}

#[test]
fn a_project_policy_file_or_data_named_directly_that_links_outside_is_not_read() {
    let world = World::new();
    let counter = user_config(&world);
    let canary = format!("canary-{}", world.marker);
    let outside = world.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), format!("{canary} = not rego\n")).unwrap();
    std::fs::write(outside.join("secret.json"), format!("{{{canary}\n")).unwrap();
    std::fs::write(world.workspace.join("ok.rego"), DENY_NOTHING).unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), world.workspace.join("p.rego")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.json"), world.workspace.join("d.json"))
        .unwrap();
    for (name, config) in [
        ("a policy file", json!({"policy": ["p.rego"]})),
        (
            "a data file",
            json!({"policy": ["ok.rego"], "policy_data": ["d.json"]}),
        ),
    ] {
        std::fs::write(world.workspace.join(".mcp.json"), config.to_string()).unwrap();
        let out = warden_in_project(&world, &["call", "--ci", "fx", "echo", "--args"])
            .arg(json!({"message": "hi"}).to_string())
            .output()
            .expect("run warden");
        let text = all_text(&out);
        assert!(!out.status.success(), "{name}: {text}");
        assert!(
            !text.contains(&canary),
            "{name}: the target was shown: {text}"
        );
        assert!(calls_received(&counter).is_empty(), "{name}: {text}");
    }
}
