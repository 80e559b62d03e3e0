//! A server with a write grant over the workspace cannot rewrite the
//! repository's git control files, which run code on the host: a
//! `core.fsmonitor` in `.git/config` runs at the person's next `git
//! status` (a shell prompt runs it on every line), a hook at the next
//! commit, a `.git` moved aside and replaced or a submodule's `.git` file
//! pointed elsewhere hands git a configuration of the server's. The same
//! script run without the sandbox does all of it, and the person's next
//! `git status` runs the planted command. A write grant of the git folder
//! itself (a server that commits) is the operator's choice and works.

mod sandbox_support;

use std::path::{Path, PathBuf};

use sandbox_support::*;
use warden::config::{SandboxSpec, Trust};

/// A repository in the workspace with a submodule at `lib`, made with the
/// real git.
fn repository(fx: &Fixture) -> Option<PathBuf> {
    let ws = fx.workspace.path().to_path_buf();
    let git = |dir: &Path, args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .envs(git_env(fx))
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !git(&ws, &["init", "-q", "."]) {
        return None;
    }
    // What `git submodule add` leaves: the module's git folder under
    // .git/modules, a `.git` file in its work tree pointing there.
    let module = ws.join(".git/modules/lib");
    std::fs::create_dir_all(ws.join("lib")).expect("mkdir lib");
    std::fs::create_dir_all(ws.join(".git/modules")).expect("mkdir modules");
    assert!(git(
        &ws,
        &[
            "init",
            "-q",
            "--separate-git-dir",
            ".git/modules/lib",
            "lib"
        ]
    ));
    std::fs::write(
        module.join("config"),
        std::fs::read_to_string(module.join("config")).expect("module config")
            + "[core]\n\tworktree = ../../../lib\n",
    )
    .expect("module config");
    Some(ws)
}

/// git's environment for the tests: no system or user configuration.
fn git_env(fx: &Fixture) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", fx.runtime.path().display().to_string()),
        ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
        (
            "GIT_CEILING_DIRECTORIES",
            fx.workspace
                .path()
                .parent()
                .expect("parent")
                .display()
                .to_string(),
        ),
    ]
}

/// The attack, each step on its own. `canary`: the file the planted
/// commands create when git runs them on the host.
fn attack(ws: &Path, canary: &Path) -> String {
    let (w, c) = (ws.display(), canary.display());
    [
        format!("printf '[core]\\n\\tfsmonitor = \"touch {c}; false\"\\n' >> {w}/.git/config"),
        format!("printf '#!/bin/sh\\ntouch {c}\\n' > {w}/.git/hooks/pre-commit && chmod +x {w}/.git/hooks/pre-commit"),
        format!("printf '[core]\\n\\tpager = touch {c}\\n' > {w}/.git/config.worktree"),
        format!("mkdir -p {w}/evil && cp -r {w}/.git/. {w}/evil/ && printf '[core]\\n\\tfsmonitor = \"touch {c}; false\"\\n' >> {w}/evil/config"),
        format!("printf 'gitdir: ../evil\\n' > {w}/lib/.git"),
        format!("mv {w}/.git {w}/.git-old && cp -r {w}/evil {w}/.git"),
        // What it may write: the rest of the grant.
        format!("echo mine > {w}/out.txt"),
    ]
    .map(|line| format!("({line}) 2>&1; echo \"rc=$? :: {line}\""))
    .join("\n")
}

/// The person's next `git status` in the workspace and in the submodule.
fn person_runs_git(fx: &Fixture, ws: &Path) {
    for dir in [ws.to_path_buf(), ws.join("lib")] {
        let _ = std::process::Command::new("git")
            .current_dir(&dir)
            .arg("status")
            .envs(git_env(fx))
            .output();
    }
}

fn control_files(ws: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    [
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/config.worktree",
        "lib/.git",
        ".git-old",
    ]
    .iter()
    .map(|p| {
        let p = ws.join(p);
        let seen = std::fs::read(&p)
            .ok()
            .or_else(|| p.is_dir().then(|| b"a folder".to_vec()));
        (p, seen)
    })
    .collect()
}

fn sandboxed_sh(fx: &Fixture, spec: SandboxSpec, script: &str) -> String {
    let cfg = server_config(
        Path::new("/bin/sh"),
        &["-c", script],
        spec,
        Trust::Untrusted,
    );
    let out = run_prepared(prepare(&cfg, &fx.ctx()).expect("prepare"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn without_the_sandbox_the_planted_git_configuration_runs_on_the_host() {
    let fx = Fixture::new();
    let Some(ws) = repository(&fx) else {
        skipped("sandbox_protects_git_repository", "git is not installed");
        return;
    };
    let canary = fx.secret_dir.path().join("ran");
    let before = control_files(&ws);
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(attack(&ws, &canary))
        .output()
        .expect("sh");
    let said = String::from_utf8_lossy(&out.stdout);
    for ((path, was), (_, now)) in before.iter().zip(control_files(&ws)) {
        assert_ne!(
            was,
            &now,
            "baseline left {} unchanged: {said}",
            path.display()
        );
    }
    person_runs_git(&fx, &ws);
    assert!(canary.exists(), "the planted fsmonitor did not run: {said}");
}

#[test]
fn a_write_grant_never_rewrites_the_repositorys_git_control_files() {
    let fx = Fixture::new();
    let Some(ws) = repository(&fx) else {
        skipped("sandbox_protects_git_repository", "git is not installed");
        return;
    };
    let canary = fx.secret_dir.path().join("ran");
    let before = control_files(&ws);
    let spec = SandboxSpec {
        write: vec![ws.clone()],
        ..SandboxSpec::default()
    };
    let said = sandboxed_sh(&fx, spec, &attack(&ws, &canary));
    for ((path, was), (_, now)) in before.iter().zip(control_files(&ws)) {
        assert_eq!(was, &now, "{} changed: {said}", path.display());
    }
    assert!(!ws.join(".git-old").exists(), "{said}");
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).ok().as_deref(),
        Some("mine\n"),
        "the rest of the grant stays writable: {said}"
    );
    person_runs_git(&fx, &ws);
    assert!(
        !canary.exists(),
        "a planted command ran on the host: {said}"
    );
}

#[test]
fn a_write_grant_of_the_git_folder_itself_lets_a_server_commit() {
    let fx = Fixture::new();
    let Some(ws) = repository(&fx) else {
        skipped("sandbox_protects_git_repository", "git is not installed");
        return;
    };
    let spec = SandboxSpec {
        write: vec![ws.clone(), ws.join(".git")],
        ..SandboxSpec::default()
    };
    let script = format!(
        "echo ref: refs/heads/other > {w}/.git/HEAD && echo rc=0",
        w = ws.display()
    );
    let said = sandboxed_sh(&fx, spec, &script);
    assert!(said.contains("rc=0"), "{said}");
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/HEAD")).expect("HEAD"),
        "ref: refs/heads/other\n"
    );
}

#[test]
fn a_write_grant_deeper_in_the_git_folder_leaves_the_rest_read_only() {
    let fx = Fixture::new();
    let Some(ws) = repository(&fx) else {
        skipped("sandbox_protects_git_repository", "git is not installed");
        return;
    };
    let canary = fx.secret_dir.path().join("ran");
    let before = control_files(&ws);
    let spec = SandboxSpec {
        write: vec![ws.clone(), ws.join(".git/objects")],
        ..SandboxSpec::default()
    };
    let script = format!(
        "{}\necho blob > {w}/.git/objects/x && echo objects-ok",
        attack(&ws, &canary),
        w = ws.display()
    );
    let said = sandboxed_sh(&fx, spec, &script);
    for ((path, was), (_, now)) in before.iter().zip(control_files(&ws)) {
        assert_eq!(was, &now, "{} changed: {said}", path.display());
    }
    assert!(
        said.contains("objects-ok"),
        "the granted subtree stays writable: {said}"
    );
    person_runs_git(&fx, &ws);
    assert!(
        !canary.exists(),
        "a planted command ran on the host: {said}"
    );
}
