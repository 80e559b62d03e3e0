//! The helper: the single-threaded process that applies a [`Plan`] and
//! runs the server (ARCHITECTURE.md, "The sandbox", says why it exists and
//! why this order).
//!
//! It runs as the `warden-sandbox-exec` binary (`warden-sandbox-exec
//! PLAN-JSON`), or as `warden __sandbox-exec PLAN-JSON` when that binary is
//! not installed; either way [`main`] is called before any thread or
//! runtime exists, so ordinary (allocating) code is safe everywhere here,
//! also after `fork`/`clone3`. Three processes:
//!
//! ```text
//! helper   host namespaces, outside the server's cgroup: pidfd of warden
//!   │      (dies with it), setsid, sweep stale cgroups, create the cgroup
//!   │      with the limits, clone3(NEWUSER|NEWNS|NEWPID|NEWIPC[|NEWNET]
//!   │      [|INTO_CGROUP on v2]) → init, write init's uid/gid maps from
//!   │      outside, "go"; then supervise: forward signals, end the sandbox
//!   │      at the CPU-time limit, die with warden, reap, remove the cgroup
//!   └─ init   pid 1: dies with the helper; waits for "go"; joins the v1
//!        │    cgroups ("0" → tasks); closes everything inherited; pid_max
//!        │    (root); builds the mount view and pivots; forks the server;
//!        │    reaps; answers listen() notifications (ports mode); exits
//!        │    with the server's status (the kernel then kills the rest)
//!        └─ server  rlimits, close-on-exec, no_new_privs, [listen()
//!                   notification filter → its fd to init], chdir, drop all
//!                   capabilities, Landlock, seccomp, exec
//! ```

use std::convert::Infallible;
use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::prctl;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{
    ForkResult, Pid, dup2_stdin, dup2_stdout, execve, fork, getegid, geteuid, getppid, pipe2,
    setsid,
};

use crate::cgroup::{self, Cgroup, CgroupLimits};
use crate::mountns::{self, ProcKind};
use crate::plan::Plan;
use crate::spec::Network;
use crate::sys::{self, Cloned, SysError};
use crate::{caps, seccomp};

/// Exit status of the helper when the sandbox could not be applied.
pub const SETUP_FAILED: i32 = 125;
/// Exit status when the kernel or host refused a required part of the
/// sandbox (the CLI's "sandbox unavailable" code).
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
    #[error(transparent)]
    Sys(#[from] SysError),
    #[error("landlock: {0}")]
    Landlock(String),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
}

fn errno(what: &'static str) -> impl FnOnce(Errno) -> HelperError {
    move |e| HelperError::Sys(sys::errno_from(what, e))
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> HelperError {
    move |e| HelperError::Sys(sys::err_from(what, e))
}

/// Entry point: `args` are the arguments after the program name (and
/// after `__sandbox-exec`), i.e. the plan. Must be called while the
/// process is single-threaded. Never returns.
pub fn main(mut args: impl Iterator<Item = OsString>) -> ! {
    let code = match args.next().ok_or(HelperError::Usage).and_then(|json| {
        let plan: Plan = serde_json::from_slice(json.as_bytes())?;
        // Before init is cloned: its `/proc/1/cmdline`, which the server
        // reads, is a copy of these bytes (see `sys::blank_last_arg`).
        sys::blank_last_arg()?;
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
    // The view is built under a mask of the helper's own, never the one
    // it happened to inherit (crate::umask).
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(
        crate::umask::VIEW_UMASK,
    ));
    // No PR_SET_PDEATHSIG here: it fires when the *thread* that spawned us
    // exits (a tokio blocking thread idles out after 10 s), which would kill
    // a healthy server. A pidfd follows the warden process itself.
    let warden = match plan.parent_pid {
        // We replaced warden: stay in the caller's process group (so a
        // terminal's Ctrl-C reaches us) and watch no parent.
        None => None,
        Some(parent) => {
            let pidfd = sys::pidfd_open(parent);
            if getppid().as_raw() != parent {
                return Ok(SETUP_FAILED); // warden already gone
            }
            let pidfd = pidfd?;
            // Fails only if already a group leader, which is harmless.
            let _ = setsid();
            Some(pidfd)
        }
    };
    sys::cloexec_from_3();
    hold_core_limit(&plan.name);

    // cgroups, before any namespace: created with host credentials, the
    // limits written before any process joins.
    let mut cg = None;
    if let Some(cp) = &plan.cgroup {
        for parent in cp.parents() {
            cgroup::sweep(&parent);
        }
        let mb = 1024 * 1024;
        let limits = CgroupLimits {
            pids_max: Some(plan.limits.processes.saturating_add(1)),
            memory_bytes: Some(plan.limits.memory_mb.saturating_mul(mb)),
        };
        match cgroup::create(cp, &cgroup::name_for(&plan.name), limits) {
            Ok(c) => cg = Some(c),
            Err(e) if plan.cgroup_required => {
                eprintln!(
                    "warden sandbox: `{}`: cannot create its cgroup ({e}); the limits written in \
                     its configuration cannot be enforced exactly (set best_effort to run anyway)",
                    plan.name
                );
                return Ok(UNSUPPORTED);
            }
            Err(e) => eprintln!(
                "warden sandbox: `{}`: no cgroup ({e}); its limits hold per process only",
                plan.name
            ),
        }
    }
    let result = spawn_and_supervise(plan, cg.as_mut(), warden.as_ref());
    if let Some(mut c) = cg {
        c.remove();
    }
    if let Some(dir) = &plan.cleanup {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

fn spawn_and_supervise(
    plan: &Plan,
    mut cg: Option<&mut Cgroup>,
    warden: Option<&OwnedFd>,
) -> Result<i32, HelperError> {
    let (uid, gid) = (geteuid().as_raw(), getegid().as_raw());
    let l = &plan.layers;
    let mut flags: u64 = 0;
    for (on, flag) in [
        (l.user_ns, libc::CLONE_NEWUSER),
        (plan.view.is_some(), libc::CLONE_NEWNS),
        (l.pid_ns, libc::CLONE_NEWPID),
        (l.ipc_ns, libc::CLONE_NEWIPC),
        (l.net_ns, libc::CLONE_NEWNET),
    ] {
        if on {
            flags |= flag as u64;
        }
    }
    let sigfd = block_signals()?;
    // The helper keeps the write end until "go"; init reads EOF if the
    // helper dies first.
    let (go_r, go_w) = pipe2(OFlag::O_CLOEXEC).map_err(errno("pipe2"))?;
    // init checks through this that the helper still lives once its death
    // signal is armed (see `init_main`).
    let helper = sys::pidfd_open(std::process::id() as libc::pid_t)?;
    let into = cg.as_ref().and_then(|c| c.v2_dir.as_ref()).map(AsFd::as_fd);
    // SAFETY: the helper is single-threaded (`main` runs before any thread
    // exists); the child only continues with ordinary code and leaves with
    // `exit_now` (see `sys::clone3_fork`).
    let cloned = unsafe { sys::clone3_fork(flags, into) };
    let (init, init_pidfd) = match cloned {
        Ok(Cloned::Child) => {
            drop(go_w);
            let code = match init_main(plan, cg.as_deref(), &sigfd, (go_r, helper), uid, gid) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("warden sandbox: {e}");
                    SETUP_FAILED
                }
            };
            // Leave without running the helper's destructors.
            crate::exit_now(code)
        }
        Ok(Cloned::Parent { pid, pidfd }) => (Pid::from_raw(pid), pidfd),
        Err(e) => {
            let hint = if uid != 0 && l.user_ns {
                "; unprivileged user namespaces may be off on this host (sysctls \
                 user.max_user_namespaces, kernel.unprivileged_userns_clone, \
                 kernel.apparmor_restrict_unprivileged_userns)"
            } else {
                ""
            };
            eprintln!(
                "warden sandbox: the kernel refused the sandbox's namespaces ({e}){hint}; \
                 see `warden sandbox check`"
            );
            return Ok(UNSUPPORTED);
        }
    };
    drop(go_r);
    drop(helper);
    if let Some(c) = cg.as_deref_mut() {
        c.close_join_handles();
    }
    if l.user_ns {
        // Same ids inside as outside (files keep their owners), written
        // from outside by the parent namespace's process.
        let base = format!("/proc/{init}");
        let maps = std::fs::write(format!("{base}/setgroups"), "deny")
            .and_then(|()| std::fs::write(format!("{base}/uid_map"), format!("{uid} {uid} 1\n")))
            .and_then(|()| std::fs::write(format!("{base}/gid_map"), format!("{gid} {gid} 1\n")));
        if let Err(e) = maps {
            let _ = sys::pidfd_send_signal(init_pidfd.as_fd(), libc::SIGKILL);
            let _ = waitpid(init, None);
            return Err(io_err("uid/gid maps")(e));
        }
    }
    sys::write_all(go_w.as_fd(), b"g").map_err(io_err("go"))?;
    drop(go_w);
    release_stdio();
    supervise(plan, cg.as_deref(), init, &init_pidfd, &sigfd, warden)
}

/// Whether poll reported anything on this descriptor.
fn ready(fd: Option<&PollFd<'_>>) -> bool {
    fd.and_then(PollFd::revents).is_some_and(|r| !r.is_empty())
}

/// The helper's loop: forward signals to init, exit with its status, kill
/// it when warden dies or the sandbox has used its CPU time.
fn supervise(
    plan: &Plan,
    cg: Option<&Cgroup>,
    init: Pid,
    init_pidfd: &OwnedFd,
    sigfd: &SignalFd,
    warden: Option<&OwnedFd>,
) -> Result<i32, HelperError> {
    let cpu_limit_ns = cg
        .filter(|c| c.counts_cpu())
        .map(|_| plan.limits.cpu_seconds.saturating_mul(1_000_000_000));
    let ncpus = sys::ncpus().max(1);
    let mut killed_for_cpu = false;
    loop {
        // The sandbox cannot burn more than `ncpus` CPU-seconds per second:
        // it cannot reach the limit before the next check.
        let mut timeout = PollTimeout::NONE;
        if let (Some(limit), Some(c), false) = (cpu_limit_ns, cg, killed_for_cpu) {
            let used = c.cpu_ns().unwrap_or(0);
            if used >= limit {
                killed_for_cpu = true;
                eprintln!(
                    "warden sandbox: `{}` used its {} s of CPU time (cpu_seconds): ending it",
                    plan.name, plan.limits.cpu_seconds
                );
                c.kill_all();
                let _ = sys::pidfd_send_signal(init_pidfd.as_fd(), libc::SIGKILL);
            } else {
                let ms = (limit - used) / ncpus / 1_000_000;
                timeout =
                    PollTimeout::try_from(ms.clamp(10, 10_000) as i32).unwrap_or(PollTimeout::NONE);
            }
        }
        let mut fds = vec![
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
            PollFd::new(init_pidfd.as_fd(), PollFlags::POLLIN),
        ];
        if let Some(w) = warden {
            fds.push(PollFd::new(w.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(errno("poll")(e)),
        }
        if ready(fds.get(2)) {
            // warden is gone: take everything down (pid namespace teardown).
            if let Some(c) = cg {
                c.kill_all();
            }
            let _ = sys::pidfd_send_signal(init_pidfd.as_fd(), libc::SIGKILL);
            let _ = waitpid(init, None);
            return Ok(128 + Signal::SIGKILL as i32);
        }
        if ready(fds.first()) {
            match read_signal(sigfd)? {
                Some(Signal::SIGCHLD) | None => {}
                Some(sig) => {
                    let _ = sys::pidfd_send_signal(init_pidfd.as_fd(), sig as i32);
                }
            }
        }
        match waitpid(init, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {}
            Ok(status) => return Ok(exit_code(status)),
            Err(e) => return Err(errno("waitpid")(e)),
        }
    }
}

/// pid 1 of the namespace: join the cgroups, build the view, start the
/// server, forward signals, reap orphans, answer listen() notifications,
/// exit with the server's status (the kernel then kills the rest).
fn init_main(
    plan: &Plan,
    cg: Option<&Cgroup>,
    sigfd: &SignalFd,
    (go_r, helper): (OwnedFd, OwnedFd),
    uid: u32,
    gid: u32,
) -> Result<i32, HelperError> {
    prctl::set_pdeathsig(Signal::SIGKILL).map_err(errno("prctl"))?;
    // The death signal holds only from here on. A helper killed before
    // (init not yet scheduled while it wrote the maps and "go") never
    // sends it, and its buffered "go" would let the server start with no
    // one watching: so check the helper (its pidfd turns readable when it
    // exits) before going on.
    let mut alive = [PollFd::new(helper.as_fd(), PollFlags::POLLIN)];
    if poll(&mut alive, PollTimeout::ZERO).map_err(errno("poll"))? > 0 {
        return Ok(SETUP_FAILED);
    }
    drop(helper);
    let mut go = [0u8; 1];
    match nix::unistd::read(&go_r, &mut go) {
        Ok(1) => {}
        // EOF: the helper died before "go".
        _ => return Ok(SETUP_FAILED),
    }
    drop(go_r);
    if let Some(c) = cg {
        c.join_v1()?;
    }
    // init never execs, so close-on-exec alone would leave warden's pidfd,
    // the cgroup files and anything inherited open behind /proc/1/fd.
    sys::close_all_but(&[sigfd.as_fd().as_raw_fd()]);
    if !plan.layers.pid_ns {
        // Without a pid namespace, orphans of the server are reparented to
        // us rather than to the host's init. Best effort.
        let _ = prctl::set_child_subreaper(true);
    }
    if let (true, Some(pid_max)) = (plan.layers.pid_ns, plan.pid_max) {
        // Per pid namespace since Linux 6.14 (prepare checked): a process
        // cap that holds for root without a pids cgroup.
        std::fs::write("/proc/sys/kernel/pid_max", pid_max.to_string())
            .map_err(io_err("pid_max"))?;
    }
    if plan.layers.user_ns
        && let Err(e) = crate::counters::cap_inotify()
    {
        // A read-only /proc/sys (some containers): the host's own limit
        // still holds, shared with the person.
        eprintln!(
            "warden sandbox: `{}`: inotify limits of its own not set ({e}); it shares the \
             user's",
            plan.name
        );
    }
    if plan.layers.pid_ns && plan.layers.memfd_noexec {
        // Per pid namespace (prepare checked): a memfd made without flags
        // is sealed non-executable, one asking for MFD_EXEC is refused,
        // so no program runs from memory, outside every grant's
        // execute right.
        std::fs::write("/proc/sys/vm/memfd_noexec", "2").map_err(io_err("memfd_noexec"))?;
    }
    if let Some(view) = &plan.view
        && let ProcKind::Snapshot(why) = mountns::build(view, &plan.cwd, uid, gid)?
    {
        eprintln!(
            "warden sandbox: `{}`: /proc is a read-only snapshot (a fresh proc was refused: \
             {why})",
            plan.name
        );
    }
    // The server hands init its notification descriptor (epoll watch
    // quota, listen() supervision) here.
    let pair = if plan.layers.listen_supervisor || plan.layers.epoll_quota {
        Some(
            socketpair(
                AddressFamily::Unix,
                SockType::SeqPacket,
                None,
                SockFlag::SOCK_CLOEXEC,
            )
            .map_err(errno("socketpair"))?,
        )
    } else {
        None
    };
    // SAFETY: init is single-threaded (a clone of the single-threaded
    // helper that started no thread), so the child may continue with
    // ordinary code.
    let server = match unsafe { fork() }.map_err(errno("fork"))? {
        ForkResult::Child => {
            let sock = pair.map(|(ours, theirs)| {
                drop(ours);
                theirs
            });
            let e = match restrict_and_exec(plan, sock) {
                Ok(never) => match never {},
                Err(e) => e,
            };
            eprintln!("warden sandbox: {e}");
            crate::exit_now(SETUP_FAILED)
        }
        ForkResult::Parent { child } => child,
    };
    let mut listener = match pair {
        Some((ours, theirs)) => {
            drop(theirs);
            recv_fd(&ours)
        }
        None => None,
    };
    release_stdio();
    let bind_ports = match &plan.network {
        crate::spec::Network::Ports { bind_tcp, .. } => bind_tcp.clone(),
        _ => Vec::new(),
    };
    let mut supervisor = seccomp::Supervisor::new(
        crate::epoll_quota::EpollQuota::new(std::path::Path::new("/proc")),
        bind_ports,
    );
    // init holds a duplicate of each epoll instance the sandbox adds
    // watches to (epoll_quota.rs): as many descriptors as its hard limit
    // allows. (The server's own limits were set in its process.)
    if plan.layers.epoll_quota
        && let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    loop {
        let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        if let Some(l) = &listener {
            fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(errno("poll")(e)),
        }
        let sig_ready = ready(fds.first());
        let listen_events = fds.get(1).and_then(PollFd::revents);
        drop(fds);
        if let (Some(ev), Some(l)) = (listen_events, listener.as_ref()) {
            let alive = if ev.contains(PollFlags::POLLIN) {
                seccomp::handle_notification(l.as_fd(), &mut supervisor)
            } else {
                ev.is_empty()
            };
            if !alive {
                listener = None;
            }
        }
        if sig_ready {
            match read_signal(sigfd)? {
                Some(Signal::SIGCHLD) | None => {
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
                    let _ = nix::sys::signal::kill(server, sig);
                }
            }
        }
    }
}

/// One signal from the signalfd (`None`: none pending, or a number nix
/// does not know).
fn read_signal(sigfd: &SignalFd) -> Result<Option<Signal>, HelperError> {
    let info = match sigfd.read_signal() {
        Ok(info) => info,
        Err(Errno::EAGAIN | Errno::EINTR) => None,
        Err(e) => return Err(errno("read(signalfd)")(e)),
    };
    Ok(info.and_then(|i| {
        i32::try_from(i.ssi_signo)
            .ok()
            .and_then(|n| Signal::try_from(n).ok())
    }))
}

fn exit_code(status: WaitStatus) -> i32 {
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, sig, _) => 128 + sig as i32,
        _ => SETUP_FAILED,
    }
}

/// Receives one descriptor over SCM_RIGHTS.
fn recv_fd(sock: &OwnedFd) -> Option<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!(RawFd);
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .ok()?;
    for c in msg.cmsgs().ok()? {
        if let ControlMessageOwned::ScmRights(fds) = c
            && let Some(&fd) = fds.first()
        {
            // SAFETY: SCM_RIGHTS installed this new descriptor in our
            // table; nothing else owns it.
            return Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    None
}

fn send_fd(sock: &OwnedFd, fd: BorrowedFd<'_>) -> Result<(), HelperError> {
    let fds = [fd.as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    let iov = [IoSlice::new(b"f")];
    sendmsg::<()>(sock.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
        .map_err(errno("sendmsg(listener fd)"))?;
    Ok(())
}

/// The server process: apply the per-process restrictions and exec.
fn restrict_and_exec(plan: &Plan, notify_sock: Option<OwnedFd>) -> Result<Infallible, HelperError> {
    sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)
        .map_err(errno("sigprocmask"))?;
    set_rlimits(plan)?;
    sys::cloexec_from_3();
    prctl::set_no_new_privs().map_err(errno("no_new_privs"))?;
    if let Some(sock) = notify_sock {
        let listener = seccomp::notify_filter(plan.layers.listen_supervisor)?;
        send_fd(&sock, listener.as_fd())?;
    }
    std::env::set_current_dir(&plan.cwd)
        .map_err(|e| HelperError::Sys(sys::err_from(format!("chdir {}", plan.cwd.display()), e)))?;
    let program = cstring(plan.program.as_os_str().as_bytes())?;
    let argv: Vec<CString> = plan
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    // The environment warden prepared for the server, which the helper
    // carried under other names (crate::env::SERVER_ENV_PREFIX).
    let envp: Vec<CString> = crate::env::server_env()
        .iter()
        .map(|pair| cstring(pair.as_bytes()))
        .collect::<Result<_, _>>()?;
    let filters = if plan.layers.seccomp {
        seccomp::build(&plan.network)?
    } else {
        Vec::new()
    };
    if plan.layers.drop_caps {
        caps::drop_all()?;
    }
    let skipped = match plan.layers.landlock_abi {
        Some(abi) => apply_landlock(plan, abi)?,
        None => Vec::new(),
    };
    // The server's own mask, set before the filter (which has no say on
    // umask, but nothing is asked of the kernel after it but the exec).
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(plan.umask));
    seccomp::apply(&filters)?;
    let Err(e) = execve(&program, &argv, &envp);
    let what = match e {
        Errno::EACCES | Errno::EPERM => format!(
            "exec {} ({})",
            plan.program.display(),
            exec_refusal(&plan.program, &skipped)
        ),
        _ => format!("exec {}", plan.program.display()),
    };
    Err(HelperError::Sys(sys::errno_from(what, e)))
}

fn cstring(bytes: &[u8]) -> Result<CString, HelperError> {
    CString::new(bytes).map_err(|e| {
        HelperError::Sys(sys::err_from(
            "argument with NUL byte",
            io::Error::new(io::ErrorKind::InvalidInput, e),
        ))
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

/// Restricts this process with Landlock. Returns the paths left out
/// because they could not be opened (a device node the view lacks), for
/// the message of a refused exec.
fn apply_landlock(plan: &Plan, abi: u8) -> Result<Vec<String>, HelperError> {
    let ll = |e: landlock::RulesetError| HelperError::Landlock(e.to_string());
    let requested = abi;
    let abi = abi_from(abi);
    let read = AccessFs::from_read(abi);
    let read_exec = read | AccessFs::Execute;
    let private =
        AccessFs::from_all(abi) & !(AccessFs::Execute | AccessFs::MakeChar | AccessFs::MakeBlock);
    // A configured write grant (the workspace) is opened by host programs
    // later: a FIFO there blocks them, a socket answers as their daemon.
    // Landlock's Make* rights also decide a rename or link into it.
    let write = private & !(AccessFs::MakeFifo | AccessFs::MakeSock);
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
    let paths = &plan.landlock;
    let mut skipped = Vec::new();
    let mut created = ruleset.create().map_err(ll)?;
    for (list, access) in [
        (&paths.read_exec, read_exec),
        (&paths.read, read),
        (&paths.write, write),
        (&paths.private, private),
        (&paths.list, BitFlags::from(AccessFs::ReadDir)),
    ] {
        let rules = path_rules(list, &paths.confine, access, abi, &mut skipped)?;
        created = created.add_rules(rules.into_iter().map(Ok)).map_err(ll)?;
    }
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
    Ok(skipped)
}

/// One rule per path of `list`. A path that does not open is left out
/// (and named in `skipped`): the lists hold device nodes a host may lack.
/// A confined grant ([`crate::plan::Bind::confine`], only without a view)
/// is opened once and checked to lie under its folder, and the rule is
/// made from that handle; failing that ends the launch.
fn path_rules(
    list: &[PathBuf],
    confine: &[(PathBuf, PathBuf)],
    access: BitFlags<AccessFs>,
    abi: ABI,
    skipped: &mut Vec<String>,
) -> Result<Vec<PathBeneath<OwnedFd>>, HelperError> {
    let mut rules = Vec::with_capacity(list.len());
    for path in list {
        let fd = match confine.iter().find(|(c, _)| c == path) {
            Some((_, root)) => sys::open_confined(path, root)?,
            None => match sys::open_path(path) {
                Ok(fd) => fd,
                Err(e) => {
                    skipped.push(e.to_string());
                    continue;
                }
            },
        };
        // Landlock refuses directory-only rights on a file.
        let is_dir =
            nix::sys::stat::fstat(&fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR);
        let access = if is_dir {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        rules.push(PathBeneath::new(fd, access));
    }
    Ok(rules)
}

/// Why an exec was refused, as far as this process can still see: the
/// file's mode and owner, a `noexec` mount, Landlock rules left out.
fn exec_refusal(program: &Path, skipped: &[String]) -> String {
    use std::os::unix::fs::MetadataExt;
    let mut seen = Vec::new();
    match std::fs::metadata(program) {
        Ok(m) => seen.push(format!(
            "mode {:o}, owner {}:{}, {} bytes",
            m.mode() & 0o7777,
            m.uid(),
            m.gid(),
            m.len()
        )),
        Err(e) => seen.push(format!("stat: {e}")),
    }
    if nix::sys::statvfs::statvfs(program)
        .is_ok_and(|v| v.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC))
    {
        seen.push("on a noexec mount".into());
    }
    if !skipped.is_empty() {
        seen.push(format!("Landlock rules left out: {}", skipped.join("; ")));
    }
    seen.join("; ")
}

fn set_rlimits(plan: &Plan) -> Result<(), HelperError> {
    const MB: u64 = 1024 * 1024;
    let l = plan.limits;
    let set = |res: Resource, soft: Option<u64>, hard: u64, what: &'static str| {
        let (cur_soft, cur_hard) = getrlimit(res).map_err(errno(what))?;
        // Never above the current hard limit (raising it needs privilege).
        let hard = hard.min(cur_hard);
        let soft = soft.unwrap_or(cur_soft).min(hard);
        setrlimit(res, soft, hard).map_err(errno(what))
    };
    // RLIMIT_DATA (not AS): V8 and others reserve large PROT_NONE ranges
    // that RLIMIT_AS would count; DATA counts what is actually writable.
    // Per process: the memory cgroup bounds all of them together.
    let memory = l.memory_mb.saturating_mul(MB);
    set(Resource::RLIMIT_DATA, Some(memory), memory, "RLIMIT_DATA")?;
    // The stack's hard limit is often unlimited: a process could raise its
    // own and grow a stack past the memory limit.
    set(Resource::RLIMIT_STACK, None, memory / 4, "RLIMIT_STACK")?;
    // Counted per (user namespace, uid) since Linux 5.14, so for a non-root
    // user a per-sandbox cap; init is one of them. Ignored for host root.
    let nproc = l.processes.saturating_add(1);
    set(Resource::RLIMIT_NPROC, Some(nproc), nproc, "RLIMIT_NPROC")?;
    set(
        Resource::RLIMIT_NOFILE,
        Some(l.open_files),
        l.open_files,
        "RLIMIT_NOFILE",
    )?;
    set(
        Resource::RLIMIT_CPU,
        Some(l.cpu_seconds),
        l.cpu_seconds,
        "RLIMIT_CPU",
    )?;
    let fsize = l.file_size_mb.saturating_mul(MB);
    set(Resource::RLIMIT_FSIZE, Some(fsize), fsize, "RLIMIT_FSIZE")?;
    // RLIMIT_CORE 1, not 0 (raised in the helper where only root could,
    // `hold_core_limit`): a file dump needs a page, so 1 writes none, and
    // with a pipe `core_pattern` (systemd-coredump, apport) the kernel
    // ignores the limit except for 1, which it takes for a crash of the
    // handler itself and aborts the dump. With 0 a crashing server made
    // the host start that handler as root, reading its memory and
    // namespaces. Changing it is refused by seccomp.
    set(Resource::RLIMIT_CORE, Some(1), 1, "RLIMIT_CORE")?;
    // Scheduling: no real-time policy (RLIMIT_RTPRIO 0) and no nice value
    // below the one it started with (RLIMIT_NICE 0). A host whose limits
    // allow them (root's raised hard limits, a real-time group) would
    // otherwise let a server starve the person's processes of the CPU;
    // the capability that ignores both (CAP_SYS_NICE) is dropped.
    set(Resource::RLIMIT_RTPRIO, Some(0), 0, "RLIMIT_RTPRIO")?;
    set(Resource::RLIMIT_NICE, Some(0), 0, "RLIMIT_NICE")?;
    // Queued signals, locked shared memory and message queue bytes are
    // counted per user across user namespaces, checked in the sandbox's
    // namespace against these limits: a share of the person's, or a server
    // taking all of one leaves the person's sigqueue and POSIX timers
    // (EAGAIN) or SHM_LOCK (ENOMEM) failing while it runs (crate::counters).
    for (res, what) in [
        (Resource::RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING"),
        (Resource::RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK"),
        (Resource::RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE"),
    ] {
        let (soft, _) = getrlimit(res).map_err(errno(what))?;
        let share = (soft / crate::counters::SHARE).max(1);
        set(res, Some(share), share, what)?;
    }
    Ok(())
}

/// Sets RLIMIT_CORE to 1/1 here, in the host's namespaces, where a helper
/// started by root may raise a hard limit of 0 (the server, in its user
/// namespace, never may). A limit that stays below 1 (a host whose hard
/// limit is 0, warden not root) is said when a pipe `core_pattern` would
/// then receive the server's crash.
fn hold_core_limit(name: &str) {
    let _ = setrlimit(Resource::RLIMIT_CORE, 1, 1);
    let held = getrlimit(Resource::RLIMIT_CORE).is_ok_and(|(soft, _)| soft == 1);
    let pipe = std::fs::read("/proc/sys/kernel/core_pattern").is_ok_and(|p| p.starts_with(b"|"));
    if !held && pipe {
        eprintln!(
            "warden sandbox: `{name}`: the hard RLIMIT_CORE is 0, so a crash of the server \
             goes to the host's core handler (core_pattern is a pipe); raise the hard limit \
             to at least 1"
        );
    }
}

/// Blocks the forwarded signals and returns a signalfd that receives them.
fn block_signals() -> Result<SignalFd, HelperError> {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(s);
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None).map_err(errno("sigprocmask"))?;
    SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(errno("signalfd"))
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn rules_leave_out_missing_paths_by_name_but_never_a_confined_grant() {
        let ws = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let root = ws.path().canonicalize().expect("canonical");
        std::fs::write(ws.path().join("file"), "x").expect("write");
        std::os::unix::fs::symlink(outside.path(), ws.path().join("away")).expect("symlink");
        let missing = ws.path().join("missing");
        let list = vec![
            ws.path().to_path_buf(),
            ws.path().join("file"),
            missing.clone(),
        ];
        let mut skipped = Vec::new();
        let rules = path_rules(
            &list,
            &[],
            AccessFs::from_all(ABI::V5),
            ABI::V5,
            &mut skipped,
        )
        .expect("rules");
        assert_eq!(rules.len(), 2);
        assert_eq!(skipped.len(), 1);
        assert!(
            skipped[0].contains(&missing.display().to_string()),
            "{skipped:?}"
        );

        let away = ws.path().join("away");
        let confine = vec![(away.clone(), root)];
        let refused = path_rules(
            &[away],
            &confine,
            AccessFs::from_all(ABI::V5),
            ABI::V5,
            &mut skipped,
        );
        assert!(
            matches!(&refused, Err(HelperError::Sys(e)) if e.to_string().contains("outside")),
            "{refused:?}"
        );
    }

    #[test]
    fn a_refused_exec_says_what_the_helper_can_still_see() {
        let dir = tempfile::tempdir().expect("tempdir");
        let program = dir.path().join("server");
        std::fs::write(&program, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let said = exec_refusal(
            &program,
            &["open /dev/kvm: No such file or directory".into()],
        );
        assert!(said.contains("mode 644"), "{said}");
        assert!(
            said.contains("Landlock rules left out: open /dev/kvm"),
            "{said}"
        );
        let said = exec_refusal(&dir.path().join("gone"), &[]);
        assert!(said.starts_with("stat: "), "{said}");
    }
}
