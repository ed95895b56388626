//! Sharing runs with a remote (`git factory push` / `fetch`): run refs move only where they
//! are new or fast-forward, and `refs/notes/factory` is merged with git's `cat_sort_uniq`
//! strategy (the note lines of both sides, sorted, duplicates once) before it is pushed, so
//! any number of clones with runs of their own never meet a non-fast-forward refusal. The
//! signed evidence in `refs/notes/factory-attest` (one envelope per line, SPEC §6.1) travels and
//! merges the same way.
//!
//! git itself does the transport (its remotes, credentials and protocols are the point).

use super::backoff::Backoff;
use super::records::Verdict;
use super::{run_ids, NOTES_REF, RUN_REF_PREFIX};
use crate::error::{Error, Result};
use git2::{Oid, Repository};
use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::Duration;

/// Signed evidence: one DSSE envelope per line of the note on a tree (SPEC §6.1).
pub const ATTEST_NOTES_REF: &str = "refs/notes/factory-attest";

/// The notes refs shared with a remote; each is merged with `cat_sort_uniq` before it is
/// sent and when it is fetched.
pub const SHARED_NOTES: &[&str] = &[NOTES_REF, ATTEST_NOTES_REF];

/// Where fetched records wait before they are taken in (removed at the end).
const INCOMING_RUNS: &str = "refs/factory-incoming/";

/// Where a remote's notes ref waits to be merged: `refs/notes/factory-incoming` for
/// `refs/notes/factory`.
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
    /// The remote's run refs that git would not bring into this clone because their history
    /// is cut off on the remote (a shallow remote) and this clone is not shallow: taking them
    /// would make it so. Named, never dropped in silence.
    pub cut_off: Vec<String>,
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
    Err(git_error(what, &String::from_utf8_lossy(&out.stderr)).hint(format!(
        "check the remote with git remote -v (or name one: git factory {} <remote>); nothing was changed for {remote}",
        if what.starts_with("push") { "push" } else { "fetch" }
    )))
}

/// git's complaint as an error: its first line as the message, the next ones as details.
fn git_error(what: &str, stderr: &str) -> Error {
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
    err
}

/// The remote's run refs and notes refs, as (name, id).
fn remote_refs(
    repo: &Repository,
    remote: &str,
    notes_refs: &[&str],
    what: &str,
) -> Result<Vec<(String, Oid)>> {
    let mut cmd = git(repo)?;
    cmd.args(["ls-remote", "--refs", remote, "refs/factory/*"])
        .args(notes_refs);
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
///
/// In a shallow clone (a CI checkout) the fetch may take in records whose history the remote
/// itself holds only in part (it took shallow pushes): `--update-shallow` lets git add the
/// remote's cut points to ours, which is what a shallow clone is for. A full clone is never
/// made shallow: git leaves such refs out (and says so only in a warning), and the caller
/// names them.
fn fetch_into(repo: &Repository, remote: &str, refspec: &str, what: &str) -> Result<()> {
    let mut fetch = git(repo)?;
    fetch.args(["fetch", "-q", "--no-tags", "--no-write-fetch-head"]);
    if repo.is_shallow() {
        fetch.arg("--update-shallow");
    }
    fetch.args([remote, refspec]);
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
        Some(o) if o == theirs => false,
        // Ours builds on theirs, but may have dropped lines since (`prune` here): a push
        // never takes another clone's line off the remote, so those lines come back.
        Some(o) if repo.graph_descendant_of(o, theirs)? => {
            restore_dropped_lines(repo, notes_ref, theirs)?
        }
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
                &incoming,
            ]);
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
    let theirs = remote_refs(repo, remote, SHARED_NOTES, &what)?;
    let mut shared = Shared::default();
    if theirs.iter().any(|(n, _)| n.starts_with(RUN_REF_PREFIX)) {
        fetch_into(
            repo,
            remote,
            &format!("+{RUN_REF_PREFIX}*:{INCOMING_RUNS}*"),
            &what,
        )?;
        let ours: BTreeMap<String, Oid> = run_ids(repo)?.into_iter().collect();
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
        // What the remote listed but git did not bring: records whose history is cut off there.
        for (name, _) in &theirs {
            if let Some(id) = name.strip_prefix(RUN_REF_PREFIX) {
                if is_run_id(id) && !incoming.iter().any(|(i, _)| i == id) {
                    shared.cut_off.push(id.to_string());
                }
            }
        }
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
                // Our record was caught RUNNING (pushed mid-run, or its run was killed and
                // recovered elsewhere); a finished record of the same run supersedes it.
                Some(o) if supersedes(repo, *oid, *o) => {
                    repo.reference(
                        &super::run_ref(id),
                        *oid,
                        true,
                        "git factory: finished run record from a remote",
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

/// How long `push` keeps trying when other clones push first.
pub const PUSH_PATIENCE: Duration = Duration::from_secs(60);

/// `git factory push <remote>`: merges the remote's notes into ours, then sends our runs (new
/// ones, and records that fast-forward theirs) and the merged notes; a push that loses a race
/// with another clone is merged and sent again (see [`push_until_landed`]).
pub fn push(repo: &Repository, remote: &str) -> Result<Shared> {
    push_until_landed(repo, remote, SHARED_NOTES, PUSH_PATIENCE)
}

/// One ref of a `git push --porcelain` answer.
#[derive(Debug)]
struct PushedRef {
    /// The ref on the remote.
    dst: String,
    landed: bool,
    /// git's word on it (`[new reference]`, `[rejected] (fetch first)`, …).
    summary: String,
}

fn parse_porcelain(stdout: &[u8]) -> Vec<PushedRef> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let mut fields = l.splitn(3, '\t');
            let flag = fields.next()?;
            let (_, dst) = fields.next()?.rsplit_once(':')?;
            (flag.len() == 1).then(|| PushedRef {
                dst: dst.to_string(),
                landed: flag != "!",
                summary: fields.next().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// Whether git's words say another process got there first (a push that moved the ref, a
/// lock held): worth merging and trying again, unlike a hook's or a permission refusal.
fn lost_a_race(text: &str) -> bool {
    [
        "fetch first",
        "non-fast-forward",
        "stale info",
        "already exists",
        "failed to update ref",
        "failed to lock",
        "cannot lock ref",
        "incorrect old value",
        "Unable to create",
        "but expected",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// What one round of a push came to.
enum Round {
    /// Everything to send is on the remote.
    Landed,
    /// Some refs were refused (the rest of the round landed).
    Refused {
        refs: Vec<PushedRef>,
        /// The remote's own words (`remote: …` lines), a few at most.
        remote_says: Vec<String>,
        /// Whether other refs of the same round landed.
        progressed: bool,
    },
}

/// Whether a refused ref is worth another round: another clone got there first, or the remote
/// went quiet about it in a round where it took other refs (git's receive-pack does so for the
/// other refs of a push that also brought it a shallow history; sent alone next round, they
/// land). A round that moves nothing is never tried again for the second reason, so this
/// cannot loop on a remote that always fails.
fn worth_another_round(refused: &PushedRef, progressed: bool) -> bool {
    lost_a_race(&refused.summary)
        || (progressed && refused.summary.contains("remote failed to report status"))
}

/// Sends our runs and `notes_refs` to `remote` until everything has landed: a round reads the
/// remote's refs, merges each of its notes refs into ours (`cat_sort_uniq`), and pushes what
/// the remote lacks. A round refused because another clone pushed first is tried again after
/// a jittered pause, for up to `patience`; any other refusal ends it at once. A push that
/// fails names what was sent and what was not.
pub fn push_until_landed(
    repo: &Repository,
    remote: &str,
    notes_refs: &[&str],
    patience: Duration,
) -> Result<Shared> {
    let what = format!("push to {remote}");
    let mut sent = Shared::default();
    let mut backoff = Backoff::new(patience, Duration::from_millis(50), Duration::from_secs(2));
    loop {
        let failure = match push_round(repo, remote, notes_refs, &what, &mut sent) {
            Ok(Round::Landed) => return Ok(sent),
            Ok(Round::Refused {
                refs: refused,
                remote_says,
                progressed,
            }) => {
                let retry = refused.iter().all(|r| worth_another_round(r, progressed));
                if retry && backoff.wait() {
                    continue;
                }
                refused_error(
                    remote,
                    &what,
                    &refused,
                    &remote_says,
                    retry.then_some(patience),
                )
            }
            Err(e) => {
                let text = format!("{} {}", e.message, e.details.join(" "));
                if lost_a_race(&text) && backoff.wait() {
                    continue;
                }
                e
            }
        };
        return Err(naming_what_was_sent(failure, remote, &sent));
    }
}

/// Adds back to `notes_ref` every line the notes commit `theirs` holds that ours lacks;
/// whether any came back.
fn restore_dropped_lines(repo: &Repository, notes_ref: &str, theirs: Oid) -> Result<bool> {
    let before = repo.refname_to_id(notes_ref).ok();
    let tree = repo.find_commit(theirs)?.tree()?;
    for (target, text) in super::notes::all_in(repo, &tree)? {
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            // Appending leaves a line that is there already as it is.
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            super::notes::append_line(repo, notes_ref, target, line)?;
        }
    }
    Ok(repo.refname_to_id(notes_ref).ok() != before)
}

/// Whether record `new` is a finished record of the run that `old` holds as still RUNNING
/// (what each record's own summary says).
fn supersedes(repo: &Repository, new: Oid, old: Oid) -> bool {
    let summary = |oid| super::read_summary(repo, oid).ok().flatten();
    match (summary(new), summary(old)) {
        (Some(new), Some(old)) => {
            old.verdict == Verdict::Running
                && new.verdict != Verdict::Running
                && new.run_id == old.run_id
        }
        _ => false,
    }
}

fn push_round(
    repo: &Repository,
    remote: &str,
    notes_refs: &[&str],
    what: &str,
    sent: &mut Shared,
) -> Result<Round> {
    let theirs = remote_refs(repo, remote, notes_refs, what)?;
    let theirs_of = |name: &str| theirs.iter().find(|(n, _)| n == name).map(|(_, o)| *o);
    for notes_ref in notes_refs {
        if theirs_of(notes_ref).is_some() {
            merge_remote_notes(repo, remote, notes_ref, what)?;
        }
    }
    let theirs_runs: BTreeMap<&str, Oid> = theirs
        .iter()
        .filter_map(|(n, o)| Some((n.strip_prefix(RUN_REF_PREFIX)?, *o)))
        .collect();
    let mut refspecs = Vec::new();
    sent.diverged.clear();
    for (id, oid) in run_ids(repo)? {
        match theirs_runs.get(id.as_str()) {
            None => {}
            Some(t) if *t == oid => continue,
            Some(t) if repo.find_commit(*t).is_ok() && repo.graph_descendant_of(oid, *t)? => {}
            // The remote holds this run as RUNNING (pushed mid-run): the finished record
            // replaces it, as it replaced it here.
            Some(t) if supersedes(repo, oid, *t) => {
                refspecs.push(format!("+{oid}:{}", super::run_ref(&id)));
                continue;
            }
            Some(_) => {
                sent.diverged.push(id);
                continue;
            }
        }
        refspecs.push(format!("{oid}:{}", super::run_ref(&id)));
    }
    for notes_ref in notes_refs {
        let ours = repo.refname_to_id(notes_ref).ok();
        if ours.is_some() && ours != theirs_of(notes_ref) {
            refspecs.push(format!("{notes_ref}:{notes_ref}"));
        }
    }
    if refspecs.is_empty() {
        return Ok(Round::Landed);
    }
    let mut push = git(repo)?;
    // Not `-q`: git then prints the porcelain lines only when something failed.
    push.args(["push", "--porcelain", remote]).args(&refspecs);
    let out = push.output().map_err(|e| {
        Error::new(format!("{what}: cannot run git: {e}"))
            .hint("install git and make sure it is on PATH")
    })?;
    let answers = parse_porcelain(&out.stdout);
    for answer in answers.iter().filter(|a| a.landed) {
        if let Some(id) = answer.dst.strip_prefix(RUN_REF_PREFIX) {
            if !sent.runs.iter().any(|r| r == id) {
                sent.runs.push(id.to_string());
            }
        } else if notes_refs.contains(&answer.dst.as_str()) {
            sent.notes = true;
        }
    }
    if out.status.success() {
        return Ok(Round::Landed);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let progressed = answers.iter().any(|a| a.landed);
    let refused: Vec<PushedRef> = answers.into_iter().filter(|a| !a.landed).collect();
    if refused.is_empty() {
        // Nothing reached the remote (it is not there, or the connection failed).
        return Err(git_error(what, &stderr));
    }
    let remote_says = stderr
        .lines()
        .filter(|l| l.starts_with("remote: "))
        .map(|l| l.trim_end().to_string())
        .take(4)
        .collect();
    Ok(Round::Refused {
        refs: refused,
        remote_says,
        progressed,
    })
}

/// The refusal of a push whose refs were refused: which, and why.
fn refused_error(
    remote: &str,
    what: &str,
    refused: &[PushedRef],
    remote_says: &[String],
    gave_up_after: Option<Duration>,
) -> Error {
    let names: Vec<&str> = refused.iter().map(|r| r.dst.as_str()).collect();
    let why = refused.first().map_or("", |r| r.summary.as_str());
    if refused
        .iter()
        .any(|r| r.summary.contains("shallow update not allowed"))
    {
        return shallow_refusal(remote, what, refused, &names);
    }
    let mut err = match gave_up_after {
        Some(t) => Error::new(format!(
            "{what}: {} still refused after {} s of merging and trying again: {why}",
            names.join(", "),
            t.as_secs()
        )),
        None => Error::new(format!("{what}: {} refused: {why}", names.join(", "))),
    };
    for line in remote_says {
        err = err.detail(line.clone());
    }
    for r in refused {
        err = err.detail(format!("not sent: {} {}", r.dst, r.summary));
    }
    err.hint(match gave_up_after {
        Some(_) => format!(
            "other clones kept pushing first; run git factory push {remote} again"
        ),
        None => format!(
            "ask the owner of {remote} why it refuses them, then run git factory push {remote} again"
        ),
    })
}

/// A push from a shallow clone to a remote that lacks the history below the clone's cut (the
/// runs' baseline commits, or their parents): the remote would have to take a history with a
/// hole in it, which git refuses unless the remote allows it.
fn shallow_refusal(remote: &str, what: &str, refused: &[PushedRef], names: &[&str]) -> Error {
    let mut err = Error::new(format!(
        "{what}: {} refused: this clone is shallow and {remote} does not have the history the runs start from",
        names.join(", ")
    ));
    for r in refused {
        err = err.detail(format!("not sent: {} {}", r.dst, r.summary));
    }
    err.hint(format!(
        "push the commits the runs started from to {remote} first (or push the records to the remote this clone came from), or fetch the whole history here (git fetch --unshallow), or let {remote} take shallow pushes (git config receive.shallowUpdate true, in {remote}); then run git factory push {remote} again"
    ))
}

/// A push failure that says what reached the remote before it failed, so "nothing was
/// changed" is never said of a push that sent runs.
fn naming_what_was_sent(mut err: Error, remote: &str, sent: &Shared) -> Error {
    if sent.runs.is_empty() && !sent.notes {
        return err;
    }
    let mut line = format!(
        "sent to {remote}: {} run{}",
        sent.runs.len(),
        if sent.runs.len() == 1 { "" } else { "s" }
    );
    if !sent.runs.is_empty() {
        line.push_str(&format!(" ({})", sent.runs.join(", ")));
    }
    if sent.notes {
        line.push_str(" and the merged notes");
    }
    err.details.insert(0, line);
    if let Some(hint) = &mut err.hint {
        if let Some(cut) = hint.find("; nothing was changed for") {
            hint.truncate(cut);
        }
        hint.push_str(&format!(" (what was sent stays on {remote})"));
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn porcelain_answers_say_which_refs_landed() {
        let out = b"To ../o.git\n*\t0123456789abcdef0123456789abcdef01234567:refs/factory/aaaaaaaaaaaa\t[new reference]\n \trefs/notes/factory:refs/notes/factory\t1111111..2222222\n!\trefs/notes/factory-attest:refs/notes/factory-attest\t[rejected] (fetch first)\nDone\n";
        let answers = parse_porcelain(out);
        let got: Vec<(&str, bool, &str)> = answers
            .iter()
            .map(|a| (a.dst.as_str(), a.landed, a.summary.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("refs/factory/aaaaaaaaaaaa", true, "[new reference]"),
                ("refs/notes/factory", true, "1111111..2222222"),
                (
                    "refs/notes/factory-attest",
                    false,
                    "[rejected] (fetch first)"
                ),
            ]
        );
    }

    #[test]
    fn races_are_told_from_refusals() {
        for race in [
            "[rejected] (fetch first)",
            "[rejected] (non-fast-forward)",
            "[remote rejected] (failed to update ref)",
            "[remote rejected] (failed to lock)",
            "[rejected] (stale info)",
            "error: cannot lock ref 'refs/notes/factory': is at 1 but expected 2",
        ] {
            assert!(lost_a_race(race), "{race}");
        }
        for refusal in [
            "[remote rejected] (hook declined)",
            "[remote rejected] (pre-receive hook declined)",
            "[remote rejected] (deny updating a hidden ref)",
            "fatal: 'nowhere' does not appear to be a git repository",
        ] {
            assert!(!lost_a_race(refusal), "{refusal}");
        }
    }

    #[test]
    fn a_ref_the_remote_went_quiet_about_is_tried_again_only_after_a_round_that_moved_others() {
        let quiet = PushedRef {
            dst: NOTES_REF.to_string(),
            landed: false,
            summary: "[remote failure] (remote failed to report status)".to_string(),
        };
        assert!(worth_another_round(&quiet, true));
        assert!(!worth_another_round(&quiet, false));
        let hook = PushedRef {
            summary: "[remote rejected] (hook declined)".to_string(),
            ..quiet
        };
        assert!(!worth_another_round(&hook, true));
    }

    /// A repo with one commit, a run ref on it and a note line; and a bare remote.
    fn repo_and_remote() -> (tempfile::TempDir, Repository, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path().join("repo")).expect("init");
        {
            let mut cfg = repo.config().expect("config");
            cfg.set_str("user.name", "T").expect("name");
            cfg.set_str("user.email", "t@example.invalid")
                .expect("email");
        }
        {
            let sig = super::super::signature(&repo).expect("sig");
            let tree = repo
                .find_tree(repo.treebuilder(None).expect("tb").write().expect("tree"))
                .expect("tree");
            let commit = repo
                .commit(None, &sig, &sig, "base", &tree, &[])
                .expect("commit");
            repo.reference(&super::super::run_ref("aaaaaaaaaaaa"), commit, true, "run")
                .expect("ref");
            super::super::append_note(&repo, commit, "factory aaaaaaaaaaaa FAIL wo attempts=1")
                .expect("note");
        }
        let bare = dir.path().join("origin.git");
        let made = Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&bare)
            .output()
            .expect("git");
        assert!(made.status.success());
        (dir, repo, bare)
    }

    #[test]
    fn a_ref_the_remote_keeps_locked_is_tried_until_patience_runs_out_naming_what_was_sent() {
        let (_dir, repo, bare) = repo_and_remote();
        std::fs::create_dir_all(bare.join("refs/notes")).expect("mkdir");
        let lock = bare.join("refs/notes/factory.lock");
        std::fs::write(&lock, "").expect("lock");
        let remote = bare.to_str().expect("utf8");
        let start = std::time::Instant::now();
        let err = push_until_landed(&repo, remote, SHARED_NOTES, Duration::from_secs(2))
            .expect_err("the notes cannot land");
        assert!(start.elapsed() >= Duration::from_secs(2));
        assert!(start.elapsed() < Duration::from_secs(15));
        assert_eq!(
            err.message,
            format!("push to {remote}: refs/notes/factory still refused after 2 s of merging and trying again: [remote rejected] (failed to update ref)")
        );
        assert_eq!(
            err.details.first().map(String::as_str),
            Some(format!("sent to {remote}: 1 run (aaaaaaaaaaaa)").as_str())
        );
        assert!(err.details.contains(
            &"not sent: refs/notes/factory [remote rejected] (failed to update ref)".to_string()
        ));
        assert!(!format!("{:?}", err.hint).contains("nothing was changed"));

        // Once the other process lets go, the next try lands.
        let releaser = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(700));
                std::fs::remove_file(lock).expect("unlock");
            })
        };
        let shared = push_until_landed(&repo, remote, SHARED_NOTES, Duration::from_secs(30))
            .expect("lands once unlocked");
        releaser.join().expect("thread");
        assert!(shared.notes && shared.runs.is_empty(), "{shared:?}");
        let remote_repo = Repository::open_bare(&bare).expect("bare");
        assert_eq!(
            remote_repo.refname_to_id(NOTES_REF).ok(),
            repo.refname_to_id(NOTES_REF).ok()
        );
    }
}
