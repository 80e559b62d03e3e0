//! Three holes a red-team review found in the sandbox's edges, each tried
//! as the attack and seen to fail (and, where it is harmless, seen to
//! work without the sandbox):
//! - the view's device nodes are the host's own inodes: a server started
//!   by root, their owner, could chmod, chown and re-time the host's
//!   `/dev/null` and `/dev/full` (no capability needed by an owner). Now
//!   they are read-only binds, which still take reads and writes;
//! - a program copied into a memfd ran, past Landlock's execute right on
//!   every grant. For root, `vm.memfd_noexec = 2` in the server's pid
//!   namespace stops it;
//! - a server that could open the audit log (read-only inside its grant)
//!   took its `flock` and froze every call of the session, for as long as
//!   it liked. The log, its head and the pin files are now hidden from
//!   every server, and warden waits for any of those locks only so long
//!   (10 s), then fails closed.

mod cli_support;

use std::io::Write;
use std::time::{Duration, Instant};

use cli_support::*;
use serde_json::{Value, json};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn set_up(audit_in_workspace: bool) -> World {
    let world = World::new();
    let audit = if audit_in_workspace {
        world.workspace.join(".warden/audit.jsonl")
    } else {
        world.path("audit.jsonl")
    };
    world.write_config(&json!({
        "mcpServers": {
            "hostile": {
                "command": WARDEN,
                "args": ["__hostile-server", world.marker.as_str()],
                "sandbox": {"write": [world.workspace.clone()]}
            },
            "plain": {
                "command": WARDEN,
                "args": ["__hostile-server", world.marker.as_str()],
                "trust": "trusted",
                "sandbox": false
            }
        },
        "permissions": {"allow": ["mcp__hostile__spawn_shell", "mcp__plain__spawn_shell"]},
        // Scripts have line breaks, which the shipped policy asks about.
        "policy": [],
        "audit": {"path": audit}
    }));
    world
}

/// `warden call SERVER spawn_shell` of `script`: the shell's stdout (`Err`
/// with warden's stderr when the call failed).
fn shell(world: &World, server: &str, script: &str) -> Result<String, String> {
    let args = json!({ "command": script }).to_string();
    let out = world.run(&["call", server, "spawn_shell", "--json", "--args", &args]);
    if out.status.code() != Some(0) {
        return Err(format!("exit {:?}: {}", out.status.code(), stderr(&out)));
    }
    let text = stdout_json(&out)["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let report: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(report["detail"]["stdout"]
        .as_str()
        .map_or(text.clone(), str::to_string))
}

/// Changes to each device node that leave it as it is (same mode, owner
/// and times) but that the kernel performs, and so succeed, when the
/// caller may: what an attack with other values would get through.
fn no_op_metadata_changes() -> String {
    ["null", "zero", "full", "random", "urandom"]
        .map(|n| {
            let d = format!("/dev/{n}");
            format!(
                "chmod $(stat -c %a {d}) {d} 2>/dev/null; echo \"chmod {d} rc=$?\"; \
                 chown $(stat -c %u:%g {d}) {d} 2>/dev/null; echo \"chown {d} rc=$?\"; \
                 touch -c -r {d} {d} 2>/dev/null; echo \"touch {d} rc=$?\""
            )
        })
        .join("\n")
        + "\necho x > /dev/null; echo \"write null rc=$?\"\n\
           head -c 3 /dev/zero | wc -c | sed 's/^/zero bytes /'\n\
           echo x > /dev/full 2>/dev/null; echo \"write full rc=$?\""
}

#[test]
fn host_device_nodes_keep_their_metadata_and_still_work() {
    let world = set_up(false);
    let script = no_op_metadata_changes();
    if is_root() {
        // Root owns the host's nodes: without the sandbox every change is
        // allowed (here each one changes nothing).
        let plain = shell(&world, "plain", &script).expect("unsandboxed call");
        for op in ["chmod", "chown", "touch"] {
            let line = format!("{op} /dev/full rc=0");
            assert!(plain.contains(&line), "baseline refused {op}: {plain}");
        }
    }
    let boxed = shell(&world, "hostile", &script).expect("sandboxed call");
    for n in ["null", "zero", "full", "random", "urandom"] {
        for op in ["chmod", "chown", "touch"] {
            let line = format!("{op} /dev/{n} rc=0");
            assert!(
                !boxed.contains(&line),
                "{line} inside the sandbox:\n{boxed}"
            );
        }
    }
    assert!(boxed.contains("write null rc=0"), "{boxed}");
    assert!(boxed.contains("zero bytes 3"), "{boxed}");
    // /dev/full still says ENOSPC, as it should.
    assert!(boxed.contains("write full rc=1"), "{boxed}");
    assert!(world.leftover_processes().is_empty());
}

/// Copies /bin/true into a memfd and runs it from there.
const MEMFD_EXEC: &str = r#"python3 -c '
import os
fd = os.memfd_create("x", 0)
os.write(fd, open("/bin/true", "rb").read())
pid = os.fork()
if pid == 0:
    try:
        os.execv("/proc/self/fd/%d" % fd, ["x"])
    except OSError as e:
        print("exec refused:", e.errno, flush=True)
        os._exit(3)
_, st = os.waitpid(pid, 0)
print("memfd program exit", os.waitstatus_to_exitcode(st))
'"#;

#[test]
fn no_program_runs_from_a_memfd_when_root_starts_the_server() {
    if !is_root() {
        // vm.memfd_noexec belongs to the host's root: a user namespace of
        // another user cannot set it (README, "The sandbox").
        eprintln!(
            "SKIPPED no_program_runs_from_a_memfd_when_root_starts_the_server (uid {}): only \
             root of the host can set vm.memfd_noexec per pid namespace",
            nix::unistd::geteuid().as_raw()
        );
        return;
    }
    let world = set_up(false);
    let plain = shell(&world, "plain", MEMFD_EXEC).expect("unsandboxed call");
    assert!(plain.contains("memfd program exit 0"), "baseline: {plain}");
    let boxed = shell(&world, "hostile", MEMFD_EXEC).expect("sandboxed call");
    assert!(
        boxed.contains("exec refused: 13"),
        "a program ran from a memfd inside the sandbox: {boxed}"
    );
    // Memory files themselves still work (runtimes use them).
    let boxed = shell(
        &world,
        "hostile",
        "python3 -c 'import os; fd = os.memfd_create(\"m\", 0); print(os.write(fd, b\"abc\"))'",
    )
    .expect("sandboxed call");
    assert_eq!(boxed.trim(), "3", "{boxed}");
    assert!(world.leftover_processes().is_empty());
}

/// Tries to read the audit log, its head and the pin file, and to take the
/// log's lock.
fn lock_and_read(world: &World) -> String {
    let log = world.workspace.join(".warden/audit.jsonl");
    let head = world.workspace.join(".warden/audit.jsonl.head");
    format!(
        "cat {log} >/dev/null 2>&1; echo \"read log rc=$?\"\n\
         cat {head} >/dev/null 2>&1; echo \"read head rc=$?\"\n\
         python3 -c 'import fcntl, sys; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print(\"locked the log\")' {log} 2>/dev/null; \
         echo \"lock rc=$?\"",
        log = log.display(),
        head = head.display()
    )
}

#[test]
fn a_server_can_neither_read_nor_lock_the_audit_log_in_its_grant() {
    let world = set_up(true);
    // The first call creates the log and its head.
    shell(&world, "plain", "true").expect("first call");
    let plain = shell(&world, "plain", &lock_and_read(&world)).expect("unsandboxed call");
    assert!(plain.contains("read log rc=0"), "baseline: {plain}");
    assert!(plain.contains("locked the log"), "baseline: {plain}");
    let boxed = shell(&world, "hostile", &lock_and_read(&world)).expect("sandboxed call");
    assert!(!boxed.contains("read log rc=0"), "{boxed}");
    assert!(!boxed.contains("read head rc=0"), "{boxed}");
    assert!(!boxed.contains("locked the log"), "{boxed}");
    assert!(world.leftover_processes().is_empty());
}

/// Whatever else holds the log's lock (a process of the same user, a
/// warden stuck mid-write), a session waits 10 s for it, then fails
/// closed: no call goes out unrecorded, and nothing hangs.
#[test]
fn a_lock_held_elsewhere_fails_the_call_closed_after_the_wait() {
    let world = set_up(true);
    shell(&world, "plain", "true").expect("first call");
    let log = world.workspace.join(".warden/audit.jsonl");
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .open(&log)
        .expect("open log");
    let held = nix::fcntl::Flock::lock(holder, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .expect("lock the log");
    let marker = world.path("ran");
    let started = Instant::now();
    let result = shell(&world, "plain", &format!("touch {}", marker.display()));
    let took = started.elapsed();
    drop(held);
    let err = result.expect_err("a call whose record cannot be written must fail");
    assert!(err.contains("lock"), "{err}");
    assert!(!marker.exists(), "the tool ran unrecorded");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(60),
        "waited {took:?}"
    );
    // Once the lock is free again, sessions go on.
    shell(&world, "plain", "true").expect("a call after the lock was released");
    let _ = std::io::stderr().flush();
    assert!(world.leftover_processes().is_empty());
}

/// A FIFO in a read grant under `/tmp` (where CI workspaces and every
/// tempdir live): the view's private `/tmp` had a Landlock write rule,
/// which covers every grant bound beneath it, and a read-only bind does
/// not stop a write to a FIFO, so a sandboxed server wrote to a host
/// reader through a *read* grant. TMPDIR, HOME and `/dev/shm` stay
/// writable.
#[test]
fn a_fifo_in_a_read_grant_under_tmp_cannot_be_written() {
    use std::os::unix::fs::OpenOptionsExt;
    let world = World::new();
    let shared = world.path("shared");
    std::fs::create_dir_all(&shared).expect("mkdir");
    assert!(shared.starts_with("/tmp"), "the world lives under /tmp");
    let fifo = shared.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).expect("mkfifo");
    world.write_config(&json!({
        "mcpServers": {
            "hostile": {
                "command": WARDEN,
                "args": ["__hostile-server", world.marker.as_str()],
                "sandbox": {"read": [shared.clone()]}
            },
            "plain": {
                "command": WARDEN,
                "args": ["__hostile-server", world.marker.as_str()],
                "trust": "trusted",
                "sandbox": false
            }
        },
        "permissions": {"allow": ["mcp__hostile__spawn_shell", "mcp__plain__spawn_shell"]},
        "policy": [],
        "audit": {"path": world.path("audit.jsonl")}
    }));
    // A reader on the host, so that an open for writing does not wait.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&fifo)
        .expect("open the fifo");
    let read_all = |mut r: &std::fs::File| {
        use std::io::Read;
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    };
    let script = format!(
        "echo through-the-read-grant > {} 2>/dev/null; echo \"fifo rc=$?\"",
        fifo.display()
    );
    let plain = shell(&world, "plain", &script).expect("unsandboxed call");
    assert!(plain.contains("fifo rc=0"), "baseline: {plain}");
    assert!(read_all(&reader).contains("through-the-read-grant"));
    let boxed = shell(&world, "hostile", &script).expect("sandboxed call");
    assert!(!boxed.contains("fifo rc=0"), "{boxed}");
    assert!(read_all(&reader).is_empty(), "the host reader got data");
    // What servers write to stays writable.
    let boxed = shell(
        &world,
        "hostile",
        "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo h > \"$HOME/h\" && cat \"$HOME/h\" \
         && python3 -c 'import multiprocessing as m; m.Lock(); print(\"shm ok\")'",
    )
    .expect("sandboxed call");
    assert_eq!(
        boxed.split_whitespace().collect::<Vec<_>>(),
        ["t", "h", "shm", "ok"],
        "{boxed}"
    );
    assert!(world.leftover_processes().is_empty());
}
