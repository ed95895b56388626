//! Sharing runs with a remote (`git factory push` / `fetch`): run refs move only where they
//! are new or fast-forward, and `refs/notes/factory` is merged with git's `cat_sort_uniq`
//! strategy (the note lines of both sides, sorted, duplicates once) before it is pushed, so
//! any number of clones with runs of their own never meet a non-fast-forward refusal. The
//! signed evidence in `refs/notes/factory-attest` (one envelope per line, SPEC §6.1) travels and
//! merges the same way.
//!
//! git itself does the transport (its remotes, credentials and protocols are the point).

use super::{run_ids, NOTES_REF, RUN_REF_PREFIX};
use crate::error::{Error, Result};
use git2::{Oid, Repository};
use std::process::{Command, Output};

/// Signed evidence: one DSSE envelope per line of the note on a tree (SPEC §6.1).
pub const ATTEST_NOTES_REF: &str = "refs/notes/factory-attest";

/// The notes refs `push` and `fetch` share, each merged with `cat_sort_uniq`.
const SHARED_NOTES: [&str; 2] = [NOTES_REF, ATTEST_NOTES_REF];

/// Where fetched records wait before they are taken in (removed at the end).
const INCOMING_RUNS: &str = "refs/factory-incoming/";

/// Where a remote's notes wait before they are merged (`refs/notes/factory-incoming` for
/// `refs/notes/factory`).
fn incoming_notes(notes_ref: &str) -> String {
    format!("{notes_ref}-incoming")
}

/// What a push or fetch moved.
#[derive(Debug, Default)]
pub struct Shared {
    /// Run ids sent or taken in.
    pub runs: Vec<String>,
    /// Run ids whose record differs on the two sides; each side keeps its own.
    pub diverged: Vec<String>,
    /// Whether the notes changed (merged here, or sent).
    pub notes: bool,
    /// Incoming run refs that do not point at a commit (`refs/factory/<id>`, what it is):
    /// skipped, never taken in.
    pub not_runs: Vec<(String, String)>,
}

fn git(repo: &Repository) -> Result<Command> {
    let mut cmd = crate::git::worktree::git_cmd(repo);
    // A notes merge makes a commit: give it the identity runs are recorded with.
    let sig = super::signature(repo)?;
    for (who, value) in [
        ("GIT_AUTHOR_NAME", sig.name()),
        ("GIT_AUTHOR_EMAIL", sig.email()),
        ("GIT_COMMITTER_NAME", sig.name()),
        ("GIT_COMMITTER_EMAIL", sig.email()),
    ] {
        if let Some(v) = value {
            cmd.env(who, v);
        }
    }
    Ok(cmd)
}

fn output(mut cmd: Command, what: &str, remote: &str) -> Result<Output> {
    let out = cmd.output().map_err(|e| {
        Error::new(format!("{what}: cannot run git: {e}"))
            .hint("install git and make sure it is on PATH")
    })?;
    if out.status.success() {
        return Ok(out);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim_start_matches("fatal: ")
        .trim_start_matches("error: ");
    let mut err = Error::new(format!("{what}: {}", first.trim()));
    for line in stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .skip(1)
        .take(8)
    {
        err = err.detail(line.to_string());
    }
    Err(err.hint(format!(
        "check the remote with git remote -v (or name one: git factory {} <remote>); nothing was changed for {remote}",
        if what.starts_with("push") { "push" } else { "fetch" }
    )))
}

/// The remote's run refs and notes ref, as (name, id).
fn remote_refs(repo: &Repository, remote: &str, what: &str) -> Result<Vec<(String, Oid)>> {
    let mut cmd = git(repo)?;
    cmd.args(["ls-remote", "--refs", remote, "refs/factory/*"])
        .args(SHARED_NOTES);
    let out = output(cmd, what, remote)?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (oid, name) = l.split_once('\t')?;
            Some((name.to_string(), Oid::from_str(oid).ok()?))
        })
        .collect())
}

fn is_run_id(id: &str) -> bool {
    id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `git fetch` of one refspec into our staging refs: no tags, no FETCH_HEAD.
fn fetch_into(repo: &Repository, remote: &str, refspec: &str, what: &str) -> Result<()> {
    let mut fetch = git(repo)?;
    fetch.args([
        "fetch",
        "-q",
        "--no-tags",
        "--no-write-fetch-head",
        remote,
        refspec,
    ]);
    output(fetch, what, remote)?;
    Ok(())
}

/// Brings the remote's `notes_ref` in and merges it into ours with `cat_sort_uniq`.
fn merge_remote_notes(
    repo: &Repository,
    remote: &str,
    notes_ref: &str,
    what: &str,
) -> Result<bool> {
    let incoming = incoming_notes(notes_ref);
    fetch_into(repo, remote, &format!("+{notes_ref}:{incoming}"), what)?;
    let theirs = repo.refname_to_id(&incoming)?;
    if let Some(kind) = not_a_commit(repo, theirs) {
        if let Ok(mut r) = repo.find_reference(&incoming) {
            let _ = r.delete();
        }
        return Err(Error::new(format!(
            "{remote}'s {notes_ref} points at a {kind}, not a notes commit: its notes cannot be merged (your runs and notes are unchanged)"
        ))
        .hint(format!(
            "ask the remote's owner to repair it, or delete it there: git push {remote} :{notes_ref}"
        )));
    }
    let ours = repo.refname_to_id(notes_ref).ok();
    let changed = match ours {
        Some(o) if o == theirs || repo.graph_descendant_of(o, theirs)? => false,
        None => {
            repo.reference(notes_ref, theirs, false, "git factory: notes from a remote")?;
            true
        }
        Some(_) => {
            let mut merge = git(repo)?;
            merge.args([
                "notes",
                "--ref",
                notes_ref,
                "merge",
                "-q",
                "-s",
                "cat_sort_uniq",
            ]);
            merge.arg(&incoming);
            output(merge, what, remote)?;
            true
        }
    };
    if let Ok(mut r) = repo.find_reference(&incoming) {
        let _ = r.delete();
    }
    Ok(changed)
}

/// What `oid` is when it is not a commit (`blob`, `tree`, `tag`, or `missing object`).
fn not_a_commit(repo: &Repository, oid: Oid) -> Option<String> {
    match repo.find_object(oid, None) {
        Ok(o) if o.kind() == Some(git2::ObjectType::Commit) => None,
        Ok(o) => Some(o.kind().map_or("unknown object", |k| k.str()).to_string()),
        Err(_) => Some("missing object".to_string()),
    }
}

/// `git factory fetch <remote>`: takes in the remote's runs (new ones, and records that
/// fast-forward ours) and merges its notes into ours.
pub fn fetch(repo: &Repository, remote: &str) -> Result<Shared> {
    let what = format!("fetch from {remote}");
    let theirs = remote_refs(repo, remote, &what)?;
    let mut shared = Shared::default();
    if theirs.iter().any(|(n, _)| n.starts_with(RUN_REF_PREFIX)) {
        fetch_into(
            repo,
            remote,
            &format!("+{RUN_REF_PREFIX}*:{INCOMING_RUNS}*"),
            &what,
        )?;
        let ours: std::collections::BTreeMap<String, Oid> = run_ids(repo)?.into_iter().collect();
        let mut incoming: Vec<(String, Oid)> = Vec::new();
        for r in repo
            .references_glob(&format!("{INCOMING_RUNS}*"))?
            .flatten()
        {
            if let (Some(name), Some(oid)) = (r.name(), r.target()) {
                incoming.push((name[INCOMING_RUNS.len()..].to_string(), oid));
            }
        }
        incoming.sort();
        for (id, oid) in &incoming {
            if !is_run_id(id) {
                continue;
            }
            // A run record is a commit; anything else (a blob, a tree, a tag) is not taken
            // in: every later command would trip over it.
            if let Some(kind) = not_a_commit(repo, *oid) {
                shared.not_runs.push((super::run_ref(id), kind));
                continue;
            }
            match ours.get(id) {
                Some(o) if o == oid || repo.graph_descendant_of(*o, *oid)? => {}
                Some(o) if repo.graph_descendant_of(*oid, *o)? => {
                    repo.reference(
                        &super::run_ref(id),
                        *oid,
                        true,
                        "git factory: run record from a remote",
                    )?;
                    shared.runs.push(id.clone());
                }
                Some(_) => shared.diverged.push(id.clone()),
                None => {
                    repo.reference(
                        &super::run_ref(id),
                        *oid,
                        false,
                        "git factory: run record from a remote",
                    )?;
                    shared.runs.push(id.clone());
                }
            }
        }
        for (id, _) in &incoming {
            if let Ok(mut r) = repo.find_reference(&format!("{INCOMING_RUNS}{id}")) {
                let _ = r.delete();
            }
        }
    }
    for notes_ref in SHARED_NOTES {
        if theirs.iter().any(|(n, _)| n == notes_ref) {
            shared.notes |= merge_remote_notes(repo, remote, notes_ref, &what)?;
        }
    }
    Ok(shared)
}

/// `git factory push <remote>`: merges the remote's notes into ours first, then sends our
/// runs (new ones, and records that fast-forward theirs) and the merged notes. A push that
/// loses a race with another one is tried again from the merge.
pub fn push(repo: &Repository, remote: &str) -> Result<Shared> {
    let what = format!("push to {remote}");
    let mut last = None;
    for _ in 0..3 {
        let theirs = remote_refs(repo, remote, &what)?;
        let mut shared = Shared::default();
        let remote_notes =
            |notes_ref: &str| theirs.iter().find(|(n, _)| n == notes_ref).map(|(_, o)| *o);
        for notes_ref in SHARED_NOTES {
            if remote_notes(notes_ref).is_some() {
                merge_remote_notes(repo, remote, notes_ref, &what)?;
            }
        }
        let theirs_runs: std::collections::BTreeMap<&str, Oid> = theirs
            .iter()
            .filter_map(|(n, o)| Some((n.strip_prefix(RUN_REF_PREFIX)?, *o)))
            .collect();
        let mut refspecs = Vec::new();
        for (id, oid) in run_ids(repo)? {
            match theirs_runs.get(id.as_str()) {
                None => {}
                Some(t) if *t == oid => continue,
                Some(t) if repo.find_commit(*t).is_ok() && repo.graph_descendant_of(oid, *t)? => {}
                Some(_) => {
                    shared.diverged.push(id);
                    continue;
                }
            }
            refspecs.push(format!("{oid}:{}", super::run_ref(&id)));
            shared.runs.push(id);
        }
        for notes_ref in SHARED_NOTES {
            let ours_notes = repo.refname_to_id(notes_ref).ok();
            if ours_notes.is_some() && ours_notes != remote_notes(notes_ref) {
                refspecs.push(format!("{notes_ref}:{notes_ref}"));
                shared.notes = true;
            }
        }
        if refspecs.is_empty() {
            return Ok(shared);
        }
        let mut push = git(repo)?;
        push.args(["push", "-q", remote]).args(&refspecs);
        match output(push, &what, remote) {
            Ok(_) => return Ok(shared),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::new(format!("{what} failed"))))
}
