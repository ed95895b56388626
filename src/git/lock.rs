//! The in-situ repo lock: an `flock` on `.git/factory/lock`, so the kernel frees it when the
//! process dies and a killed run never leaves a lock that needs guessing.

use crate::error::{Error, Result};
use rustix::fs::{flock, FlockOperation};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;

pub struct RepoLock {
    file: File,
}

/// Opens `path` and takes its flock without waiting: the open file, or who holds it (what the
/// holder wrote into it, else "another process").
fn try_lock(path: &Path) -> Result<std::result::Result<File, String>> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
        return Ok(Ok(file));
    }
    let mut holder = String::new();
    let _ = file.read_to_string(&mut holder);
    let holder = holder.trim();
    Ok(Err(if holder.is_empty() {
        "another process".to_string()
    } else {
        holder.to_string()
    }))
}

impl RepoLock {
    /// Takes the lock or refuses, naming the holder's pid and run id.
    pub fn acquire(factory_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(factory_dir)?;
        let file = try_lock(&factory_dir.join("lock"))?.map_err(|who| {
            Error::new(format!(
                "another git factory run holds the repo lock ({who})"
            ))
            .hint("wait for it to finish, or use --worktree to run beside it")
        })?;
        let mut lock = RepoLock { file };
        lock.describe("(preflight)")?;
        Ok(lock)
    }

    /// Records which run holds the lock, for the refusal another run prints.
    pub fn describe(&mut self, run_id: &str) -> Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()?;
        write!(self.file, "pid {} run {run_id}", std::process::id())?;
        self.file.flush()?;
        Ok(())
    }

    /// Takes the lock of one run_id (`locks/run-<run_id>`), held while the run uses its
    /// staging folder and worktree; refuses, naming the holder's pid, while another process
    /// runs the same run_id (two `--worktree` runs of one order), so neither ever removes
    /// the other's worktree.
    pub fn acquire_run(factory_dir: &Path, run_id: &str) -> Result<Self> {
        let dir = factory_dir.join("locks");
        std::fs::create_dir_all(&dir)?;
        let file = try_lock(&dir.join(format!("run-{run_id}")))?.map_err(|who| {
            Error::new(format!(
                "git factory run {run_id} is already under way ({who})"
            ))
            .hint(
                "wait for it to finish; it records this same run (git factory show then shows it)",
            )
        })?;
        let mut lock = RepoLock { file };
        lock.describe(run_id)?;
        Ok(lock)
    }

    /// Whether a live process holds the lock now (probes without keeping it).
    pub fn is_held(factory_dir: &Path) -> bool {
        let Ok(file) = File::open(factory_dir.join("lock")) else {
            return false;
        };
        if flock(&file, FlockOperation::NonBlockingLockShared).is_err() {
            return true;
        }
        let _ = flock(&file, FlockOperation::Unlock);
        false
    }
}

impl Drop for RepoLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}
