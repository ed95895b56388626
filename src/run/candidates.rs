//! What a race was asked for (SPEC §5.1): how many candidates, how many at once, and each
//! one's provider; and the two stand-in providers of the run's own attempt in a race.

use crate::error::{Error, Result};
use crate::roles::se::proposal::OutputFormat;
use crate::roles::se::provider::client::Settings;
use crate::roles::se::provider::{Provider, ProviderError, ProviderSpec, Request, Response};
use crate::run::options::RunOptions;
use std::path::Path;
use std::time::Duration;

/// What a race was asked for, checked.
pub struct Race {
    pub candidates: u32,
    pub jobs: u32,
    /// The models given, in order; candidate i uses `models[(i − 1) mod len]`.
    pub models: Vec<ProviderSpec>,
}

impl Race {
    /// `None` for a single run (one candidate is a plain run, with the same run id).
    pub fn of(opts: &RunOptions) -> Result<Option<Race>> {
        if opts.candidates == 0 {
            return Err(Error::new("--candidates must be at least 1").hint("e.g. --candidates 4"));
        }
        if opts.jobs == Some(0) {
            return Err(Error::new("--jobs must be at least 1").hint("e.g. --jobs 2"));
        }
        let mut models = vec![opts.provider.clone()];
        models.extend(opts.more_models.iter().cloned());
        if models.len() > 1 && opts.candidates < models.len() as u32 {
            return Err(Error::new(format!(
                "{} models were given for {} candidate(s): some would never run",
                models.len(),
                opts.candidates
            ))
            .hint(format!(
                "add --candidates {} (or more) to race them",
                models.len()
            )));
        }
        if opts.candidates == 1 {
            return Ok(None);
        }
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1);
        Ok(Some(Race {
            candidates: opts.candidates,
            jobs: opts
                .jobs
                .unwrap_or_else(|| opts.candidates.min(cpus))
                .min(opts.candidates),
            models,
        }))
    }

    /// Candidate `index`'s provider: its model, and with `--replay DIR` its own folder
    /// `DIR/<index>/` when there is one (a flat DIR serves every candidate).
    pub fn spec(&self, index: u32) -> ProviderSpec {
        let spec = &self.models[(index as usize - 1) % self.models.len()];
        match spec {
            ProviderSpec::Replay { dir } if dir.join(index.to_string()).is_dir() => {
                ProviderSpec::Replay {
                    dir: dir.join(index.to_string()),
                }
            }
            other => other.clone(),
        }
    }

    /// The `model` part of the config hash (SPEC §4.3): the models given joined by `,`; a
    /// replay of per-candidate folders is named by the hash of every candidate's replay.
    /// Opening every candidate's provider also refuses a missing key or proposal up front.
    pub fn identity(
        &self,
        cwd: &Path,
        settings: &Settings,
        need_key: bool,
        agent_timeout: Duration,
    ) -> Result<String> {
        let mut each = Vec::new();
        for index in 1..=self.candidates {
            let (_, id) = self
                .spec(index)
                .open(cwd, settings, need_key, agent_timeout)
                .map_err(|e| {
                    let message = format!("candidate {index}: {}", e.message);
                    Error { message, ..e }
                })?;
            each.push(id);
        }
        if self.models.len() > 1 {
            return Ok(each[..self.models.len()].join(","));
        }
        if each.iter().all(|id| *id == each[0]) {
            return Ok(each[0].clone());
        }
        Ok(format!(
            "replay:{}",
            crate::identity::sha256_hex(each.join(",").as_bytes())
        ))
    }
}

/// The winner's proposal, handed to the run's own single attempt, which applies and verifies
/// it where it lands (the user's tree in-situ).
pub struct Chosen {
    pub text: Vec<u8>,
    pub format: OutputFormat,
    /// The model that answered the winner: the run's attempt names it too. (Its tokens are
    /// not given again: the race already spent and recorded them.)
    pub served_model: Option<String>,
}

impl Provider for Chosen {
    fn propose(&mut self, _request: &Request<'_>) -> std::result::Result<Response, ProviderError> {
        Ok(Response {
            served_model: self.served_model.clone(),
            ..Response::plain(self.text.clone(), self.format)
        })
    }
}

/// Stands in for a replay folder that only holds per-candidate folders: the run's own
/// attempt is only ever given the winner's proposal.
pub struct NoProposal;

impl Provider for NoProposal {
    fn propose(&mut self, request: &Request<'_>) -> std::result::Result<Response, ProviderError> {
        Err(ProviderError::Exhausted(format!(
            "replay has no proposal {}",
            request.attempt
        )))
    }
}
