//! `warden-sandbox-exec PLAN-JSON`: the sandbox helper a running warden
//! starts for every sandboxed server (ARCHITECTURE.md, "The sandbox").
//! Links warden-sandbox only, so it starts in well under a millisecond.

#![forbid(unsafe_code)]

fn main() {
    let mut args = std::env::args_os();
    args.next(); // program name
    warden_sandbox::helper::main(args)
}
