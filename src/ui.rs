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
    /// A live status line is drawn only on a terminal.
    live: bool,
}

/// A live status line ("⠋ PO acceptance: pytest -q 3.2s") redrawn while a stage runs; on a
/// non-terminal the label is printed once as a plain line instead.
pub struct Progress {
    stop: Option<std::sync::mpsc::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Ends the status line, replacing it with `line`.
    pub fn finish(mut self, ui: &Ui, line: Option<String>) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.join();
        if let Some(line) = line {
            ui.info(line);
        }
    }

    fn join(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Progress {
    /// Dropped: the label stays, with the time the stage took.
    fn drop(&mut self) {
        drop(self.stop.take());
        self.join();
    }
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
        let live = !quiet && console::Term::stderr().is_term();
        Ui {
            quiet,
            verbose,
            live,
        }
    }

    /// Starts a status line for a stage that takes a while.
    pub fn progress(&self, label: String) -> Progress {
        if !self.live {
            self.info(&label);
            return Progress {
                stop: None,
                handle: None,
            };
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let term = console::Term::stderr();
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let start = std::time::Instant::now();
            let mut i = 0usize;
            loop {
                let line = format!(
                    "{} {label} {}",
                    frames[i % frames.len()],
                    dim(format!("{:.1}s", start.elapsed().as_secs_f64()))
                );
                let _ = term.clear_line();
                let _ = term.write_str(&line);
                i += 1;
                match rx.recv_timeout(std::time::Duration::from_millis(100)) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                    Ok(()) => {
                        // Replaced by the caller's own line.
                        let _ = term.clear_line();
                        return;
                    }
                    Err(_) => break,
                }
            }
            // Dropped without a line of its own: keep the label with how long it took.
            let _ = term.clear_line();
            let _ = term.write_line(&format!(
                "{label} {}",
                dim(format!("({:.1}s)", start.elapsed().as_secs_f64()))
            ));
        });
        Progress {
            stop: Some(tx),
            handle: Some(handle),
        }
    }

    /// A progress or report line on stderr (silenced by -q).
    pub fn info(&self, line: impl AsRef<str>) {
        if !self.quiet {
            err_line(line.as_ref());
        }
    }

    /// Detail shown only with -v.
    pub fn detail(&self, line: impl AsRef<str>) {
        if self.verbose && !self.quiet {
            err_line(&style(line.as_ref()).dim().to_string());
        }
    }

    pub fn warn(&self, line: impl AsRef<str>) {
        err_line(&format!(
            "{} {}",
            style("warning:").yellow().bold(),
            line.as_ref()
        ));
    }

    /// A line on stderr that -q does not silence (the final verdict line).
    pub fn always(&self, line: impl AsRef<str>) {
        err_line(line.as_ref());
    }

    pub fn error(&self, err: &Error) {
        err_line(&format!("{} {}", style("error:").red().bold(), err.message));
        for d in &err.details {
            err_line(&format!("  {d}"));
        }
        if let Some(h) = &err.hint {
            err_line(&format!("{} {h}", style("hint:").cyan().bold()));
        }
    }

    /// Writes a result to stdout; a closed pipe (`| head`) is not an error.
    pub fn out(&self, text: impl AsRef<str>) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_ref().as_bytes());
        let _ = stdout.flush();
    }
}

/// One line on stderr. A closed pipe (`2>&1 | head -1`) is not a crash: it raises the
/// interrupt flag, so a run under way rolls back and records itself as SIGINT would make it.
fn err_line(line: &str) {
    let mut stderr = std::io::stderr().lock();
    if writeln!(stderr, "{line}").is_err() {
        crate::interrupt::raise();
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
