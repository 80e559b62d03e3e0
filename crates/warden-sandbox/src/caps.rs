//! Dropping every capability in the server before exec.
//!
//! The server runs in its own user namespace mapped to the caller's uid.
//! For root that is uid 0, which would regain the full capability set *in
//! that namespace* at `exec`: `CAP_SETFCAP` lets it write a
//! `security.capability` xattr into a write grant (stored as a plain v2
//! capability, honoured on the host for whoever runs the file),
//! `CAP_CHOWN`/`CAP_FOWNER`/`CAP_FSETID` let it chown and chmod any file it
//! can see. An empty bounding set, no ambient capabilities and the locked
//! `SECBIT_NOROOT` mean that exec as uid 0 grants nothing. Without a user
//! namespace (root where user namespaces are off) the same drop removes
//! the real host capabilities.

use std::io;

use crate::sys::{self, Result};

const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn prctl(what: &'static str, op: libc::c_int, a: libc::c_ulong) -> Result<libc::c_int> {
    // SAFETY: these prctl operations take integer arguments only (no
    // pointer) and act on the calling thread.
    let rc = unsafe {
        libc::prctl(
            op,
            a,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc < 0 {
        Err(sys::err_from(what, io::Error::last_os_error()))
    } else {
        Ok(rc)
    }
}

/// Empties the bounding, ambient, inheritable, permitted and effective
/// sets and locks the securebits. Needs `CAP_SETPCAP` (the server still
/// holds it in its user namespace, or as root on the host).
pub(crate) fn drop_all() -> Result<()> {
    for cap in 0..64 {
        match prctl("PR_CAPBSET_DROP", libc::PR_CAPBSET_DROP, cap) {
            Ok(_) => {}
            // Past CAP_LAST_CAP.
            Err(e) if e.err.raw_os_error() == Some(libc::EINVAL) => break,
            Err(e) => return Err(e),
        }
    }
    prctl(
        "PR_CAP_AMBIENT_CLEAR_ALL",
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    )?;
    prctl(
        "PR_SET_SECUREBITS",
        libc::PR_SET_SECUREBITS,
        SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
    )?;
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: capset reads one header and two data structs (version 3),
    // both valid and alive for the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) };
    if rc < 0 {
        return Err(sys::err_from("capset", io::Error::last_os_error()));
    }
    Ok(())
}
