//! Confinement (SPEC §7.1): one policy for every confined command — checks in every mode,
//! agents, `reverify --sandbox`, the bytecode cache's fill — and two backends that enforce it,
//! bubblewrap and Landlock, chosen by git config `factory.sandboxBackend`. A backend is
//! trusted only after a probe has shown, once per process, that it confines on this machine.
//!
//! A command is confined in three steps: [`Confinement::prepare`] gives the command line to
//! start (and saves the read-only files inside the writable tree, under both backends: see
//! `keep.rs`), the caller starts it and tells [`Prepared::started`], and after it ended
//! [`Prepared::finish`] says whether the sandbox ever started it and puts back what it saved
//! and the command changed. A run keeps those copies with its journal, so its tree restore
//! and `recover` put them back again (the journal's `put_back_kept`).

mod bwrap;
mod git_modes;
pub mod keep;
pub mod landlock;
mod leftovers;
mod modes;
mod policy;
mod probe;
mod process;

pub use policy::{AgentIn, ChecksIn, Policy, VERIFY_KEY};
pub use probe::{choose, Choice};

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// git config: which backend `--sandbox` uses (`auto`, `bwrap`, `landlock`).
pub const BACKEND_KEY: &str = "factory.sandboxBackend";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Bwrap,
    Landlock,
}

impl Backend {
    /// The name recorded with each command (`sandbox` in `verify_result.json`) and shown.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Bwrap => "bwrap",
            Backend::Landlock => "landlock",
        }
    }
}

/// A policy and the backend that enforces it.
#[derive(Debug, Clone)]
pub struct Confinement {
    pub policy: Policy,
    pub backend: Backend,
    /// Where the read-only files saved before each command are kept (the run's own state,
    /// so `recover` finds them after a `kill -9`); `None`: a folder of the command's own.
    pub kept_in: Option<PathBuf>,
    /// The Landlock backend's private folder and status file, kept between commands.
    spares: leftovers::Spares,
}

/// The backend `--sandbox` uses in `repo`, by its git config `factory.sandboxBackend`,
/// proven to confine; a refusal naming why when none does.
pub fn require(repo: &git2::Repository) -> crate::error::Result<Backend> {
    let setting = crate::config::Config::of(repo).string(BACKEND_KEY);
    let choice = choose(setting.as_deref())?;
    if let Some(why) = &choice.passed_over {
        crate::trace::mark(&format!("sandbox: {} ({why})", choice.backend.name()));
    }
    Ok(choice.backend)
}

impl Confinement {
    pub fn new(policy: Policy, backend: Backend) -> Confinement {
        Confinement {
            policy,
            backend,
            kept_in: None,
            spares: leftovers::Spares::default(),
        }
    }

    /// Checks in the tree `at.tree`: the policy of [`Policy::for_checks`] under the backend
    /// the repo's configuration chooses.
    pub fn for_checks(at: ChecksIn<'_>) -> crate::error::Result<Confinement> {
        let backend = require(at.repo)?;
        Ok(Confinement::new(Policy::for_checks(at), backend))
    }

    /// The read-only files saved before each command are kept in `dir` (see
    /// [`Confinement::kept_in`]) until the run's state goes.
    pub fn keeping_in(mut self, dir: PathBuf) -> Confinement {
        self.kept_in = Some(dir);
        self
    }

    /// One more writable folder (see [`Policy::with_writable`]).
    pub fn with_writable(mut self, dir: PathBuf) -> Confinement {
        self.policy = self.policy.with_writable(dir);
        self
    }

    /// The command line that runs `argv` in `cwd` confined, with what must live until the
    /// command ended. An error here means the sandbox cannot start anything.
    pub fn prepare(&self, cwd: &Path, argv: &[String]) -> std::io::Result<Prepared> {
        let mut prepared = Prepared {
            backend: self.backend,
            argv: Vec::new(),
            env_set: Vec::new(),
            status_read: None,
            status_write: None,
            status_file: None,
            tmp: None,
            kept: None,
            modes: None,
            seccomp: None,
            spares: None,
        };
        // Under every backend: what it cannot stop is found and put back (see `keep.rs`).
        let kept = match &self.kept_in {
            Some(dir) => keep::Store::at(dir.clone()),
            None => keep::Store::temporary()?,
        };
        kept.save(&keep::wanted(&self.policy))?;
        prepared.kept = Some(kept);
        prepared.modes = Some(modes::Noted::of(
            &self.policy,
            self.backend == Backend::Landlock,
        ));
        match self.backend {
            Backend::Bwrap => {
                let (read, write) = rustix::pipe::pipe_with(
                    rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
                )?;
                // Only bwrap's end is passed on (inherited by the child it starts).
                rustix::io::fcntl_setfd(&write, rustix::io::FdFlags::empty())?;
                let seccomp = Some(seccomp_pipe(process::Confined::of(&self.policy, false))?);
                prepared.argv = bwrap::command_line(
                    &self.policy,
                    cwd,
                    argv,
                    write.as_raw_fd(),
                    seccomp.as_ref().map(|fd| fd.as_raw_fd()),
                );
                prepared.status_read = Some(read);
                prepared.status_write = Some(write);
                prepared.seccomp = seccomp;
            }
            Backend::Landlock => {
                let (tmp, status) = self.spares.take()?;
                let rules = landlock::rules(&self.policy, tmp.path());
                let who = process::Confined::of(&self.policy, true);
                prepared.argv =
                    landlock::command_line(&rules, self.policy.network, who, status.path(), argv)?;
                prepared.env_set = vec![("TMPDIR".into(), tmp.path().into())];
                prepared.tmp = Some(tmp);
                prepared.status_file = Some(status);
                prepared.spares = Some(self.spares.clone());
            }
        }
        Ok(prepared)
    }
}

/// A pipe holding the seccomp program of `who` (see `process.rs`), its reading end to pass
/// on to bwrap (which reads it to its end).
fn seccomp_pipe(who: process::Confined) -> std::io::Result<OwnedFd> {
    let program = process::filter(who).map_err(std::io::Error::other)?;
    let bytes = process::program_bytes(&program);
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // A few hundred bytes: far below a pipe's buffer, so this never blocks.
    let mut file = std::fs::File::from(write);
    std::io::Write::write_all(&mut file, &bytes)?;
    drop(file);
    rustix::io::fcntl_setfd(&read, rustix::io::FdFlags::empty())?;
    Ok(read)
}

/// A confined command ready to start (see [`Confinement::prepare`]).
pub struct Prepared {
    backend: Backend,
    /// The program and arguments to start instead of the command's own.
    pub argv: Vec<OsString>,
    /// Variables the command gets on top of the caller's (its private `TMPDIR`).
    pub env_set: Vec<(OsString, OsString)>,
    status_read: Option<OwnedFd>,
    status_write: Option<OwnedFd>,
    status_file: Option<tempfile::NamedTempFile>,
    tmp: Option<tempfile::TempDir>,
    kept: Option<keep::Store>,
    /// The modes put back after the command (see `modes.rs`).
    modes: Option<modes::Noted>,
    /// The reading end bwrap takes the seccomp program from (closed once it started).
    seccomp: Option<OwnedFd>,
    /// Where the private folder and status file go back to after the command.
    spares: Option<leftovers::Spares>,
}

/// What the sandbox says after the command ended.
#[derive(Debug, Default)]
pub struct Finished {
    /// The sandbox never started the command: why, naming the sandbox.
    pub not_started: Option<String>,
    /// Read-only files the command changed, and entries whose mode it changed, put back
    /// (listed in `side_effects`), as paths relative to the tree.
    pub put_back: Vec<PathBuf>,
    /// Read-only files the command changed that could not be put back, with why.
    pub not_put_back: Vec<String>,
}

impl Prepared {
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The command was started (or failed to start): our copy of the status pipe's writing
    /// end is closed.
    pub fn started(&mut self) {
        self.status_write = None;
        self.seccomp = None;
    }

    /// After the command ended (`exit_code` its launcher's): whether the sandbox started it,
    /// and the saved files put back.
    pub fn finish(mut self, exit_code: Option<i32>) -> Finished {
        self.status_write = None;
        let mut out = Finished::default();
        match self.backend {
            Backend::Bwrap => {
                let mut status = Vec::new();
                if let Some(fd) = self.status_read.take() {
                    let _ = std::fs::File::from(fd).read_to_end(&mut status);
                }
                if (!bwrap::started(&status) || bwrap::setup_failed(&status, exit_code))
                    && exit_code.is_some()
                {
                    out.not_started =
                        Some("the sandbox (bwrap) could not start the command".to_string());
                }
            }
            Backend::Landlock => {
                let said = (self.status_file.as_ref())
                    .and_then(|f| std::fs::read(f.path()).ok())
                    .unwrap_or_default();
                let said = String::from_utf8_lossy(&said).trim().to_string();
                if let Some(exec) = said.strip_prefix("exec ") {
                    out.not_started = Some(exec.to_string());
                } else if !said.is_empty() {
                    out.not_started = Some(format!(
                        "the sandbox (landlock) could not start the command: {said}"
                    ));
                }
            }
        }
        if let Some(kept) = self.kept.take() {
            let done = kept.put_back();
            out.put_back = done.restored;
            out.not_put_back = done.failed;
        }
        if let Some(modes) = self.modes.take() {
            let done = modes.put_back();
            out.put_back.extend(done.restored);
            out.not_put_back.extend(done.failed);
        }
        if let (Some(spares), Some(tmp), Some(status)) =
            (self.spares.take(), self.tmp.take(), self.status_file.take())
        {
            spares.give_back(tmp, status);
        }
        out
    }
}
