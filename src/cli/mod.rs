//! The command line: clap definitions (their doc comments are the help text) and dispatch.

pub mod apply;
pub mod cached;
pub mod checkout;
pub mod completions;
pub mod demo;
pub mod generated;
pub mod hook;
pub mod log;
pub mod patch;
pub mod recover;
pub mod reverify;
pub mod run;
pub mod show;
pub mod verify;

use crate::error::{Error, Exit};
use crate::ui::{ColorChoice, Ui};
use clap::{Parser, Subcommand};

/// Hold LLM-proposed changes to the same gates as human ones.
///
/// git factory runs a strict SE → TR → PO loop: a model or agent proposes a patch (SE), the
/// harness scopes and applies it (TR), then runs your verification and acceptance commands
/// (PO). Failed attempts are rolled back and retried with a bounded failure brief; every run
/// is recorded in git under refs/factory/<run_id>.
#[derive(Debug, Parser)]
#[command(
    name = "git-factory",
    bin_name = "git factory",
    version,
    propagate_version = true
)]
pub struct Cli {
    /// When to colour output
    #[arg(long, value_enum, global = true, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    /// Print only results and the final verdict line
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Print more detail about each stage
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one work order through the SE → TR → PO loop
    Run(Box<run::RunArgs>),
    /// List past runs, newest first
    Log(log::LogArgs),
    /// Show one run: summary, attempts, failure briefs, patch, logs
    Show(show::ShowArgs),
    /// Bring a PASSed run's change into the current work tree (3-way if HEAD moved on)
    Apply(apply::ApplyArgs),
    /// Run global verification on a revision in a temporary worktree (cached by tree)
    Verify(verify::VerifyArgs),
    /// Install or remove the pre-push hook that verifies what you push
    Hook(hook::HookArgs),
    /// Materialise the tree of one attempt of a run into a folder
    Checkout(checkout::CheckoutArgs),
    /// Re-run verification and acceptance on every recorded attempt tree of a run
    Reverify(reverify::ReverifyArgs),
    /// Apply a diff (unified, Begin Patch envelope or SEARCH/REPLACE) with the TR engine
    Patch(patch::PatchArgs),
    /// Roll back a run that was killed mid-way and record it as INTERRUPTED
    Recover(recover::RecoverArgs),
    /// Print the completion script for bash, zsh, fish, elvish or powershell
    Completions(completions::CompletionsArgs),
    /// Make a demo repo and run a work order through the loop with a scripted proposer
    Demo(demo::DemoArgs),
}

/// A panic is a bug: one line saying so (exit 101), never a debug dump; the backtrace only
/// when RUST_BACKTRACE asks for it.
fn install_panic_hook() {
    if std::env::var_os("RUST_BACKTRACE").is_some() {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        #[allow(clippy::print_stderr)]
        {
            eprintln!("error: git factory hit a bug: {what}{at}");
            eprintln!("hint: please report it with the command you ran (RUST_BACKTRACE=1 shows a backtrace)");
        }
    }));
}

pub fn main() -> std::process::ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Refused
            } else {
                Exit::Success
            };
            let _ = e.print();
            return code.into();
        }
    };
    let ui = Ui::new(cli.color, cli.quiet, cli.verbose);
    let result: Result<Exit, Error> = match cli.command {
        Command::Run(args) => run::cmd_run(&ui, *args),
        Command::Log(args) => log::cmd_log(&ui, args),
        Command::Show(args) => show::cmd_show(&ui, args),
        Command::Demo(args) => demo::cmd_demo(&ui, args),
        Command::Completions(args) => completions::cmd_completions(&ui, args),
        Command::Patch(args) => patch::cmd_patch(&ui, args),
        Command::Apply(args) => apply::cmd_apply(&ui, args),
        Command::Verify(args) => verify::cmd_verify(&ui, args),
        Command::Hook(args) => hook::cmd_hook(&ui, args),
        Command::Recover(args) => recover::cmd_recover(&ui, args),
        Command::Checkout(args) => checkout::cmd_checkout(&ui, args),
        Command::Reverify(args) => reverify::cmd_reverify(&ui, args),
    };
    match result {
        Ok(code) => code.into(),
        Err(e) => {
            ui.error(&e);
            e.exit.into()
        }
    }
}
