//! `git factory patch`: the TR engine as plumbing. Applies a diff in any dialect to the work
//! tree under every always-refused rule (no allow-list), all or nothing.

use crate::error::{Error, Exit, Result};
use crate::roles::se::proposal::{Change, Dialect};
use crate::roles::tr::{self, apply, dialects, diff::Strip, Rules};
use crate::ui::Ui;
use clap::Args;
use std::io::Read;

#[derive(Debug, Args)]
pub struct PatchArgs {
    /// The patch: a unified diff, a `*** Begin Patch` envelope or SEARCH/REPLACE blocks (`-` reads stdin)
    #[arg(value_name = "FILE|-")]
    pub file: String,
    /// Only check that it would apply; write nothing
    #[arg(long)]
    pub check: bool,
    /// Only the strict pass: every hunk exactly where its header says
    #[arg(long)]
    pub strict: bool,
    /// Remove N leading path components from unified-diff paths (default: git's a/ and b/)
    #[arg(short = 'p', value_name = "N")]
    pub strip: Option<usize>,
}

pub fn cmd_patch(ui: &Ui, args: PatchArgs) -> Result<Exit> {
    // Bytes, never decoded: a Latin-1 line must be matched and written as it is.
    let text = if args.file == "-" {
        let mut t = Vec::new();
        std::io::stdin()
            .read_to_end(&mut t)
            .map_err(|e| Error::new(format!("cannot read the patch from stdin: {e}")))?;
        t
    } else {
        std::fs::read(&args.file).map_err(|e| {
            Error::new(format!("cannot read {}: {e}", args.file))
                .hint("pass a patch file, or - for stdin")
        })?
    };
    let root = match crate::git::open(None) {
        // A killed run was refused before (`cli::refuse_if_killed`).
        Ok(repo) => crate::git::workdir(&repo)?,
        Err(_) => std::env::current_dir()?,
    };
    let change = if dialects::is_envelope(&text) {
        Change::Dialect(Dialect::Envelope, text)
    } else if dialects::is_search_replace(&text) {
        Change::Dialect(Dialect::SearchReplace, text)
    } else {
        Change::Diff(text)
    };
    let rules = Rules {
        protected: None,
        allowed: None,
        strip: args.strip.map_or(Strip::Auto, Strip::Components),
        strict_only: args.strict,
        repo: None,
        tests: tr::TestsGuard::Off,
        judged: &tr::weakened::Judged::default(),
    };
    let plan = match tr::plan(&change, &root, &rules) {
        Ok(plan) => plan,
        Err(refusal) => {
            ui.always(format!(
                "{} {}",
                console::style("refused:").red().bold(),
                refusal.message
            ));
            return Ok(Exit::Fail);
        }
    };
    let mut report = String::new();
    for (path, method) in &plan.methods {
        report.push_str(&format!(
            "{:<8} {}\n",
            method.as_str(),
            crate::ui::escape_line(path)
        ));
    }
    if !args.check {
        apply::write_outcomes(&root, &plan.outcomes).map_err(|e| {
            Error::new(format!(
                "writing the change failed (nothing was left half-written): {e}"
            ))
        })?;
    }
    ui.out(report);
    Ok(Exit::Success)
}
