//! A submodule a command dirtied, put back as `git submodule update` would.

use super::facts::RelPath;
use super::paths::remove_path;
use super::report::Report;
use super::walk::status_walk;
use git2::build::CheckoutBuilder;
use git2::{Oid, Repository};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A submodule a command dirtied: a HEAD a command moved (a commit made inside it) is put
/// back at the recorded gitlink commit, detached, with its index and files, as `git submodule
/// update` does (the command's commit stays in its object store and reflog); then what it
/// left untracked is removed and its tracked files checked out from that HEAD.
pub(super) fn clean_submodule(root: &Path, path: &[u8], gitlink: Option<Oid>, report: &mut Report) {
    let name = RelPath::from_bytes(path).display();
    let sub_root = root.join(OsStr::from_bytes(path));
    let Ok(sub) = Repository::open(&sub_root) else {
        report
            .failed
            .push(format!("{name}: a submodule that cannot be opened"));
        return;
    };
    let head = sub.head().ok().and_then(|h| h.target());
    if let Some(want) = gitlink.filter(|w| head != Some(*w)) {
        let back = sub.find_commit(want).and_then(|c| {
            sub.set_head_detached(want)?;
            let mut force = CheckoutBuilder::new();
            force.force();
            sub.reset(c.as_object(), git2::ResetType::Hard, Some(&mut force))
        });
        match back {
            Ok(()) => report.paths.push(format!("{name} (HEAD back at {want})")),
            Err(e) => report.failed.push(format!(
                "{name}: its HEAD moved and could not be put back at {want}: {}",
                e.message()
            )),
        }
    }
    let Ok(dirty) = status_walk(&sub) else {
        report
            .failed
            .push(format!("{name}: a submodule whose status cannot be read"));
        return;
    };
    let mut checkout = CheckoutBuilder::new();
    checkout
        .force()
        .update_index(false)
        .disable_pathspec_match(true);
    let mut any = false;
    for d in &dirty {
        let inner = format!("{name}/{}", RelPath::from_bytes(&d.path).display());
        if d.untracked {
            match remove_path(&sub_root, &d.path) {
                Ok(()) => report.paths.push(inner),
                Err(e) => report.failed.push(format!("{inner}: {e}")),
            }
        } else {
            checkout.path(d.path.as_slice());
            any = true;
            report.paths.push(inner);
        }
    }
    if any {
        let done = sub
            .head()
            .and_then(|h| h.peel_to_tree())
            .and_then(|t| sub.checkout_tree(t.as_object(), Some(&mut checkout)));
        if let Err(e) = done {
            report.failed.push(format!("{name}: {}", e.message()));
        }
    }
}
