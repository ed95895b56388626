//! The race's compare-and-swap (SPEC §5.1): a race can last minutes and the user may work
//! meanwhile. Before an in-situ winner is delivered, HEAD, its branch, the index and the work
//! tree must be exactly as at preflight; if anything moved, nothing is delivered and nothing
//! of the user's is touched — the record keeps the winner for `git factory apply`.

use crate::error::Result;
use crate::git::restore::Restore;
use crate::graph::Ending;
use crate::run::attempt::session::Session;
use crate::run::race::candidate::CandidateRun;
use crate::store::records::Verdict;
use git2::Repository;

/// What differs in the user's tree from preflight, one phrase per difference; empty when
/// nothing does.
pub(crate) fn changed_since_preflight(session: &Session<'_>) -> Result<Vec<String>> {
    let repo = session.repo;
    let restore = &session.journal.restore;
    let mut changed = head_changes(repo, restore)?;
    if index_changed(repo, restore)? {
        changed.push("the index changed".to_string());
    }
    if let Some(preflight) = session.preflight {
        let dirty = preflight.changes_since(repo)?;
        let shown = dirty.iter().take(10);
        changed.extend(shown.map(|d| format!("{} ({})", d.path, d.label)));
        if dirty.len() > 10 {
            changed.push(format!("… and {} more paths", dirty.len() - 10));
        }
    }
    Ok(changed)
}

/// What changed in the user's tree during an in-situ race's final check that neither the
/// winner's change nor its checks account for (its checks changed `expected` in their own
/// worktree): the user's work, one phrase per difference; empty when there is none.
pub(crate) fn changed_during_final_check(
    session: &Session<'_>,
    change: &[String],
    expected: &[String],
) -> Result<Vec<String>> {
    let repo = session.repo;
    let restore = &session.journal.restore;
    let mut changed = head_changes(repo, restore)?;
    if index_changed(repo, restore)? {
        changed.push("the index changed".to_string());
    }
    if let Some(preflight) = session.preflight {
        let ours = |path: &str| change.iter().chain(expected).any(|p| p == path);
        let dirty: Vec<_> = (preflight.changes_since(repo)?.into_iter())
            .filter(|d| !ours(&d.path))
            .collect();
        changed.extend(
            dirty
                .iter()
                .take(10)
                .map(|d| format!("{} ({})", d.path, d.label)),
        );
        if dirty.len() > 10 {
            changed.push(format!("… and {} more paths", dirty.len() - 10));
        }
    }
    Ok(changed)
}

/// HEAD and its branch: the same ref checked out, at the same commit.
fn head_changes(repo: &Repository, restore: &Restore) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let head = repo.find_reference("HEAD")?;
    let now_ref = head.symbolic_target().map(str::to_string);
    if now_ref != restore.head_ref {
        out.push(format!(
            "HEAD now points at {} (was {})",
            now_ref.as_deref().unwrap_or("a detached commit"),
            restore.head_ref.as_deref().unwrap_or("a detached commit")
        ));
    }
    let at = match &restore.head_ref {
        Some(name) => repo.refname_to_id(name).ok(),
        None => head.target(),
    };
    let baseline = restore.baseline.as_str();
    match at {
        Some(id) if id.to_string() == baseline => {}
        Some(id) => out.push(format!(
            "{} moved from {} to {}",
            restore.head_ref.as_deref().unwrap_or("HEAD"),
            crate::git::short(baseline),
            crate::git::short(&id.to_string())
        )),
        None => out.push(format!(
            "{} no longer exists",
            restore.head_ref.as_deref().unwrap_or("HEAD")
        )),
    }
    Ok(out)
}

/// One index entry as far as its content goes: path, stage, mode, blob.
type Entry = (Vec<u8>, u16, u32, git2::Oid);

/// The index's entries (path, stage, mode, blob) against the bytes saved at preflight: a
/// refresh of stat data by `git status` is not a change, a `git add` is.
fn index_changed(repo: &Repository, restore: &Restore) -> Result<bool> {
    let now_path = repo.path().join("index");
    let saved = match (now_path.exists(), restore.saved_index()?) {
        (false, None) => return Ok(false),
        (true, Some(saved)) => saved,
        _ => return Ok(true),
    };
    let entries = |index: &git2::Index| -> Vec<Entry> {
        index
            .iter()
            .map(|e| (e.path, e.flags & 0x3000, e.mode, e.id))
            .collect()
    };
    Ok(entries(&git2::Index::open(&now_path)?) != entries(&saved))
}

/// The user worked in their tree while the winner was checked there once more: their work is
/// kept, the winner's change taken back where it is still as written, nothing restored as
/// a side effect; the run keeps the winner undelivered (PASS, `delivered: false`).
pub(crate) fn keep_users_work(
    session: &mut Session<'_>,
    plan: &crate::roles::tr::Plan,
    changed: &[String],
) -> Result<()> {
    let (_, left) = (session.journal.restore).take_back_change(session.repo, &plan.outcomes)?;
    let run_id = session.summary.run_id.clone();
    session.summary.delivered = Some(false);
    let mut why = format!(
        "not delivered: your work changed while the winner was checked once more in your tree ({}); \
         your changes are kept and the winner's change was taken back",
        changed.join("; ")
    );
    if !left.is_empty() {
        why.push_str(&format!(
            ", except where you had changed it too ({}), left as you made it",
            left.join(", ")
        ));
    }
    why.push_str(&format!(" — bring it in with git factory apply {run_id}"));
    session.fatal = Some(why);
    Ok(())
}

/// The run ends with the winner kept but not delivered: PASS, `delivered: false`, the winner's
/// passing attempt in the record (what `git factory apply` brings in), and the cause named.
pub(crate) fn undelivered(
    session: &mut Session<'_>,
    winner: &CandidateRun,
    changed: &[String],
) -> Ending {
    let run_id = session.summary.run_id.clone();
    session.summary.delivered = Some(false);
    if let Some(passing) = winner.attempts.last() {
        session.summary.attempts.push(passing.clone());
    }
    session.fatal = Some(format!(
        "not delivered: your work changed during the race ({}); nothing of yours was touched, \
         and candidate {} passed — bring its change in with git factory apply {run_id}",
        changed.join("; "),
        winner.index
    ));
    Ending {
        verdict: Verdict::Pass,
        stage: winner.stage.clone(),
        attempts: 0,
    }
}
