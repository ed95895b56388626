//! `git factory report [RUN…|--since DATE] [--html [-o FILE]]`: many runs side by side.

use crate::error::{Exit, Result};
use crate::git;
use crate::ops::page::{self, report, RunPage};
use crate::ui::Ui;
use clap::Args;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run ids or unique prefixes (default: every run, newest first)
    #[arg(value_name = "RUN")]
    pub runs: Vec<String>,
    /// Only runs started at or after DATE (as git log --since takes it: 2.weeks, yesterday, 2026-11-01)
    #[arg(long, value_name = "DATE", conflicts_with = "runs")]
    pub since: Option<String>,
    /// Write the report as one self-contained HTML page (default file: factory-report.html)
    #[arg(long)]
    pub html: bool,
    /// With --html: the file to write
    #[arg(short = 'o', long = "output", value_name = "FILE", requires = "html")]
    pub output: Option<std::path::PathBuf>,
    /// The repository (default: discovered from the current directory)
    #[arg(long, value_name = "DIR")]
    pub repo: Option<std::path::PathBuf>,
}

pub fn cmd_report(ui: &Ui, args: ReportArgs) -> Result<Exit> {
    let repo = git::open(args.repo.as_deref())?;
    let since = args
        .since
        .as_deref()
        .map(|d| report::since(&repo, d))
        .transpose()?;
    let runs = report::runs(&repo, &args.runs, since)?;
    let pages = runs
        .iter()
        .map(|run| RunPage::load(&repo, run))
        .collect::<Result<Vec<_>>>()?;
    if args.html {
        let path = page::output_path(args.output.as_deref(), "factory-report.html");
        page::write_page(&path, &report::render(&pages))?;
        ui.out(format!("{}\n", path.display()));
    } else {
        ui.out(report::table(&pages));
    }
    Ok(Exit::Success)
}
