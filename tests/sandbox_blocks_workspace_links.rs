//! A grant named inside the workspace stays inside it. The workspace's
//! content is the repository's to choose, so a symbolic link it holds (or
//! one swapped in while warden runs) must never turn `read` of
//! `${WORKSPACE}/data` into a grant of a folder outside. Each attack is
//! first shown to work without the sandbox.

mod sandbox_support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sandbox_support::*;
use warden::config::{SandboxSpec, Trust};
use warden_sandbox::SandboxError;

/// Runs `/bin/cat FILE` under the sandbox `spec`; `Err` when the launch was
/// refused before anything ran. `Ok((status, stdout))` otherwise.
fn sandboxed_cat(
    fx: &Fixture,
    spec: SandboxSpec,
    file: &Path,
) -> Result<(Option<i32>, String), SandboxError> {
    let path = file.display().to_string();
    let cfg = server_config(Path::new("/bin/cat"), &[&path], spec, Trust::Untrusted);
    let out = run_prepared(prepare(&cfg, &fx.ctx())?);
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

fn unsandboxed_cat(file: &Path) -> String {
    let out = std::process::Command::new("/bin/cat")
        .arg(file)
        .output()
        .expect("cat");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refusal(result: Result<(Option<i32>, String), SandboxError>) -> String {
    match result {
        Err(SandboxError::Setup { detail, .. }) => detail,
        other => panic!("expected the launch to be refused, got {other:?}"),
    }
}

#[test]
fn a_grant_named_in_the_workspace_never_leads_outside_it() {
    let fx = Fixture::new();
    let ws = fx.workspace.path();
    let secret_dir = fx.secret_dir.path();
    // An absolute link, a relative one climbing out with `..`, and a link
    // in the middle of the granted path.
    symlink(secret_dir, ws.join("data")).expect("symlink");
    let climb: PathBuf = std::iter::repeat_n("..", ws.components().count())
        .collect::<PathBuf>()
        .join(secret_dir.strip_prefix("/").expect("absolute"));
    symlink(&climb, ws.join("climb")).expect("symlink");
    std::fs::create_dir(ws.join("sub")).expect("mkdir");
    symlink(secret_dir, ws.join("sub").join("mid")).expect("symlink");
    let attempts: Vec<(&str, PathBuf, PathBuf)> = vec![
        ("read", ws.join("data"), ws.join("data/secret.txt")),
        ("write", ws.join("data"), ws.join("data/secret.txt")),
        ("read", ws.join("climb"), ws.join("climb/secret.txt")),
        (
            "read",
            ws.join("sub/mid/secret.txt"),
            ws.join("sub/mid/secret.txt"),
        ),
    ];
    for (which, grant, file) in attempts {
        // Baseline: the path really reaches the secret.
        assert!(
            unsandboxed_cat(&file).contains(&fx.token),
            "baseline must read the canary through {}",
            file.display()
        );
        let spec = match which {
            "read" => SandboxSpec {
                read: vec![grant.clone()],
                ..SandboxSpec::default()
            },
            _ => SandboxSpec {
                write: vec![grant.clone()],
                ..SandboxSpec::default()
            },
        };
        let detail = refusal(sandboxed_cat(&fx, spec, &file));
        assert!(
            detail.contains("leads outside") && detail.contains(&grant.display().to_string()),
            "{which} {}: {detail}",
            grant.display()
        );
        assert!(!detail.contains(&fx.token));
    }
}

#[test]
fn a_link_that_stays_inside_the_workspace_still_grants_its_target() {
    let fx = Fixture::new();
    let ws = fx.workspace.path();
    std::fs::create_dir(ws.join("real")).expect("mkdir");
    std::fs::write(ws.join("real/in.txt"), "inside").expect("write");
    symlink("real", ws.join("data")).expect("symlink");
    let spec = SandboxSpec {
        read: vec![ws.join("data")],
        ..SandboxSpec::default()
    };
    let (status, out) = sandboxed_cat(&fx, spec, &ws.join("data/in.txt")).expect("launch");
    assert_eq!((status, out.as_str()), (Some(0), "inside"));
    // A single file, through a link, as a read and as a write grant.
    symlink("real/in.txt", ws.join("file")).expect("symlink");
    for spec in [
        SandboxSpec {
            read: vec![ws.join("file")],
            ..SandboxSpec::default()
        },
        SandboxSpec {
            write: vec![ws.join("file")],
            ..SandboxSpec::default()
        },
    ] {
        let (status, out) = sandboxed_cat(&fx, spec, &ws.join("file")).expect("launch");
        assert_eq!((status, out.as_str()), (Some(0), "inside"));
    }
}

/// The check warden makes before the launch is repeated by the helper on
/// the very object it binds: a link flipped between a folder inside and the
/// secret folder outside, as fast as the kernel allows, never lets one
/// launch through with the secret.
#[test]
fn a_link_swapped_after_the_check_is_caught_by_the_helper() {
    let fx = Fixture::new();
    let ws = fx.workspace.path().to_path_buf();
    std::fs::create_dir(ws.join("real")).expect("mkdir");
    std::fs::write(ws.join("real/secret.txt"), "decoy").expect("write");
    let link = ws.join("data");
    symlink(ws.join("real"), &link).expect("symlink");
    assert!(
        unsandboxed_cat(&fx.secret_dir.path().join("secret.txt")).contains(&fx.token),
        "baseline"
    );
    let stop = Arc::new(AtomicBool::new(false));
    // Read by the launch loop, which goes on until the link has moved
    // often enough for the race to have been run.
    let moved = Arc::new(AtomicU64::new(0));
    let flipper = {
        let stop = Arc::clone(&stop);
        let moved = Arc::clone(&moved);
        let (inside, outside) = (ws.join("real"), fx.secret_dir.path().to_path_buf());
        let (link, tmp) = (link.clone(), ws.join("data.next"));
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let target = if flips.is_multiple_of(2) {
                    &outside
                } else {
                    &inside
                };
                let _ = std::fs::remove_file(&tmp);
                if symlink(target, &tmp).is_ok() && std::fs::rename(&tmp, &link).is_ok() {
                    flips += 1;
                    moved.store(flips, Ordering::Relaxed);
                }
            }
            flips
        })
    };
    let spec = SandboxSpec {
        read: vec![link.clone()],
        ..SandboxSpec::default()
    };
    let (mut launched, mut refused_early, mut refused_late, mut decoys) = (0, 0, 0, 0);
    let mut leaked = false;
    for _ in 0..200 {
        match sandboxed_cat(&fx, spec.clone(), &link.join("secret.txt")) {
            Err(_) => refused_early += 1,
            Ok((status, out)) => {
                launched += 1;
                // Asserted once the flipper has stopped, so that a failure
                // leaves no thread writing into the folders being removed.
                if out.contains(&fx.token) {
                    leaked = true;
                    break;
                }
                match status {
                    Some(0) if out == "decoy" => decoys += 1,
                    _ => refused_late += 1,
                }
            }
        }
        if launched >= 40 && refused_late >= 3 && moved.load(Ordering::Relaxed) > 100 {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().expect("flipper");
    assert!(!leaked, "the secret leaked through a swapped link");
    eprintln!(
        "{flips} flips; launches: {launched} ({decoys} read the decoy, {refused_late} refused by the helper); {refused_early} refused before launch"
    );
    assert!(flips > 100, "the link hardly moved ({flips} flips)");
    assert!(
        launched > 0 && refused_early > 0,
        "both outcomes of the first check must occur"
    );
}
