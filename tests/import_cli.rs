//! `warden import claude|codex|cursor`: real-world-shaped configurations
//! (tests/fixtures/import/) convert to the expected warden configuration,
//! which warden's own loader accepts; credentials never reach the output;
//! bad input is one error naming the file and key or line (exit 2).
//! Every run has its own HOME and config dir in a temporary folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// Literal credentials in the fixtures: none may be printed.
const SECRETS: &[&str] = &[
    "ghp_0123456789abcdefABCDEF0123456789abcd",
    "sntrys_abcdefghijklmnopqrstuvwxyz0123456789",
    "ctx7sk-0123456789abcdef0123456789abcdef",
];

struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("warden-import-test-")
            .tempdir()
            .expect("tempdir");
        for d in ["home", "config", "bin", "ws"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        // The commands the fixtures start, so the loader finds them.
        for name in ["npx", "uvx"] {
            let p = dir.path().join("bin").join(name);
            std::fs::write(&p, "#!/bin/sh\nexit 0\n").expect("write");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        World { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn warden(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(WARDEN);
        cmd.args(args)
            .env_clear()
            .env("HOME", self.path("home"))
            .env("WARDEN_CONFIG_DIR", self.path("config"))
            .env("PATH", self.path("bin"))
            .env("TMPDIR", self.dir.path())
            .current_dir(self.path("ws"));
        cmd
    }
    fn run(&self, args: &[&str]) -> Output {
        self.warden(args).output().expect("run warden")
    }
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
        .display()
        .to_string()
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name)).expect("read expected");
    serde_json::from_str(&text).expect("expected json")
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn no_secret_printed(output: &Output) {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for secret in SECRETS {
        assert!(!all.contains(secret), "a credential was printed: {all}");
    }
}

fn note_keys(value: &Value) -> Vec<String> {
    value["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .map(|n| n["key"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Imports `files` with `--json`, checks the configuration against the
/// expected fixture, then loads it with warden's own loader (`--config`).
fn converts(client: &str, files: &[&str], expected_name: &str, env: &[(&str, &str)]) -> Value {
    let world = World::new();
    let paths: Vec<String> = files.iter().map(|f| fixture(f)).collect();
    let mut args = vec!["import", client];
    args.extend(paths.iter().map(String::as_str));
    args.push("--json");
    let output = world.run(&args);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    no_secret_printed(&output);
    let value = stdout_json(&output);
    assert_eq!(value["config"], expected(expected_name), "{value:#}");
    assert_eq!(value["error"], Value::Null);

    // The result loads with warden's own loader.
    let config = world.path("imported.json");
    std::fs::write(
        &config,
        serde_json::to_string(&value["config"]).expect("json"),
    )
    .expect("write");
    let mut list = world.warden(&[
        "--config",
        &config.display().to_string(),
        "mcp",
        "list",
        "--json",
    ]);
    for (k, v) in env {
        list.env(k, v);
    }
    let listed = list.output().expect("run warden");
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let listed = stdout_json(&listed);
    let mut names: Vec<String> = listed["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|s| s["name"].as_str().unwrap_or_default().to_string())
        .collect();
    names.sort();
    let mut want: Vec<String> = value["config"]["mcpServers"]
        .as_object()
        .expect("servers")
        .keys()
        .cloned()
        .collect();
    want.sort();
    assert_eq!(names, want, "{listed:#}");
    value
}

#[test]
fn claude_code_configuration_converts_and_loads() {
    let value = converts(
        "claude",
        &["claude.json", "claude-settings.json"],
        "claude.expected.json",
        &[("SENTRY_TOKEN", "t")],
    );
    let keys = note_keys(&value);
    for key in [
        "mcpServers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN",
        "mcpServers.sentry.headers.Authorization",
        "permissions",
        "enabledMcpjsonServers",
    ] {
        assert!(keys.iter().any(|k| k == key), "no note for {key}: {keys:?}");
    }
}

#[test]
fn codex_configuration_converts_and_loads() {
    let value = converts(
        "codex",
        &["codex.toml"],
        "codex.expected.json",
        &[("FIGMA_OAUTH_TOKEN", "t")],
    );
    let keys = note_keys(&value);
    for key in [
        "mcp_servers.context7.env.CONTEXT7_API_KEY",
        "mcp_servers.context7.startup_timeout_sec",
        "mcp_servers.figma.enabled_tools",
    ] {
        assert!(keys.iter().any(|k| k == key), "no note for {key}: {keys:?}");
    }
}

#[test]
fn cursor_configuration_converts_and_loads() {
    let value = converts(
        "cursor",
        &["cursor.json"],
        "cursor.expected.json",
        &[("NOTION_TOKEN", "t")],
    );
    let keys = note_keys(&value);
    assert!(
        keys.iter().any(|k| k == "mcpServers.playwright.envFile"),
        "{keys:?}"
    );
}

#[test]
fn default_files_come_from_home() {
    let world = World::new();
    let home = world.path("home");
    std::fs::copy(fixture("claude.json"), home.join(".claude.json")).expect("copy");
    std::fs::create_dir_all(home.join(".claude")).expect("mkdir");
    std::fs::copy(
        fixture("claude-settings.json"),
        home.join(".claude/settings.json"),
    )
    .expect("copy");
    std::fs::create_dir_all(home.join(".codex")).expect("mkdir");
    std::fs::copy(fixture("codex.toml"), home.join(".codex/config.toml")).expect("copy");
    std::fs::create_dir_all(home.join(".cursor")).expect("mkdir");
    std::fs::copy(fixture("cursor.json"), home.join(".cursor/mcp.json")).expect("copy");
    for (client, want) in [
        ("claude", "claude.expected.json"),
        ("codex", "codex.expected.json"),
        ("cursor", "cursor.expected.json"),
    ] {
        let output = world.run(&["import", client]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        no_secret_printed(&output);
        assert_eq!(stdout_json(&output), expected(want), "{client}");
    }
    // A fresh ~/.claude.json without servers is not an error.
    std::fs::write(home.join(".claude.json"), "{\"numStartups\": 1}").expect("write");
    std::fs::remove_file(home.join(".claude/settings.json")).expect("rm");
    let output = world.run(&["import", "claude"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(stdout_json(&output), json!({"mcpServers": {}}));
    // CODEX_HOME wins over ~/.codex.
    let output = world
        .warden(&["import", "codex"])
        .env("CODEX_HOME", world.path("nowhere"))
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("nowhere/config.toml"));
}

#[test]
fn write_creates_the_user_file_once_with_mode_0600() {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new();
    let cursor = fixture("cursor.json");
    let output = world.run(&["import", "cursor", &cursor, "--write"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(output.stdout.is_empty());
    let written = world.path("config/config.json");
    let mode = std::fs::metadata(&written)
        .expect("written")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // The user scope loads it (no --config).
    let listed = world
        .warden(&["mcp", "list", "--json"])
        .env("NOTION_TOKEN", "t")
        .output()
        .expect("run");
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let listed = stdout_json(&listed);
    let servers = listed["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 3, "{listed:#}");

    // Never overwritten without --force.
    std::fs::write(&written, "{\"mcpServers\": {}}").expect("write");
    let again = world.run(&["import", "cursor", &cursor, "--write"]);
    assert_eq!(again.status.code(), Some(2), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert_eq!(
        std::fs::read_to_string(&written).expect("read"),
        "{\"mcpServers\": {}}"
    );
    let forced = world.run(&["import", "cursor", &cursor, "--write", "--force"]);
    assert_eq!(forced.status.code(), Some(0), "{forced:?}");
    let text = std::fs::read_to_string(&written).expect("read");
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("json"),
        expected("cursor.expected.json")
    );
    let leftovers: Vec<_> = std::fs::read_dir(world.path("config"))
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}

/// Each bad input: exit 2, one message naming the file and the key or
/// line, no panic, nothing on stdout (or one JSON error object).
#[test]
fn bad_input_names_file_and_key_or_line() {
    let world = World::new();
    let cases: &[(&str, &str, &str, &[&str])] = &[
        (
            "claude",
            "bad.json",
            "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"npx\",}\n  }\n}\n",
            &["line 3"],
        ),
        (
            "claude",
            "bad.json",
            "{\"mcpServers\": {\"x\": {\"command\": \"npx\", \"args\": \"-y\"}}}",
            &["mcpServers.x.args", "list of strings"],
        ),
        (
            "claude",
            "bad.json",
            "{\"mcpServers\": {\"x\": {\"type\": \"websocket\", \"url\": \"ws://h\"}}}",
            &["mcpServers.x.type", "websocket"],
        ),
        ("claude", "bad.json", "[1, 2]", &["(top level)", "object"]),
        (
            "claude",
            "bad.json",
            "{\"theme\": \"dark\"}",
            &["not a Claude Code configuration"],
        ),
        (
            "cursor",
            "bad.json",
            "{\"mcpServers\": {\"x\": {\"env\": {}}}}",
            &["mcpServers.x", "command"],
        ),
        (
            "codex",
            "bad.toml",
            "[mcp_servers.x]\ncommand = \"npx\"\nargs = [\"a\",\n",
            &["line"],
        ),
        (
            "codex",
            "bad.toml",
            "[mcp_servers.x]\ncommand = 5\n",
            &["mcp_servers.x.command", "string"],
        ),
        (
            "codex",
            "bad.toml",
            "model = \"o3\"\n",
            &["mcp_servers", "missing"],
        ),
        (
            "codex",
            "missing.toml",
            "",
            &["missing.toml", "cannot read"],
        ),
    ];
    for (client, name, text, wants) in cases {
        let file = world.path(name);
        let _ = std::fs::remove_file(&file);
        if *name != "missing.toml" {
            std::fs::write(&file, text).expect("write");
        }
        let file = file.display().to_string();
        let output = world.run(&["import", client, &file]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{client} {text}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(output.stdout.is_empty());
        assert!(stderr.contains(&file), "no file name in {stderr}");
        for want in *wants {
            assert!(
                stderr.contains(want),
                "{client} {text}: no `{want}` in {stderr}"
            );
        }
        let output = world.run(&["import", client, &file, "--json"]);
        assert_eq!(output.status.code(), Some(2));
        let value = stdout_json(&output);
        assert_eq!(value["outcome"], json!("config_error"), "{value:#}");
    }
}

/// Settings that change meaning or have no equivalent are notes, and the
/// result still loads: a relative cwd made absolute, a millisecond
/// timeout, a token in a URL, a name warden refuses, two servers of one
/// name, rules in neither syntax.
#[test]
fn settings_without_equivalent_become_notes() {
    let world = World::new();
    std::fs::create_dir_all(world.path("proj/tools")).expect("mkdir");
    let file = world.path("proj/.mcp.json");
    std::fs::write(
        &file,
        json!({
            "mcpServers": {
                "my.server": {"command": "npx", "args": ["x"], "cwd": "tools", "timeout": 30000,
                               "trust": "trusted"},
                "web": {"type": "http", "url": "https://h.example/mcp?api_key=abcdef123456&v=2",
                        "headersHelper": "/bin/get-token"}
            },
            "projects": {
                "/a": {"mcpServers": {"web": {"type": "http", "url": "https://other.example/mcp"}}}
            },
            "permissions": {"allow": ["mcp__web__get(url: [)"], "defaultMode": "acceptEdits"}
        })
        .to_string(),
    )
    .expect("write");
    let output = world.run(&["import", "claude", &file.display().to_string(), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("abcdef123456")
            && !String::from_utf8_lossy(&output.stdout).contains("abcdef123456")
    );
    let value = stdout_json(&output);
    let config = &value["config"];
    let server = &config["mcpServers"]["my-server"];
    assert_eq!(
        server["cwd"],
        json!(world.path("proj/tools").display().to_string())
    );
    assert_eq!(server["timeout"], json!(30));
    assert_eq!(server["trust"], json!("untrusted"));
    assert_eq!(
        config["mcpServers"]["web"]["url"],
        json!("https://h.example/mcp?api_key=${WEB_API_KEY}&v=2")
    );
    assert_eq!(config.get("permissions"), None, "{config:#}");
    let keys = note_keys(&value);
    for key in [
        "mcpServers.my.server",
        "mcpServers.my.server.cwd",
        "mcpServers.my.server.timeout",
        "mcpServers.my.server.trust",
        "mcpServers.web.url",
        "mcpServers.web.headersHelper",
        "projects./a.mcpServers.web",
        "permissions.allow[0]",
        "permissions.defaultMode",
    ] {
        assert!(keys.iter().any(|k| k == key), "no note for {key}: {keys:?}");
    }
    let out = world.path("out.json");
    std::fs::write(&out, config.to_string()).expect("write");
    let listed = world
        .warden(&[
            "--config",
            &out.display().to_string(),
            "mcp",
            "list",
            "--json",
        ])
        .env("WEB_API_KEY", "k")
        .output()
        .expect("run");
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
}

/// A client already set up as README says (warden's gateway registered as
/// one server) imports its other servers; the gateway entry itself is left
/// out with a note, never put behind warden again.
#[test]
fn warden_gateway_entry_is_not_imported_behind_itself() {
    let world = World::new();
    let file = world.path("mcp.json");
    std::fs::write(
        &file,
        serde_json::json!({"mcpServers": {
            "warden": {"command": "/usr/local/bin/warden",
                       "args": ["--config", "/home/me/warden.json", "gateway", "--stdio"]},
            "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}
        }})
        .to_string(),
    )
    .expect("write");
    let out = world.run(&["--json", "import", "cursor", file.to_str().expect("utf-8")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value = stdout_json(&out);
    let servers = value["config"]["mcpServers"].as_object().expect("servers");
    assert!(servers.contains_key("fetch"), "{value}");
    assert!(!servers.contains_key("warden"), "{value}");
    let note = value["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .find(|n| n["key"] == "mcpServers.warden")
        .unwrap_or_else(|| panic!("no note for the gateway entry: {value}"));
    assert!(
        note["message"]
            .as_str()
            .is_some_and(|m| m.contains("warden's own gateway")),
        "{note}"
    );
}

/// Names that collide after renaming: a hostile `db__prod` (renamed to
/// `db_prod`, since `__` separates server and tool) came first in the
/// file and took the name of the real `db_prod`, which was left out, so
/// the input's `allow` rule for `mcp__db_prod__query` applied to the
/// hostile server. The server named exactly `db_prod` keeps its name,
/// whichever comes first; the renamed one is left out with a note.
#[test]
fn a_renamed_server_never_takes_the_name_of_another_and_its_rules() {
    let world = World::new();
    for order in [["db__prod", "db_prod"], ["db_prod", "db__prod"]] {
        let file = world.path("claude.json");
        let mut servers = serde_json::Map::new();
        for name in order {
            let args = if name == "db_prod" { "good" } else { "evil" };
            servers.insert(name.into(), json!({"command": "npx", "args": [args]}));
        }
        std::fs::write(
            &file,
            json!({"mcpServers": servers,
                   "permissions": {"allow": ["mcp__db_prod__query"]}})
            .to_string(),
        )
        .expect("write");
        let output = world.run(&["import", "claude", &file.display().to_string(), "--json"]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let value = stdout_json(&output);
        let config = &value["config"];
        assert_eq!(
            config["mcpServers"].as_object().map(|m| m.len()),
            Some(1),
            "{config:#}"
        );
        assert_eq!(
            config["mcpServers"]["db_prod"]["args"],
            json!(["good"]),
            "{order:?}: {config:#}"
        );
        assert_eq!(
            config["permissions"]["allow"],
            json!(["mcp__db_prod__query"])
        );
        assert!(
            note_keys(&value)
                .iter()
                .any(|k| k.contains("db__prod") || k.contains("db_prod")),
            "{value:#}"
        );
    }
}

/// Rules follow a renamed server. Claude Code names the tools of a server
/// `my.db` `mcp__my_db__…` (and a rule may use the name as written); warden
/// imports the server as `my-db`, and the rules were kept (or left out)
/// under the old names, so the user's `deny` no longer applied to
/// anything: the import loosened. A Codex `disabled_tools` entry whose
/// name has characters warden replaces (`files.delete`, served as
/// `mcp__fs__files_delete`) was left out the same way.
#[test]
fn rules_follow_a_renamed_server_and_sanitised_tool_names() {
    let world = World::new();
    let file = world.path("claude.json");
    std::fs::write(
        &file,
        json!({"mcpServers": {"my.db": {"command": "npx", "args": ["x"]}},
               "permissions": {"deny": ["mcp__my_db__drop", "mcp__my.db__wipe", "mcp__my.db"],
                               "ask": ["mcp__my.db__*(table: users)"],
                               "allow": ["mcp__my_db__read"]}})
        .to_string(),
    )
    .expect("write");
    let output = world.run(&["import", "claude", &file.display().to_string(), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let value = stdout_json(&output);
    let permissions = &value["config"]["permissions"];
    assert_eq!(
        permissions["deny"],
        json!(["mcp__my-db__drop", "mcp__my-db__wipe", "mcp__my-db"]),
        "{value:#}"
    );
    assert_eq!(
        permissions["ask"],
        json!(["mcp__my-db__*(table: users)"]),
        "{value:#}"
    );
    assert_eq!(
        permissions["allow"],
        json!(["mcp__my-db__read"]),
        "{value:#}"
    );

    let toml = world.path("config.toml");
    std::fs::write(
        &toml,
        "[mcp_servers.fs]\ncommand = \"npx\"\ndisabled_tools = [\"files.delete\", \"rm\"]\n",
    )
    .expect("write");
    let output = world.run(&["import", "codex", &toml.display().to_string(), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let value = stdout_json(&output);
    assert_eq!(
        value["config"]["permissions"]["deny"],
        json!(["mcp__fs__files_delete", "mcp__fs__rm"]),
        "{value:#}"
    );
}
