//! Run records in git: the only code that writes `refs/factory/*` and `refs/notes/factory*`.
//!
//! `refs/factory/<run_id>` → the run commit: its tree holds the artifacts, its parents are the
//! attempt commits (parent: baseline; tree: the repo after that attempt's change), plus the
//! previous run commit when a run was forced again.

pub mod backoff;
pub mod checked;
pub mod notes;
pub mod prune;
pub mod records;
pub mod share;
pub mod streams;
pub mod view;

use crate::error::{Error, Result};
use git2::{Commit, FileMode, Oid, Repository, Signature};
use records::RunSummary;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub const RUN_REF_PREFIX: &str = "refs/factory/";
pub const NOTES_REF: &str = "refs/notes/factory";

pub fn run_ref(run_id: &str) -> String {
    format!("{RUN_REF_PREFIX}{run_id}")
}

/// Sets the run record ref `name` (under `refs/factory/`) back to `to`, or removes it: the
/// agent audit's put-back of a record an agent made, moved or removed.
pub fn set_record_back(repo: &Repository, name: &str, to: Option<git2::Oid>) -> Result<()> {
    if !name.starts_with(RUN_REF_PREFIX) {
        return Err(Error::new(format!("{name} is not a run record")));
    }
    match to {
        Some(oid) => {
            repo.reference(name, oid, true, "git factory: agent audit")?;
        }
        None => {
            if let Ok(mut r) = repo.find_reference(name) {
                r.delete()?;
            }
        }
    }
    Ok(())
}

/// The branch a `--worktree` PASS is committed on (SPEC §5): `factory/run-<run_id>`, never
/// `factory/<run_id>`, which `git merge` and `git log` resolve to the record
/// `refs/factory/<run_id>` before the branch.
pub fn run_branch(run_id: &str) -> String {
    format!("factory/run-{run_id}")
}

/// The run id a run branch carries — `factory/run-<run_id>`, or `factory/<run_id>` as runs
/// before the rename named it — when it looks like one (12 lowercase hex digits).
pub fn run_id_of_branch(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("factory/")?;
    let id = rest.strip_prefix("run-").unwrap_or(rest);
    (id.len() == 12
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then_some(id)
}

/// The run branch of `run_id` that points at `commit`, if any: the current name first, then
/// the name runs made before the rename used.
pub fn run_branch_at(repo: &Repository, run_id: &str, commit: &str) -> Option<String> {
    [run_branch(run_id), format!("factory/{run_id}")]
        .into_iter()
        .find(|branch| {
            repo.find_reference(&format!("refs/heads/{branch}"))
                .ok()
                .and_then(|r| r.target())
                .is_some_and(|at| at.to_string() == commit)
        })
}

/// Where the seal of run `run_id`'s record lives, relative to `.git/factory/` (`made/<run_id>`:
/// local, never pushed); `None` for an id that is not hex, so no path is spelt through it.
pub fn record_seal(run_id: &str) -> Option<String> {
    let hex = !run_id.is_empty() && run_id.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| format!("made/{run_id}"))
}

/// Puts `refs/factory/<run_id>` back as it was before a refused run: at the earlier record,
/// or away when there was none.
pub fn withdraw_run(repo: &Repository, run_id: &str, previous: Option<git2::Oid>) -> Result<()> {
    let refname = run_ref(run_id);
    match previous {
        Some(commit) => {
            repo.reference(&refname, commit, true, "factory: refused run")?;
        }
        None => {
            if let Ok(mut r) = repo.find_reference(&refname) {
                r.delete()?;
            }
        }
    }
    Ok(())
}

pub fn signature(repo: &Repository) -> Result<Signature<'static>> {
    match repo.signature() {
        Ok(sig) => Ok(sig.to_owned()),
        Err(_) => Ok(Signature::now("git-factory", "git-factory@localhost")?),
    }
}

/// Writes a run's artifact folder into git after every stage.
pub struct RunWriter {
    run_id: String,
    dir: PathBuf,
    /// Blob ids of files already stored, keyed by path with their size and mtime.
    blobs: HashMap<PathBuf, (u64, Option<SystemTime>, Oid)>,
    pub attempt_commits: Vec<Oid>,
    pub previous: Option<Oid>,
    /// `factory.recordLogBytes`, read at the first checkpoint.
    log_cap: Option<u64>,
}

impl RunWriter {
    /// Continues a run commit that already exists (recover): its parents stay as they are.
    pub fn resume(run_id: &str, dir: &Path, parents: Vec<Oid>) -> Self {
        let mut w = RunWriter::new(run_id, dir, None);
        w.attempt_commits = parents;
        w
    }

    pub fn new(run_id: &str, dir: &Path, previous: Option<Oid>) -> Self {
        RunWriter {
            run_id: run_id.to_string(),
            dir: dir.to_path_buf(),
            blobs: HashMap::new(),
            attempt_commits: Vec::new(),
            previous,
            log_cap: None,
        }
    }

    fn tree_of(&mut self, repo: &Repository, dir: &Path) -> Result<Oid> {
        let mut builder = repo.treebuilder(None)?;
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let meta = entry.metadata()?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if meta.is_dir() {
                let oid = self.tree_of(repo, &path)?;
                builder.insert(name.as_ref(), oid, FileMode::Tree.into())?;
            } else if meta.is_file() {
                let stamp = (meta.len(), meta.modified().ok());
                let oid = match self.blobs.get(&path) {
                    Some((len, mtime, oid)) if (*len, *mtime) == stamp => *oid,
                    _ => {
                        let cap = self
                            .log_cap
                            .unwrap_or(crate::config::DEFAULT_RECORD_LOG_BYTES);
                        let oid = if streams::is_command_stream(&name) && meta.len() > cap {
                            repo.blob(&streams::capped_stream(&path, meta.len(), cap)?)?
                        } else {
                            repo.blob_path(&path)?
                        };
                        self.blobs.insert(path.clone(), (stamp.0, stamp.1, oid));
                        oid
                    }
                };
                builder.insert(name.as_ref(), oid, FileMode::Blob.into())?;
            }
        }
        Ok(builder.write()?)
    }

    /// Records an attempt's resulting tree as a commit on the baseline.
    pub fn attempt_commit(
        &mut self,
        repo: &Repository,
        baseline: &Commit<'_>,
        tree: Oid,
        attempt: u32,
    ) -> Result<Oid> {
        let sig = signature(repo)?;
        let tree = repo.find_tree(tree)?;
        let msg = format!("factory {} attempt {attempt}", self.run_id);
        let oid = repo.commit(None, &sig, &sig, &msg, &tree, &[baseline])?;
        self.attempt_commits.push(oid);
        Ok(oid)
    }

    /// Writes the artifact folder as the run commit and moves `refs/factory/<run_id>` to it.
    pub fn checkpoint(&mut self, repo: &Repository, message: &str) -> Result<Oid> {
        if self.log_cap.is_none() {
            self.log_cap = Some(streams::record_log_bytes(&crate::config::Config::of(repo))?);
        }
        let dir = self.dir.clone();
        let tree = self.tree_of(repo, &dir)?;
        crate::trace::mark("    checkpoint: artifact tree");
        let tree = repo.find_tree(tree)?;
        let sig = signature(repo)?;
        let mut parents: Vec<Commit<'_>> = Vec::new();
        for oid in self.attempt_commits.iter().chain(self.previous.iter()) {
            parents.push(repo.find_commit(*oid)?);
        }
        let parent_refs: Vec<&Commit<'_>> = parents.iter().collect();
        let oid = repo.commit(None, &sig, &sig, message, &tree, &parent_refs)?;
        crate::trace::mark("    checkpoint: commit");
        crate::crash::point("during_ref_update");
        let subject = message.lines().next().unwrap_or("");
        repo.reference(&run_ref(&self.run_id), oid, true, subject)?;
        Ok(oid)
    }
}

/// The note line of SPEC §4.1: `factory <run_id> <verdict> <work-order-id> attempts=<n>`.
pub fn note_line(s: &RunSummary) -> String {
    format!(
        "factory {} {} {} attempts={}",
        s.run_id,
        s.verdict.as_str(),
        s.work_order_id,
        s.attempts.len()
    )
}

/// The run commit's message: the note line as subject, then what `log` shows, so listing
/// runs reads commit headers only, never artifact blobs.
pub fn run_message(s: &RunSummary) -> String {
    let mut m = format!(
        "{}\n\ntitle: {}\nbaseline: {}\nstarted: {}\nstage: {}\n",
        note_line(s),
        s.work_order_title.replace('\n', " "),
        s.repo_baseline_commit,
        s.started_utc,
        s.ended_stage
    );
    if let Some(ms) = s.started_unix_ms {
        m.push_str(&format!("started_ms: {ms}\n"));
    }
    if !s.candidates.is_empty() {
        let passed = s
            .candidates
            .iter()
            .filter(|c| c.verdict == records::Verdict::Pass)
            .count();
        m.push_str(&format!("candidates: {passed}/{}\n", s.candidates.len()));
    }
    // The last attempt's per-test counts (SPEC §3.9), for `log`: one line of canonical JSON.
    let counts = (s.attempts.iter().rev()).find_map(|a| a.tests.as_ref());
    if let Some(value) = counts.and_then(|t| serde_json::to_value(t).ok()) {
        m.push_str(&format!(
            "tests: {}\n",
            crate::identity::canonical_json(&value)
        ));
    }
    if let Some(c) = &s.cost {
        m.push_str(&format!("cost: {}\n", cost_field(c)));
        for (model, cost) in costs_by_model(s) {
            m.push_str(&format!(
                "cost_model: {} {}\n",
                cost_field(&cost),
                model.replace('\n', " ")
            ));
        }
    }
    m
}

/// A cost in a run commit's message: `<usd or -> <unpriced requests> <source>`.
fn cost_field(c: &records::Cost) -> String {
    let usd = c.usd.map_or("-".to_string(), |u| format!("{u:.9}"));
    format!(
        "{usd} {} {}",
        c.unpriced_requests,
        c.source.replace([' ', '\n'], "_")
    )
}

/// Reads `cost_field` back; the rest of the line after it.
fn parse_cost(v: &str) -> Option<(records::Cost, &str)> {
    let mut parts = v.splitn(4, ' ');
    let usd = match parts.next()? {
        "-" => None,
        // A record can come from anyone: a cost that is no bill is no cost it can be read as.
        n => Some(
            n.parse::<f64>()
                .ok()
                .filter(|u| u.is_finite() && *u >= 0.0)?,
        ),
    };
    let unpriced_requests = parts.next()?.parse().ok()?;
    let source = parts.next()?.to_string();
    let cost = records::Cost {
        usd,
        unpriced_requests,
        source,
    };
    Some((cost, parts.next().unwrap_or("")))
}

/// The run's cost per model it asked (a race's candidates by their models, a lone run by its
/// own), for `log --cost`.
fn costs_by_model(s: &RunSummary) -> Vec<(String, records::Cost)> {
    let mut by: Vec<(String, records::Cost)> = Vec::new();
    let mut add = |model: &str, cost: &records::Cost| match by.iter_mut().find(|(m, _)| m == model)
    {
        Some((_, sum)) => *sum = records::Cost::sum([&*sum, cost]).unwrap_or_default(),
        None => by.push((model.to_string(), cost.clone())),
    };
    for c in &s.candidates {
        if let Some(cost) = &c.cost {
            add(&c.model, cost);
        }
    }
    for a in &s.attempts {
        if let Some(cost) = &a.cost {
            add(&s.config.model, cost);
        }
    }
    by
}

/// What `log` needs of a run, parsed from its run commit's message.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunHeader {
    pub run_id: String,
    pub verdict: String,
    pub attempts: u32,
    pub work_order_id: String,
    pub title: String,
    pub baseline: String,
    pub started_utc: String,
    /// The stage the run ended at (`already_satisfied`, …); empty for older records.
    pub ended_stage: String,
    /// Seconds since the epoch of the run commit (its last update).
    pub time: i64,
    /// A race's `passed/candidates` (SPEC §5.1); absent for a single run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<String>,
    /// When the run started, in milliseconds (runs recorded before it was kept: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    /// What the run cost (SPEC §3.3 Cost); none for runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<records::Cost>,
    /// Its cost per model asked, for `log --cost`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cost_by_model: Vec<(String, records::Cost)>,
    /// The last attempt's per-test counts (SPEC §3.9); none when no check reported tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<records::TestCounts>,
}

impl RunHeader {
    /// What `log` orders by: the start to the millisecond, else the record's time.
    pub fn order_key(&self) -> i64 {
        self.started_ms.unwrap_or(self.time.saturating_mul(1000))
    }
}

pub fn parse_header(run_id: &str, message: &str, time: i64) -> RunHeader {
    let mut lines = message.lines();
    // `factory <run_id> <verdict> <work-order-id, may hold spaces> attempts=<n>`
    let subject: Vec<&str> = lines.next().unwrap_or("").split(' ').collect();
    let attempts = subject
        .last()
        .and_then(|a| a.strip_prefix("attempts="))
        .and_then(|a| a.parse().ok());
    let wo_end = if attempts.is_some() {
        subject.len() - 1
    } else {
        subject.len()
    };
    let mut h = RunHeader {
        run_id: run_id.to_string(),
        verdict: subject.get(2).unwrap_or(&"?").to_string(),
        attempts: attempts.unwrap_or(0),
        work_order_id: subject
            .get(3..wo_end)
            .map(|w| w.join(" "))
            .unwrap_or_default(),
        title: String::new(),
        baseline: String::new(),
        started_utc: String::new(),
        ended_stage: String::new(),
        time,
        started_ms: None,
        candidates: None,
        cost: None,
        cost_by_model: Vec::new(),
        tests: None,
    };
    for line in lines {
        if let Some(v) = line.strip_prefix("title: ") {
            h.title = v.to_string();
        } else if let Some(v) = line.strip_prefix("baseline: ") {
            h.baseline = v.to_string();
        } else if let Some(v) = line.strip_prefix("started: ") {
            h.started_utc = v.to_string();
        } else if let Some(v) = line.strip_prefix("stage: ") {
            h.ended_stage = v.to_string();
        } else if let Some(v) = line.strip_prefix("started_ms: ") {
            h.started_ms = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("candidates: ") {
            h.candidates = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("tests: ") {
            h.tests = serde_json::from_str(v).ok();
        } else if let Some(v) = line.strip_prefix("cost: ") {
            h.cost = parse_cost(v).map(|(c, _)| c);
        } else if let Some((cost, model)) = line.strip_prefix("cost_model: ").and_then(parse_cost) {
            h.cost_by_model.push((model.to_string(), cost));
        }
    }
    h
}

/// Every stored run's header, newest first. Run commits are immutable, so what `log` needs of
/// each is kept in `.git/factory/log-cache` keyed by commit id: a listing reads only the refs
/// and the commits it has not seen (new runs, fetched runs), however many runs there are.
pub fn list_runs(repo: &Repository) -> Result<Vec<RunHeader>> {
    list_runs_naming_damaged(repo).map(|(runs, _)| runs)
}

/// [`list_runs`], and the refusal for each run ref that is not a commit (skipped in the
/// listing), for `log` to name.
pub fn list_runs_naming_damaged(repo: &Repository) -> Result<(Vec<RunHeader>, Vec<Error>)> {
    let mut damaged = Vec::new();
    let cache_path = crate::git::factory_dir(repo).join("log-cache");
    let cached: HashMap<String, (i64, String)> = std::fs::read(&cache_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Vec<(String, i64, String)>>(&b).ok())
        .map(|v| v.into_iter().map(|(oid, t, m)| (oid, (t, m))).collect())
        .unwrap_or_default();
    let mut fresh: Vec<(String, i64, String)> = Vec::new();
    let mut missed = false;
    let mut out = Vec::new();
    for (id, oid) in run_ids(repo)? {
        let key = oid.to_string();
        let (time, message) = match cached.get(&key) {
            Some((t, m)) => (*t, m.clone()),
            None => {
                let Ok(commit) = repo.find_commit(oid) else {
                    if let Err(e) = check_run_commit(repo, &id, oid) {
                        damaged.push(e);
                    }
                    continue;
                };
                missed = true;
                (
                    commit.time().seconds(),
                    String::from_utf8_lossy(commit.message_bytes()).into_owned(),
                )
            }
        };
        out.push(parse_header(&id, &message, time));
        fresh.push((key, time, message));
    }
    if missed || fresh.len() != cached.len() {
        // Best effort: a cache that cannot be written only costs speed.
        if let Ok(text) = serde_json::to_vec(&fresh) {
            let tmp = cache_path.with_extension("tmp");
            if std::fs::create_dir_all(crate::git::factory_dir(repo)).is_ok()
                && std::fs::write(&tmp, text).is_ok()
            {
                let _ = std::fs::rename(&tmp, &cache_path);
            }
        }
    }
    // Newest first by start time (to the millisecond), ties by run id: the same order in
    // every clone.
    out.sort_by(|a, b| {
        b.order_key()
            .cmp(&a.order_key())
            .then_with(|| a.run_id.cmp(&b.run_id))
    });
    Ok((out, damaged))
}

/// Appends a line to the `refs/notes/factory` note on `target`, never clobbering what is there.
pub fn append_note(repo: &Repository, target: Oid, line: &str) -> Result<()> {
    append_note_in(repo, NOTES_REF, target, line)
}

/// Appends a line to a note, keeping every line already there byte for byte (a fetched note
/// can hold any bytes), and trying again while other processes change the notes (runs in
/// several worktrees finish at the same time).
pub fn append_note_in(repo: &Repository, notes_ref: &str, target: Oid, line: &str) -> Result<()> {
    notes::append_line(repo, notes_ref, target, line.as_bytes())
}

/// A run found in the store.
pub struct StoredRun {
    pub run_id: String,
    pub commit: Oid,
    pub summary: RunSummary,
}

/// Reads a file of a run commit's tree.
pub fn read_artifact(repo: &Repository, commit: Oid, path: &str) -> Result<Option<Vec<u8>>> {
    let tree = repo.find_commit(commit)?.tree()?;
    let entry = match tree.get_path(Path::new(path)) {
        Ok(e) => e,
        Err(_) => return Ok(None),
    };
    let blob = repo.find_blob(entry.id())?;
    Ok(Some(blob.content().to_vec()))
}

pub fn read_summary(repo: &Repository, commit: Oid) -> Result<Option<RunSummary>> {
    let Some(bytes) = read_artifact(repo, commit, "run_summary.json")? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        Error::new(format!(
            "run record {commit} has an unreadable run_summary.json: {e}"
        ))
    })
}

/// The stored run with exactly this id, if any.
pub fn find_run(repo: &Repository, run_id: &str) -> Result<Option<StoredRun>> {
    let reference = match repo.find_reference(&run_ref(run_id)) {
        Ok(r) => r,
        Err(_) => return Ok(None),
    };
    let Some(commit) = reference.target() else {
        return Ok(None);
    };
    check_run_commit(repo, run_id, commit)?;
    let summary = read_summary(repo, commit)?;
    if let Some(s) = summary.as_ref().filter(|s| s.run_id != run_id) {
        // Run ids come from public inputs: a fetched record put under the id another run
        // will have is not that run's, whatever it claims.
        return Err(Error::new(format!(
            "{} holds the record of another run ({}): a record that lies about its name",
            run_ref(run_id),
            crate::ui::escape_controls(&s.run_id)
        ))
        .hint(format!(
            "remove it with git update-ref -d {}, then run again",
            run_ref(run_id)
        )));
    }
    Ok(summary.map(|summary| StoredRun {
        run_id: run_id.to_string(),
        commit,
        summary,
    }))
}

/// A run ref must point at a run commit; one that points at anything else (a blob, tree or
/// tag someone pushed there) is named with the way to remove it.
fn check_run_commit(repo: &Repository, run_id: &str, oid: Oid) -> Result<()> {
    let kind = match repo.find_object(oid, None) {
        Ok(o) if o.kind() == Some(git2::ObjectType::Commit) => return Ok(()),
        Ok(o) => o.kind().map_or("unknown object", |k| k.str()).to_string(),
        Err(_) => "missing object".to_string(),
    };
    let name = run_ref(run_id);
    Err(
        Error::new(format!("{name} points at a {kind}, not a run record")).hint(format!(
        "it was damaged or fetched from an untrusted place; delete it with git update-ref -d {name}"
    )),
    )
}

/// The runs a forced re-run of `run_id` replaced, newest first: run commits of the same id
/// reached through its parents (SPEC §4.1: "so no run is ever lost"). What they spent was
/// spent, so `log --cost` counts them too. Attempt commits (`factory <id> attempt N`) are
/// not runs; each commit is read once however the records were crafted.
pub fn superseded_runs(repo: &Repository, run_id: &str) -> Vec<RunHeader> {
    let Ok(oid) = repo.refname_to_id(&run_ref(run_id)) else {
        return Vec::new();
    };
    let prefix = format!("factory {run_id} ");
    let mut seen = std::collections::HashSet::from([oid]);
    let mut next = vec![oid];
    let mut out = Vec::new();
    while let Some(oid) = next.pop() {
        let Ok(commit) = repo.find_commit(oid) else {
            continue;
        };
        for parent in commit.parents() {
            let message = String::from_utf8_lossy(parent.message_bytes()).into_owned();
            let is_run = message
                .lines()
                .next()
                .and_then(|subject| subject.strip_prefix(&prefix))
                .is_some_and(|rest| !rest.starts_with("attempt "));
            if is_run && seen.insert(parent.id()) {
                out.push(parse_header(run_id, &message, parent.time().seconds()));
                next.push(parent.id());
            }
        }
    }
    out
}

/// Every run id under `refs/factory/`, with its run commit, sorted by id.
pub fn run_ids(repo: &Repository) -> Result<Vec<(String, Oid)>> {
    let mut out = Vec::new();
    for reference in repo
        .references_glob(&format!("{RUN_REF_PREFIX}*"))?
        .flatten()
    {
        let Some(name) = reference.name() else {
            continue;
        };
        let id = &name[RUN_REF_PREFIX.len()..];
        if id.len() != 12 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        if let Some(oid) = reference.target() {
            out.push((id.to_string(), oid));
        }
    }
    out.sort();
    Ok(out)
}

/// Resolves a run id or a unique prefix of at least 4 hex chars.
pub fn resolve(repo: &Repository, prefix: &str) -> Result<StoredRun> {
    let prefix = prefix.to_ascii_lowercase();
    if prefix.len() < 4 || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::new(format!("{prefix:?} is not a run id")).hint(
            "give a run id or a unique prefix of at least 4 hex digits (see git factory log)",
        ));
    }
    let matches: Vec<(String, Oid)> = run_ids(repo)?
        .into_iter()
        .filter(|(id, _)| id.starts_with(&prefix))
        .collect();
    match matches.as_slice() {
        [] => Err(Error::new(format!("no run matches {prefix}")).hint(
            "list runs with git factory log (fetch shared runs with git factory fetch <remote>)",
        )),
        [(id, commit)] => {
            check_run_commit(repo, id, *commit)?;
            let summary = read_summary(repo, *commit)?
                .ok_or_else(|| Error::new(format!("run {id} has no run_summary.json")))?;
            Ok(StoredRun {
                run_id: id.clone(),
                commit: *commit,
                summary,
            })
        }
        many => {
            let mut err = Error::new(format!("run prefix {prefix} is ambiguous"));
            for (id, _) in many {
                err = err.detail(format!("candidate: {id}"));
            }
            Err(err.hint("give more digits of the run id"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::records::Cost;
    use super::{cost_field, parse_cost};

    #[test]
    fn a_cost_in_a_run_commit_reads_back_and_a_damaged_one_is_none() {
        for cost in [
            Cost::priced(0.0123, "table"),
            Cost::unpriced(),
            Cost {
                usd: Some(1.5),
                unpriced_requests: 2,
                source: "mixed".to_string(),
            },
        ] {
            let line = format!("{} openai:my model@http://x", cost_field(&cost));
            let (back, model) = parse_cost(&line).expect("reads back");
            assert_eq!(back, cost);
            assert_eq!(model, "openai:my model@http://x");
        }
        for bad in ["", "x 0 table", "NaN 0 table", "0.1 -1 table", "0.1 1"] {
            assert!(parse_cost(bad).is_none(), "{bad}");
        }
    }
}
