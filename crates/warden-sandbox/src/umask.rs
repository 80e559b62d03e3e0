//! The file-creation mask a server starts with, and the one the helper
//! builds its view with: neither is whatever warden's umask happens to be
//! at the moment of a launch.
//!
//! The umask is process-wide, and a library may change it for a moment:
//! rustyline sets it to 0o177 while it writes the repl's history file. A
//! server launched in that moment inherited 0o177: the helper created the
//! view's folders (`/etc`, `/root/…` above single-file grants) with mode
//! 0600, and once its capabilities were dropped the server could not
//! reach its own program (EACCES). So warden remembers its umask when it
//! starts ([`remember_umask`], before any thread), the plan carries it,
//! and the helper builds the view under [`VIEW_UMASK`] and sets the
//! remembered one just before it executes the server; a trusted server
//! without the sandbox gets it between fork and exec. The host folders
//! warden makes for a launch are chmod-ed to 0700 after they are made.

use std::sync::OnceLock;

/// The helper's own mask while it builds the view: folders 0755, files
/// 0644 (the view is read-only to the server anyway).
pub(crate) const VIEW_UMASK: u32 = 0o022;

static REMEMBERED: OnceLock<u32> = OnceLock::new();

/// Remembers the process's umask as the one servers get. Call it first
/// thing in `main`, before any thread could change it; later calls keep
/// the first value.
pub fn remember_umask() -> u32 {
    *REMEMBERED.get_or_init(current)
}

/// The umask servers get: the remembered one, else (a program that never
/// called [`remember_umask`]) the current one, read without changing it.
pub(crate) fn for_servers() -> u32 {
    REMEMBERED.get().copied().unwrap_or_else(current)
}

/// The process's umask from `/proc/self/status` (Linux 4.7+), which reads
/// it without setting it; `VIEW_UMASK` if that line is missing.
fn current() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(VIEW_UMASK)
        & 0o777
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_current_umask_is_read_without_changing_it() {
        let before = super::current();
        assert!(before <= 0o777);
        assert_eq!(super::current(), before);
    }
}
