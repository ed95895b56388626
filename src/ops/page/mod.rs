//! A run, or many, as one self-contained HTML page (SPEC §8): `show --html` and
//! `report --html`. Everything on the page comes from the stored record, which may have been
//! fetched from anyone, so it is read here once, escaped for a terminal's sake (control
//! characters made visible), and rendered by templates that HTML-escape every value; the page
//! carries no script and a Content-Security-Policy that forbids every load.

mod html;
pub mod report;

use crate::error::{Error, Result};
use crate::store::records::{AttemptRecord, CandidateRecord, RunSummary, TestsRecord, Verdict};
use crate::store::{read_artifact, StoredRun};
use git2::{Oid, Repository};
use std::path::{Path, PathBuf};

pub use html::render_run;

/// Record fields shown over several lines: their newlines and tabs are kept.
const MULTILINE: &[&str] = &[
    "summary",
    "primary_error_excerpt",
    "constraints_reminder",
    "excerpt",
    "error",
    "stdout_trunc",
    "stderr_trunc",
    "message",
];

/// The most of one proposed patch a page shows: a page is for reading, and a run of many
/// candidates must still render at once.
const PATCH_SHOWN: usize = 256 * 1024;

/// One run, as its page shows it.
pub struct RunPage {
    pub summary: RunSummary,
    /// The work order's intent, from the stored `work_order.json`.
    pub intent: Option<String>,
    pub attempts: Vec<AttemptView>,
    /// A race's candidates (SPEC §5.1), each with its own attempts.
    pub candidates: Vec<CandidateView>,
    pub evidence: Evidence,
}

/// One attempt, what it proposed, and the tests its checks reported (SPEC §3.9).
pub struct AttemptView {
    pub record: AttemptRecord,
    pub patch: Option<Patch>,
    pub tests: Option<TestsRecord>,
}

/// A proposed change as stored, made safe to show.
pub struct Patch {
    pub text: String,
    pub is_diff: bool,
    /// Bytes left out past [`PATCH_SHOWN`].
    pub cut: usize,
}

pub struct CandidateView {
    pub record: CandidateRecord,
    pub attempts: Vec<AttemptView>,
}

/// The signed evidence (SPEC §6.1) on the tree a PASS produced.
pub enum Evidence {
    /// The run did not pass: there is no result tree to carry evidence.
    NoResult,
    /// No envelope on the result tree.
    Unsigned,
    /// An envelope this repository's trust accepts.
    Accepted { signer: String },
    /// Envelopes, none accepted; why, per envelope.
    Refused(Vec<String>),
    /// The evidence could not be examined (the reason).
    Unchecked(String),
}

impl RunPage {
    /// Reads everything the page of `run` shows from its run commit.
    pub fn load(repo: &Repository, run: &StoredRun) -> Result<RunPage> {
        let summary = escaped(&run.summary)?;
        let intent = read_artifact(repo, run.commit, "work_order.json")?
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|wo| {
                wo.get("intent")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            })
            .map(|s| crate::ui::escape_controls(&s));
        let attempts = attempt_views(repo, run.commit, "", &summary.attempts)?;
        let mut candidates = Vec::new();
        for c in &summary.candidates {
            let prefix = format!("candidate_{}/", c.index);
            let own = read_artifact(repo, run.commit, &format!("{prefix}run_summary.json"))?
                .and_then(|b| serde_json::from_slice::<RunSummary>(&b).ok())
                .map(|s| escaped(&s))
                .transpose()?;
            let records = own.map(|s| s.attempts).unwrap_or_default();
            candidates.push(CandidateView {
                record: c.clone(),
                attempts: attempt_views(repo, run.commit, &prefix, &records)?,
            });
        }
        let evidence = evidence_of(repo, &summary);
        Ok(RunPage {
            summary,
            intent,
            attempts,
            candidates,
            evidence,
        })
    }
}

/// `summary` with every string escaped for display (a record is anyone's bytes, SPEC §7).
fn escaped(summary: &RunSummary) -> Result<RunSummary> {
    crate::ui::for_terminal(summary, MULTILINE).ok_or_else(|| {
        Error::new(format!("run {}'s record cannot be shown", summary.run_id))
            .hint("see it as stored with git factory show RUN --json")
    })
}

fn attempt_views(
    repo: &Repository,
    commit: Oid,
    prefix: &str,
    records: &[AttemptRecord],
) -> Result<Vec<AttemptView>> {
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let n = record.attempt_index;
        let mut patch = None;
        for name in ["proposed_patch.diff", "proposed_writes.json"] {
            let path = format!("{prefix}attempt_{n}/{name}");
            if let Some(bytes) = read_artifact(repo, commit, &path)? {
                let shown = &bytes[..bytes.len().min(PATCH_SHOWN)];
                patch = Some(Patch {
                    text: crate::ui::escape_controls(&String::from_utf8_lossy(shown)),
                    is_diff: name.ends_with(".diff"),
                    cut: bytes.len() - shown.len(),
                });
                break;
            }
        }
        let tests = read_artifact(repo, commit, &format!("{prefix}attempt_{n}/tests.json"))?
            .and_then(|b| serde_json::from_slice::<TestsRecord>(&b).ok())
            .and_then(|t| crate::ui::for_terminal(&t, MULTILINE));
        out.push(AttemptView {
            record: record.clone(),
            patch,
            tests,
        });
    }
    Ok(out)
}

/// The evidence on the tree of the run's passing attempt, as `attest verify` judges it.
fn evidence_of(repo: &Repository, summary: &RunSummary) -> Evidence {
    if summary.verdict != Verdict::Pass {
        return Evidence::NoResult;
    }
    let passing = summary
        .attempts
        .iter()
        .rev()
        .find(|a| a.failure_brief.is_none())
        .and_then(|a| a.tree_commit.as_deref())
        .or(summary.result_commit.as_deref());
    let Some(tree) = passing
        .and_then(|c| Oid::from_str(c).ok())
        .and_then(|c| repo.find_commit(c).ok())
        .map(|c| c.tree_id())
    else {
        return Evidence::NoResult;
    };
    match crate::evidence::examine(repo, tree) {
        Err(e) => Evidence::Unchecked(crate::ui::escape_line(&e.message)),
        Ok(found) if found.findings.is_empty() && found.not_examined == 0 => Evidence::Unsigned,
        Ok(found) => match found.accepted() {
            Some(f) => Evidence::Accepted {
                signer: crate::ui::escape_line(f.signer.as_deref().unwrap_or("a trusted key")),
            },
            None => Evidence::Refused(
                found
                    .findings
                    .iter()
                    .map(|f| {
                        let why = f.reason.map(|r| r.as_str()).unwrap_or("accepted");
                        crate::ui::escape_line(&format!("line {}: {why} {}", f.line, f.detail))
                    })
                    .collect(),
            ),
        },
    }
}

/// Where a page goes: `-o FILE`, else `default` in the current folder.
pub fn output_path(asked: Option<&Path>, default: &str) -> PathBuf {
    asked
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// Writes `html` to `path` (created with the usual mode, as `git format-patch` writes its
/// files), never into a folder.
pub fn write_page(path: &Path, html: &str) -> Result<()> {
    if path.is_dir() {
        return Err(Error::new(format!("{} is a folder", path.display()))
            .hint("name the file to write with -o FILE"));
    }
    std::fs::write(path, html).map_err(|e| {
        Error::new(format!("cannot write {}: {e}", path.display()))
            .hint("choose another file with -o FILE")
    })
}
