//! Issue 11, classes 1–4, end to end: `warden call` against real servers
//! that resolve paths and URIs as users' servers do (Python's `pathlib` and
//! `urllib`, Node's `path` and `fileURLToPath`). For each attack a control
//! run (everything allowed) shows the server really opens the secret; the
//! protected run is refused.

mod resolving_support;

use resolving_support::*;
use serde_json::json;

/// Class 1: a `file:` URI whose fragment hides `..`: warden read
/// `WS/public/x`, both servers open `WS/secrets/key`.
#[test]
fn class1_file_uri_fragment_is_refused() {
    if !npm_ready() {
        panic!("run scripts/test-deps.sh first (tests/npm)");
    }
    let world = World::new();
    populate(&world);
    let ws = ws(&world);
    for attack in [
        format!("file://{ws}/secrets/key#/../../public/x"),
        format!("file://{ws}/secrets/key?x=/../../public/x"),
    ] {
        for s in SERVERS {
            let args = json!({"uri": attack});
            control_reads(&world, s, "read_uri", &args, SECRET);
            world.write_config(&json!({
                "mcpServers": {s: server(&world, s)},
                "permissions": {
                    "allow": [format!("mcp__{s}__read_uri(uri: {ws}/public/**)")],
                    "deny": [format!("mcp__{s}__read_uri(uri: {ws}/secrets/**)")],
                },
                "policy": [],
            }));
            let (code, report) = call(&world, s, "read_uri", &args);
            assert_denied(code, &report, "deny rule");
            // Without the deny rule the allow still never matches: asked,
            // which `--ci` turns into a deny naming why.
            world.write_config(&json!({
                "mcpServers": {s: server(&world, s)},
                "permissions": {"allow": [format!("mcp__{s}__read_uri(uri: {ws}/public/**)")]},
                "policy": [],
            }));
            let out = world.run(&[
                "--ci",
                "call",
                s,
                "read_uri",
                "--json",
                "--args",
                &args.to_string(),
            ]);
            let report = stdout_json(&out);
            assert_denied(out.status.code(), &report, "cannot be read with certainty");
        }
    }
    // A backslash: Node reads it as `/`, Python as a name character.
    let attack = format!("file://{ws}/public/a\\..\\..\\secrets\\key");
    control_reads(&world, "node", "read_uri", &json!({"uri": attack}), SECRET);
    world.write_config(&json!({
        "mcpServers": {"node": server(&world, "node")},
        "permissions": {
            "allow": [format!("mcp__node__read_uri(uri: {ws}/public/**)")],
            "deny": [format!("mcp__node__read_uri(uri: {ws}/secrets/**)")],
        },
        "policy": [],
    }));
    let (code, report) = call(&world, "node", "read_uri", &json!({"uri": attack}));
    assert_denied(code, &report, "deny rule");
    assert!(world.leftover_processes().is_empty());
}

/// Class 2: `~` followed by `..` climbs out of any home directory: the
/// servers expand `~` and open the secret outside the workspace.
#[test]
fn class2_tilde_climb_is_refused() {
    let world = World::new();
    populate(&world);
    let attack = format!("~{}{}/outside/secret", "/..".repeat(24), root(&world));
    for s in SERVERS {
        let args = json!({"path": attack});
        control_reads(&world, s, "read_file", &args, OUTSIDE);
        world.write_config(&json!({
            "mcpServers": {s: server(&world, s)},
            "permissions": {
                "allow": [format!("mcp__{s}__read_file")],
                "deny": [format!("mcp__{s}__read_file(path: {}/outside/**)", root(&world))],
            },
            "policy": [],
        }));
        let (code, report) = call(&world, s, "read_file", &args);
        assert_denied(code, &report, "outside/secret");
    }
}

/// Class 3: the shipped `default.rego` matched raw strings, so
/// `//etc/shadow`, `/etc/./shadow` and `/proc/self//environ` passed where
/// `/etc/shadow` is denied. The servers resolve them to the real files.
#[test]
fn class3_default_policy_decides_on_canonical_paths() {
    let world = World::new();
    populate(&world);
    for s in SERVERS {
        // Control: the server resolves each to the denied file.
        world.write_config(&json!({
            "mcpServers": {s: server(&world, s)},
            "permissions": {"allow": [format!("mcp__{s}__*")]},
            "policy": [],
        }));
        for (attack, real) in [
            ("//etc/shadow", "/etc/shadow"),
            ("/etc/./shadow", "/etc/shadow"),
            ("/proc/self//environ", "/proc/self/environ"),
        ] {
            let (code, report) = call(&world, s, "read_file", &json!({"path": attack}));
            assert_eq!(code, Some(0), "{report}");
            let resolved = answer(&report)["resolved"]
                .as_str()
                .unwrap_or("")
                .to_string();
            // (Python's `resolve()` follows `/proc/self` to `/proc/PID`.)
            let same = resolved == real
                || (real == "/proc/self/environ"
                    && resolved.starts_with("/proc/")
                    && resolved.ends_with("/environ"));
            assert!(
                same,
                "{s}: {attack} resolved to {resolved}, not {real}: {report}"
            );
        }
        // Protected: the shipped policy (no `policy` key), even with the
        // tool allowed by a rule.
        world.write_config(&json!({
            "mcpServers": {s: server(&world, s)},
            "permissions": {"allow": [format!("mcp__{s}__*")]},
        }));
        for attack in ["//etc/shadow", "/etc/./shadow", "/proc/self//environ"] {
            let (code, report) = call(&world, s, "read_file", &json!({"path": attack}));
            assert_denied(code, &report, "points at a secret file");
            assert_eq!(report["decision"]["stage"], "policy", "{report}");
        }
    }
}

/// Class 4: numbers compared as text: `{"id": 2.0}` and `2e0` passed a deny
/// on `read_note(id: 2)`; the schema takes them as integers and the server
/// reads note 2.
#[test]
fn class4_numbers_are_compared_by_value() {
    let world = World::new();
    populate(&world);
    for s in SERVERS {
        for raw in [r#"{"id": 2.0}"#, r#"{"id": 2e0}"#, r#"{"id": 2}"#] {
            let args: serde_json::Value = serde_json::from_str(raw).unwrap();
            control_reads(&world, s, "read_note", &args, "secret plan");
            world.write_config(&json!({
                "mcpServers": {s: server(&world, s)},
                "permissions": {
                    "allow": [format!("mcp__{s}__read_note")],
                    "deny": [format!("mcp__{s}__read_note(id: 2)")],
                },
                "policy": [],
            }));
            let out = world.run(&["call", s, "read_note", "--json", "--args", raw]);
            let report = stdout_json(&out);
            assert_denied(out.status.code(), &report, "deny rule");
        }
        let (code, report) = call(&world, s, "read_note", &json!({"id": 3.0}));
        assert_eq!(code, Some(0), "note 3 is not note 2: {report}");
    }
    assert!(world.leftover_processes().is_empty());
}

/// `/proc`'s magic links: `/proc/self/root/X` is `X` to the kernel (and
/// `/proc/self/root/../X` too, where a lexical `..` removed `root`), so
/// both servers open the secret behind a deny on its folder. Each is
/// denied, and the shipped policy denies `/etc/shadow` reached that way.
#[test]
fn proc_magic_links_are_read_where_they_lead() {
    if !npm_ready() {
        panic!("run scripts/test-deps.sh first (tests/npm)");
    }
    let world = World::new();
    populate(&world);
    let secret = world.path("outside/secret").display().to_string();
    let attacks = [
        ("py", format!("/proc/self/root{secret}")),
        ("node", format!("/proc/self/root{secret}")),
        ("py", format!("/proc/self/root/..{secret}")),
        ("py", format!("/proc/thread-self/root{secret}")),
        ("py", format!("file:///proc/self/root/..{secret}")),
    ];
    for (s, path) in &attacks {
        let (tool, key) = if path.starts_with("file:") {
            ("read_uri", "uri")
        } else {
            ("read_file", "path")
        };
        let args = json!({ key: path });
        control_reads(&world, s, tool, &args, OUTSIDE);
        world.write_config(&json!({
            "mcpServers": {*s: server(&world, s)},
            "permissions": {
                "allow": [format!("mcp__{s}__{tool}")],
                "deny": [format!("mcp__{s}__{tool}(/{key}: {}/outside/**)", root(&world))],
            },
            "policy": [],
        }));
        let (code, report) = call(&world, s, tool, &args);
        assert_denied(code, &report, "deny rule");
        assert!(!report.to_string().contains(OUTSIDE), "{report}");
    }
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {"allow": ["mcp__py__read_file"]},
    }));
    let (code, report) = call(
        &world,
        "py",
        "read_file",
        &json!({"path": "/proc/self/root/../etc/shadow"}),
    );
    assert_denied(code, &report, "secret file");
}

/// `~NAME` is NAME's home to Python's `expanduser` (the password
/// database): `~bin/ldd` opens `/bin/ldd` behind a deny on `/bin/**`.
#[test]
fn another_users_home_is_read_as_theirs() {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    if !passwd
        .lines()
        .any(|l| l.starts_with("bin:") && l.contains(":/bin:"))
        || !std::path::Path::new("/bin/ldd").exists()
    {
        println!("SKIPPED: this host has no user `bin` with home /bin, or no /bin/ldd");
        return;
    }
    let world = World::new();
    let args = json!({"path": "~bin/ldd"});
    control_reads(&world, "py", "read_file", &args, "GNU C Library");
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {
            "allow": ["mcp__py__read_file"],
            "deny": ["mcp__py__read_file(path: /bin/**)"],
        },
        "policy": [],
    }));
    let (code, report) = call(&world, "py", "read_file", &args);
    assert_denied(code, &report, "deny rule");
}

/// Numbers as JavaScript reads them: Node reads the id 9007199254740993 as
/// the double 9007199254740992 and returns that note, behind a deny on it.
#[test]
fn numbers_are_read_as_javascript_reads_them() {
    if !npm_ready() {
        panic!("run scripts/test-deps.sh first (tests/npm)");
    }
    let world = World::new();
    let args: serde_json::Value =
        serde_json::from_str(r#"{"id": 9007199254740993}"#).expect("json");
    control_reads(&world, "node", "read_note", &args, "vault code");
    world.write_config(&json!({
        "mcpServers": {"node": server(&world, "node")},
        "permissions": {
            "allow": ["mcp__node__read_note"],
            "deny": ["mcp__node__read_note(id: 9007199254740992)"],
        },
        "policy": [],
    }));
    let (code, report) = call(&world, "node", "read_note", &args);
    assert_denied(code, &report, "deny rule");
    assert!(!report.to_string().contains("vault code"), "{report}");
}

/// A pointer rule (`/paths/0`) on an argument sent as JSON text: the
/// Python SDK parses `"[\"…\"]"` into the list the server reads
/// (`paths: str | list[str]`), and the pointer found no element in a
/// string. The text stands for what the pointer reaches: denied.
#[test]
fn a_pointer_reaches_into_json_text() {
    let world = World::new();
    populate(&world);
    let key = format!("{}/secrets/key", ws(&world));
    let args = json!({"paths": json!([key]).to_string()});
    control_reads(&world, "py", "read_paths", &args, SECRET);
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {
            "allow": ["mcp__py__read_paths"],
            "deny": [format!("mcp__py__read_paths(/paths/0: {}/secrets/**)", ws(&world))],
        },
        "policy": [],
    }));
    let (code, report) = call(&world, "py", "read_paths", &args);
    assert_denied(code, &report, "deny rule");
    assert!(!report.to_string().contains(SECRET), "{report}");
}
