//! The helper: the single-threaded process that applies a [`Plan`] and
//! runs the server (ARCHITECTURE.md, "The sandbox", says why it exists and
//! why this order).
//!
//! It runs as the `warden-sandbox-exec` binary (`warden-sandbox-exec
//! PLAN-JSON`), or as `warden __sandbox-exec PLAN-JSON` when that binary is
//! not installed; either way [`main`] is called before any thread or
//! runtime exists, so ordinary (allocating) code is safe everywhere here,
//! also after `fork`. Three processes:
//!
//! ```text
//! helper (warden's child; own session; unshares user, pid+ipc and, for
//!   │     network "none", net namespaces; dies with warden via a pidfd of it
//!   │     (not PR_SET_PDEATHSIG, which follows the spawning thread);
//!   │     forwards signals; exits with the server's status)
//!   └─ init (pid 1 of the new pid namespace; dies with the helper; reaps;
//!        │   when it exits the kernel kills everything left in the namespace)
//!        └─ server (rlimits, close-on-exec for inherited fds, Landlock with
//!                   no_new_privs, seccomp, then exec)
//! ```

use std::convert::Infallible;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sched::{CloneFlags, unshare};
use nix::sys::prctl;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{
    ForkResult, Pid, dup2_stdin, dup2_stdout, execv, fork, getegid, geteuid, getppid, pipe2, setsid,
};

use crate::plan::Plan;
use crate::seccomp;
use crate::spec::Network;

/// Exit status of the helper when the sandbox could not be applied.
pub const SETUP_FAILED: i32 = 125;
/// Exit status when the kernel refused a required namespace (the CLI's
/// "sandbox unavailable" code).
pub const UNSUPPORTED: i32 = 4;

/// Signals the helper and init receive through a signalfd and forward.
const FORWARDED: [Signal; 7] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

#[derive(Debug, thiserror::Error)]
enum HelperError {
    #[error("usage: warden-sandbox-exec PLAN-JSON (started by warden, not by hand)")]
    Usage,
    #[error("bad plan: {0}")]
    Plan(#[from] serde_json::Error),
    #[error("{what}: {err}")]
    Sys { what: &'static str, err: io::Error },
    #[error("landlock: {0}")]
    Landlock(String),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
}

fn sys(what: &'static str) -> impl FnOnce(io::Error) -> HelperError {
    move |err| HelperError::Sys { what, err }
}

fn errno(what: &'static str) -> impl FnOnce(Errno) -> HelperError {
    move |e| HelperError::Sys {
        what,
        err: io::Error::from(e),
    }
}

/// Entry point: `args` are the arguments after the program name (and
/// after `__sandbox-exec`), i.e. the plan. Must be called while the
/// process is single-threaded. Never returns.
pub fn main(mut args: impl Iterator<Item = OsString>) -> ! {
    let code = match args.next().ok_or(HelperError::Usage).and_then(|json| {
        let plan: Plan = serde_json::from_slice(json.as_bytes())?;
        run(&plan)
    }) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("warden sandbox: {e}");
            SETUP_FAILED
        }
    };
    std::process::exit(code)
}

fn run(plan: &Plan) -> Result<i32, HelperError> {
    // No PR_SET_PDEATHSIG here: it fires when the *thread* that spawned us
    // exits (a tokio blocking thread idles out after 10 s), which would kill
    // a healthy server. A pidfd follows the warden process itself.
    let pidfd = match plan.parent_pid {
        // We replaced warden: stay in the caller's process group (so a
        // terminal's Ctrl-C reaches us) and watch no parent.
        None => None,
        Some(parent) => {
            let pidfd = pidfd_open(parent);
            if getppid().as_raw() != parent {
                return Ok(SETUP_FAILED); // warden already gone
            }
            let pidfd = pidfd.map_err(sys("pidfd_open"))?;
            // Fails only if already a group leader, which is harmless.
            let _ = setsid();
            Some(pidfd)
        }
    };
    close_inherited();
    let result = run_namespaced(plan, pidfd);
    if let Some(dir) = &plan.cleanup {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

/// `pidfd_open(pid, 0)`, which nix does not wrap.
fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags by value, no pointer.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else
    // owns it, so the OwnedFd is its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn run_namespaced(plan: &Plan, pidfd: Option<OwnedFd>) -> Result<i32, HelperError> {
    let (uid, gid) = (geteuid(), getegid());
    let mut flags = CloneFlags::empty();
    if plan.user_ns {
        flags |= CloneFlags::CLONE_NEWUSER;
    }
    if plan.net_ns {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    if plan.pid_ns {
        // SysV IPC objects are per namespace too.
        flags |= CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC;
    }
    if !flags.is_empty()
        && let Err(err) = unshare(flags)
    {
        eprintln!(
            "warden sandbox: the kernel refused the sandbox's namespaces (unshare: {err}); \
             see `warden sandbox check`"
        );
        return Ok(UNSUPPORTED);
    }
    if plan.user_ns {
        // Same ids inside as outside: files keep their owners.
        std::fs::write("/proc/self/setgroups", "deny").map_err(sys("setgroups"))?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")).map_err(sys("uid_map"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")).map_err(sys("gid_map"))?;
    }
    let sigfd = block_signals()?;
    // The helper keeps the write end; its death closes it, which init sees.
    let (death_r, death_w) = pipe2(OFlag::O_CLOEXEC).map_err(errno("pipe2"))?;
    // SAFETY: the helper is single-threaded (`main` runs before any thread
    // exists), so the child may go on with ordinary, allocating code.
    match unsafe { fork() }.map_err(errno("fork"))? {
        ForkResult::Child => {
            drop(death_w);
            let code = match init_main(plan, sigfd, death_r) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("warden sandbox: {e}");
                    SETUP_FAILED
                }
            };
            // Leave without running the helper's destructors.
            crate::exit_now(code)
        }
        ForkResult::Parent { child: init } => {
            drop(death_r);
            release_stdio();
            let status = supervise(init, &sigfd, pidfd.as_ref());
            drop(death_w);
            status
        }
    }
}

/// Whether poll reported anything on this descriptor.
fn ready(fd: Option<&PollFd<'_>>) -> bool {
    fd.and_then(PollFd::revents).is_some_and(|r| !r.is_empty())
}

/// Waits until one of `fds` is ready (retrying on EINTR).
fn wait_ready(fds: &mut [PollFd<'_>]) -> Result<(), HelperError> {
    loop {
        match poll(fds, PollTimeout::NONE) {
            Ok(_) => return Ok(()),
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(errno("poll")(e)),
        }
    }
}

/// The helper's loop: forward signals to init, exit with its status, kill
/// it when warden dies.
fn supervise(init: Pid, sigfd: &SignalFd, pidfd: Option<&OwnedFd>) -> Result<i32, HelperError> {
    loop {
        let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        if let Some(p) = pidfd {
            fds.push(PollFd::new(p.as_fd(), PollFlags::POLLIN));
        }
        wait_ready(&mut fds)?;
        if ready(fds.get(1)) {
            // warden is gone: take everything down.
            let _ = kill(init, Signal::SIGKILL);
            let _ = waitpid(init, None);
            return Ok(128 + Signal::SIGKILL as i32);
        }
        if ready(fds.first()) {
            match read_signal(sigfd)? {
                Some(Signal::SIGCHLD) => {
                    if let Some(code) = reap(init) {
                        return Ok(code);
                    }
                }
                Some(sig) => {
                    let _ = kill(init, sig);
                }
                None => {}
            }
        }
    }
}

/// pid 1 of the namespace: start the server, forward signals, reap
/// orphans, exit with the server's status (the kernel then kills the rest).
fn init_main(plan: &Plan, sigfd: SignalFd, death_r: OwnedFd) -> Result<i32, HelperError> {
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(errno("prctl"))?;
    if !plan.pid_ns {
        // Without a pid namespace, orphans of the server are reparented to
        // us rather than to the host's init. Best effort.
        let _ = prctl::set_child_subreaper(true);
    }
    if let (true, Some(pid_max)) = (plan.pid_ns, plan.pid_max) {
        // Per pid namespace since Linux 6.14 (prepare checked): caps the
        // number of processes in the namespace, also for root.
        std::fs::write("/proc/sys/kernel/pid_max", pid_max.to_string()).map_err(sys("pid_max"))?;
    }
    // SAFETY: init is a fork of the single-threaded helper and has started
    // no thread, so the child may go on with ordinary code.
    let server = match unsafe { fork() }.map_err(errno("fork"))? {
        ForkResult::Child => {
            // The server must not hold these (they are close-on-exec too).
            drop(sigfd);
            drop(death_r);
            let e = exec_server(plan);
            eprintln!("warden sandbox: {e}");
            crate::exit_now(SETUP_FAILED)
        }
        ForkResult::Parent { child } => child,
    };
    release_stdio();
    loop {
        let mut fds = [
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
            PollFd::new(death_r.as_fd(), PollFlags::POLLIN),
        ];
        wait_ready(&mut fds)?;
        if ready(fds.get(1)) {
            // The helper died: end the namespace.
            if !plan.pid_ns {
                let _ = kill(server, Signal::SIGKILL);
            }
            return Ok(128 + Signal::SIGKILL as i32);
        }
        if ready(fds.first()) {
            match read_signal(&sigfd)? {
                Some(Signal::SIGCHLD) => {
                    // Reap everything; stop when the server itself is gone.
                    let mut done = None;
                    while let Ok(status) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                        match status.pid() {
                            None => break, // StillAlive
                            Some(pid) if pid == server => done = Some(exit_code(status)),
                            Some(_) => {}
                        }
                    }
                    if let Some(code) = done {
                        return Ok(code);
                    }
                }
                Some(sig) => {
                    let _ = kill(server, sig);
                }
                None => {}
            }
        }
    }
}

/// One signal from the signalfd (`None`: a number nix does not know).
fn read_signal(sigfd: &SignalFd) -> Result<Option<Signal>, HelperError> {
    let info = sigfd.read_signal().map_err(errno("read(signalfd)"))?;
    Ok(info.and_then(|i| {
        i32::try_from(i.ssi_signo)
            .ok()
            .and_then(|n| Signal::try_from(n).ok())
    }))
}

fn reap(child: Pid) -> Option<i32> {
    match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
        Ok(status) if status.pid() == Some(child) => Some(exit_code(status)),
        _ => None,
    }
}

fn exit_code(status: WaitStatus) -> i32 {
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, sig, _) => 128 + sig as i32,
        _ => SETUP_FAILED,
    }
}

/// The server process: apply the per-process restrictions and exec.
fn exec_server(plan: &Plan) -> HelperError {
    match restrict_and_exec(plan) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

fn restrict_and_exec(plan: &Plan) -> Result<Infallible, HelperError> {
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .map_err(errno("sigprocmask"))?;
    set_rlimits(plan)?;
    close_inherited();
    let program = cstring(plan.program.as_os_str().as_bytes())?;
    let argv: Vec<CString> = plan
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let filters = if plan.seccomp {
        seccomp::build(&plan.network, plan.deny_connect)?
    } else {
        Vec::new()
    };
    match plan.landlock_abi {
        Some(abi) => apply_landlock(plan, abi)?,
        None => prctl::set_no_new_privs().map_err(errno("no_new_privs"))?,
    }
    seccomp::apply(&filters)?;
    // The environment is the one warden prepared for the helper.
    execv(&program, &argv).map_err(errno("exec"))
}

fn cstring(bytes: &[u8]) -> Result<CString, HelperError> {
    CString::new(bytes).map_err(|e| HelperError::Sys {
        what: "argument with NUL byte",
        err: io::Error::new(io::ErrorKind::InvalidInput, e),
    })
}

fn abi_from(v: u8) -> ABI {
    match v {
        0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        7 => ABI::V7,
        8 => ABI::V8,
        _ => ABI::V9,
    }
}

fn apply_landlock(plan: &Plan, abi: u8) -> Result<(), HelperError> {
    let ll = |e: landlock::RulesetError| HelperError::Landlock(e.to_string());
    let requested = abi;
    let abi = abi_from(abi);
    let read = AccessFs::from_read(abi);
    let read_exec = read | AccessFs::Execute;
    let write =
        AccessFs::from_all(abi) & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(ll)?;
    let handle_net = !matches!(plan.network, Network::Host) && abi >= ABI::V4;
    if handle_net {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(ll)?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(ll)?;
    }
    let mut created = ruleset
        .create()
        .map_err(ll)?
        .add_rules(path_beneath_rules(&plan.read_exec, read_exec))
        .map_err(ll)?
        .add_rules(path_beneath_rules(&plan.read, read))
        .map_err(ll)?
        .add_rules(path_beneath_rules(&plan.write, write))
        .map_err(ll)?;
    if let (
        true,
        Network::Ports {
            connect_tcp,
            bind_tcp,
        },
    ) = (handle_net, &plan.network)
    {
        for &p in connect_tcp {
            created = created
                .add_rule(NetPort::new(p, AccessNet::ConnectTcp))
                .map_err(ll)?;
        }
        for &p in bind_tcp {
            created = created
                .add_rule(NetPort::new(p, AccessNet::BindTcp))
                .map_err(ll)?;
        }
    }
    let status = created.restrict_self().map_err(ll)?;
    if !status.no_new_privs {
        return Err(HelperError::Landlock("no_new_privs was not set".into()));
    }
    if status.ruleset != RulesetStatus::FullyEnforced && !plan.best_effort {
        return Err(HelperError::Landlock(format!(
            "ruleset only {:?} (kernel lacks part of ABI {})",
            status.ruleset, requested
        )));
    }
    Ok(())
}

fn set_rlimits(plan: &Plan) -> Result<(), HelperError> {
    const MB: u64 = 1024 * 1024;
    let l = plan.limits;
    let set = |res: Resource, v: u64, what: &'static str| -> Result<(), HelperError> {
        let (_, hard) = getrlimit(res).map_err(errno(what))?;
        // Never above the current hard limit (raising it needs privilege).
        let v = v.min(hard);
        setrlimit(res, v, v).map_err(errno(what))
    };
    // RLIMIT_DATA (not AS): V8 and others reserve large PROT_NONE ranges
    // that RLIMIT_AS would count; DATA counts what is actually writable.
    set(
        Resource::RLIMIT_DATA,
        l.memory_mb.saturating_mul(MB),
        "RLIMIT_DATA",
    )?;
    set(Resource::RLIMIT_NPROC, l.processes, "RLIMIT_NPROC")?;
    set(Resource::RLIMIT_NOFILE, l.open_files, "RLIMIT_NOFILE")?;
    set(Resource::RLIMIT_CPU, l.cpu_seconds, "RLIMIT_CPU")?;
    set(
        Resource::RLIMIT_FSIZE,
        l.file_size_mb.saturating_mul(MB),
        "RLIMIT_FSIZE",
    )?;
    set(Resource::RLIMIT_CORE, 0, "RLIMIT_CORE")?;
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec (not closed: Rust's
/// std and our own pipes rely on them until exec). nix wraps neither
/// `close_range` nor `fcntl` on a descriptor we do not own.
fn close_inherited() {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC takes no pointer and only
    // sets a flag on descriptors; it closes nothing.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc < 0 {
        for fd in 3..1024 {
            // SAFETY: F_SETFD takes no pointer; on a descriptor that is not
            // open it fails with EBADF and changes nothing.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
}

/// Blocks the forwarded signals and returns a signalfd that receives them.
fn block_signals() -> Result<SignalFd, HelperError> {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None).map_err(errno("sigprocmask"))?;
    SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC).map_err(errno("signalfd"))
}

/// Points stdin and stdout at /dev/null, so that only the server holds the
/// protocol pipes (its exit is seen as EOF at once). stderr stays for our
/// own error messages.
fn release_stdio() {
    if let Ok(null) = File::options().read(true).write(true).open("/dev/null") {
        let _ = dup2_stdin(&null);
        let _ = dup2_stdout(&null);
    }
}
