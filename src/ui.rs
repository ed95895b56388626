//! The only place that prints. Results go to stdout, progress and errors to stderr; colour is
//! decided once at start-up.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use crate::error::Error;
use crate::store::records::Verdict;
use console::style;
use std::io::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone)]
pub struct Ui {
    pub quiet: bool,
    pub verbose: bool,
}

impl Ui {
    /// `--color` wins over `NO_COLOR`, which wins over whether stderr is a terminal.
    pub fn new(color: ColorChoice, quiet: bool, verbose: bool) -> Self {
        let enabled = match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => !crate::env::no_color() && console::Term::stderr().is_term(),
        };
        console::set_colors_enabled(enabled);
        console::set_colors_enabled_stderr(enabled);
        Ui { quiet, verbose }
    }

    /// A progress or report line on stderr (silenced by -q).
    pub fn info(&self, line: impl AsRef<str>) {
        if !self.quiet {
            eprintln!("{}", line.as_ref());
        }
    }

    /// Detail shown only with -v.
    pub fn detail(&self, line: impl AsRef<str>) {
        if self.verbose && !self.quiet {
            eprintln!("{}", style(line.as_ref()).dim());
        }
    }

    pub fn warn(&self, line: impl AsRef<str>) {
        eprintln!("{} {}", style("warning:").yellow().bold(), line.as_ref());
    }

    /// A line on stderr that -q does not silence (the final verdict line).
    pub fn always(&self, line: impl AsRef<str>) {
        eprintln!("{}", line.as_ref());
    }

    pub fn error(&self, err: &Error) {
        eprintln!("{} {}", style("error:").red().bold(), err.message);
        for d in &err.details {
            eprintln!("  {d}");
        }
        if let Some(h) = &err.hint {
            eprintln!("{} {h}", style("hint:").cyan().bold());
        }
    }

    /// Writes a result to stdout; a closed pipe (`| head`) is not an error.
    pub fn out(&self, text: impl AsRef<str>) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_ref().as_bytes());
        let _ = stdout.flush();
    }
}

pub fn verdict(v: Verdict) -> String {
    let s = style(v.as_str()).bold();
    match v {
        Verdict::Pass => s.green(),
        Verdict::Fail => s.red(),
        Verdict::Error | Verdict::Interrupted => s.magenta(),
        Verdict::Running => s.yellow(),
    }
    .to_string()
}

pub fn dim(s: impl std::fmt::Display) -> String {
    style(s).dim().to_string()
}

pub fn bold(s: impl std::fmt::Display) -> String {
    style(s).bold().to_string()
}
