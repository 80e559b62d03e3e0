//! Helpers for tests that run the real `warden` binary against warden's
//! own example servers: a private folder (workspace, config dir, HOME), a
//! config writer, and process-table checks.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// A private world for one test: nothing touches the real HOME.
pub struct World {
    pub dir: tempfile::TempDir,
    pub workspace: PathBuf,
    pub config_dir: PathBuf,
    pub home: PathBuf,
    /// A token unique to this test, put in server arguments so that its
    /// processes can be found in /proc.
    pub marker: String,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("warden-cli-test-")
            .tempdir()
            .expect("tempdir");
        let workspace = dir.path().join("ws");
        let config_dir = dir.path().join("config");
        let home = dir.path().join("home");
        for d in [&workspace, &config_dir, &home] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        World {
            workspace,
            config_dir,
            home,
            marker: format!("m{}", uuid::Uuid::new_v4().simple()),
            dir,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `config` as the explicit `--config` file and returns its path.
    pub fn write_config(&self, config: &Value) -> PathBuf {
        let path = self.path("warden.json");
        std::fs::write(&path, serde_json::to_string_pretty(config).expect("json"))
            .expect("write config");
        path
    }

    /// `warden --config FILE ARGS…` in this world.
    pub fn warden(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(WARDEN);
        cmd.arg("--config")
            .arg(self.path("warden.json"))
            .arg("--workspace")
            .arg(&self.workspace)
            .args(args)
            .env("WARDEN_CONFIG_DIR", &self.config_dir)
            .env("HOME", &self.home)
            // warden's runtime folder lands in this world, so even a
            // `kill -9` of warden leaves nothing in the real /tmp.
            .env("TMPDIR", self.dir.path())
            .env_remove("RUST_LOG")
            .env_remove("WARDEN_AUDIT_KEY")
            .current_dir(&self.workspace);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.warden(args).output().expect("run warden")
    }

    /// The fixture example server, tagged with this world's marker.
    pub fn fixture(&self) -> Value {
        serde_json::json!({
            "command": WARDEN,
            "args": ["example-server", "fixture", "--name", self.marker],
        })
    }

    /// The fixture server counting the calls it receives: each call
    /// appends the tool's name to the returned file (in its write grant).
    pub fn counting_fixture(&self) -> (Value, PathBuf) {
        let dir = self.path("server-calls");
        std::fs::create_dir_all(&dir).expect("mkdir");
        let counter = dir.join("calls.txt");
        let mut fixture = self.fixture();
        if let Some(args) = fixture["args"].as_array_mut() {
            args.push("--count-calls".into());
            args.push(counter.display().to_string().into());
        }
        fixture["sandbox"] = serde_json::json!({"write": [dir]});
        (fixture, counter)
    }

    pub fn notes(&self, name: &str) -> Value {
        serde_json::json!({
            "command": WARDEN,
            "args": ["example-server", "notes", "--name", format!("{name}-{}", self.marker)],
        })
    }

    /// Processes whose command line carries this world's marker.
    pub fn leftover_processes(&self) -> Vec<u32> {
        processes_with(&self.marker)
    }
}

/// Appends `inner` (program and arguments) to `outer`, which runs it
/// (`sh -c '…; exec "$0" "$@"'`, `prlimit … --`, `unshare …`), with
/// `inner`'s environment and working folder.
pub fn exec_within(mut outer: Command, inner: &Command) -> Command {
    outer.arg(inner.get_program()).args(inner.get_args());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => outer.env(key, value),
            None => outer.env_remove(key),
        };
    }
    if let Some(dir) = inner.get_current_dir() {
        outer.current_dir(dir);
    }
    outer
}

pub fn processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            let text = String::from_utf8_lossy(&cmdline);
            if text.contains(needle) && !is_zombie(pid) {
                found.push(pid);
            }
        }
    }
    found
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Waits up to `secs` for `check` to hold.
pub fn eventually(secs: f64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    check()
}

pub fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn audit_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Every call in an audit log, one object each: its `tool_call` record,
/// with `outcome` taken from its `tool_result` when it has one (the call
/// was sent), `pending_outcome` the `tool_call`'s own, and `result` the
/// `tool_result` record (or null).
pub fn audit_calls(path: &Path) -> Vec<Value> {
    let records = audit_lines(path);
    records
        .iter()
        .filter(|r| r["event"] == "tool_call")
        .map(|call| {
            let mut merged = call.clone();
            merged["pending_outcome"] = call["outcome"].clone();
            let result = records
                .iter()
                .find(|r| r["event"] == "tool_result" && r["call_id"] == call["call_id"]);
            merged["result"] = result.cloned().unwrap_or(Value::Null);
            if let Some(result) = result {
                merged["outcome"] = result["outcome"].clone();
            }
            merged
        })
        .collect()
}

/// The tool names a counting fixture received, one per call.
pub fn calls_received(counter: &Path) -> Vec<String> {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}
