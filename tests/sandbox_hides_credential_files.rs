//! warden's credential files (the gateway's `--token-file`, listed in
//! `LaunchContext::hide`) stay out of a server's reach even inside its
//! grants: a read grant cannot read them, a write grant can neither read,
//! change, move nor link them. Each attack is first shown to work without
//! the hiding.

mod sandbox_support;

use std::path::{Path, PathBuf};

use sandbox_support::*;
use warden::config::{SandboxSpec, Trust};

/// Runs `sh -c SCRIPT` under the sandbox `spec`, with `hide` hidden:
/// (exit status, stdout + stderr).
fn sandboxed_sh(fx: &Fixture, spec: SandboxSpec, hide: &[PathBuf], script: &str) -> String {
    let cfg = server_config(
        Path::new("/bin/sh"),
        &["-c", script],
        spec,
        Trust::Untrusted,
    );
    // Hidden only: that it is protected too (its folder pinned) is the
    // sandbox's to add.
    let ctx = fx.ctx().with_hidden(hide.iter().cloned());
    let prepared = prepare(&cfg, &ctx).expect("prepare");
    assert!(
        prepared.summary.gaps.is_empty(),
        "{:?}",
        prepared.summary.gaps
    );
    let out = run_prepared(prepared);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const TOKEN: &str = "gateway-token-CANARY-91c4";

fn with_token(fx: &Fixture) -> PathBuf {
    let file = fx.workspace.path().join("secrets/token");
    std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
    std::fs::write(&file, TOKEN).expect("token");
    std::fs::write(fx.workspace.path().join("secrets/beside.txt"), "beside").expect("beside");
    file
}

#[test]
fn a_read_grant_cannot_read_a_hidden_file() {
    let fx = Fixture::new();
    let file = with_token(&fx);
    let script = format!(
        "cat {0}; cat {1}/beside.txt; ls {1}",
        file.display(),
        fx.workspace.path().join("secrets").display()
    );
    let spec = || SandboxSpec {
        read: vec![fx.workspace.path().to_path_buf()],
        ..SandboxSpec::default()
    };
    // Without hiding it, the grant reads it.
    let said = sandboxed_sh(&fx, spec(), &[], &script);
    assert!(said.contains(TOKEN), "{said}");
    let said = sandboxed_sh(&fx, spec(), std::slice::from_ref(&file), &script);
    assert!(!said.contains(TOKEN), "{said}");
    assert!(said.contains("Permission denied"), "{said}");
    // The rest of the grant is as before.
    assert!(said.contains("beside"), "{said}");
}

#[test]
fn a_write_grant_can_neither_read_change_move_nor_link_a_hidden_file() {
    let fx = Fixture::new();
    let file = with_token(&fx);
    let dir = fx.workspace.path().join("secrets");
    let d = dir.display();
    let script = [
        format!("cat {d}/token"),
        format!("echo planted > {d}/token"),
        format!("mv {d}/token {d}/moved"),
        format!("rm -f {d}/token"),
        format!("ln {d}/token {d}/hard && cat {d}/hard"),
        format!("ln -sf /dev/null {d}/token"),
        format!("mv {d} {d}2 && mkdir {d} && echo planted > {d}/token"),
        format!("echo mine > {d}/out.txt && echo wrote-out"),
    ]
    .map(|line| format!("({line}) 2>&1; echo \"rc=$? :: {line}\""))
    .join("\n");
    let spec = || SandboxSpec {
        write: vec![fx.workspace.path().to_path_buf()],
        ..SandboxSpec::default()
    };
    let said = sandboxed_sh(&fx, spec(), std::slice::from_ref(&file), &script);
    assert!(!said.contains(TOKEN), "{said}");
    assert!(!said.contains("rc=0 :: cat"), "{said}");
    for step in ["echo planted", "mv ", "rm -f", "ln ", "ln -sf", "mv {d} "] {
        let step = step.replace("{d}", &d.to_string());
        assert!(
            !said.contains(&format!("rc=0 :: {step}")),
            "{step} succeeded: {said}"
        );
    }
    assert!(said.contains("wrote-out"), "{said}");
    assert_eq!(std::fs::read_to_string(&file).expect("token"), TOKEN);
    assert!(!dir.join("moved").exists() && !dir.join("hard").exists());
    assert!(!fx.workspace.path().join("secrets2").exists());
    // Without hiding it, the same script reads and replaces it.
    let said = sandboxed_sh(&fx, spec(), &[], &script);
    assert!(said.contains(TOKEN), "{said}");
}

#[test]
fn a_grant_that_is_a_hidden_file_is_refused() {
    let fx = Fixture::new();
    let file = with_token(&fx);
    let cfg = server_config(
        Path::new("/bin/true"),
        &[],
        SandboxSpec {
            read: vec![file.clone()],
            ..SandboxSpec::default()
        },
        Trust::Untrusted,
    );
    let e = prepare(&cfg, &fx.ctx().with_hidden([file]))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("credentials"), "{e}");
}
