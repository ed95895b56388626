//! The one place exit codes are chosen.
//!
//! A rejected patch or a failed check is a verdict, not an error: it is recorded and maps to exit 1.
//! `Error` means the command was refused before anything changed, or a run could not finish.

use std::fmt;

/// Process exit status, as listed in the man page's EXIT STATUS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    Fail = 1,
    Refused = 2,
    Interrupted = 130,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

/// A refusal or an unfinished run: what happened, and the command that fixes it.
#[derive(Debug)]
pub struct Error {
    pub message: String,
    pub details: Vec<String>,
    pub hint: Option<String>,
    pub exit: Exit,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            details: Vec::new(),
            hint: None,
            exit: Exit::Refused,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn detail(mut self, line: impl Into<String>) -> Self {
        self.details.push(line.into());
        self
    }

    pub fn exit(mut self, exit: Exit) -> Self {
        self.exit = exit;
        self
    }

    /// Wraps a lower-level failure with what we were doing when it happened.
    pub fn context(what: impl fmt::Display, cause: impl fmt::Display) -> Self {
        Error::new(format!("{what}: {cause}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<git2::Error> for Error {
    fn from(e: git2::Error) -> Self {
        Error::new(format!("git: {}", e.message()))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::new(format!("i/o: {e}"))
    }
}

/// Adds "while doing X" context to any displayable error.
pub trait Context<T> {
    fn context(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error::context(what, e))
    }
}
