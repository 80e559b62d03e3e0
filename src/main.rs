#![forbid(unsafe_code)]

/// mimalloc instead of glibc's malloc: a Rego decision allocates and frees
/// thousands of small values, and glibc spent a third of the decision's
/// instructions in malloc/free (BENCHMARKS.md, "Third pass"). Built with
/// `no_thp`: no huge-page advice for its arenas (idle RSS), and the THP
/// setting servers inherit is left as the system has it. Only this binary:
/// the sandbox helper `warden-sandbox-exec` keeps the system allocator,
/// and every server runs its own after `exec`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // Internal entry points, dispatched before clap, threads or a runtime
    // exist: the sandbox helper must be single-threaded. `__sandbox-exec`
    // is the fallback helper when `warden-sandbox-exec` is not installed
    // beside this binary.
    let mut args = std::env::args_os();
    match args.nth(1).as_deref().and_then(|a| a.to_str()) {
        Some(warden_sandbox::REEXEC_ARG) => warden_sandbox::helper::main(args),
        Some("__hostile-server") => warden::example_servers::hostile_main(),
        _ => warden::cli::main(),
    }
}
