fn main() -> std::process::ExitCode {
    git_factory::cli::main()
}
