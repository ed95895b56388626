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
            Some((raw, format)) => Ok(Response {
                raw: raw.clone(),
                format: *format,
                usage: None,
            }),
            None => Err(ProviderError::Exhausted(format!(
                "replay has no proposal {}",
                request.attempt
            ))),
        }
    }
}
