fn main() -> std::process::ExitCode {
    turnwal::cli::main()
}
