//! `warden __sandbox-exec PLAN-JSON`: the single-threaded helper that
//! applies the sandbox and runs the server.
//!
//! Dispatched at the very top of `main`, before any thread or runtime
//! exists, so ordinary (allocating) code is safe everywhere here. Three
//! processes:
//!
//! ```text
//! helper (warden's child; own session; joins the pids cgroup; unshares
//!   │     user+net+ipc+pid namespaces; dies with warden via a pidfd of it
//!   │     (not PR_SET_PDEATHSIG, which follows the spawning thread);
//!   │     forwards signals; exits with the server's status)
//!   └─ init (pid 1 of the new pid namespace; dies with the helper; reaps;
//!        │   when it exits the kernel kills everything left in the namespace)
//!        └─ server (rlimits, close-on-exec for inherited fds, Landlock with
//!                   no_new_privs, seccomp, then exec)
//! ```

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use super::plan::{Plan, PlanNetwork};
use super::seccomp;

/// Exit status of the helper when the sandbox could not be applied.
pub const SETUP_FAILED: i32 = 125;
/// Exit status when the kernel refused a required namespace (the CLI's
/// "sandbox unavailable" code).
pub const UNSUPPORTED: i32 = 4;

#[derive(Debug, thiserror::Error)]
enum HelperError {
    #[error("usage: warden __sandbox-exec PLAN-JSON")]
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

fn check(rc: libc::c_long, what: &'static str) -> Result<libc::c_long, HelperError> {
    if rc < 0 {
        Err(HelperError::Sys {
            what,
            err: io::Error::last_os_error(),
        })
    } else {
        Ok(rc)
    }
}

/// Entry point; never returns.
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
    let pidfd = if plan.parent_pid == 0 {
        // We replaced warden: stay in the caller's process group (so a
        // terminal's Ctrl-C reaches us) and watch no parent.
        -1
    } else {
        // SAFETY: pidfd_open takes no pointer.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, plan.parent_pid, 0) };
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != plan.parent_pid {
            return Ok(SETUP_FAILED); // warden already gone
        }
        let pidfd = check(pidfd, "pidfd_open")? as libc::c_int;
        // SAFETY: no preconditions; fails only if already a group leader.
        unsafe {
            libc::setsid();
        }
        pidfd
    };
    close_inherited();
    let result = run_namespaced(plan, pidfd);
    if let Some(dir) = &plan.cleanup {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

fn run_namespaced(plan: &Plan, pidfd: libc::c_int) -> Result<i32, HelperError> {
    // SAFETY: getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut flags = 0;
    if plan.user_ns {
        flags |= libc::CLONE_NEWUSER;
    }
    if plan.net_ns {
        flags |= libc::CLONE_NEWNET;
    }
    if plan.pid_ns {
        // SysV IPC objects are per namespace too.
        flags |= libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    }
    // SAFETY: unshare on our own single-threaded process.
    if flags != 0 && unsafe { libc::unshare(flags) } != 0 {
        let err = io::Error::last_os_error();
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
    let (death_r, death_w) = pipe()?;
    // SAFETY: single-threaded; the child continues with ordinary code.
    let init = check(unsafe { libc::fork() }.into(), "fork")? as libc::pid_t;
    if init == 0 {
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(death_w) };
        let code = match init_main(plan, sigfd, death_r) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("warden sandbox: {e}");
                SETUP_FAILED
            }
        };
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(code) }
    }
    // SAFETY: the helper keeps only the write end; its death closes it.
    unsafe { libc::close(death_r) };
    release_stdio();
    supervise(init, sigfd, pidfd)
}

/// The helper's loop: forward signals to init, exit with its status, kill
/// it when warden dies.
fn supervise(
    init: libc::pid_t,
    sigfd: libc::c_int,
    pidfd: libc::c_int,
) -> Result<i32, HelperError> {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds is a valid array of 2 pollfd.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(HelperError::Sys {
                what: "poll",
                err: e,
            });
        }
        if fds[1].revents != 0 {
            // warden is gone: take everything down.
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(init, libc::SIGKILL);
                libc::waitpid(init, std::ptr::null_mut(), 0);
            }
            return Ok(128 + libc::SIGKILL);
        }
        if fds[0].revents != 0 {
            let sig = read_signal(sigfd)?;
            if sig == libc::SIGCHLD as u32 {
                if let Some(code) = reap(init) {
                    return Ok(code);
                }
            } else {
                // SAFETY: forwarding a signal to our own child.
                unsafe { libc::kill(init, sig as libc::c_int) };
            }
        }
    }
}

/// pid 1 of the namespace: start the server, forward signals, reap
/// orphans, exit with the server's status (the kernel then kills the rest).
fn init_main(plan: &Plan, sigfd: libc::c_int, death_r: libc::c_int) -> Result<i32, HelperError> {
    // SAFETY: raw prctls on ourselves.
    unsafe {
        check(
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
            "prctl",
        )?;
        if !plan.pid_ns {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    }
    if plan.pid_ns && plan.pid_max > 0 {
        // Per pid namespace since Linux 6.14 (prepare checked): caps the
        // number of processes in the namespace, also for root.
        std::fs::write("/proc/sys/kernel/pid_max", plan.pid_max.to_string())
            .map_err(sys("pid_max"))?;
    }
    // SAFETY: single-threaded fork.
    let server = check(unsafe { libc::fork() }.into(), "fork")? as libc::pid_t;
    if server == 0 {
        // SAFETY: closing descriptors the server must not hold.
        unsafe {
            libc::close(sigfd);
            libc::close(death_r);
        }
        let e = exec_server(plan);
        eprintln!("warden sandbox: {e}");
        // SAFETY: exec failed; leave without destructors.
        unsafe { libc::_exit(SETUP_FAILED) }
    }
    release_stdio();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: death_r,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: valid pollfd array.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(HelperError::Sys {
                what: "poll",
                err: e,
            });
        }
        if fds[1].revents != 0 {
            // The helper died: end the namespace.
            if !plan.pid_ns {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(server, libc::SIGKILL) };
            }
            return Ok(128 + libc::SIGKILL);
        }
        if fds[0].revents != 0 {
            let sig = read_signal(sigfd)?;
            if sig == libc::SIGCHLD as u32 {
                // Reap everything; stop when the server itself is gone.
                let mut done = None;
                loop {
                    let mut status = 0;
                    // SAFETY: reaping our children.
                    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                    if pid <= 0 {
                        break;
                    }
                    if pid == server {
                        done = Some(exit_code(status));
                    }
                }
                if let Some(code) = done {
                    return Ok(code);
                }
            } else {
                // SAFETY: forwarding to our own child.
                unsafe { libc::kill(server, sig as libc::c_int) };
            }
        }
    }
}

fn reap(child: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: reaping our own child.
    let pid = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
    (pid == child).then(|| exit_code(status))
}

fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        SETUP_FAILED
    }
}

/// The server process: apply the per-process restrictions and exec.
fn exec_server(plan: &Plan) -> HelperError {
    match restrict_and_exec(plan) {
        Ok(never) => match never {},
        Err(e) => e,
    }
}

enum Never {}

fn restrict_and_exec(plan: &Plan) -> Result<Never, HelperError> {
    // SAFETY: resetting our own signal mask to empty.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
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
    if plan.landlock_abi > 0 {
        apply_landlock(plan)?;
    } else {
        // SAFETY: prctl on ourselves.
        check(
            unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }.into(),
            "no_new_privs",
        )?;
    }
    seccomp::apply(&filters)?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: program and argv are NUL-terminated and outlive the call;
    // environ is the process environment prepared by warden.
    unsafe { libc::execv(program.as_ptr(), ptrs.as_ptr()) };
    Err(HelperError::Sys {
        what: "exec",
        err: io::Error::last_os_error(),
    })
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

fn apply_landlock(plan: &Plan) -> Result<(), HelperError> {
    let ll = |e: landlock::RulesetError| HelperError::Landlock(e.to_string());
    let abi = abi_from(plan.landlock_abi);
    let read = AccessFs::from_read(abi);
    let read_exec = read | AccessFs::Execute;
    let write =
        AccessFs::from_all(abi) & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(ll)?;
    let handle_net = !matches!(plan.network, PlanNetwork::Host) && abi >= ABI::V4;
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
        PlanNetwork::Ports {
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
            status.ruleset, plan.landlock_abi
        )));
    }
    Ok(())
}

fn set_rlimits(plan: &Plan) -> Result<(), HelperError> {
    const MB: u64 = 1024 * 1024;
    let l = plan.limits;
    let set = |res, v: u64, what| {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid rlimit struct.
        check(unsafe { libc::getrlimit(res, &mut cur) }.into(), what)?;
        // Never above the current hard limit (raising it needs privilege).
        let v = v.min(cur.rlim_max);
        let lim = libc::rlimit {
            rlim_cur: v,
            rlim_max: v,
        };
        // SAFETY: valid rlimit struct.
        check(unsafe { libc::setrlimit(res, &lim) }.into(), what).map(|_| ())
    };
    // RLIMIT_DATA (not AS): V8 and others reserve large PROT_NONE ranges
    // that RLIMIT_AS would count; DATA counts what is actually writable.
    set(
        libc::RLIMIT_DATA,
        l.memory_mb.saturating_mul(MB),
        "RLIMIT_DATA",
    )?;
    set(libc::RLIMIT_NPROC, l.processes, "RLIMIT_NPROC")?;
    set(libc::RLIMIT_NOFILE, l.open_files, "RLIMIT_NOFILE")?;
    set(libc::RLIMIT_CPU, l.cpu_seconds, "RLIMIT_CPU")?;
    set(
        libc::RLIMIT_FSIZE,
        l.file_size_mb.saturating_mul(MB),
        "RLIMIT_FSIZE",
    )?;
    set(libc::RLIMIT_CORE, 0, "RLIMIT_CORE")?;
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec (not closed: Rust's
/// std and our own pipes rely on them until exec).
fn close_inherited() {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags.
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
            // SAFETY: setting FD_CLOEXEC on possibly-invalid fds is harmless.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
}

fn block_signals() -> Result<libc::c_int, HelperError> {
    // SAFETY: building and installing a signal mask, then a signalfd.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [
            libc::SIGCHLD,
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::sigaddset(&mut set, s);
        }
        check(
            libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()).into(),
            "sigprocmask",
        )?;
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC);
        check(fd.into(), "signalfd").map(|fd| fd as libc::c_int)
    }
}

fn read_signal(sigfd: libc::c_int) -> Result<u32, HelperError> {
    // SAFETY: reading one siginfo struct into zeroed memory of that size.
    unsafe {
        let mut info: libc::signalfd_siginfo = std::mem::zeroed();
        let n = libc::read(
            sigfd,
            (&mut info as *mut libc::signalfd_siginfo).cast(),
            std::mem::size_of::<libc::signalfd_siginfo>(),
        );
        check(n as libc::c_long, "read(signalfd)")?;
        Ok(info.ssi_signo)
    }
}

fn pipe() -> Result<(libc::c_int, libc::c_int), HelperError> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    check(
        unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into(),
        "pipe2",
    )?;
    Ok((fds[0], fds[1]))
}

/// Points stdin and stdout at /dev/null, so that only the server holds the
/// protocol pipes (its exit is seen as EOF at once). stderr stays for our
/// own error messages.
fn release_stdio() {
    // SAFETY: open/dup2/close on descriptors we own.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}
