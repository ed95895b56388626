//! The incremental fill of the bytecode cache (SPEC §3.7): the cache records, per work tree,
//! which tree's Python files it holds compiled, and a fill compiles only the files that differ
//! from that tree — none when the run's baseline is the tree it holds, so no interpreter
//! starts — and a repo whose checks never run Python never pays for it.
//!
//! The record of a work tree lives in `<cache>/.filled/<hash of the tree's real path>`: its
//! first line is the tree it holds (`none` when nothing was filled yet but its checks were
//! seen running Python), then the repo-relative paths whose entries went since (`forget`, or
//! what checks compiled and the harness dropped), each ended by a NUL. Those gaps are
//! compiled again by the next fill, so a rollback does not leave the cache colder for good.
//!
//! Never-stale holds as before: every path the harness writes is forgotten when it writes it,
//! and a fill over a new baseline forgets first every path that differs from the tree the
//! record names (the user may have changed those files since, within the same second).

use super::pycache::PyCache;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What the cache holds for one work tree.
pub(crate) struct Record {
    /// The tree whose files it holds (`None`: none yet, but the checks run Python).
    pub tree: Option<git2::Oid>,
    /// Paths whose entries went since, compiled again by the next fill.
    pub gaps: Vec<Vec<u8>>,
}

impl PyCache {
    /// Where the record of the work tree at `root` lives (`None`: a root that cannot be
    /// resolved, whose fill is never incremental).
    fn record_path(&self, root: &Path) -> Option<PathBuf> {
        let real = root.canonicalize().ok()?;
        let id =
            git2::Oid::hash_object(git2::ObjectType::Blob, real.as_os_str().as_bytes()).ok()?;
        Some(self.dir().join(".filled").join(id.to_string()))
    }

    pub(crate) fn record(&self, root: &Path) -> Option<Record> {
        let bytes = std::fs::read(self.record_path(root)?).ok()?;
        let nl = bytes.iter().position(|b| *b == b'\n')?;
        let tree = match &bytes[..nl] {
            b"none" => None,
            hex => Some(git2::Oid::from_str(std::str::from_utf8(hex).ok()?).ok()?),
        };
        let gaps = bytes[nl + 1..]
            .split(|b| *b == 0)
            .filter(|g| !g.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        Some(Record { tree, gaps })
    }

    /// Records that the cache holds `tree`'s files for `root` (no gaps), or, with `None`,
    /// only that its checks run Python.
    pub(crate) fn set_record(&self, root: &Path, tree: Option<git2::Oid>) {
        let Some(path) = self.record_path(root) else {
            return;
        };
        let line = tree.map_or("none".to_string(), |t| t.to_string());
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(path, format!("{line}\n"));
    }

    /// Drops the record of `root` (its entries went whole).
    pub(crate) fn drop_record(&self, root: &Path) {
        if let Some(path) = self.record_path(root) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Notes paths of `root` whose entries went, when the cache keeps a record for it.
    pub(crate) fn note_gaps<'p>(&self, root: &Path, paths: impl IntoIterator<Item = &'p [u8]>) {
        let Some(path) = self.record_path(root) else {
            return;
        };
        let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(path) else {
            return;
        };
        let mut bytes = Vec::new();
        for p in paths {
            if !p.is_empty() && !p.contains(&0) {
                bytes.extend_from_slice(p);
                bytes.push(0);
            }
        }
        let _ = file.write_all(&bytes);
    }

    /// What the next fill of the tree at `root` compiles for `baseline` (absolute paths, a
    /// line each; empty: nothing), with the entries of every Python file that differs from the
    /// tree the cache holds forgotten first. `runs_python`: the checks visibly run Python; a
    /// work tree without a record whose checks do not is never filled.
    pub fn fill_list(
        &self,
        repo: &git2::Repository,
        baseline: &git2::Tree<'_>,
        root: &Path,
        runs_python: bool,
    ) -> Vec<u8> {
        let held = match self.record(root) {
            None if !runs_python => return Vec::new(),
            None => None,
            Some(record) => record.tree.map(|t| (t, record.gaps)),
        };
        let Some((held, gaps)) = held else {
            return Self::prefill_list(baseline, root);
        };
        if held == baseline.id() && gaps.is_empty() {
            crate::trace::mark("  pycache: holds the baseline already");
            return Vec::new();
        }
        let mut wanted: Vec<Vec<u8>> = gaps;
        if held != baseline.id() {
            let changed = repo
                .find_tree(held)
                .and_then(|old| repo.diff_tree_to_tree(Some(&old), Some(baseline), None));
            let Ok(changed) = changed else {
                // The tree it held is gone (a pruned commit): everything, as on a first fill.
                return Self::prefill_list(baseline, root);
            };
            let paths: Vec<Vec<u8>> = changed
                .deltas()
                .flat_map(|d| [d.old_file().path_bytes(), d.new_file().path_bytes()])
                .flatten()
                .map(<[u8]>::to_vec)
                .collect();
            self.forget(root, paths.iter().map(Vec::as_slice));
            wanted.extend(paths);
        }
        let list = Self::python_files(baseline, root, Some(&wanted)).unwrap_or_default();
        if list.is_empty() {
            // No Python file differs: the cache holds the baseline's, without a compile.
            self.set_record(root, Some(baseline.id()));
        }
        list
    }

    /// After a fill of `root` for `tree` ended: the record names `tree`, unless the
    /// interpreter could not be started (the next run tries again).
    pub fn filled(&self, root: &Path, tree: git2::Oid, started: bool) {
        if started {
            self.set_record(root, Some(tree));
        }
    }
}
