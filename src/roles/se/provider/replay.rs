//! `--replay DIR`: attempt N takes proposal N from `N.json` (strict contract) or `N.diff`
//! (a bare diff), so end-to-end runs are deterministic without any model.

use super::contract::{Provider, ProviderError, Request, Response};
use crate::error::{Error, Result};
use crate::identity::sha256_hex;
use crate::roles::se::proposal::{self, Change, Dialect, OutputFormat};
use crate::roles::tr::diff::Strip;
use crate::store::checked::{self, UnsafeEntry};
use std::collections::BTreeMap;
use std::path::Path;

pub struct Replay {
    proposals: BTreeMap<u32, (Vec<u8>, OutputFormat)>,
    /// `replay:<sha256 of the proposal files' names and bytes, in name order>`.
    pub identity: String,
}

impl Replay {
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let entries = std::fs::read_dir(dir).map_err(|e| {
            Error::new(format!(
                "cannot read the replay folder {}: {e}",
                dir.display()
            ))
            .hint("pass a folder holding 1.json, 2.json, … or 1.diff, 2.diff, …")
        })?;
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((stem, ext)) = name.rsplit_once('.') else {
                continue;
            };
            if (ext == "json" || ext == "diff") && stem.parse::<u32>().is_ok_and(|n| n > 0) {
                let bytes = std::fs::read(entry.path())?;
                files.insert(name, bytes);
            }
        }
        Self::from_files(files).map_err(|e| e.hint("keep one proposal file per attempt number"))
    }

    /// The proposals a stored run's attempts made, as `N.json` files: each applied change as
    /// the strict JSON contract, each unparseable output verbatim (so it fails the same way).
    /// An attempt whose provider failed ends the list.
    pub fn from_run(repo: &git2::Repository, run: &crate::store::StoredRun) -> Result<Self> {
        use crate::store::read_artifact;
        let mut files = BTreeMap::new();
        for a in &run.summary.attempts {
            let n = a.attempt_index;
            let summary = a.summary.clone().unwrap_or_default();
            let dir = format!("attempt_{n}");
            let diff = read_artifact(repo, run.commit, &format!("{dir}/proposed_patch.diff"))?;
            let writes = read_artifact(repo, run.commit, &format!("{dir}/proposed_writes.json"))?;
            let (name, bytes) = if let Some(d) = diff {
                match String::from_utf8(d) {
                    Ok(d) => (
                        format!("{n}.json"),
                        serde_json::json!({"unified_diff": d, "summary": summary}).to_string(),
                    ),
                    // A diff of files that are not UTF-8 replays as the bare diff it is.
                    Err(e) => {
                        files.insert(format!("{n}.diff"), e.into_bytes());
                        continue;
                    }
                }
            } else if let Some(w) = writes {
                let list: serde_json::Value = serde_json::from_slice(&w).map_err(|e| {
                    Error::new(format!(
                        "run {}: unreadable {dir}/proposed_writes.json: {e}",
                        run.run_id
                    ))
                })?;
                (
                    format!("{n}.json"),
                    serde_json::json!({"writes": list, "summary": summary}).to_string(),
                )
            } else if let Some(raw) =
                read_artifact(repo, run.commit, &format!("{dir}/llm_output.txt"))?
            {
                files.insert(format!("{n}.json"), raw);
                continue;
            } else {
                break;
            };
            files.insert(name, bytes.into_bytes());
        }
        for (name, bytes) in &files {
            if let Some(bad) = stored_proposal_fault(name, bytes) {
                let n = name.split('.').next().unwrap_or(name);
                return Err(checked::refusal(
                    &run.run_id,
                    &format!("attempt {n}'s proposal"),
                    &bad,
                ));
            }
        }
        Self::from_files(files)
            .map_err(|e| e.hint("replay a run whose first attempt produced a proposal"))
    }

    /// Builds a replay from named proposal files (`N.json` / `N.diff`).
    pub fn from_files(files: BTreeMap<String, Vec<u8>>) -> Result<Self> {
        let mut proposals = BTreeMap::new();
        let mut hash_input = Vec::new();
        for (name, bytes) in &files {
            let Some((stem, ext)) = name.rsplit_once('.') else {
                continue;
            };
            let Ok(n) = stem.parse::<u32>() else { continue };
            let format = if ext == "json" {
                OutputFormat::StrictJson
            } else {
                OutputFormat::AgentText
            };
            if proposals.contains_key(&n) {
                return Err(Error::new(format!(
                    "the replay has both {n}.json and {n}.diff for attempt {n}"
                )));
            }
            proposals.insert(n, (bytes.clone(), format));
            hash_input.extend_from_slice(name.as_bytes());
            hash_input.push(0);
            hash_input.extend_from_slice(bytes);
            hash_input.push(0);
        }
        if proposals.is_empty() {
            return Err(Error::new(
                "the replay holds no proposal (1.json or 1.diff)",
            ));
        }
        Ok(Replay {
            proposals,
            identity: format!("replay:{}", sha256_hex(&hash_input)),
        })
    }
}

/// The first unsafe path a stored proposal names (see `store::checked`), if any: a fetched
/// run is untrusted, so `--replay RUN` refuses it up front instead of attempting it. Text that
/// does not parse is left to the attempt, which fails without writing.
fn stored_proposal_fault(name: &str, raw: &[u8]) -> Option<UnsafeEntry> {
    let format = if name.ends_with(".json") {
        OutputFormat::StrictJson
    } else {
        OutputFormat::AgentText
    };
    let paths: Vec<String> = match proposal::parse(raw, format).ok()?.change {
        Change::Writes(writes) => writes.into_iter().map(|w| w.path).collect(),
        Change::Diff(text) => sections_paths(&text, Dialect::Unified),
        Change::Dialect(dialect, text) => sections_paths(&text, dialect),
    };
    paths.iter().find_map(|p| {
        checked::path_fault(p.as_bytes()).map(|why| UnsafeEntry {
            path: crate::ui::escape_line(p),
            why: why.to_string(),
        })
    })
}

fn sections_paths(text: &[u8], dialect: Dialect) -> Vec<String> {
    crate::roles::tr::parse_sections(text, dialect, Strip::Auto)
        .map(|sections| {
            sections
                .iter()
                .flat_map(|s| s.touched_paths())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

impl Provider for Replay {
    fn propose(&mut self, request: &Request<'_>) -> std::result::Result<Response, ProviderError> {
        match self.proposals.get(&request.attempt) {
            Some((raw, format)) => Ok(Response::plain(raw.clone(), *format)),
            None => Err(ProviderError::Exhausted(format!(
                "replay has no proposal {}",
                request.attempt
            ))),
        }
    }
}
