//! The hooks folder: recorded entry by entry at capture and put back in every mode, since a
//! hook a command planted would run on the user's next commit.

use super::facts::{HookFile, HooksFact, RelPath};
use super::saved::{SavedHook, SavedState};
use git2::Repository;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const LINK_MODE: u32 = 0o120000;

/// A hook's mode and bytes as they are now (a link's target for a link); `None` when absent.
/// Folders inside the hooks folder are not hooks and are left alone.
fn hook_state(path: &Path) -> Option<(u32, Vec<u8>)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).ok()?;
        return Some((LINK_MODE, target.as_os_str().as_bytes().to_vec()));
    }
    if !meta.is_file() {
        return None;
    }
    Some((
        meta.permissions().mode() & 0o7777,
        std::fs::read(path).ok()?,
    ))
}

fn hook_names(dir: &Path) -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| hook_state(&e.path()).is_some())
                .map(|e| e.file_name().as_bytes().to_vec())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

impl HooksFact {
    /// The hooks folder `dir` as it is: each hook's name and mode here, its bytes (a link's
    /// target) for the saved state.
    pub(super) fn capture(dir: PathBuf) -> (Self, Vec<SavedHook>) {
        let mut files = Vec::new();
        let mut saved = Vec::new();
        for name in hook_names(&dir) {
            if let Some((mode, bytes)) = hook_state(&dir.join(OsStr::from_bytes(&name))) {
                files.push(HookFile {
                    name: RelPath::from_bytes(&name),
                    mode,
                });
                saved.push(SavedHook { name, mode, bytes });
            }
        }
        (HooksFact { dir, files }, saved)
    }

    /// Compares the folder with what was recorded; with `put_back`, rewrites each hook that
    /// changed and removes each that was added. Returns the hooks that differed.
    pub(super) fn restore(
        &self,
        saved: &SavedState,
        put_back: bool,
        failed: &mut Vec<String>,
    ) -> Vec<String> {
        let mut differed = Vec::new();
        let shown = |name: &[u8]| self.dir.join(OsStr::from_bytes(name)).display().to_string();
        // A folder a link now stands in for is not written through: the link goes first.
        if std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_symlink()) {
            differed.push(self.dir.display().to_string());
            if !put_back {
                return differed;
            }
            if let Err(e) =
                std::fs::remove_file(&self.dir).and_then(|_| std::fs::create_dir(&self.dir))
            {
                failed.push(format!("{}: {e}", self.dir.display()));
                return differed;
            }
        }
        for hook in &self.files {
            let name = hook.name.as_bytes();
            let path = self.dir.join(OsStr::from_bytes(name));
            let Some(copy) = saved.hook(name) else {
                failed.push(format!("{}: its saved copy is gone", shown(name)));
                continue;
            };
            if hook_state(&path)
                .is_some_and(|(mode, bytes)| mode == hook.mode && bytes == copy.bytes)
            {
                continue;
            }
            differed.push(shown(name));
            if put_back {
                if let Err(e) = write_hook(&path, hook.mode, &copy.bytes) {
                    failed.push(format!("{}: {e}", shown(name)));
                }
            }
        }
        for name in hook_names(&self.dir) {
            if self
                .files
                .iter()
                .any(|h| h.name.as_bytes() == name.as_slice())
            {
                continue;
            }
            differed.push(shown(&name));
            if put_back {
                if let Err(e) = std::fs::remove_file(self.dir.join(OsStr::from_bytes(&name))) {
                    failed.push(format!("{}: {e}", shown(&name)));
                }
            }
        }
        differed.sort();
        differed
    }
}

/// Writes a hook anew (never through what is there: it is removed first) with its exact mode.
fn write_hook(path: &Path, mode: u32, bytes: &[u8]) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(_) => {}
    }
    if mode == LINK_MODE {
        return std::os::unix::fs::symlink(OsStr::from_bytes(bytes), path);
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// The hooks folder git runs hooks from (`core.hooksPath`, relative to the work tree), or
/// `None` when it lies inside the work tree (the work-tree restore owns it then).
pub(super) fn hooks_dir(repo: &Repository, root: &Path) -> Option<PathBuf> {
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path("core.hooksPath").ok());
    let dir = match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => root.join(p),
        None => repo.commondir().join("hooks"),
    };
    let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
    let real_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let inside_git = real.starts_with(repo.commondir().canonicalize().unwrap_or_default());
    (inside_git || !real.starts_with(&real_root)).then_some(dir)
}
