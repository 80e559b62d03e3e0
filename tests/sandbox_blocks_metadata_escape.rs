//! Metadata calls Landlock does not cover (chmod, chown, utimes, setxattr)
//! cannot reach files outside the grants (they do not exist in the
//! server's view) nor change files in a read grant (read-only bind); set-id
//! bits and file capabilities cannot be planted even in a write grant
//! (seccomp on the mode argument; no capabilities). Each attack also runs
//! without the sandbox, against the same scratch files, and succeeds.

mod sandbox_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use sandbox_support::*;
use serde_json::json;
use warden::config::SandboxSpec;

/// A scratch file (a harmless shell script) with mode 0600.
fn scratch(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, "#!/bin/sh\necho scratch\n").expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    p
}

/// What a file looks like on the host: mode, owner, mtime, its `user.x`
/// and `security.capability` xattrs.
fn state(p: &Path) -> (u32, u32, i64, bool, bool) {
    let m = std::fs::metadata(p).expect("metadata");
    let has = |name: &str| {
        std::process::Command::new("/usr/bin/python3")
            .args(["-c", "import os,sys; os.getxattr(sys.argv[1], sys.argv[2])"])
            .args([p.as_os_str(), name.as_ref()])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    (
        m.mode() & 0o7777,
        m.uid(),
        m.mtime(),
        has("user.x"),
        has("security.capability"),
    )
}

/// chmod 0777 / 4777, chown, utimes and setxattr on a file outside every
/// grant, and on one inside a read grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_of_files_outside_write_grants_cannot_change() {
    let fx = Fixture::new();
    let readable = fx.workspace.path().join("data");
    std::fs::create_dir(&readable).expect("mkdir");
    let spec = SandboxSpec {
        read: vec![readable.clone()],
        ..SandboxSpec::default()
    };
    // The owner a chown tries: another uid for root, our own otherwise
    // (a no-op change that still succeeds without the sandbox).
    let me = nix::unistd::geteuid().as_raw();
    let other = if me == 0 { 65534 } else { me };
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        for (where_, dir) in [
            ("outside", fx.secret_dir.path()),
            ("read grant", readable.as_path()),
        ] {
            let f = scratch(dir, &format!("victim-{mode:?}-{}", where_.len()));
            assert!(filetime_back(&f), "set the mtime back");
            let before = state(&f);
            let s = launch_hostile(&fx, mode, spec.clone()).await;
            let path = f.display().to_string();
            let attacks = [
                ("chmod", json!({"path": path, "mode": "777"})),
                ("chmod", json!({"path": path, "mode": "4777"})),
                ("chown", json!({"path": path, "uid": other, "gid": other})),
                ("utimes", json!({"path": path})),
                ("setxattr", json!({"path": path, "name": "user.x"})),
            ];
            let mut results = Vec::new();
            for (tool, args) in attacks {
                let (raw, j) = call(&s, tool, args).await;
                results.push((tool, raw, j));
            }
            s.stop().await;
            let after = state(&f);
            match mode {
                Mode::Unsandboxed => {
                    for (tool, raw, j) in &results {
                        assert_eq!(j["ok"], json!(true), "baseline {tool} ({where_}): {raw}");
                    }
                    assert_ne!(before, after, "baseline changed nothing ({where_})");
                }
                Mode::Sandboxed => {
                    for (tool, raw, j) in &results {
                        assert_eq!(j["ok"], json!(false), "{tool} ({where_}) allowed: {raw}");
                        let errno = j["errno"].as_i64().unwrap_or_default() as i32;
                        // Not in the view (ENOENT), a read-only bind
                        // (EROFS), or a set-id mode (EPERM, seccomp).
                        let expected: &[nix::errno::Errno] = if where_ == "outside" {
                            &[nix::errno::Errno::ENOENT, nix::errno::Errno::EPERM]
                        } else {
                            &[nix::errno::Errno::EROFS, nix::errno::Errno::EPERM]
                        };
                        assert!(
                            expected.iter().any(|e| *e as i32 == errno),
                            "{tool} ({where_}): errno {errno}: {raw}"
                        );
                    }
                    assert_eq!(before, after, "the file changed on the host ({where_})");
                }
            }
            let _ = std::fs::remove_file(&f);
        }
    }
}

/// Sets a file's mtime an hour back, so that a `utimes` to now shows.
fn filetime_back(p: &Path) -> bool {
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(p)
        .and_then(|f| f.set_modified(hour_ago))
        .is_ok()
}

/// A server may write its write grant, but never leave a set-user-id or
/// set-group-id file there (four ways to set the bits), nor a file
/// capability (a root-mapped server would otherwise hold CAP_SETFCAP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setid_files_and_file_capabilities_cannot_be_planted_in_a_write_grant() {
    let fx = Fixture::new();
    let ws = fx.workspace.path().join("out");
    std::fs::create_dir(&ws).expect("mkdir");
    let spec = SandboxSpec {
        write: vec![ws.clone()],
        ..SandboxSpec::default()
    };
    let root = nix::unistd::geteuid().is_root();
    for mode in [Mode::Unsandboxed, Mode::Sandboxed] {
        let s = launch_hostile(&fx, mode, spec.clone()).await;
        let mut planted = Vec::new();
        for how in ["chmod", "open", "fchmodat", "mknod"] {
            let f = ws.join(format!("setid-{how}-{mode:?}"));
            let (raw, j) = call(
                &s,
                "plant_setid",
                json!({"path": f.display().to_string(), "how": how}),
            )
            .await;
            let host_mode = std::fs::metadata(&f).map(|m| m.mode()).unwrap_or(0);
            planted.push((how, raw, j, host_mode));
        }
        let cap_file = scratch(&ws, &format!("cap-{mode:?}"));
        let (cap_raw, cap_j) = call(
            &s,
            "setxattr",
            json!({"path": cap_file.display().to_string(), "name": "security.capability"}),
        )
        .await;
        // The write grant itself works.
        let (w, wj) = call(
            &s,
            "write_file",
            json!({"path": ws.join(format!("plain-{mode:?}")), "content": "x"}),
        )
        .await;
        s.stop().await;
        let has_cap = state(&cap_file).4;
        assert_eq!(wj["ok"], json!(true), "{w}");
        match mode {
            Mode::Unsandboxed => {
                for (how, raw, j, host_mode) in &planted {
                    // mknod of a regular file needs no privilege either.
                    assert_eq!(j["ok"], json!(true), "baseline {how}: {raw}");
                    assert_ne!(host_mode & 0o6000, 0, "baseline {how}: {raw}");
                }
                if root {
                    assert!(
                        has_cap,
                        "baseline (root) must set a file capability: {cap_raw}"
                    );
                } else {
                    skipped(
                        "setid_files_and_file_capabilities_cannot_be_planted_in_a_write_grant \
                         (security.capability baseline)",
                        "writing a file capability needs CAP_SETFCAP: the baseline only fires \
                         as root (the sandboxed refusal is still checked)",
                    );
                }
            }
            Mode::Sandboxed => {
                for (how, raw, j, host_mode) in &planted {
                    assert_eq!(j["ok"], json!(false), "{how} planted: {raw}");
                    assert_eq!(
                        j["errno"],
                        json!(nix::errno::Errno::EPERM as i32),
                        "{how}: {raw}"
                    );
                    assert_eq!(host_mode & 0o6000, 0, "{how}: a set-id file on the host");
                }
                assert_eq!(cap_j["ok"], json!(false), "{cap_raw}");
                assert!(!has_cap, "a file capability on the host: {cap_raw}");
            }
        }
        for e in std::fs::read_dir(&ws).expect("ls").flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
