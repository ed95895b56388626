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
    /// `--no-pager`: long output is printed, never paged.
    pub no_pager: bool,
    /// A live status line is drawn only on a terminal.
    live: bool,
}

/// A live status line ("⠋ PO acceptance: pytest -q 3.2s") redrawn while a stage runs; on a
/// non-terminal the label is printed once as a plain line instead.
pub struct Progress {
    stop: Option<std::sync::mpsc::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
    /// Shown after the label while the line is live (e.g. the tokens a model sent so far).
    detail: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Progress {
    /// Changes what the live line shows after its label (nothing when not a terminal).
    pub fn set_detail(&self, detail: String) {
        if let Ok(mut d) = self.detail.lock() {
            *d = escape_line(&detail);
        }
    }

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
            no_pager: false,
            live,
        }
    }

    /// Starts a status line for a stage that takes a while.
    pub fn progress(&self, label: String) -> Progress {
        let label = escape_line(&label);
        if !self.live {
            self.info(&label);
            return Progress {
                stop: None,
                handle: None,
                detail: Default::default(),
            };
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let detail = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let shown = std::sync::Arc::clone(&detail);
        let handle = std::thread::spawn(move || {
            let term = console::Term::stderr();
            let frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let start = std::time::Instant::now();
            let mut i = 0usize;
            loop {
                let extra = shown
                    .lock()
                    .map(|d| {
                        if d.is_empty() {
                            String::new()
                        } else {
                            format!(" {d}")
                        }
                    })
                    .unwrap_or_default();
                // One row, never more: a line wider than the terminal wraps, and clearing
                // the current row would then leave a new line behind at every tick.
                let width = term.size_checked().map(|(_, cols)| cols as usize);
                let line = status_line(
                    frames[i % frames.len()],
                    &format!("{label}{extra}"),
                    &format!("{:.1}s", start.elapsed().as_secs_f64()),
                    width,
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
            detail,
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
            escape_controls(line.as_ref())
        ));
    }

    /// A line on stderr that -q does not silence (the final verdict line).
    pub fn always(&self, line: impl AsRef<str>) {
        err_line(line.as_ref());
    }

    pub fn error(&self, err: &Error) {
        // Messages quote names and text from records, models and commands.
        err_line(&format!(
            "{} {}",
            style("error:").red().bold(),
            escape_controls(&err.message)
        ));
        for d in &err.details {
            err_line(&format!("  {}", escape_controls(d)));
        }
        if let Some(h) = &err.hint {
            err_line(&format!(
                "{} {}",
                style("hint:").cyan().bold(),
                escape_controls(h)
            ));
        }
    }

    /// Writes long output through git's pager when stdout is a terminal, as git does:
    /// `GIT_PAGER`, else `core.pager`, else `PAGER`, else `less` (with `LESS=FRX` and `LV=-c`
    /// unless set); `cat` or an empty pager, `--no-pager` (or `git --no-pager`, which sets
    /// `GIT_PAGER=cat`) and a non-terminal print directly.
    pub fn page(&self, text: impl AsRef<str>, core_pager: Option<String>) {
        let text = text.as_ref();
        if self.no_pager || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            return self.out(text);
        }
        let pager = crate::env::git_pager()
            .or(core_pager)
            .or_else(crate::env::pager)
            .unwrap_or_else(|| "less".to_string());
        if pager.trim().is_empty() || pager.trim() == "cat" {
            return self.out(text);
        }
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&pager)
            .stdin(std::process::Stdio::piped());
        if !crate::env::is_set("LESS") {
            cmd.env("LESS", "FRX");
        }
        if !crate::env::is_set("LV") {
            cmd.env("LV", "-c");
        }
        let Ok(mut child) = cmd.spawn() else {
            return self.out(text);
        };
        if let Some(mut stdin) = child.stdin.take() {
            // The reader may quit early (q in less): a closed pipe is not an error.
            let _ = stdin.write_all(text.as_bytes());
        }
        let _ = child.wait();
    }

    /// Writes stored output (a command's log, a patch) to stdout: byte for byte to a pipe or a
    /// file, where a script reads it; with control characters escaped to a terminal, where a
    /// record must not drive it (SPEC §7).
    pub fn out_record_bytes(&self, bytes: &[u8]) {
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            return self.out(escape_controls(&String::from_utf8_lossy(bytes)));
        }
        let mut stdout = std::io::stdout().lock();
        if stdout
            .write_all(bytes)
            .and_then(|()| stdout.flush())
            .is_err()
        {
            crate::interrupt::request();
        }
    }

    /// Whether stdout is a terminal (the pager and the escaping of stored bytes depend on it).
    pub fn stdout_is_terminal(&self) -> bool {
        std::io::IsTerminal::is_terminal(&std::io::stdout())
    }

    /// Writes stored bytes (a patch) as `git diff` would: to a pipe or file exactly as they
    /// are; to a terminal decoded for display with control characters escaped (a patch is
    /// model output, SPEC §7), then styled by `style` (so our colours survive), then paged.
    pub fn page_bytes(
        &self,
        bytes: &[u8],
        core_pager: Option<String>,
        style: impl FnOnce(&str) -> String,
    ) {
        if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(bytes)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                crate::interrupt::request();
            }
            return;
        }
        let text = escape_controls(&String::from_utf8_lossy(bytes));
        self.page(style(&text), core_pager);
    }

    /// Writes a result to stdout; a closed pipe (`| head`) is not an error, but a run under
    /// way stops as on SIGINT.
    pub fn out(&self, text: impl AsRef<str>) {
        let mut stdout = std::io::stdout().lock();
        let written = stdout
            .write_all(text.as_ref().as_bytes())
            .and_then(|()| stdout.flush());
        if written.is_err() {
            crate::interrupt::request();
        }
    }
}

/// The live display of a race (SPEC §5.1): one line per candidate — its stage, attempt and
/// elapsed time — redrawn in place on a terminal and cut to its width; elsewhere each change
/// is printed once as a plain line.
pub struct Board {
    lines: std::sync::Arc<std::sync::Mutex<Vec<BoardLine>>>,
    stop: Option<std::sync::mpsc::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
    ui: Ui,
}

#[derive(Clone)]
struct BoardLine {
    /// What the line is about: `candidate 2`, or a batch's work-order id.
    label: String,
    text: String,
    started: Option<std::time::Instant>,
    done: bool,
}

impl Board {
    pub fn new(ui: &Ui, count: usize) -> Self {
        Self::labelled(ui, (1..=count).map(|i| format!("candidate {i}")).collect())
    }

    /// One line per label (escaped here), in order: a batch's runs (SPEC §5.2).
    pub fn labelled(ui: &Ui, labels: Vec<String>) -> Self {
        let lines = std::sync::Arc::new(std::sync::Mutex::new(
            labels
                .into_iter()
                .map(|label| BoardLine {
                    label: escape_line(&label),
                    text: "waiting".to_string(),
                    started: None,
                    done: false,
                })
                .collect::<Vec<_>>(),
        ));
        let mut board = Board {
            lines: std::sync::Arc::clone(&lines),
            stop: None,
            handle: None,
            ui: ui.clone(),
        };
        if ui.live {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            board.stop = Some(tx);
            board.handle = Some(std::thread::spawn(move || {
                let term = console::Term::stderr();
                let mut drawn = 0usize;
                loop {
                    let width = usize::from(term.size().1).max(20);
                    if drawn > 0 {
                        let _ = term.clear_last_lines(drawn);
                    }
                    let shown = lines.lock().map(|l| l.clone()).unwrap_or_default();
                    for line in &shown {
                        let _ = term.write_line(&console::truncate_str(
                            &board_text(line),
                            width - 1,
                            "…",
                        ));
                    }
                    drawn = shown.len();
                    match rx.recv_timeout(std::time::Duration::from_millis(200)) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                        _ => break,
                    }
                }
            }));
        }
        board
    }

    /// Candidate `index` (1-based) is now at `text` (e.g. `attempt 1/2 PO`).
    pub fn set(&self, index: u32, text: &str, done: bool) {
        let text = escape_line(text);
        let Ok(mut lines) = self.lines.lock() else {
            return;
        };
        let Some(line) = lines.get_mut(index.saturating_sub(1) as usize) else {
            return;
        };
        if line.done {
            return;
        }
        let started = *line.started.get_or_insert_with(std::time::Instant::now);
        line.text = text;
        line.done = done;
        if done {
            // The time stops with the candidate.
            line.text = format!(
                "{} {}",
                line.text,
                dim(format!("({:.1}s)", started.elapsed().as_secs_f64()))
            );
            line.started = None;
        }
        if !self.ui.live {
            self.ui.info(board_text(line));
        }
    }

    /// Line `index` (1-based) shows `text` while it runs, on a terminal only: elsewhere only
    /// what [`Board::set`] is told is printed, so a log gets one line per change of state.
    pub fn note(&self, index: u32, text: &str) {
        if !self.ui.live {
            return;
        }
        let text = escape_line(text);
        if let Ok(mut lines) = self.lines.lock() {
            if let Some(line) = lines.get_mut(index.saturating_sub(1) as usize) {
                if !line.done && line.started.is_some() {
                    line.text = text;
                }
            }
        }
    }

    /// Stops redrawing; the last state of every line stays on screen.
    pub fn finish(mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn board_text(line: &BoardLine) -> String {
    let elapsed = line
        .started
        .map(|s| dim(format!(" {:.1}s", s.elapsed().as_secs_f64())))
        .unwrap_or_default();
    format!("  {}: {}{elapsed}", line.label, line.text)
}

impl Ui {
    /// The same settings with nothing printed but warnings: what a candidate of a race
    /// reports goes to the race's board instead.
    pub fn silent(&self) -> Ui {
        Ui {
            quiet: true,
            verbose: false,
            no_pager: self.no_pager,
            live: false,
        }
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

/// One line on stderr. Never panics (as `eprintln!` does when stderr is closed): a closed
/// stderr (`git factory run … 2>&1 | head`) stops a run under way as SIGINT does, and the
/// rollback and record go on without it.
fn err_line(line: &str) {
    let line = escape_keeping_styles(line, console::colors_enabled_stderr());
    let mut stderr = std::io::stderr().lock();
    if writeln!(stderr, "{line}").is_err() {
        crate::interrupt::request();
    }
}

/// A spinner line fitted to `width` columns (less one, so the cursor never wraps): the label
/// is shortened with `…`, the elapsed time is kept.
fn status_line(frame: char, label: &str, elapsed: &str, width: Option<usize>) -> String {
    let label = match width {
        Some(w) => {
            let room = w.saturating_sub(elapsed.chars().count() + 4);
            if room == 0 {
                String::new()
            } else {
                clip(label, room)
            }
        }
        None => label.to_string(),
    };
    format!("{frame} {label} {}", dim(elapsed))
}

/// `text` cut to at most `max` characters, with `…` where it was cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

pub fn dim(s: impl std::fmt::Display) -> String {
    style(s).dim().to_string()
}

pub fn bold(s: impl std::fmt::Display) -> String {
    style(s).bold().to_string()
}

/// Record and model text made safe for a terminal (SPEC §7): ESC as `\e`, BEL as `\a`, other
/// C0 controls and DEL as `^X`, C1 controls as `\u{9b}`, so a stored summary or title cannot
/// move the cursor, set the window title, write the clipboard or hide text. Newlines and tabs
/// stay (multi-line excerpts); use [`escape_line`] for text that must stay on one line.
pub fn escape_controls(text: &str) -> String {
    escape(text, true)
}

/// `value` with every string in it escaped for a terminal: the one door through which record
/// text (a fetched run's summary, a run commit's message) reaches `log` and `show`, so no field
/// printed, now or added later, can be forgotten. Strings under a key in `multiline` keep
/// their newlines and tabs ([`escape_controls`]); all others become one line
/// ([`escape_line`]). `None` only if the value does not survive its own JSON form.
pub fn for_terminal<T: serde::Serialize + serde::de::DeserializeOwned>(
    value: &T,
    multiline: &[&str],
) -> Option<T> {
    fn walk(v: &mut serde_json::Value, keep_newlines: bool, multiline: &[&str]) {
        match v {
            serde_json::Value::String(s) => *s = escape(s, keep_newlines),
            serde_json::Value::Array(items) => {
                for item in items {
                    walk(item, keep_newlines, multiline);
                }
            }
            serde_json::Value::Object(map) => {
                for (k, item) in map.iter_mut() {
                    walk(item, multiline.contains(&k.as_str()), multiline);
                }
            }
            _ => {}
        }
    }
    let mut json = serde_json::to_value(value).ok()?;
    walk(&mut json, false, multiline);
    serde_json::from_value(json).ok()
}

/// What every line [`Ui`] prints to stderr goes through, so no caller can forget it: text
/// with control characters escaped as [`escape_controls`] does, except the colour and
/// weight sequences our own styling adds (`ESC [ … m` with only the parameters `console`
/// emits for them), kept when colour is on. A model could still colour its text with them,
/// but nothing else: no cursor moves, cleared screens, titles, clipboard writes, and no
/// concealed (8) or black-on-black (30, 40…) text.
pub fn escape_keeping_styles(text: &str, colour: bool) -> String {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(i) = rest.find('\x1b') {
        out.push_str(&escape_controls(&rest[..i]));
        let after = &rest[i..];
        match our_style(after).filter(|_| colour) {
            Some(len) => {
                out.push_str(&after[..len]);
                rest = &after[len..];
            }
            None => {
                out.push_str("\\e");
                rest = &after[1..];
            }
        }
    }
    out.push_str(&escape_controls(rest));
    out
}

/// The length of an SGR sequence at the start of `text` made only of the parameters our
/// styles use (reset, bold, dim, normal weight, and the foreground colours red to white).
fn our_style(text: &str) -> Option<usize> {
    let body = text.strip_prefix("\x1b[")?;
    let end = body.find('m')?;
    let params = &body[..end];
    let allowed = |p: &str| {
        matches!(p, "" | "0" | "1" | "2" | "22" | "39")
            || (p.len() == 2
                && (p.starts_with('3') || p.starts_with('9'))
                && matches!(p.as_bytes()[1], b'1'..=b'7'))
    };
    (params.len() <= 16 && params.split(';').all(allowed)).then_some(2 + end + 1)
}

/// [`escape_controls`] for one-line fields (ids, titles): newlines become `^J` too.
pub fn escape_line(text: &str) -> String {
    escape(text, false)
}

fn escape(text: &str, keep_newlines: bool) -> String {
    let needs = |c: char| c.is_control() && !(keep_newlines && (c == '\n' || c == '\t'));
    if !text.chars().any(needs) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !needs(c) => out.push(c),
            '\x1b' => out.push_str("\\e"),
            '\x07' => out.push_str("\\a"),
            '\x7f' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(c as u8 + 0x40));
            }
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped() {
        assert_eq!(
            escape_controls("a\x1b]52;c;eA==\x07b\r\x01\x7f\u{9b}2J\nc\td"),
            "a\\e]52;c;eA==\\ab^M^A^?\\u{9b}2J\nc\td"
        );
        assert_eq!(escape_line("id\nforged"), "id^Jforged");
        assert_eq!(escape_controls("caf\u{e9} plain"), "caf\u{e9} plain");
    }

    #[test]
    fn our_styles_are_kept_everything_else_escaped() {
        let ours = "\x1b[31m\x1b[1mFAIL\x1b[0m \x1b[2m(1.0s)\x1b[0m";
        assert_eq!(escape_keeping_styles(ours, true), ours);
        assert_eq!(
            escape_keeping_styles(ours, false),
            "\\e[31m\\e[1mFAIL\\e[0m \\e[2m(1.0s)\\e[0m"
        );
        assert_eq!(
            escape_keeping_styles("g\x1b]0;PWNED\x07\x1b[2J\x1b[8mhid\x1b[30m\0.txt", true),
            "g\\e]0;PWNED\\a\\e[2J\\e[8mhid\\e[30m^@.txt"
        );
    }

    #[test]
    fn status_lines_fit_the_terminal() {
        console::set_colors_enabled(false);
        let label = "  PO acceptance: python -m pytest -q tests/test_a_rather_long_name.py";
        for width in [10, 20, 40, 80] {
            let line = super::status_line('⠋', label, "12.3s", Some(width));
            assert!(
                console::measure_text_width(&line) < width,
                "{width}: {line}"
            );
            assert!(line.ends_with("12.3s"), "{line}");
        }
        let line = super::status_line('⠋', "short", "0.1s", Some(80));
        assert_eq!(line, "⠋ short 0.1s");
        assert_eq!(super::clip("abcdef", 4), "abc…");
        assert_eq!(super::clip("abc", 4), "abc");
    }
}
