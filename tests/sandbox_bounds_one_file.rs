//! `file_size_mb` bounds what one file of a write grant takes on the
//! host's disk, whatever call made it grow. RLIMIT_FSIZE is checked by
//! writes, truncate and plain `fallocate`, but not by `fallocate` with
//! FALLOC_FL_KEEP_SIZE (disk blocks reserved past the end of a file that
//! stays small) nor FALLOC_FL_INSERT_RANGE (the file grows by the range):
//! a red-team review reserved 100 MB of the host's disk in one file under
//! `file_size_mb: 1`. Each attack also runs without the sandbox, under
//! the same RLIMIT_FSIZE, and gets through there.

mod sandbox_support;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use sandbox_support::*;

const MB: u64 = 1 << 20;

/// The attack: a file reserving 64 MB past its end, a file grown by a
/// 64 MB inserted range, then the calls that stay allowed (a plain
/// allocation and a punched hole inside the limit).
const SCRIPT: &str = "cd \"$1\" || exit 9
: > keep; fallocate -n -l 64M keep; echo \"keep rc=$?\"
printf 12345678 > insert; fallocate -i -o 0 -l 64M insert; echo \"insert rc=$?\"
fallocate -l 512K plain; echo \"plain rc=$?\"
fallocate -p -o 0 -l 4096 plain; echo \"punch rc=$?\"
";

/// (bytes on disk, size) of `dir/name`.
fn usage(dir: &Path, name: &str) -> (u64, u64) {
    let m = std::fs::metadata(dir.join(name)).expect("stat");
    (m.blocks() * 512, m.size())
}

#[test]
fn one_file_never_takes_more_disk_than_file_size_mb() {
    if !Path::new("/usr/bin/fallocate").exists() {
        skipped(
            "one_file_never_takes_more_disk_than_file_size_mb",
            "util-linux fallocate is not installed",
        );
        return;
    }
    let fx = Fixture::new();
    let ws = fx.workspace.path();

    // Baseline: the same script under the same RLIMIT_FSIZE (1 MB =
    // 2048 blocks of 512 bytes), no sandbox.
    let plain_dir = ws.join("plain");
    std::fs::create_dir(&plain_dir).expect("mkdir");
    let o = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("ulimit -f 2048 && {{ {SCRIPT} }}"))
        .arg("sh")
        .arg(&plain_dir)
        .output()
        .expect("run baseline");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("keep rc=0"), "baseline: {out}");
    let (disk, _) = usage(&plain_dir, "keep");
    assert!(disk >= 64 * MB, "baseline reserved only {disk} bytes");
    let insert_ok = out.contains("insert rc=0");
    if insert_ok {
        let (_, size) = usage(&plain_dir, "insert");
        assert!(size >= 64 * MB, "baseline insert grew to {size}");
    }

    // Sandboxed.
    let grant = ws.join("grant");
    std::fs::create_dir(&grant).expect("mkdir");
    let profile = ws.join("profile.json");
    std::fs::write(
        &profile,
        serde_json::json!({"write": [grant], "limits": {"file_size_mb": 1}}).to_string(),
    )
    .expect("profile");
    let o = Command::new(WARDEN)
        .args(["sandbox", "exec", "--profile"])
        .arg(&profile)
        .args(["--", "/bin/sh", "-c", SCRIPT, "sh"])
        .arg(&grant)
        .env("HOME", ws)
        .env("TMPDIR", fx.runtime.path())
        .env_remove("WARDEN_CGROUP_PARENT")
        .current_dir(ws)
        .output()
        .expect("run warden");
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("plain rc=0"), "plain fallocate: {out} {err}");
    assert!(out.contains("punch rc=0"), "hole punching: {out} {err}");
    for name in ["keep", "insert", "plain"] {
        let (disk, size) = usage(&grant, name);
        assert!(
            disk <= MB && size <= MB,
            "{name}: {disk} bytes on disk, size {size} under file_size_mb 1: {out} {err}"
        );
    }
    assert!(!out.contains("keep rc=0"), "{out}");
    assert!(!out.contains("insert rc=0"), "{out}");
}
