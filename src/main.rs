fn main() -> std::process::ExitCode {
    warden::cli::main()
}
