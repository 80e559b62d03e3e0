//! README "Use warden from the clients you have": each client snippet
//! (marked `<!-- readme-test: CLIENT -->`), read back with `warden import
//! CLIENT`, is warden's gateway, and its arguments load the operator
//! configuration they name; and
//! the official MCP Python SDK, as a client of `warden gateway --stdio`
//! without `--ask-client`, lists the tools and gets an `ask` as a denial.
//! Temporary HOME and config dir only.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn readme_block(client: &str) -> String {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let marker = format!("<!-- readme-test: {client} -->");
    let after = readme
        .split(&marker)
        .nth(1)
        .unwrap_or_else(|| panic!("README has no {marker}"));
    let fence = after.find("```").expect("a code block after the marker");
    let body = &after[fence..];
    let start = body.find('\n').expect("fence line") + 1;
    let end = body[start..].find("```").expect("closing fence");
    body[start..start + end].to_string()
}

struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("warden-readme-test-")
            .tempdir()
            .expect("tempdir");
        for d in ["home", "config", "bin", "ws"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        // `warden` on PATH, as the snippets name it.
        std::os::unix::fs::symlink(WARDEN, dir.path().join("bin/warden")).expect("symlink");
        World { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn warden(&self, args: &[&str]) -> Output {
        Command::new(WARDEN)
            .args(args)
            .env_clear()
            .env("HOME", self.path("home"))
            .env("WARDEN_CONFIG_DIR", self.path("config"))
            .env("PATH", self.path("bin"))
            .env("TMPDIR", self.dir.path())
            .env("GITHUB_TOKEN", "t")
            .current_dir(self.path("ws"))
            .output()
            .expect("run warden")
    }
    /// The operator config the snippets' `--config` names: the notes
    /// example server, reads allowed, adding asked, deleting denied.
    fn operator_config(&self) -> String {
        let path = self.path("warden.json");
        let config = json!({
            "mcpServers": {"notes": {"command": WARDEN, "args": ["example-server", "notes"]}},
            "permissions": {
                "allow": ["mcp__notes__list_notes", "mcp__notes__read_note"],
                "ask": ["mcp__notes__add_note"],
                "deny": ["mcp__notes__delete_note"]
            },
            "audit": {"path": self.path("audit.jsonl")}
        });
        std::fs::write(&path, config.to_string()).expect("write");
        path.display().to_string()
    }
}

fn json_of(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// Each snippet is read in its client's format by `warden import`, which
/// recognises it as warden's own gateway (and so leaves it out, never
/// putting warden behind itself); the snippet's own arguments then run:
/// the options before `gateway` load the operator configuration it names.
#[test]
fn each_client_snippet_is_a_gateway_entry_that_loads() {
    for (client, ext) in [("claude", "json"), ("codex", "toml"), ("cursor", "json")] {
        let world = World::new();
        let operator = world.operator_config();
        let snippet = readme_block(client).replace("/home/me/warden.json", &operator);
        let file = world.path(&format!("{client}.{ext}"));
        std::fs::write(&file, &snippet).expect("write");
        let imported =
            json_of(&world.warden(&["import", client, &file.display().to_string(), "--json"]));
        assert!(
            imported["config"]["mcpServers"].get("warden").is_none(),
            "{client}: {imported:#}"
        );
        let recognised = imported["notes"].as_array().is_some_and(|notes| {
            notes.iter().any(|n| {
                n["key"].as_str().is_some_and(|k| k.ends_with(".warden"))
                    && n["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("warden's own gateway"))
            })
        });
        assert!(
            recognised,
            "{client}: not seen as the gateway: {imported:#}"
        );

        let entry = if ext == "toml" {
            let table: toml::Table = toml::from_str(&snippet).expect("TOML snippet");
            serde_json::to_value(&table["mcp_servers"]["warden"]).expect("as JSON")
        } else {
            let parsed: Value = serde_json::from_str(&snippet).expect("JSON snippet");
            parsed["mcpServers"]["warden"].clone()
        };
        assert_eq!(entry["command"], json!("warden"), "{client}: {entry:#}");
        let args: Vec<&str> = entry["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let gateway = args.iter().position(|a| *a == "gateway").expect("gateway");
        assert_eq!(
            &args[..gateway],
            ["--config", operator.as_str()],
            "{client}"
        );
        assert!(args[gateway..].contains(&"--stdio"), "{client}");
        let mut list: Vec<&str> = args[..gateway].to_vec();
        list.extend(["mcp", "list", "--json"]);
        let listed = json_of(&world.warden(&list));
        assert_eq!(
            listed["servers"][0]["name"],
            json!("notes"),
            "{client}: {listed:#}"
        );
    }
}

/// The venv of tests/python/setup-venv.sh holds the official SDK (`mcp`,
/// a dependency of mcp-server-time); None when Python is not there.
fn sdk_python() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/setup-venv.sh");
    let output = Command::new(&script).output().ok()?;
    if !output.status.success() {
        eprintln!(
            "setup-venv.sh failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    let venv = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim().to_string());
    let python = venv.join("bin/python");
    let has_sdk = Command::new(&python)
        .args(["-c", "from mcp import Client"])
        .status()
        .is_ok_and(|s| s.success());
    has_sdk.then_some(python)
}

#[test]
fn python_sdk_client_lists_tools_and_an_ask_is_a_denial_without_ask_client() {
    let Some(python) = sdk_python() else {
        println!("SKIPPED: no Python venv with the MCP SDK (run scripts/test-deps.sh)");
        return;
    };
    let world = World::new();
    let operator = world.operator_config();
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_tools_client.py");
    let output = Command::new(python)
        .arg(client)
        .args([
            "-e",
            &format!("WARDEN_CONFIG_DIR={}", world.path("config").display()),
        ])
        .args(["-e", &format!("TMPDIR={}", world.dir.path().display())])
        .args(["--call", "notes__read_note", "{\"id\": 2}"])
        .args([
            "--call",
            "notes__add_note",
            "{\"title\": \"t\", \"body\": \"b\"}",
        ])
        .args(["--", WARDEN, "--config", &operator, "gateway", "--stdio"])
        .env("HOME", world.path("home"))
        .current_dir(world.path("ws"))
        .output()
        .expect("run the Python client");
    assert!(output.status.success(), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    // delete_note is denied outright: not listed.
    assert_eq!(
        value["tools"],
        json!(["notes__add_note", "notes__list_notes", "notes__read_note"]),
        "{value:#}"
    );
    let calls = value["calls"].as_array().expect("calls");
    assert_eq!(calls[0]["isError"], json!(false), "{value:#}");
    assert_eq!(calls[1]["isError"], json!(true), "{value:#}");
    let denial = calls[1]["text"].as_str().unwrap_or_default();
    assert!(denial.contains("no one could be asked"), "{denial}");
    // Both calls are in the audit log, the second one denied.
    let log = std::fs::read_to_string(world.path("audit.jsonl")).expect("audit log");
    assert!(
        log.lines().any(|l| l.contains("add_note")
            && l.contains("\"denied\"")
            && l.contains("\"gateway\"")),
        "{log}"
    );
}
