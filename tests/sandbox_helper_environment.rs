//! The server's environment is the server's, not the helper's: the helper
//! runs outside every namespace with warden's rights, and a dynamic loader
//! variable in a server's `env` (`LD_PRELOAD`, `LD_LIBRARY_PATH` into a
//! folder a server can write, `LD_AUDIT`, `LD_DEBUG_OUTPUT`, …) acted in
//! the helper before the sandbox existed. Here `LD_DEBUG_OUTPUT` names a
//! file outside every grant: without the sandbox the loader writes it (the
//! baseline), and before this was fixed the helper wrote it too, as
//! warden's user, outside the sandbox. Now only the server sees the
//! variable, under its own name, and its loader cannot reach the path.

mod sandbox_support;

use std::path::Path;

use sandbox_support::*;
use warden::config::{SandboxSpec, Secret, TransportConfig, Trust};

const SCRIPT: &str = "echo \"server sees: $LD_DEBUG_OUTPUT\"";

/// Loader debug files written into `dir`.
fn written(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ld-debug"))
        .collect()
}

#[test]
fn loader_variables_of_a_server_never_act_outside_the_sandbox() {
    let fx = Fixture::new();
    let out = fx.secret_dir.path().join("ld-debug");
    let vars = [
        ("LD_DEBUG", "files".to_string()),
        ("LD_DEBUG_OUTPUT", out.display().to_string()),
    ];

    let baseline = std::process::Command::new("/bin/sh")
        .args(["-c", SCRIPT])
        .envs(vars.iter().map(|(k, v)| (*k, v)))
        .output()
        .expect("sh");
    assert!(baseline.status.success());
    assert!(
        !written(fx.secret_dir.path()).is_empty(),
        "the baseline loader wrote no debug file"
    );
    for name in written(fx.secret_dir.path()) {
        std::fs::remove_file(fx.secret_dir.path().join(name)).expect("rm");
    }

    let mut cfg = server_config(
        Path::new("/bin/sh"),
        &["-c", SCRIPT],
        SandboxSpec::default(),
        Trust::Untrusted,
    );
    let TransportConfig::Stdio(stdio) = &mut cfg.transport else {
        panic!("a stdio server");
    };
    for (k, v) in &vars {
        stdio.env.insert(k.to_string(), Secret::new(v.clone()));
    }
    let ran = run_prepared(prepare(&cfg, &fx.ctx()).expect("prepare"));
    let said = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(
        written(fx.secret_dir.path()),
        Vec::<String>::new(),
        "a loader outside the sandbox wrote a file outside every grant: {said}"
    );
    // The server's own loader, unable to open the file, writes its debug
    // lines to the server's output instead; the script's line is last.
    assert_eq!(
        said.lines().last(),
        Some(format!("server sees: {}", out.display()).as_str()),
        "the server gets its environment as configured: {said}"
    );
    assert_eq!(ran.status.code(), Some(0), "{said}");
}
