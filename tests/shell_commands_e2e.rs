//! Text rules on commands, end to end: a real server (the Python resolving
//! fixture's `run_shell`, the official SDK running `subprocess.run(cmd,
//! shell=True)` in warden's sandbox) runs what a shell makes of the value,
//! not what a glob saw. For each attack a control run (everything allowed)
//! shows the server really reads the secret; the protected run is refused.

mod resolving_support;

use resolving_support::*;
use serde_json::json;

fn run_ci(world: &World, cmd: &str) -> (Option<i32>, serde_json::Value) {
    let args = json!({"cmd": cmd}).to_string();
    let out = world.run(&["--ci", "call", "py", "run_shell", "--json", "--args", &args]);
    (out.status.code(), stdout_json(&out))
}

/// `allow run_shell(cmd: echo*)` held for `echo hi; cat SECRET`: the glob's
/// `*` covered a second command. A wildcard never covers shell syntax: the
/// rules stage asks (a deny with `--ci`), saying why; a plain `echo` still
/// runs.
#[test]
fn an_allowed_command_never_covers_a_second_one() {
    let world = World::new();
    populate(&world);
    let secret = world.path("outside/secret");
    let secret = secret.display();
    let attacks = [
        format!("echo hi; cat {secret}"),
        format!("echo hi && cat {secret}"),
        format!("echo hi | cat {secret}"),
        format!("echo hi\ncat {secret}"),
        format!("echo $(cat {secret})"),
        format!("echo `cat {secret}`"),
        format!("echo hi > /dev/null; cat < {secret}"),
    ];
    for attack in &attacks {
        control_reads(&world, "py", "run_shell", &json!({"cmd": attack}), OUTSIDE);
    }
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {"allow": ["mcp__py__run_shell(cmd: echo*)"]},
        "policy": [],
    }));
    let (code, report) = run_ci(&world, "echo plain-words");
    assert_eq!(code, Some(0), "{report}");
    assert!(answer(&report)["stdout"] == "plain-words\n", "{report}");
    for attack in &attacks {
        let (code, report) = run_ci(&world, attack);
        assert_denied(code, &report, "shell syntax");
        assert!(!report.to_string().contains(OUTSIDE), "{report}");
    }
}

/// `deny run_shell(cmd: cat*)` missed every other spelling of `cat`: an
/// assignment or a wrapper before it, its full path, quotes, `sh -c`, a
/// second command. Each is denied; a command that runs no `cat` is not.
#[test]
fn a_denied_command_is_denied_in_every_spelling() {
    let world = World::new();
    populate(&world);
    let secret = world.path("outside/secret");
    let secret = secret.display();
    let attacks = [
        format!("X=1 cat {secret}"),
        format!("/bin/cat {secret}"),
        format!("/usr/bin/../bin/cat {secret}"),
        format!("env cat {secret}"),
        format!("env -i A=1 cat {secret}"),
        format!("'c''at' {secret}"),
        format!("c\\at {secret}"),
        format!("sh -c 'cat {secret}'"),
        format!("echo; cat {secret}"),
        format!("echo $(cat {secret})"),
        format!("timeout 60 cat {secret}"),
        format!("find {secret} -exec cat {{}} +"),
        format!("/bin/?at {secret}"),
        format!("X=1 /usr/bin/[c]at {secret}"),
    ];
    for attack in &attacks {
        control_reads(&world, "py", "run_shell", &json!({"cmd": attack}), OUTSIDE);
    }
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {
            "allow": ["mcp__py__run_shell"],
            "deny": ["mcp__py__run_shell(cmd: cat*)"],
        },
        "policy": [],
    }));
    let (code, report) = run_ci(&world, "echo concatenate");
    assert_eq!(code, Some(0), "{report}");
    for attack in &attacks {
        let (code, report) = run_ci(&world, attack);
        assert_denied(code, &report, "deny rule");
        assert!(!report.to_string().contains(OUTSIDE), "{report}");
    }
}
