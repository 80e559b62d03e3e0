//! seccomp filters installed last, right before `exec`.
//!
//! A deny-list (the server runs arbitrary runtimes, so an allow-list would
//! break them): syscalls a tool server never needs fail with `EPERM`;
//! sockets of families the network mode does not allow fail with `EACCES`
//! at creation (never `send`: asyncio wakes its loop through an AF_UNIX
//! socketpair); `clone3` fails with `ENOSYS` so libc falls back to `clone`,
//! whose flags the filter can see.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

use crate::spec::Network;

#[derive(Debug, thiserror::Error)]
#[error("seccomp: {0}")]
pub(crate) struct SeccompError(String);

fn err(e: impl std::fmt::Display) -> SeccompError {
    SeccompError(e.to_string())
}

fn arch() -> Result<TargetArch, SeccompError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(err)
}

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

/// The filters for a network mode, in installation order.
pub(crate) fn build(
    network: &Network,
    deny_connect: bool,
) -> Result<Vec<BpfProgram>, SeccompError> {
    let mut programs = Vec::new();

    // 1. EPERM deny-list.
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        rules.insert(nr, Vec::new());
    }
    // clone with any namespace flag; ioctl TIOCSTI/TIOCLINUX (typing into a terminal).
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
    programs.push(compile(rules, SeccompAction::Errno(libc::EPERM as u32))?);

    // 2. clone3 hides its flags in memory: ENOSYS makes libc use clone.
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_clone3, Vec::new());
    programs.push(compile(rules, SeccompAction::Errno(libc::ENOSYS as u32))?);

    // 3. Socket families.
    let unix = libc::AF_UNIX as u64;
    let inet = libc::AF_INET as u64;
    let inet6 = libc::AF_INET6 as u64;
    let socket_rules = match network {
        Network::Host => Vec::new(),
        // Only AF_UNIX (socketpairs, and pathname sockets Landlock governs).
        Network::None => vec![rule(vec![cond(0, Op::Ne, unix)?])?],
        // AF_UNIX, and TCP over IPv4/IPv6 (ports enforced by Landlock).
        Network::Ports { .. } => {
            let mut v = vec![rule(vec![
                cond(0, Op::Ne, unix)?,
                cond(0, Op::Ne, inet)?,
                cond(0, Op::Ne, inet6)?,
            ])?];
            for dom in [inet, inet6] {
                // Any type other than SOCK_STREAM (low 4 bits; the rest are flags).
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
            v
        }
    };
    if !socket_rules.is_empty() {
        let mut rules = BTreeMap::new();
        rules.insert(libc::SYS_socket, socket_rules);
        // socketpair creates only AF_UNIX pairs in practice; refuse others.
        rules.insert(
            libc::SYS_socketpair,
            vec![rule(vec![cond(0, Op::Ne, unix)?])?],
        );
        if deny_connect {
            // With only AF_UNIX sockets left, connect() can only reach
            // pathname sockets (e.g. /var/run/docker.sock), which Landlock
            // governs only from ABI 9. socketpairs never connect, and
            // send() on them passes no address.
            rules.insert(libc::SYS_connect, Vec::new());
            rules.insert(
                libc::SYS_sendto,
                vec![rule(vec![
                    Cond::new(4, Len::Qword, Op::Ne, 0).map_err(err)?,
                ])?],
            );
        }
        programs.push(compile(rules, SeccompAction::Errno(libc::EACCES as u32))?);
    }
    Ok(programs)
}

/// Installs the filters on the calling thread (no_new_privs must be set).
pub(crate) fn apply(programs: &[BpfProgram]) -> Result<(), SeccompError> {
    for p in programs {
        seccompiler::apply_filter(p).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_every_network_mode() {
        let ports = Network::Ports {
            connect_tcp: vec![443],
            bind_tcp: vec![],
        };
        assert_eq!(build(&Network::None, true).expect("none").len(), 3);
        assert_eq!(build(&ports, false).expect("ports").len(), 3);
        // `host`: no socket filter.
        assert_eq!(build(&Network::Host, false).expect("host").len(), 2);
    }
}
