//! The command line: clap definitions (their doc comments are the help text) and dispatch.

pub mod apply;
pub mod attest;
pub mod batch;
pub mod cached;
pub mod checkout;
pub mod completions;
pub mod demo;
pub mod fetch;
pub mod generated;
pub mod hook;
pub mod log;
pub mod patch;
pub mod prune;
pub mod push;
pub mod recover;
pub mod report;
pub mod reverify;
pub mod run;
pub mod show;
pub mod verify;
pub mod version;

use crate::error::{Error, Exit};
use crate::journal::Beside;
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
    disable_version_flag = true
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
    /// Do not pipe long output into a pager (as git --no-pager)
    #[arg(long = "no-pager", global = true)]
    pub no_pager: bool,
    /// Print the version, the commit it was built from and the sandbox backends built in
    #[arg(short = 'V', long)]
    pub version: bool,
    /// With --version: print it as one JSON object, for scripts
    #[arg(long, requires = "version")]
    pub json: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one work order through the SE → TR → PO loop
    Run(Box<run::RunArgs>),
    /// List past runs, newest first
    Log(log::LogArgs),
    /// Show one run: summary, attempts, failure briefs, patch, logs
    Show(show::ShowArgs),
    /// Many runs side by side: verdicts, attempts, time per model; --html writes one page
    Report(report::ReportArgs),
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
    /// Send runs to a remote: refs/factory/* and the notes, merged (default remote: origin)
    Push(push::PushArgs),
    /// Take in a remote's runs and merge its notes into yours (default remote: origin)
    Fetch(fetch::FetchArgs),
    /// Roll back a run that was killed mid-way and record it as INTERRUPTED
    Recover(recover::RecoverArgs),
    /// Check the signed evidence that a revision's tree passed its checks
    Attest(attest::AttestArgs),
    /// Remove old run records and their note lines (objects are left to git gc)
    Prune(prune::PruneArgs),
    /// Print the completion script for bash, zsh, fish, elvish or powershell
    Completions(completions::CompletionsArgs),
    /// Make a demo repo and run a work order through the loop with a scripted proposer
    Demo(demo::DemoArgs),
}

pub(crate) use crate::run::asked::sandbox_wanted;

impl Command {
    /// Whether this command could change the repo, and so refuses after a killed run (SPEC
    /// §7: all but `recover`, `log` and `show`): the repo it acts on and whether it may go on
    /// beside an in-situ run under way; `None` for the commands that may always go on. Every
    /// command is named here, so a new one must say which it is. `run` asks it in its
    /// preflight, under the repo lock (`run::preflight::Claim`), of in-situ runs only: a
    /// killed `--worktree` run's pooled worktree is replaced, not reused (SPEC §5).
    fn guarded(&self) -> Option<(Option<&std::path::Path>, Beside)> {
        match self {
            Command::Log(_)
            | Command::Show(_)
            | Command::Report(_)
            | Command::Recover(_)
            | Command::Run(_)
            | Command::Completions(_)
            | Command::Demo(_) => None,
            Command::Apply(a) => Some((a.repo.as_deref(), Beside::Refuse)),
            Command::Patch(_) => Some((None, Beside::Refuse)),
            Command::Verify(a) => Some((a.repo.as_deref(), Beside::Allow)),
            Command::Checkout(a) => Some((a.repo.as_deref(), Beside::Allow)),
            Command::Reverify(a) => Some((a.repo.as_deref(), Beside::Allow)),
            Command::Hook(_) => Some((None, Beside::Allow)),
            Command::Push(a) => Some((a.repo.as_deref(), Beside::Allow)),
            Command::Fetch(a) => Some((a.repo.as_deref(), Beside::Allow)),
            Command::Prune(a) => Some((a.repo.as_deref(), Beside::Allow)),
            Command::Attest(a) => Some((a.repo(), Beside::Allow)),
        }
    }
}

/// The refusal after a killed run, for a command that could change the repo; a repo that
/// cannot be opened is left to the command to name.
fn refuse_if_killed(command: &Command) -> Result<(), Error> {
    let Some((dir, beside)) = command.guarded() else {
        return Ok(());
    };
    match crate::git::open(dir) {
        Ok(repo) => crate::run::orphans::refuse_if_killed(&repo, beside),
        Err(_) => Ok(()),
    }
}

/// `<run>` where it is optional (`show`, `apply`, `reverify`): the run the id or prefix names,
/// else the newest run, as `git show` shows HEAD.
pub(crate) fn run_or_newest(
    repo: &git2::Repository,
    run: Option<&str>,
) -> crate::error::Result<crate::store::StoredRun> {
    if let Some(prefix) = run {
        return crate::store::resolve(repo, prefix);
    }
    let newest = crate::store::list_runs(repo)?
        .into_iter()
        .next()
        .ok_or_else(|| {
            Error::new("no runs are recorded in this repository yet")
                .hint("start one with git factory run (or see one with git factory demo)")
        })?;
    crate::store::resolve(repo, &newest.run_id)
}

/// `color.ui` of the repository around the current directory (or the user's config).
fn git_color_ui() -> Option<bool> {
    match git2::Repository::open_from_env() {
        Ok(repo) => crate::config::Config::of(&repo).color_ui(),
        Err(_) => crate::config::Config::default_only().color_ui(),
    }
}

/// git's `-<n>` for `log` (`git factory log -3`), which clap cannot declare: rewritten to
/// `--max-count=<n>` when the subcommand (the first word that is not an option) is `log`.
fn with_log_counts(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut subcommand = None;
    let mut skip_value = false;
    let mut out = Vec::with_capacity(args.len());
    for (i, arg) in args.into_iter().enumerate() {
        let text = arg.to_str().unwrap_or("");
        if i == 0 {
            out.push(arg);
            continue;
        }
        match subcommand {
            None if skip_value => skip_value = false,
            None if text == "--color" => skip_value = true,
            None if !text.starts_with('-') => subcommand = Some(text == "log"),
            Some(true)
                if text.len() > 1
                    && text.starts_with('-')
                    && text[1..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                out.push(format!("--max-count={}", &text[1..]).into());
                continue;
            }
            _ => {}
        }
        out.push(arg);
    }
    out
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
    // The Landlock backend's own entry (SPEC §7.1): restricts this process, then becomes the
    // confined command. Internal, so never a clap command: no help, man page or completion.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::sandbox::landlock::INTERNAL)
    {
        crate::sandbox::landlock::enter(&args[2..]);
    }
    // Not dumpable, as ssh-agent makes itself: our `/proc/<pid>/environ`, `mem` and `fd/`
    // are then closed to other processes of the user, so a check (which runs as the user
    // without `--sandbox`) cannot read the API keys and `SSH_AUTH_SOCK` removed from its own
    // environment (SPEC §3.7, §6.1) out of ours. What it executes is dumpable again.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    install_panic_hook();
    crate::trace::mark("started");
    let cli = match Cli::try_parse_from(with_log_counts(std::env::args_os().collect())) {
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
    // `--color` wins; else git's `color.ui` (never/always), else NO_COLOR and the terminal.
    let color = match (cli.color, git_color_ui()) {
        (ColorChoice::Auto, Some(false)) => ColorChoice::Never,
        (ColorChoice::Auto, Some(true)) => ColorChoice::Always,
        (chosen, _) => chosen,
    };
    let mut ui = Ui::new(color, cli.quiet, cli.verbose);
    ui.no_pager = cli.no_pager;
    let command = match (cli.command, cli.version) {
        (_, true) => return version::cmd_version(&ui, cli.json).into(),
        (Some(command), false) => command,
        (None, false) => {
            let _ = <Cli as clap::CommandFactory>::command()
                .error(
                    clap::error::ErrorKind::MissingSubcommand,
                    "a command is required (git factory --help lists them)",
                )
                .print();
            return Exit::Refused.into();
        }
    };
    if let Err(e) = refuse_if_killed(&command) {
        ui.error(&e);
        return e.exit.into();
    }
    let result: Result<Exit, Error> = match command {
        // Several work orders are a batch: each runs as its own `run` child (cli/batch.rs).
        Command::Run(args) if args.work_order.len() > 1 => batch::cmd_batch(&ui, &args),
        Command::Run(args) => run::cmd_run(&ui, *args),
        Command::Log(args) => log::cmd_log(&ui, args),
        Command::Show(args) => show::cmd_show(&ui, args),
        Command::Report(args) => report::cmd_report(&ui, args),
        Command::Demo(args) => demo::cmd_demo(&ui, args),
        Command::Completions(args) => completions::cmd_completions(&ui, args),
        Command::Patch(args) => patch::cmd_patch(&ui, args),
        Command::Apply(args) => apply::cmd_apply(&ui, args),
        Command::Verify(args) => verify::cmd_verify(&ui, args),
        Command::Hook(args) => hook::cmd_hook(&ui, args),
        Command::Recover(args) => recover::cmd_recover(&ui, args),
        Command::Attest(args) => attest::cmd_attest(&ui, args),
        Command::Prune(args) => prune::cmd_prune(&ui, args),
        Command::Push(args) => push::cmd_push(&ui, args),
        Command::Fetch(args) => fetch::cmd_fetch(&ui, args),
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

#[cfg(test)]
mod tests {
    fn rewritten(args: &[&str]) -> Vec<String> {
        super::with_log_counts(args.iter().map(|a| a.into()).collect())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn log_takes_gits_dash_n() {
        assert_eq!(
            rewritten(&["gf", "log", "-3"]),
            ["gf", "log", "--max-count=3"]
        );
        assert_eq!(
            rewritten(&["gf", "--color", "never", "log", "--oneline", "-12"]),
            [
                "gf",
                "--color",
                "never",
                "log",
                "--oneline",
                "--max-count=12"
            ]
        );
        assert_eq!(rewritten(&["gf", "show", "-3"]), ["gf", "show", "-3"]);
        assert_eq!(
            rewritten(&["gf", "run", "--id", "log", "-3"]),
            ["gf", "run", "--id", "log", "-3"]
        );
    }
}
