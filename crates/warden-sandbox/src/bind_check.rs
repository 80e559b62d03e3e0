//! `bind()` in ports mode, made by init on the server's behalf.
//!
//! The server shares the host's network namespace there, and with it the
//! host's abstract unix socket names. `socket(AF_UNIX)` is refused, but a
//! connected pair from `socketpair()` has no name yet and `bind()` gives
//! it one: a server took a name of the host's (say `@/tmp/.X11-unix/X1`
//! of a display not started yet, or of a service about to restart), which
//! that service then failed to bind (`EADDRINUSE`). The seccomp filter
//! cannot tell a unix socket from a TCP one by its descriptor number, so
//! `bind()` goes to init (`seccomp::handle_notification`): init reads the
//! address once from the caller's memory, takes its own duplicate of the
//! socket, checks both here, and binds the duplicate itself. Nothing the
//! server changes after the check (the descriptor behind the number, the
//! bytes of the address) reaches the call. Since init binds, Landlock's
//! bind rule is not what decides: [`check`] applies the same rule
//! (`bind_tcp` ports only; never port 0, an auto-bound port).

/// The largest address `bind()` takes (`sizeof(struct sockaddr_storage)`).
pub(crate) const MAX_ADDR: usize = 128;

/// Why a bind is refused, as the errno the server gets.
pub(crate) fn check(domain: i32, addr: &[u8], bind_ports: &[u16]) -> Result<(), i32> {
    match domain {
        libc::AF_INET | libc::AF_INET6 => {}
        // A socketpair() end (the only unix sockets here): naming it takes
        // a host name; a connected pair needs none.
        _ => return Err(libc::EACCES),
    }
    let family = addr
        .get(..2)
        .map(|b| i32::from(u16::from_ne_bytes([b[0], b[1]])))
        .ok_or(libc::EINVAL)?;
    // AF_UNSPEC: IPv4 sockets take it as AF_INET with the wildcard address;
    // the port is at the same place in all three.
    if !matches!(family, libc::AF_INET | libc::AF_INET6 | libc::AF_UNSPEC) {
        return Err(libc::EAFNOSUPPORT);
    }
    let min = if domain == libc::AF_INET6 { 24 } else { 16 };
    if addr.len() < min {
        return Err(libc::EINVAL);
    }
    let port = u16::from_be_bytes([addr[2], addr[3]]);
    if port == 0 || !bind_ports.contains(&port) {
        // What Landlock answers for a port no rule grants.
        return Err(libc::EACCES);
    }
    Ok(())
}

/// Reads the `len` bytes of the address at `ptr` in thread `tid`'s memory.
pub(crate) fn read_addr(tid: libc::pid_t, ptr: u64, len: u64) -> Result<Vec<u8>, i32> {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv};
    let len = usize::try_from(len).map_err(|_| libc::EINVAL)?;
    if len > MAX_ADDR {
        return Err(libc::EINVAL);
    }
    let base = usize::try_from(ptr).map_err(|_| libc::EFAULT)?;
    let mut buf = vec![0u8; len];
    let read = process_vm_readv(
        nix::unistd::Pid::from_raw(tid),
        &mut [std::io::IoSliceMut::new(&mut buf)],
        &[RemoteIoVec { base, len }],
    )
    .map_err(|_| libc::EFAULT)?;
    if read != len {
        return Err(libc::EFAULT);
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inet(port: u16) -> Vec<u8> {
        let mut a = vec![0u8; 16];
        a[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        a[2..4].copy_from_slice(&port.to_be_bytes());
        a
    }

    #[test]
    fn only_granted_tcp_ports_are_bound() {
        assert_eq!(check(libc::AF_INET, &inet(8080), &[8080]), Ok(()));
        assert_eq!(
            check(libc::AF_INET, &inet(8081), &[8080]),
            Err(libc::EACCES)
        );
        // Port 0 is a port the kernel picks: never, even if 0 were listed.
        assert_eq!(
            check(libc::AF_INET, &inet(0), &[0, 8080]),
            Err(libc::EACCES)
        );
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&8080u16.to_be_bytes());
        assert_eq!(check(libc::AF_INET6, &v6, &[8080]), Ok(()));
        assert_eq!(check(libc::AF_INET6, &v6[..20], &[8080]), Err(libc::EINVAL));
        assert_eq!(
            check(libc::AF_INET, &inet(8080)[..3], &[8080]),
            Err(libc::EINVAL)
        );
    }

    #[test]
    fn unix_sockets_are_never_named() {
        let mut abs = vec![0u8; 20];
        abs[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(check(libc::AF_UNIX, &abs, &[8080]), Err(libc::EACCES));
        // A unix address on a TCP socket is the kernel's EAFNOSUPPORT.
        assert_eq!(check(libc::AF_INET, &abs, &[8080]), Err(libc::EAFNOSUPPORT));
    }

    #[test]
    fn reads_an_address_from_a_process() {
        let a = inet(4242);
        let got = read_addr(std::process::id() as i32, a.as_ptr() as u64, a.len() as u64);
        assert_eq!(got, Ok(a.clone()));
        assert_eq!(
            read_addr(std::process::id() as i32, a.as_ptr() as u64, 4096),
            Err(libc::EINVAL)
        );
    }
}
