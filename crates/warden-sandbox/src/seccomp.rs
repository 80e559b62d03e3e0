//! seccomp filters, installed last in the server right before `exec`
//! ([`build`] + [`apply`]), and the small user-notification filter that
//! sends `epoll_ctl(ADD)` and, in ports mode, `listen()` to init
//! ([`notify_filter`], answered by [`handle_notification`]).
//!
//! A deny-list (the server runs arbitrary runtimes, so an allow-list would
//! break them):
//!
//! - EPERM: syscalls a tool server never needs (ptrace, the mount family,
//!   bpf, keyctl, kexec, modules, unshare/setns and namespace flags of
//!   `clone`, io_uring, perf, userfaultfd, TIOCSTI…), and **set-id mode
//!   bits**: `chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `mknod`, `mknodat`
//!   and `creat` with S_ISUID or S_ISGID in the mode argument, `open` and
//!   `openat` when they create (O_CREAT or O_TMPFILE) with such a mode.
//!   The mode is argument 1, 2 or 3 depending on the call: `openat`'s is
//!   the 4th (argument 3); a rule on its flags would match O_NONBLOCK
//!   (0o4000 = S_ISUID) and break `ls`. Also EPERM: **device nodes**,
//!   `mknod`/`mknodat` of a character or block device and
//!   `renameat2(RENAME_WHITEOUT)` (a 0:0 character device needs no
//!   privilege since Linux 5.8, and the whiteout a rename leaves is not
//!   checked by Landlock's MakeChar right); `prlimit64` of any pid but
//!   0 (the server's own limits stay; init's, which keeps the epoll quota,
//!   and other processes' do not); and any change of RLIMIT_CORE
//!   (`setrlimit`, `prlimit64` with a new value): its 1 is what keeps a
//!   crash from a pipe `core_pattern`'s root handler.
//! - ENOMEM: **huge pages** (`mmap` MAP_HUGETLB, `memfd_create`
//!   MFD_HUGETLB, `shmget` SHM_HUGETLB): hugetlb memory is charged to
//!   neither the memory cgroup nor RLIMIT_DATA, so it escaped `memory_mb`.
//! - EOPNOTSUPP: `fallocate` modes that allocate past what RLIMIT_FSIZE
//!   checks: FALLOC_FL_KEEP_SIZE without FALLOC_FL_PUNCH_HOLE reserves
//!   disk blocks beyond the end of the file without growing it, and
//!   FALLOC_FL_INSERT_RANGE grows it; the kernel checks neither against
//!   the limit, so one file of a write grant took any amount of the
//!   host's disk under `file_size_mb`. EOPNOTSUPP is what a filesystem
//!   without those modes answers: callers fall back to plain writes.
//! - EACCES: `fcntl(F_SETLEASE)`. A lease needs only a read-only open of
//!   a file the caller owns, and every other process's open for writing
//!   (a write lease: any open) then waits for the holder up to
//!   `fs.lease-break-time` (45 s): a server froze the person's editor and
//!   git on a file of its *read* grant. EACCES is what a caller that does
//!   not own the file gets.
//! - ENOSYS: `io_setup` (Linux AIO): its events come out of one budget
//!   for the whole host (`fs.aio-max-nr`), which a server took in full,
//!   failing every other program's `io_setup`; ENOSYS is a kernel without
//!   AIO, which libaio users and glibc's POSIX AIO (threads) handle.
//! - ENOSYS: `clone3` and `openat2` (their flags and mode hide in memory
//!   the filter cannot read; libc falls back to `clone`/`openat`), and
//!   `listmount`/`statmount` (the mount namespace already limits them to
//!   the sandbox's own mounts; ENOSYS lets tools fall back).
//! - EACCES, network `none`: every socket family but AF_UNIX, and AF_UNIX
//!   *datagram* sockets and socketpairs (only a datagram socket sends to
//!   an address in `sendmsg`/`sendmmsg`, whose `msg_name` the filter cannot
//!   read; stream sockets refuse `msg_name`, seqpacket ones ignore it),
//!   `connect`, and `sendto` with an address. Never `send()` on a
//!   socketpair: asyncio wakes its loop through one.
//! - listen() in ports mode goes to init ([`handle_notification`]): refused
//!   on an unbound inet socket (auto-bind), on an address other than the
//!   wildcard or loopback (each extra loopback address was one more
//!   listener on a granted port), on an abstract unix name; the backlog
//!   is capped at [`MAX_BACKLOG`] (unaccepted connections are charged to
//!   no memory cgroup). bind() goes there too and init binds on the
//!   server's behalf (`bind_check.rs`): no unix socket is named (a
//!   socketpair() end took a host abstract name), TCP only on `bind_tcp`.
//! - EACCES, ports mode: every socket but TCP (Landlock covers TCP
//!   only), AF_UNIX `socket()` included: a pathname socket inside a grant
//!   stayed connectable (docker.sock in a read grant is root on the
//!   host), and the host's abstract names are shared there (a listener
//!   or datagram socket bound to one took what host programs sent).
//!   `socketpair()` of AF_UNIX stream/seqpacket stays (already connected;
//!   the listen() supervisor also refuses abstract listeners),
//!   `sendto`/`sendmsg`/`sendmmsg` with MSG_FASTOPEN (TCP Fast Open
//!   connects inside the send, where Landlock's connect hook is not
//!   called; `TCP_FASTOPEN_CONNECT` + `connect()` is seen by Landlock),
//!   and `setsockopt(SO_REUSEPORT)` (it would let a granted bind join a
//!   host service's listener and take part of its connections).

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::sys::socket::{Backlog, SockaddrLike, SockaddrStorage, getsockname, listen};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

use crate::epoll_quota::EpollQuota;
use crate::spec::Network;
use crate::sys;

#[derive(Debug, thiserror::Error)]
#[error("seccomp: {0}")]
pub(crate) struct SeccompError(String);

fn err(e: impl std::fmt::Display) -> SeccompError {
    SeccompError(e.to_string())
}

fn arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(err)
}

const SYS_FCHMODAT2: libc::c_long = 452;
const SYS_STATMOUNT: libc::c_long = 457;
const SYS_LISTMOUNT: libc::c_long = 458;
const MSG_FASTOPEN: u64 = 0x2000_0000;
const FALLOC_FL_KEEP_SIZE: u64 = 0x01;
const FALLOC_FL_PUNCH_HOLE: u64 = 0x02;
const FALLOC_FL_INSERT_RANGE: u64 = 0x20;
/// `__O_TMPFILE` without O_DIRECTORY (libc's O_TMPFILE includes it).
const O_TMPFILE_BIT: u64 = 0o20_000_000;
const RENAME_WHITEOUT: u64 = 1 << 2;

/// Syscalls that always fail with EPERM.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_fanotify_init,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_pidfd_getfd,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_uselib,
];

fn cond(arg: u8, op: Op, value: u64) -> Result<Cond, SeccompError> {
    Cond::new(arg, Len::Dword, op, value).map_err(err)
}

fn rule(conds: Vec<Cond>) -> Result<SeccompRule, SeccompError> {
    SeccompRule::new(conds).map_err(err)
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
) -> Result<BpfProgram, SeccompError> {
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, arch()?).map_err(err)?;
    BpfProgram::try_from(filter).map_err(err)
}

/// Rules matching a mode argument `arg` with S_ISUID or S_ISGID set,
/// each combined with `extra` conditions.
fn setid_mode(arg: u8, extra: &[(u8, u64)]) -> Result<Vec<SeccompRule>, SeccompError> {
    let mut out = Vec::new();
    for bit in [libc::S_ISUID as u64, libc::S_ISGID as u64] {
        let mut conds = vec![cond(arg, Op::MaskedEq(bit), bit)?];
        for &(a, mask) in extra {
            conds.push(cond(a, Op::MaskedEq(mask), mask)?);
        }
        out.push(rule(conds)?);
    }
    Ok(out)
}

/// Set-id modes of a call that creates only with O_CREAT or O_TMPFILE in
/// its flags argument `flags`.
fn setid_create(flags: u8, mode: u8) -> Result<Vec<SeccompRule>, SeccompError> {
    let mut v = setid_mode(mode, &[(flags, libc::O_CREAT as u64)])?;
    v.extend(setid_mode(mode, &[(flags, O_TMPFILE_BIT)])?);
    Ok(v)
}

/// The filters for a network mode, in installation order.
pub(crate) fn build(network: &Network) -> Result<Vec<BpfProgram>, SeccompError> {
    let mut programs = Vec::new();

    // 0. The x32 ABI reaches the same kernel entry points under numbers
    //    with bit 30 set, which no rule below names: refuse all of them.
    #[cfg(target_arch = "x86_64")]
    programs.push(x32_filter());

    // 1. EPERM: the deny-list, namespace clone flags, TIOCSTI, set-id modes.
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        rules.insert(nr, Vec::new());
    }
    for ns in [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ] {
        let ns = ns as u64;
        rules.entry(libc::SYS_clone).or_default().push(rule(vec![
            Cond::new(0, Len::Qword, Op::MaskedEq(ns), ns).map_err(err)?,
        ])?);
    }
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Op::Eq, libc::TIOCSTI)?])?,
            rule(vec![cond(1, Op::Eq, libc::TIOCLINUX)?])?,
        ],
    );
    // Clearing the parent-death signal would let a process outlive warden
    // when it is not in a pid namespace.
    rules.insert(
        libc::SYS_prctl,
        vec![rule(vec![
            cond(0, Op::Eq, libc::PR_SET_PDEATHSIG as u64)?,
            cond(1, Op::Eq, 0)?,
        ])?],
    );
    for (nr, mode) in [
        (libc::SYS_fchmod, 1u8),
        (libc::SYS_fchmodat, 2),
        (SYS_FCHMODAT2, 2),
        (libc::SYS_mknodat, 2),
    ] {
        rules.insert(nr, setid_mode(mode, &[])?);
    }
    rules.insert(libc::SYS_openat, setid_create(2, 3)?);
    #[cfg(target_arch = "x86_64")]
    {
        for (nr, mode) in [
            (libc::SYS_chmod, 1u8),
            (libc::SYS_creat, 1),
            (libc::SYS_mknod, 1),
        ] {
            rules.insert(nr, setid_mode(mode, &[])?);
        }
        rules.insert(libc::SYS_open, setid_create(1, 2)?);
    }
    // Device nodes: a character or block device made by mknod. Since
    // Linux 5.8 a 0:0 character device (an overlayfs whiteout) needs no
    // privilege, and `renameat2(RENAME_WHITEOUT)` leaves one in the
    // source's place, a path Landlock's MakeChar right does not check:
    // a server planted device nodes in its write grant.
    rules
        .entry(libc::SYS_mknodat)
        .or_default()
        .extend(device_nodes(2)?);
    #[cfg(target_arch = "x86_64")]
    rules
        .entry(libc::SYS_mknod)
        .or_default()
        .extend(device_nodes(1)?);
    rules.insert(
        libc::SYS_renameat2,
        vec![rule(vec![cond(
            4,
            Op::MaskedEq(RENAME_WHITEOUT),
            RENAME_WHITEOUT,
        )?])?],
    );
    // Limits of another process (prlimit64 with a pid): the sandbox's
    // init keeps the epoll quota and reads its own /proc, and a server
    // lowering init's RLIMIT_NOFILE could make that fail. A process's own
    // limits (pid 0: getrlimit, setrlimit, prlimit of itself) stay.
    // RLIMIT_CORE stays the 1 the helper set (`helper::set_rlimits`): with
    // a pipe `core_pattern` the kernel ignores the limit except for that
    // value, so a server lowering its soft limit to 0 would have the host
    // start the core handler as root with its memory. Reading the limit
    // (prlimit64 with no new value, getrlimit) stays.
    let core = libc::RLIMIT_CORE as u64;
    rules.insert(
        libc::SYS_prlimit64,
        vec![
            rule(vec![cond(0, Op::Ne, 0)?])?,
            rule(vec![
                cond(1, Op::Eq, core)?,
                Cond::new(2, Len::Qword, Op::Ne, 0).map_err(err)?,
            ])?,
        ],
    );
    rules.insert(
        libc::SYS_setrlimit,
        vec![rule(vec![cond(0, Op::Eq, core)?])?],
    );
    programs.push(compile(rules, SeccompAction::Errno(libc::EPERM as u32))?);

    // 2. EOPNOTSUPP: fallocate modes whose allocation RLIMIT_FSIZE never
    //    sees (KEEP_SIZE unless it punches a hole, INSERT_RANGE).
    let mut rules = BTreeMap::new();
    rules.insert(
        libc::SYS_fallocate,
        vec![
            rule(vec![cond(
                1,
                Op::MaskedEq(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE),
                FALLOC_FL_KEEP_SIZE,
            )?])?,
            rule(vec![cond(
                1,
                Op::MaskedEq(FALLOC_FL_INSERT_RANGE),
                FALLOC_FL_INSERT_RANGE,
            )?])?,
        ],
    );
    programs.push(compile(
        rules,
        SeccompAction::Errno(libc::EOPNOTSUPP as u32),
    )?);

    // 2b. ENOMEM: huge pages. hugetlb memory (MAP_HUGETLB, MFD_HUGETLB,
    //     SHM_HUGETLB) is charged to neither the memory cgroup nor
    //     RLIMIT_DATA, so a server could take the host's whole huge-page
    //     pool outside `memory_mb`. ENOMEM is what a host with no free
    //     huge pages answers; callers fall back to ordinary pages.
    let mut rules = BTreeMap::new();
    for (nr, arg, flag) in [
        (libc::SYS_mmap, 3u8, libc::MAP_HUGETLB as u64),
        (libc::SYS_memfd_create, 1, libc::MFD_HUGETLB as u64),
        (libc::SYS_shmget, 2, libc::SHM_HUGETLB as u64),
    ] {
        rules.insert(nr, vec![rule(vec![cond(arg, Op::MaskedEq(flag), flag)?])?]);
    }
    programs.push(compile(rules, SeccompAction::Errno(libc::ENOMEM as u32))?);

    // 3. ENOSYS: arguments hidden in memory, mount listing, Linux AIO.
    let mut rules = BTreeMap::new();
    for nr in [
        libc::SYS_io_setup,
        libc::SYS_clone3,
        libc::SYS_openat2,
        SYS_STATMOUNT,
        SYS_LISTMOUNT,
    ] {
        rules.insert(nr, Vec::new());
    }
    programs.push(compile(rules, SeccompAction::Errno(libc::ENOSYS as u32))?);

    // 4. EACCES: file leases (whose holder stalls other processes' opens),
    //    and sockets and sends per network mode.
    let unix = libc::AF_UNIX as u64;
    let inet = libc::AF_INET as u64;
    let inet6 = libc::AF_INET6 as u64;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(
        libc::SYS_fcntl,
        vec![rule(vec![cond(1, Op::Eq, libc::F_SETLEASE as u64)?])?],
    );
    match network {
        Network::Host => {}
        Network::None => {
            // Only AF_UNIX stream and seqpacket sockets; nothing that can
            // send to an address. An allow-list of the two types (every
            // other value of the type's low 4 bits refused): AF_UNIX turns
            // SOCK_RAW into a datagram socket, which a deny of SOCK_DGRAM
            // alone let through to a host listener.
            let mut unix_only = vec![rule(vec![cond(0, Op::Ne, unix)?])?];
            unix_only.extend(unix_datagrams()?);
            rules.insert(libc::SYS_socket, unix_only.clone());
            rules.insert(libc::SYS_socketpair, unix_only);
            rules.insert(libc::SYS_connect, Vec::new());
            rules.insert(
                libc::SYS_sendto,
                vec![rule(vec![
                    Cond::new(4, Len::Qword, Op::Ne, 0).map_err(err)?,
                ])?],
            );
        }
        Network::Ports { .. } => {
            // TCP over IPv4/IPv6 only (ports enforced by Landlock). No
            // AF_UNIX socket(): a pathname socket in a grant (a read-only
            // bind does not stop a connect; think docker.sock) would be a
            // service no grant names, and the host's abstract names are
            // shared here (a listener or a datagram socket bound to one
            // took what host programs sent there). Connected pairs from
            // socketpair() stay: runtimes wake their loops with them.
            let mut v = vec![rule(vec![cond(0, Op::Ne, inet)?, cond(0, Op::Ne, inet6)?])?];
            for dom in [inet, inet6] {
                // Any type but SOCK_STREAM (low 4 bits; the rest are flags).
                for ty in [
                    libc::SOCK_DGRAM,
                    libc::SOCK_RAW,
                    libc::SOCK_RDM,
                    libc::SOCK_SEQPACKET,
                    libc::SOCK_DCCP,
                    10, // SOCK_PACKET (obsolete)
                ] {
                    v.push(rule(vec![
                        cond(0, Op::Eq, dom)?,
                        cond(1, Op::MaskedEq(0xf), ty as u64)?,
                    ])?);
                }
                // SOCK_STREAM with a protocol other than TCP (SCTP, MPTCP).
                v.push(rule(vec![
                    cond(0, Op::Eq, dom)?,
                    cond(2, Op::Ne, 0)?,
                    cond(2, Op::Ne, libc::IPPROTO_TCP as u64)?,
                ])?);
            }
            rules.insert(libc::SYS_socket, v);
            let mut pair = vec![rule(vec![cond(0, Op::Ne, unix)?])?];
            pair.extend(unix_datagrams()?);
            rules.insert(libc::SYS_socketpair, pair);
            // SO_REUSEPORT: a socket with it joins a host listener of the
            // same user on a granted port, and the kernel deals out that
            // service's connections between them.
            rules.insert(
                libc::SYS_setsockopt,
                vec![rule(vec![
                    cond(1, Op::Eq, libc::SOL_SOCKET as u64)?,
                    cond(2, Op::Eq, libc::SO_REUSEPORT as u64)?,
                ])?],
            );
            for (nr, flags) in [
                (libc::SYS_sendto, 3u8),
                (libc::SYS_sendmsg, 2),
                (libc::SYS_sendmmsg, 3),
            ] {
                rules.insert(
                    nr,
                    vec![rule(vec![cond(
                        flags,
                        Op::MaskedEq(MSG_FASTOPEN),
                        MSG_FASTOPEN,
                    )?])?],
                );
            }
        }
    }
    programs.push(compile(rules, SeccompAction::Errno(libc::EACCES as u32))?);
    Ok(programs)
}

/// Rules matching a `mknod` mode argument `arg` of a character or block
/// device (the file type bits, S_IFMT).
fn device_nodes(arg: u8) -> Result<Vec<SeccompRule>, SeccompError> {
    let fmt = libc::S_IFMT as u64;
    [libc::S_IFCHR, libc::S_IFBLK]
        .into_iter()
        .map(|kind| rule(vec![cond(arg, Op::MaskedEq(fmt), kind as u64)?]))
        .collect()
}

/// Rules matching AF_UNIX sockets of every type but stream and
/// seqpacket (an allow-list of the type's low 4 bits: AF_UNIX turns
/// SOCK_RAW into a datagram socket too).
fn unix_datagrams() -> Result<Vec<SeccompRule>, SeccompError> {
    let mut v = Vec::new();
    for ty in 0..16u64 {
        if ty != libc::SOCK_STREAM as u64 && ty != libc::SOCK_SEQPACKET as u64 {
            v.push(rule(vec![
                cond(0, Op::Eq, libc::AF_UNIX as u64)?,
                cond(1, Op::MaskedEq(0xf), ty)?,
            ])?);
        }
    }
    Ok(v)
}

/// Installs the filters on the calling thread (no_new_privs must be set).
pub(crate) fn apply(programs: &[BpfProgram]) -> Result<(), SeccompError> {
    for p in programs {
        seccompiler::apply_filter(p).map_err(err)?;
    }
    Ok(())
}

/// ENOSYS for every x32 system call (number with `__X32_SYSCALL_BIT`).
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> BpfProgram {
    const X32_BIT: u32 = 0x4000_0000;
    let ld_w_abs = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jset_k = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
    let ret_k = libc::BPF_RET | libc::BPF_K;
    [
        stmt(ld_w_abs, 0), // seccomp_data.nr
        jump(jset_k, X32_BIT, 0, 1),
        stmt(ret_k, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        stmt(ret_k, SECCOMP_RET_ALLOW),
    ]
    .into_iter()
    .map(|f| seccompiler::sock_filter {
        code: f.code,
        jt: f.jt,
        jf: f.jf,
        k: f.k,
    })
    .collect()
}

// --- listen() supervision (ports mode) ---

const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;
const SECCOMP_FILTER_FLAG_NEW_LISTENER: libc::c_ulong = 1 << 3;
const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
const SECCOMP_USER_NOTIF_FLAG_CONTINUE: u32 = 1;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
#[cfg(target_arch = "x86_64")]
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Installs (on the calling thread) a filter that hands init every
/// `epoll_ctl(EPOLL_CTL_ADD)` (the watch quota, `epoll_quota.rs`) and,
/// when `listen`, every `listen()`, and returns the listener descriptor.
/// Needs no_new_privs or CAP_SYS_ADMIN in the current user namespace.
pub(crate) fn notify_filter(listen: bool) -> Result<OwnedFd, SeccompError> {
    let ld_w_abs = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let jeq_k = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let ret_k = libc::BPF_RET | libc::BPF_K;
    // No syscall has this number: listen() and bind() are not sent when
    // not asked (ports mode only).
    let (listen_nr, bind_nr) = if listen {
        (libc::SYS_listen as u32, libc::SYS_bind as u32)
    } else {
        (u32::MAX, u32::MAX)
    };
    // seccomp_data.args[1]'s low word (little-endian: x86_64, aarch64).
    const ARG1_LOW: u32 = 24;
    const EPOLL_CTL_ADD: u32 = 1;
    let prog = [
        stmt(ld_w_abs, 4), // 0: seccomp_data.arch
        jump(jeq_k, AUDIT_ARCH, 1, 0),
        stmt(ret_k, SECCOMP_RET_KILL_PROCESS),
        stmt(ld_w_abs, 0),                             // 3: seccomp_data.nr
        jump(jeq_k, listen_nr, 5, 0),                  // → 10
        jump(jeq_k, bind_nr, 4, 0),                    // → 10
        jump(jeq_k, libc::SYS_epoll_ctl as u32, 0, 2), // → 7, else 9
        stmt(ld_w_abs, ARG1_LOW),
        jump(jeq_k, EPOLL_CTL_ADD, 1, 0),    // → 10, else 9
        stmt(ret_k, SECCOMP_RET_ALLOW),      // 9
        stmt(ret_k, SECCOMP_RET_USER_NOTIF), // 10
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points to a valid BPF program of `len` instructions
    // that outlives the call; the kernel copies it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    let fd = i32::try_from(rc).map_err(err)?;
    // SAFETY: the kernel returned a new listener descriptor owned by us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `struct seccomp_data`.
#[repr(C)]
#[derive(Default)]
struct SeccompData {
    nr: i32,
    arch: u32,
    ip: u64,
    args: [u64; 6],
}

/// `struct seccomp_notif`.
#[repr(C)]
#[derive(Default)]
struct SeccompNotif {
    id: u64,
    pid: u32,
    flags: u32,
    data: SeccompData,
}

/// `struct seccomp_notif_resp`.
#[repr(C)]
#[derive(Default)]
struct SeccompNotifResp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

// _IOWR('!', 0, struct seccomp_notif), _IOWR('!', 1, struct seccomp_notif_resp),
// and for ID_VALID the original _IOR('!', 2, __u64): kernels before 5.17
// know only that number, later ones accept it beside the corrected _IOW.
const NOTIF_RECV: libc::c_ulong = 0xc050_2100;
const NOTIF_SEND: libc::c_ulong = 0xc018_2101;
const NOTIF_ID_VALID: libc::c_ulong = 0x8008_2102;

/// Answers one pending notification on `listener` (init calls this when
/// the descriptor is readable). `epoll_ctl(ADD)`: init takes its own
/// duplicate of the caller's epoll instance (counted from then on) and
/// the call continues while the sandbox is within `quota`, else ENOSPC as
/// the kernel's own limit answers. The continue-after-check race the
/// kernel warns of remains here: a thread that puts another instance
/// under the same descriptor number between init's look and the kernel's
/// call adds that one watch to an instance init has not seen (see
/// `epoll_quota.rs`; making the call in init instead would tie a
/// signalfd's wake-ups to init's signals). `listen()`: the check is made on init's own duplicate of
/// the caller's socket (`pidfd_getfd`), and init calls `listen()` on that
/// duplicate itself instead of letting the call continue, so swapping the
/// descriptor number in the server between check and call changes
/// nothing. `bind()` (ports mode): the same, init binds its duplicate
/// (`bind_check`). Returns false when the listener is dead.
pub(crate) fn handle_notification(listener: BorrowedFd<'_>, sup: &mut Supervisor) -> bool {
    let mut req = SeccompNotif::default();
    // SAFETY: NOTIF_RECV fills a `struct seccomp_notif` of this layout.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            NOTIF_RECV,
            &mut req as *mut SeccompNotif,
        )
    };
    if rc < 0 {
        // ENOENT: the caller went away meanwhile; EINTR: try again later.
        let e = std::io::Error::last_os_error();
        return matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EINTR));
    }
    let mut resp = SeccompNotifResp {
        id: req.id,
        ..SeccompNotifResp::default()
    };
    if i64::from(req.data.nr) == libc::SYS_epoll_ctl {
        // Only EPOLL_CTL_ADD is sent here; it goes on (the kernel makes
        // the call as asked) unless the sandbox's share is used up. init
        // takes its own duplicate of the instance (epoll_quota.rs), so an
        // instance sent away and closed still counts. The kernel reads an
        // int descriptor: the argument's low 32 bits.
        let epfd = req.data.args[0] as u32 as i32;
        // init out of descriptors for its duplicate: the add is refused
        // as past a limit (ENOSPC), not with an errno epoll_ctl never gives.
        let caller = caller_fd(req.pid, epfd, listener, req.id, &mut sup.pidfd).map_err(|e| {
            if e == libc::EMFILE || e == libc::ENFILE {
                libc::ENOSPC
            } else {
                e
            }
        });
        match caller.and_then(|ep| sup.quota.admit(ep)) {
            Ok(()) => resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE,
            Err(errno) => resp.error = -errno,
        }
        send_response(listener, &mut resp);
        return true;
    }
    let fd = i32::try_from(req.data.args[0]).unwrap_or(-1);
    if i64::from(req.data.nr) == libc::SYS_bind {
        resp.error = match bind_for(&req, fd, listener, sup) {
            Ok(()) => 0,
            Err(errno) => -errno,
        };
        send_response(listener, &mut resp);
        return true;
    }
    let backlog = req.data.args[1] as i32;
    resp.error = match checked_duplicate(req.pid, fd, listener, req.id, &mut sup.pidfd) {
        Ok(dup) => {
            // Connections a listener has not accepted yet are charged to
            // no memory cgroup (a socket is charged when accepted), and
            // each holds up to a receive window of data: a server made
            // thousands with no accept() and held 170 MB of the host's
            // TCP memory under memory_mb 128. The backlog bounds them.
            // (A negative backlog means the most the kernel allows.)
            let backlog = if (0..=MAX_BACKLOG).contains(&backlog) {
                backlog
            } else {
                MAX_BACKLOG
            };
            let backlog = Backlog::new(backlog).unwrap_or(Backlog::MAXCONN);
            match listen(&dup, backlog) {
                Ok(()) => 0,
                Err(e) => -(e as i32),
            }
        }
        Err(errno) => -errno,
    };
    send_response(listener, &mut resp);
    true
}

fn send_response(listener: BorrowedFd<'_>, resp: &mut SeccompNotifResp) {
    // SAFETY: NOTIF_SEND reads a `struct seccomp_notif_resp` of this layout.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            NOTIF_SEND,
            resp as *mut SeccompNotifResp,
        )
    };
}

/// The largest listen() backlog a sandboxed listener gets (see
/// [`handle_notification`]); servers' defaults (node, nginx: 511) are cut to it.
const MAX_BACKLOG: i32 = 64;

/// Whether an inet listener may be bound to `ip`: the wildcard or the
/// loopback address only. Every other loopback address (127.0.0.0/8) is
/// one more listener on the same granted port, each with its own backlog
/// of uncharged connections.
fn listen_address_allowed(ip: std::net::IpAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let v4 = |a: Ipv4Addr| a.is_unspecified() || a == Ipv4Addr::LOCALHOST;
    match ip {
        IpAddr::V4(a) => v4(a),
        IpAddr::V6(a) => {
            a.is_unspecified() || a == Ipv6Addr::LOCALHOST || a.to_ipv4_mapped().is_some_and(v4)
        }
    }
}

/// `bind()` made by init on its own duplicate of the caller's socket, with
/// the address read once from the caller (`bind_check` says why).
fn bind_for(
    req: &SeccompNotif,
    fd: i32,
    listener: BorrowedFd<'_>,
    sup: &mut Supervisor,
) -> Result<(), i32> {
    let tid = libc::pid_t::try_from(req.pid).map_err(|_| libc::ESRCH)?;
    let addr = crate::bind_check::read_addr(tid, req.data.args[1], req.data.args[2])?;
    // After the read: the thread may have died and its id been reused.
    let dup = caller_fd(req.pid, fd, listener, req.id, &mut sup.pidfd)?;
    // The socket's own family (a fresh socket's name is its family's
    // unspecified address), not the one the address claims.
    let local: SockaddrStorage = getsockname(dup.as_raw_fd()).map_err(|_| libc::ENOTSOCK)?;
    let domain = local.family().map_or(-1, |f| f as i32);
    crate::bind_check::check(domain, &addr, &sup.bind_ports)?;
    // SAFETY: `addr` holds `addr.len()` initialised bytes (at most
    // `MAX_ADDR`, checked by `read_addr`), which bind() only reads.
    let rc = unsafe {
        libc::bind(
            dup.as_raw_fd(),
            addr.as_ptr().cast::<libc::sockaddr>(),
            addr.len() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL));
    }
    Ok(())
}

/// init's duplicate of the caller's socket when the listen may proceed,
/// else the errno to return. An AF_INET/AF_INET6 socket must already be
/// bound (its port was checked at `bind()`, which init made: [`bind_for`]):
/// `listen()` on an unbound one would auto-bind a port no rule ever saw.
fn checked_duplicate(
    pid: u32,
    fd: i32,
    listener: BorrowedFd<'_>,
    id: u64,
    pidfd: &mut CachedPidfd,
) -> Result<OwnedFd, i32> {
    let dup = caller_fd(pid, fd, listener, id, pidfd)?;
    let addr: SockaddrStorage = getsockname(dup.as_raw_fd()).map_err(|_| libc::ENOTSOCK)?;
    // An abstract AF_UNIX name lives in the host's network namespace in
    // ports mode: a listener there takes connections host programs make
    // to that name (a name of a service not running yet, e.g. an X
    // display), a listener no grant names.
    if addr
        .as_unix_addr()
        .is_some_and(|u| u.as_abstract().is_some())
    {
        return Err(libc::EACCES);
    }
    let bound = if let Some(v4) = addr.as_sockaddr_in() {
        Some((v4.port(), std::net::IpAddr::V4(v4.ip())))
    } else {
        addr.as_sockaddr_in6()
            .map(|v6| (v6.port(), std::net::IpAddr::V6(v6.ip())))
    };
    if let Some((port, ip)) = bound
        && (port == 0 || !listen_address_allowed(ip))
    {
        return Err(libc::EACCES);
    }
    Ok(dup)
}

/// What init keeps between notifications: the epoll quota, the pidfd
/// of the thread that asked last, and the ports `bind()` may name.
pub(crate) struct Supervisor {
    pub(crate) quota: EpollQuota,
    pidfd: CachedPidfd,
    bind_ports: Vec<u16>,
}

impl Supervisor {
    pub(crate) fn new(quota: EpollQuota, bind_ports: Vec<u16>) -> Self {
        Supervisor {
            quota,
            pidfd: None,
            bind_ports,
        }
    }
}

/// A thread id and a pidfd naming that very task (never a thread-group
/// fallback, which a reused id could make name another process).
type CachedPidfd = Option<(libc::pid_t, OwnedFd)>;

/// init's duplicate of descriptor `fd` of the thread `pid` whose
/// notification `id` is pending, else the errno to answer. `pidfd_open`
/// is the dearest call here (~18 µs on the test VM), so the pidfd of the
/// thread that asked last is kept: it names that task for good, and once
/// the task is gone its `pidfd_getfd` fails and a fresh one is opened.
fn caller_fd(
    pid: u32,
    fd: i32,
    listener: BorrowedFd<'_>,
    id: u64,
    cache: &mut CachedPidfd,
) -> Result<OwnedFd, i32> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| libc::ESRCH)?;
    let cached = match cache {
        Some((tid, pidfd)) if *tid == pid => match sys::pidfd_getfd(pidfd.as_fd(), fd) {
            Ok(dup) => Some(dup),
            Err(e) if out_of_descriptors(&e.err) => return Err(libc::EMFILE),
            Err(_) => None,
        },
        _ => None,
    };
    let dup = match cached {
        Some(dup) => dup,
        None => {
            let (pidfd, exact) = thread_pidfd(pid)?;
            let dup = sys::pidfd_getfd(pidfd.as_fd(), fd)
                .map_err(|e| e.err.raw_os_error().unwrap_or(libc::EBADF))?;
            *cache = exact.then_some((pid, pidfd));
            dup
        }
    };
    // The pid may have been reused between RECV and pidfd_open: only trust
    // the duplicate if the notification is still pending.
    let mut idv = id;
    // SAFETY: NOTIF_ID_VALID reads one u64.
    if unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_ID_VALID, &mut idv as *mut u64) } < 0 {
        return Err(libc::ESRCH);
    }
    Ok(dup)
}

/// A pidfd for the thread `tid` that asked (a notification names the
/// thread, not its process): `pidfd_open` takes only a thread-group
/// leader, so a server listening from any other thread (a Go program, a
/// tokio worker) got ESRCH. The thread itself with `PIDFD_THREAD` (Linux
/// ≥ 6.9: its own descriptor table, exact even after
/// `unshare(CLONE_FILES)`), else its thread group, whose table the
/// thread shares unless it unshared it.
/// The bool says whether the pidfd names the thread itself (a leader, or
/// `PIDFD_THREAD`) rather than its thread group. Errors: EMFILE when init
/// is out of descriptors, else ESRCH.
fn thread_pidfd(tid: libc::pid_t) -> Result<(OwnedFd, bool), i32> {
    match sys::pidfd_open(tid) {
        Ok(fd) => return Ok((fd, true)),
        Err(e) if out_of_descriptors(&e.err) => return Err(libc::EMFILE),
        Err(_) => {}
    }
    if let Ok(fd) = sys::pidfd_open_flags(tid, sys::PIDFD_THREAD) {
        return Ok((fd, true));
    }
    let tgid = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Tgid:"))?
                .trim()
                .parse::<libc::pid_t>()
                .ok()
        })
        .ok_or(libc::ESRCH)?;
    sys::pidfd_open(tgid)
        .map(|fd| (fd, false))
        .map_err(|_| libc::ESRCH)
}

fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_only_on_the_wildcard_or_the_loopback_address() {
        for ok in ["0.0.0.0", "127.0.0.1", "::", "::1", "::ffff:127.0.0.1"] {
            assert!(listen_address_allowed(ok.parse().expect("ip")), "{ok}");
        }
        for no in [
            "127.0.0.2",
            "127.1.2.3",
            "10.0.0.5",
            "::ffff:127.0.0.9",
            "fe80::1",
        ] {
            assert!(!listen_address_allowed(no.parse().expect("ip")), "{no}");
        }
    }

    #[test]
    fn filters_compile_for_every_network_mode() {
        let ports = Network::Ports {
            connect_tcp: vec![443],
            bind_tcp: vec![],
        };
        let x32 = usize::from(cfg!(target_arch = "x86_64"));
        assert_eq!(build(&Network::None).expect("none").len(), 5 + x32);
        assert_eq!(build(&ports).expect("ports").len(), 5 + x32);
        // `host`: no socket rules, still the lease rule.
        assert_eq!(build(&Network::Host).expect("host").len(), 5 + x32);
    }
}
