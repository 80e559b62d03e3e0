//! The sandbox does not take its permissions from whatever umask warden
//! has at the moment a server starts. rustyline (the repl's editor) sets
//! the process-wide umask to 0o177 while it saves the history; a server
//! launched at that moment built its view's folders with mode 0600, could
//! not even reach its own program, and failed with EACCES (the repl tests'
//! old flake). Every server, sandboxed or a trusted one without the
//! sandbox, gets the umask warden started with, not 0o177.
//!
//! One test in its own binary: it changes the process-wide umask.

mod sandbox_support;

use std::path::Path;

use nix::sys::stat::{Mode, umask};
use sandbox_support::*;
use warden::config::{SandboxSpec, Trust};

#[test]
fn a_server_started_during_a_transient_umask_runs_with_warden_s_own() {
    let fx = Fixture::new();
    // warden remembers its umask at start (the CLI does this first thing).
    umask(Mode::from_bits_truncate(0o027));
    warden_sandbox::remember_umask();
    // What rustyline sets while it writes the history file.
    let _ = umask(Mode::from_bits_truncate(0o177));
    let cfg = server_config(
        Path::new("/bin/sh"),
        &["-c", "umask; cat /etc/passwd > /dev/null && echo read-etc"],
        SandboxSpec::default(),
        Trust::Untrusted,
    );
    let sandboxed = run_prepared(prepare(&cfg, &fx.ctx()).expect("prepare"));
    // A trusted server without the sandbox: its private HOME and TMPDIR
    // are folders warden makes on the host, at this same moment.
    let cfg = server_config(
        Path::new("/bin/sh"),
        &[
            "-c",
            "umask; cd \"$HOME\" && : > f && cd \"$TMPDIR\" && echo home-ok",
        ],
        SandboxSpec {
            enabled: false,
            ..SandboxSpec::default()
        },
        Trust::Trusted,
    );
    let plain = run_prepared(prepare(&cfg, &fx.ctx()).expect("prepare"));
    let _ = umask(Mode::from_bits_truncate(0o022));
    for (out, what) in [(sandboxed, "read-etc"), (plain, "home-ok")] {
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}");
        assert!(said.contains(what), "{said}");
        assert!(said.starts_with("0027\n"), "{said}");
    }
}
