//! Next variants of attacks closed before, each tried as the attack and
//! seen to fail:
//! - host leaks through `/proc` for a server started by root: it runs as
//!   uid 0 (the host's, through the identity map) with no capability, and
//!   the kernel's global owner-only files need no capability, only that
//!   uid. It read the physical page flags and counts of all memory
//!   (`/proc/kpageflags`, `kpagecount`), slab and vmalloc state, and in
//!   ports mode the host's TCP Fast Open key: what no other user of the
//!   host may read (the baseline below, as `nobody`, is refused).

mod sandbox_support;

use sandbox_support::*;

/// Walks the global part of `/proc` (not the processes' folders) and
/// prints `READ path` for each regular file that others may not read but
/// this process did, `LISTED path` for each folder that others may not
/// search but this process listed; then `DONE`.
const OWNER_ONLY: &str = r#"
import os, stat
def walk(d, depth):
    try:
        entries = list(os.scandir(d))
    except OSError:
        return
    for e in entries:
        if d == "/proc" and (e.name.isdigit() or e.name in ("self", "thread-self")):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            if st.st_mode & 0o005 != 0o005:
                try:
                    os.listdir(e.path)
                    print("LISTED", e.path, flush=True)
                except OSError:
                    pass
            elif depth < 8:
                walk(e.path, depth + 1)
        elif stat.S_ISREG(st.st_mode) and st.st_mode & 0o004 == 0 and st.st_mode & 0o400:
            try:
                with open(e.path, "rb") as f:
                    f.read(16)
                print("READ", e.path, flush=True)
            except OSError:
                pass
walk("/proc", 0)
print("DONE", flush=True)
"#;

fn run(mut c: std::process::Command) -> String {
    let out = c.output().expect("run");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn leaks(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|l| l.starts_with("READ ") || l.starts_with("LISTED "))
        .collect()
}

#[test]
fn root_reads_no_owner_only_kernel_file_of_proc() {
    if !is_root() {
        // The owner of these files is the host's root: another user's
        // server maps to its own uid and is refused by the kernel.
        skipped(
            "root_reads_no_owner_only_kernel_file_of_proc",
            "the leak needs a server started by root",
        );
        return;
    }
    // Baseline: the host gives these files to root alone; `nobody` reads
    // none of them (what the sandbox's root, without capabilities, should
    // get too).
    let nobody = run(unprivileged(&["/usr/bin/python3", "-c", OWNER_ONLY]));
    assert!(nobody.contains("DONE"), "baseline: {nobody}");
    assert!(leaks(&nobody).is_empty(), "baseline: {nobody}");
    assert!(
        std::fs::metadata("/proc/kpageflags").is_ok(),
        "this kernel has /proc/kpageflags"
    );

    let fx = Fixture::new();
    for profile in [
        serde_json::json!({"network": "none"}),
        // The host's network namespace: its /proc/sys/net is the host's
        // (tcp_fastopen_key, stable_secret).
        serde_json::json!({"network": {"connect_tcp": [9]}}),
    ] {
        let report = run(sandbox_exec(
            &fx,
            &profile,
            &["/usr/bin/python3", "-c", OWNER_ONLY],
        ));
        assert!(report.contains("DONE"), "{profile}: {report}");
        assert!(
            leaks(&report).is_empty(),
            "{profile}: a root-started server read the host's owner-only /proc files:\n{report}"
        );
        // Named ones, refused as for any other user.
        let direct = run(sandbox_exec(
            &fx,
            &profile,
            &[
                "/usr/bin/python3",
                "-c",
                "import sys\n\
                 for p in sys.argv[1:]:\n\
                 \x20   try:\n\
                 \x20       open(p, 'rb').read(8); print('READ', p)\n\
                 \x20   except OSError as e: print('REFUSED', p, e.errno)\n",
                "/proc/kpageflags",
                "/proc/kpagecount",
                "/proc/slabinfo",
                "/proc/sys/net/ipv4/tcp_fastopen_key",
            ],
        ));
        assert_eq!(direct.matches("REFUSED").count(), 4, "{profile}: {direct}");
        assert!(
            direct
                .lines()
                .all(|l| !l.starts_with("REFUSED") || l.ends_with(" 13")),
            "EACCES, as for any other user: {direct}"
        );
    }
}

#[test]
fn the_rest_of_proc_stays_readable_for_root() {
    // What runtimes read (CPU count, memory, their own process) is world
    // readable and stays so: covering only owner-only files breaks none.
    let fx = Fixture::new();
    let report = run(sandbox_exec(
        &fx,
        &serde_json::json!({"network": "none"}),
        &[
            "/usr/bin/python3",
            "-c",
            "import os\n\
             for p in ('/proc/cpuinfo', '/proc/meminfo', '/proc/self/status', '/proc/sys/kernel/pid_max'):\n\
             \x20   assert open(p).read(), p\n\
             print('OK', os.cpu_count())\n",
        ],
    ));
    assert!(report.starts_with("OK "), "{report}");
}
