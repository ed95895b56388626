//! Stored runs as `show` and `log` present them: the record escaped for a terminal, the
//! attempt asked for, the artifacts (logs, the proposed patch) read from the run commit, the
//! runs listed. Everything is chosen and read here; the command line only renders it.

use super::records::{AttemptRecord, RunSummary};
use super::{list_runs_naming_damaged, read_artifact, RunHeader, StoredRun};
use crate::error::{Error, Result};
use git2::{Oid, Repository};

/// Record fields printed over several lines (their newlines and tabs are kept).
const MULTILINE_FIELDS: &[&str] = &["summary", "primary_error_excerpt", "excerpt", "error"];

/// The kinds of command whose output an attempt stores (`--log KIND:I`).
const LOG_KINDS: &[&str] = &[
    "verify",
    "pass_to_pass",
    "fail_to_pass",
    "acceptance",
    "agent",
];

/// One stored run ready to be shown: every string of its record escaped once, here, before
/// anything prints it.
pub struct RunView {
    pub commit: Oid,
    pub summary: RunSummary,
}

/// One stored artifact: its path in the run commit's tree and its bytes as stored.
pub struct Artifact {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// A proposed change as stored: a unified diff, or the JSON of whole-file writes.
pub struct ProposedPatch {
    pub bytes: Vec<u8>,
    pub is_diff: bool,
}

impl RunView {
    /// The view of `run`, or a refusal when its record cannot be escaped for a terminal.
    pub fn of(run: &StoredRun) -> Result<RunView> {
        let summary = crate::ui::for_terminal(&run.summary, MULTILINE_FIELDS).ok_or_else(|| {
            Error::new(format!("run {}'s record cannot be shown", run.run_id))
                .hint("see it as stored with git factory show RUN --json")
        })?;
        Ok(RunView {
            commit: run.commit,
            summary,
        })
    }

    /// The attempt `wanted` names, else the passing attempt, else the last one.
    pub fn attempt(&self, wanted: Option<u32>) -> Result<u32> {
        let s = &self.summary;
        match wanted {
            Some(n) if s.attempts.iter().any(|a| a.attempt_index == n) => Ok(n),
            Some(n) => Err(Error::new(format!("run {} has no attempt {n}", s.run_id))
                .hint(format!("it has attempts 1 to {}", s.attempts.len()))),
            None => {
                let passing = s
                    .attempts
                    .iter()
                    .find(|a| a.failure_brief.is_none() && a.apply_ok);
                passing
                    .or(s.attempts.last())
                    .map(|a| a.attempt_index)
                    .ok_or_else(|| Error::new(format!("run {} has no attempts", s.run_id)))
            }
        }
    }

    /// The attempts to list: all of them, or only attempt `only`.
    pub fn attempts(&self, only: Option<u32>) -> impl Iterator<Item = &AttemptRecord> {
        self.summary
            .attempts
            .iter()
            .filter(move |a| only.is_none_or(|n| n == a.attempt_index))
    }

    /// The stored output (stdout, then stderr) of the command `spec` (`KIND:I`) names in
    /// attempt `n`; a refusal when the spec is malformed or nothing of it is stored.
    pub fn logs(&self, repo: &Repository, n: u32, spec: &str) -> Result<Vec<Artifact>> {
        let stem = log_stem(spec)?;
        let mut found = Vec::new();
        for stream in ["stdout", "stderr"] {
            let path = format!("attempt_{n}/{stem}_{stream}.txt");
            if let Some(bytes) = read_artifact(repo, self.commit, &path)? {
                found.push(Artifact { path, bytes });
            }
        }
        if found.is_empty() {
            return Err(Error::new(format!(
                "attempt {n} of run {} has no {spec} log",
                self.summary.run_id
            ))
            .hint("see which commands ran with git factory show RUN"));
        }
        Ok(found)
    }

    /// Attempt `n`'s `tests.json` (SPEC §3.9); `None` when it has none or it does not parse.
    pub fn tests(&self, repo: &Repository, n: u32) -> Option<crate::store::records::TestsRecord> {
        let bytes = read_artifact(repo, self.commit, &format!("attempt_{n}/tests.json")).ok()??;
        serde_json::from_slice(&bytes).ok()
    }

    /// Attempt `n`'s proposed change as stored, or a refusal naming why there is none.
    pub fn patch(&self, repo: &Repository, n: u32) -> Result<ProposedPatch> {
        for name in ["proposed_patch.diff", "proposed_writes.json"] {
            if let Some(bytes) = read_artifact(repo, self.commit, &format!("attempt_{n}/{name}"))? {
                return Ok(ProposedPatch {
                    bytes,
                    is_diff: name.ends_with(".diff"),
                });
            }
        }
        Err(Error::new(format!(
            "attempt {n} of run {} has no proposed patch",
            self.summary.run_id
        ))
        .hint("its proposal was invalid or the provider failed; see git factory show RUN"))
    }
}

/// The stored `run_summary.json` of `run`, byte for byte (empty when it is missing).
pub fn stored_summary(repo: &Repository, run: &StoredRun) -> Result<Vec<u8>> {
    Ok(read_artifact(repo, run.commit, "run_summary.json")?.unwrap_or_default())
}

/// The runs `log` lists, newest first, and the records it could not read.
pub struct RunList {
    pub runs: Vec<RunHeader>,
    /// One refusal for each run commit whose record is damaged (those runs are not listed).
    pub damaged: Vec<Error>,
}

impl RunList {
    /// The runs with verdict `verdict` (all without one), at most `max_count` of them.
    pub fn of(repo: &Repository, verdict: Option<&str>, max_count: Option<usize>) -> Result<Self> {
        let (mut runs, damaged) = list_runs_naming_damaged(repo)?;
        if let Some(want) = verdict {
            runs.retain(|r| r.verdict == want);
        }
        if let Some(n) = max_count {
            runs.truncate(n);
        }
        Ok(RunList { runs, damaged })
    }

    /// The runs with every string parsed from the run commits escaped for a terminal, once.
    pub fn for_terminal(&self) -> Result<Vec<RunHeader>> {
        crate::ui::for_terminal(&self.runs, &[]).ok_or_else(|| {
            Error::new("the run records cannot be shown")
                .hint("list them as stored with git factory log --json")
        })
    }
}

/// The file stem of the log `spec` (`KIND:I`) names: `acceptance_0`, or `agent`.
fn log_stem(spec: &str) -> Result<String> {
    let (kind, index) = spec
        .split_once(':')
        .and_then(|(k, i)| Some((k, i.parse::<usize>().ok()?)))
        .filter(|(k, _)| LOG_KINDS.contains(k))
        .ok_or_else(|| {
            Error::new(format!("--log {spec:?} is not KIND:I"))
                .hint("e.g. --log acceptance:0 or --log verify:0")
        })?;
    Ok(if kind == "agent" {
        "agent".to_string()
    } else {
        format!("{kind}_{index}")
    })
}

#[cfg(test)]
mod tests {
    use super::log_stem;

    #[test]
    fn log_specs_name_their_files() {
        assert_eq!(
            log_stem("acceptance:0").ok().as_deref(),
            Some("acceptance_0")
        );
        assert_eq!(log_stem("verify:12").ok().as_deref(), Some("verify_12"));
        assert_eq!(log_stem("agent:3").ok().as_deref(), Some("agent"));
        assert!(log_stem("acceptance").is_err());
        assert!(log_stem("build:0").is_err());
        assert!(log_stem("verify:x").is_err());
    }
}
