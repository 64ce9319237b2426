fn main() -> std::process::ExitCode {
    turnwal_cli::cli::main()
}
