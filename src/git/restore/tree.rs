//! The work tree, put back last: the sweep, then what the status walk finds removed or
//! checked out from the baseline, images written, folders and modes as they were.

use super::dirs::{walk_dirs, Known, Touched};
use super::facts::{Image, RelPath, Restore};
use super::images::{image_matches, write_image};
use super::paths::{real_parents, remove_path, split};
use super::python::is_bytecode;
use super::report::Report;
use super::submodule::clean_submodule;
use super::walk::{tree_walk, Dirty};
use crate::error::Result;
use git2::build::CheckoutBuilder;
use git2::Repository;
use std::path::Path;

impl Restore {
    /// The work tree step of [`Restore::apply`]: the sweep of what the status walk cannot
    /// see (with `new_ignored`, every new entry the baseline's rules ignore too), then up to three rounds of putting back what it finds (a removal can uncover more),
    /// then modes, and a name for each path that still differs.
    pub(super) fn restore_tree(
        &self,
        repo: &Repository,
        tree: &git2::Tree<'_>,
        images: &[Image],
        walk: Option<&crate::git::status::Snapshot>,
        new_ignored: bool,
        report: &mut Report,
    ) -> Result<()> {
        let root = &self.root;
        // Folders first, one stat each: an unreadable one (chmod 000) would hide what is
        // under it.
        let known: Known<'_> = self.dirs.iter().map(|d| (d.path.as_bytes(), d)).collect();
        let mut first = self.first_look();
        self.sweep(repo, images, &known, &first, new_ignored, report)?;
        crate::trace::mark("  restore: ignore rules and hidden entries");
        self.drop_kept_bytecode(report);
        crate::trace::mark("  restore: bytecode beside the sources");
        let image_paths: Vec<&[u8]> = images.iter().map(|i| i.path.as_bytes()).collect();
        // Images are written below; an entry that existed before the run is the user's.
        let others = |walk: Vec<Dirty>| -> Vec<Dirty> {
            walk.into_iter()
                .filter(|d| !image_paths.contains(&d.path.as_slice()))
                .filter(|d| !(d.untracked && self.existed_before(&d.path)))
                .collect()
        };
        let mut pending = match tree_walk(repo, walk) {
            Ok(found) => others(found),
            Err(_) => {
                // A folder a command made unreadable hides what is under it: open them all up
                // (which may change any folder's mode: the first look no longer holds).
                first.distrust();
                walk_dirs(repo, root, b"", true, Some(&known), &mut |_, _, _| {}, None);
                others(tree_walk(repo, walk)?)
            }
        };
        crate::trace::mark("  restore: status walk");
        // What the restore itself changes from here on (and what the bytecode pass may have
        // removed): the folders on the way are stat'ed again, the others are not.
        let mut touched = Touched::default();
        let kept_bytecode =
            (self.kept.iter().map(|k| k.path.as_bytes())).filter(|path| is_bytecode(split(path).1));
        for path in image_paths.iter().copied().chain(kept_bytecode) {
            touched.add(path);
        }
        for round in 0..3 {
            let checkout = clear_pending(root, &pending, report);
            write_images(repo, root, images, round == 2, report);
            checkout_paths(repo, root, tree, &checkout, report);
            crate::trace::mark("  restore: paths put back");
            for d in &pending {
                touched.add(&d.path);
            }
            touched.note(report);
            self.restore_dirs(repo, &known, &first, &touched, report);
            crate::trace::mark("  restore: folders put back");
            let images_done = images.iter().all(|i| image_matches(root, i));
            if pending.is_empty() && images_done {
                break;
            }
            pending = others(tree_walk(repo, walk)?);
            if pending.is_empty() && images_done {
                break;
            }
        }
        self.restore_modes(images, report);
        name_leftovers(root, &pending, images, report);
        Ok(())
    }
}

impl Restore {
    /// Whether `path`, or a folder it lies in, is an entry recorded at capture that is still
    /// the same one (not tracked: an ignored file, say). What existed before the run is the
    /// user's and is never removed, whatever the rules now say of it (SPEC §5).
    fn existed_before(&self, path: &[u8]) -> bool {
        let mut at = path.strip_suffix(b"/").unwrap_or(path);
        loop {
            if let Some(k) = self.kept.iter().find(|k| k.path.as_bytes() == at) {
                let now = super::paths::identity_at(&self.root, at);
                return k
                    .id
                    .zip(now)
                    .is_some_and(|(then, now)| then.same_entry(&now));
            }
            match at.iter().rposition(|b| *b == b'/') {
                Some(cut) => at = &at[..cut],
                None => return false,
            }
        }
    }
}

/// Removes what the walk found untracked and cleans dirtied submodules; returns the tracked
/// paths to check out from the baseline.
fn clear_pending(root: &Path, pending: &[Dirty], report: &mut Report) -> Vec<Vec<u8>> {
    let mut checkout: Vec<Vec<u8>> = Vec::new();
    for d in pending {
        let name = RelPath::from_bytes(&d.path).display();
        if d.submodule {
            clean_submodule(root, &d.path, d.gitlink, report);
        } else if d.untracked {
            match remove_path(root, &d.path) {
                Ok(()) => {
                    report.paths.push(name.trim_end_matches('/').to_string());
                    report.files.push(d.path.clone());
                }
                Err(e) => report.failed.push(format!("{name}: {e}")),
            }
        } else {
            if d.modified {
                // A change its stat data hides (same size and mtime second) is one
                // libgit2's checkout would skip as unmodified: the file goes first
                // (never through a link), so it is written again.
                let _ = remove_path(root, &d.path);
            }
            checkout.push(d.path.clone());
        }
    }
    checkout
}

/// Writes each image that differs; a failure is named only in the `last` round (an earlier
/// one may be cleared by what the round removes).
fn write_images(repo: &Repository, root: &Path, images: &[Image], last: bool, report: &mut Report) {
    for image in images {
        match write_image(repo, root, image) {
            Ok(true) => {
                report.paths.push(image.path.display());
                report.files.push(image.path.as_bytes().to_vec());
            }
            Ok(false) => {}
            Err(e) if last => report.failed.push(format!("{}: {e}", image.path.display())),
            Err(_) => {}
        }
    }
}

/// Checks the tracked `paths` out from the baseline's tree, through real folders only.
fn checkout_paths(
    repo: &Repository,
    root: &Path,
    tree: &git2::Tree<'_>,
    paths: &[Vec<u8>],
    report: &mut Report,
) {
    if paths.is_empty() {
        return;
    }
    let mut builder = CheckoutBuilder::new();
    builder
        .force()
        .update_index(false)
        .remove_untracked(false)
        .disable_pathspec_match(true);
    for p in paths {
        // Nothing on the way to a tracked path may be a link or a file.
        if let Err(e) = real_parents(root, p) {
            report
                .failed
                .push(format!("{}: {e}", RelPath::from_bytes(p).display()));
        }
        builder.path(p.as_slice());
    }
    if let Err(e) = repo.checkout_tree(tree.as_object(), Some(&mut builder)) {
        report.failed.push(format!("checkout: {}", e.message()));
    }
    report
        .paths
        .extend(paths.iter().map(|p| RelPath::from_bytes(p).display()));
    report.files.extend(paths.iter().cloned());
}

/// Names every path that still differs after the last round, unless its failure is named.
fn name_leftovers(root: &Path, pending: &[Dirty], images: &[Image], report: &mut Report) {
    for d in pending {
        let name = RelPath::from_bytes(&d.path).display();
        if !report.failed.iter().any(|f| f.starts_with(&name)) {
            report
                .failed
                .push(format!("{name}: still differs from the baseline"));
        }
    }
    for image in images {
        if !image_matches(root, image) {
            let name = image.path.display();
            if !report.failed.iter().any(|f| f.starts_with(&name)) {
                report
                    .failed
                    .push(format!("{name}: could not be written back"));
            }
        }
    }
}
