//! `--replay DIR`: attempt N takes proposal N from `N.json` (strict contract) or `N.diff`
//! (a bare diff), so end-to-end runs are deterministic without any model.

use super::{Provider, ProviderError, Request, Response};
use crate::error::{Error, Result};
use crate::identity::sha256_hex;
use crate::roles::se::proposal::OutputFormat;
use std::collections::BTreeMap;
use std::path::Path;

pub struct Replay {
    proposals: BTreeMap<u32, (String, OutputFormat)>,
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
            let bytes = if let Some(d) = diff {
                serde_json::json!({"unified_diff": String::from_utf8_lossy(&d), "summary": summary})
                    .to_string()
            } else if let Some(w) = writes {
                let list: serde_json::Value = serde_json::from_slice(&w).map_err(|e| {
                    Error::new(format!(
                        "run {}: unreadable {dir}/proposed_writes.json: {e}",
                        run.run_id
                    ))
                })?;
                serde_json::json!({"writes": list, "summary": summary}).to_string()
            } else if let Some(raw) =
                read_artifact(repo, run.commit, &format!("{dir}/llm_output.txt"))?
            {
                String::from_utf8_lossy(&raw).into_owned()
            } else {
                break;
            };
            files.insert(format!("{n}.json"), bytes.into_bytes());
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
            proposals.insert(n, (String::from_utf8_lossy(bytes).into_owned(), format));
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
