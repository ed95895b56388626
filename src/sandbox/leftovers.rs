//! The Landlock backend's private `TMPDIR` and status file live in the system's temporary
//! folder, named after the process that made them (`git-factory-tmp-<pid>-…`). A harness
//! killed with `kill -9` cannot remove them; the next process that confines a command does,
//! once, for every such entry of ours whose process is gone.
//!
//! They are made once per confinement and emptied after each command ([`Spares`]): on a busy
//! disk, making a folder and a file cost more than a short command itself.

use std::path::Path;
use std::sync::{Arc, Mutex, Once};
use tempfile::{NamedTempFile, TempDir};

/// A confinement's private `TMPDIR` and status file between its commands.
#[derive(Debug, Default, Clone)]
pub struct Spares(Arc<Mutex<Option<(TempDir, NamedTempFile)>>>);

impl Spares {
    /// An empty private folder and an empty status file: the ones the last command gave
    /// back, or new ones.
    pub fn take(&self) -> std::io::Result<(TempDir, NamedTempFile)> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(pair) = kept {
            return Ok(pair);
        }
        sweep_once();
        let tmp = tempfile::Builder::new().prefix(&prefix(TMP)).tempdir()?;
        let status = tempfile::Builder::new()
            .prefix(&prefix(STATUS))
            .tempfile()?;
        Ok((tmp, status))
    }

    /// After a command ended (its process group gone): the folder emptied and the file
    /// truncated are kept for the next command; what cannot be emptied is removed instead.
    pub fn give_back(&self, tmp: TempDir, status: NamedTempFile) {
        if !emptied(tmp.path()) || status.as_file().set_len(0).is_err() {
            return;
        }
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some((tmp, status));
        }
    }
}

/// Removes everything in `dir` (never following a link), its own mode put back first.
fn emptied(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).is_err() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries {
        let Ok(entry) = entry else { return false };
        let path = entry.path();
        let removed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(e) => Err(e),
        };
        if removed.is_err() {
            return false;
        }
    }
    true
}

/// A command's private temporary folder.
pub const TMP: &str = "git-factory-tmp-";
/// The file the launcher writes why it could not start a command to.
pub const STATUS: &str = "git-factory-status-";
/// The scratch tree of a backend's probe.
pub const PROBE: &str = "git-factory-probe-";
/// The copies of a command's read-only files (see `keep.rs`), when its run keeps none.
pub const KEPT: &str = "git-factory-kept-";
const KINDS: [&str; 4] = [TMP, STATUS, PROBE, KEPT];

/// The name prefix for one of ours made by this process.
pub fn prefix(kind: &str) -> String {
    format!("{kind}{}-", std::process::id())
}

/// Removes the leftovers of processes that are gone, once per process.
pub fn sweep_once() {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| sweep(&std::env::temp_dir()));
}

/// Removes from `dir` every entry named like ours whose process no longer exists, if it is
/// ours (same owner) and a real folder or file (never through a link).
pub fn sweep(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = owner_pid(name.as_encoded_bytes()) else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.uid() != me {
            continue;
        }
        if meta.is_dir() {
            let _ = std::fs::remove_dir_all(&path);
        } else if meta.is_file() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The pid in a name of ours (`git-factory-tmp-<pid>-…`).
fn owner_pid(name: &[u8]) -> Option<i32> {
    let rest = KINDS.iter().find_map(|k| name.strip_prefix(k.as_bytes()))?;
    let end = rest.iter().position(|b| *b == b'-')?;
    let digits = std::str::from_utf8(&rest[..end]).ok()?;
    digits.parse::<i32>().ok().filter(|p| *p > 0)
}

/// Whether a process with this pid exists (one we may not signal exists too).
fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_back_folder_comes_back_empty_and_the_same() {
        let spares = Spares::default();
        let (tmp, status) = spares.take().expect("made");
        let path = tmp.path().to_path_buf();
        std::fs::create_dir_all(path.join("a/b")).expect("mkdir");
        std::fs::write(path.join("a/b/f"), "x").expect("write");
        std::os::unix::fs::symlink("/", path.join("link")).expect("symlink");
        std::fs::write(status.path(), "exec x: failed\n").expect("write");
        spares.give_back(tmp, status);
        let (tmp, status) = spares.take().expect("kept");
        assert_eq!(tmp.path(), path);
        assert_eq!(std::fs::read_dir(&path).expect("read").count(), 0);
        assert_eq!(std::fs::read(status.path()).expect("read").len(), 0);
    }

    #[test]
    fn only_our_names_with_a_pid_are_read() {
        assert_eq!(owner_pid(b"git-factory-tmp-123-abc"), Some(123));
        assert_eq!(owner_pid(b"git-factory-status-7-x"), Some(7));
        assert_eq!(owner_pid(b"git-factory-tmp-abc"), None);
        assert_eq!(owner_pid(b"git-factory-tmp-0-x"), None);
        assert_eq!(owner_pid(b"other-123-x"), None);
    }

    #[test]
    fn a_gone_process_leftovers_go_and_a_live_ones_stay() {
        let base = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let gone = child.id();
        child.wait().expect("wait");
        let dead_dir = base.path().join(format!("{TMP}{gone}-x"));
        std::fs::create_dir_all(dead_dir.join("sub")).expect("mkdir");
        let dead_file = base.path().join(format!("{STATUS}{gone}-y"));
        std::fs::write(&dead_file, "").expect("write");
        let live = base.path().join(prefix(TMP) + "z");
        std::fs::create_dir(&live).expect("mkdir");
        sweep(base.path());
        assert!(!dead_dir.exists() && !dead_file.exists());
        assert!(live.exists());
    }
}
