//! SE: one model (or agent) request, its answer stored and parsed into a proposal.

use crate::cost::Meter;
use crate::error::Error;
use crate::graph::Outcome;
use crate::roles::se::audit::Audit;
use crate::roles::se::prompt;
use crate::roles::se::proposal;
use crate::roles::se::provider::api::DEFAULT_OUTPUT_LIMIT;
use crate::roles::se::provider::client::Stop;
use crate::roles::se::provider::{ProviderError, Request, Response};
use crate::run::attempt::session::Session;
use crate::store::records::Stage;
use std::path::Path;
use std::time::Instant;

impl Session<'_> {
    /// SE for one attempt: the prompt built and stored, the provider asked, its answer kept
    /// and judged; a proposal that parses is the attempt's.
    pub(crate) fn propose(&mut self, attempt: u32, dir: &Path, rel: &str) -> Outcome {
        let text = prompt::build(
            &self.plan.wo.order,
            &self.plan.context,
            &self.plan.wo.order.acceptance_commands,
            self.brief.as_ref(),
            &self.red_for(attempt),
        );
        if let Err(e) = std::fs::write(dir.join("prompt.txt"), &text) {
            self.fatal = Some(format!("cannot write prompt.txt: {e}"));
            return Outcome::Fatal(Stage::Exception);
        }
        // Every request is held against the dollar budget and priced (SPEC §3.3 Cost): a model
        // API meters each request it sends; any other provider's call is one request.
        let priced = self.priced.clone();
        let plan = self.plan;
        let output = (plan.settings.output_limit()).unwrap_or(DEFAULT_OUTPUT_LIMIT);
        let served_before =
            (self.summary.attempts.iter().rev()).find_map(|a| a.served_model.clone());
        let meter = Meter::new(self.budget, &plan.prices, priced.as_ref(), output)
            .served_before(served_before);
        let whole = !self.provider.meters_requests();
        let held = match whole
            .then(|| meter.hold(|| prompt::SYSTEM.len() + text.len()))
            .transpose()
        {
            Ok(held) => held,
            Err(why) => return self.over_budget(&why),
        };
        let answer = self.ask(attempt, dir, rel, &text, &meter);
        let (answer, served) = match answer {
            Ok(answer) => {
                let served = answer.as_ref().ok().and_then(|r| r.served_model.clone());
                (Ok(answer), served)
            }
            Err(outcome) => (Err(outcome), None),
        };
        let answered = matches!(answer, Ok(Ok(_)));
        let answer = answer.map(|a| self.answered(a));
        if let Ok(Ok(r)) = &answer {
            self.current().record.usage = r.usage.clone();
        }
        if let Some(held) = held {
            let usage = self.current().record.usage.clone();
            meter.settle(held, usage.as_ref(), answered, served.as_deref());
        }
        let metered = meter.take();
        let a = self.current();
        a.record.cost = metered.cost;
        a.record.requested_utc = metered.requested_utc;
        // Kept beside the attempt's files at once: a run killed before the attempt's record
        // is written is recovered with what its requests cost (SPEC §7).
        a.record.keep_usage(dir);
        let response = match answer {
            Ok(Ok(response)) => response,
            Ok(Err(outcome)) | Err(outcome) => return outcome,
        };
        if let Some(outcome) = self.keep(&response, dir, rel) {
            return outcome;
        }
        self.judge(&response)
    }

    /// `--max-cost` (SPEC §3.3 Cost): the next request's worst case would pass what is left
    /// of the budget, so it was not made; the run stops, every candidate in flight too.
    fn over_budget(&mut self, why: &str) -> Outcome {
        if let Some(board) = self.board {
            board.set(self.candidate.unwrap_or(1), "budget exhausted", false);
        }
        crate::interrupt::halt();
        let _ = self.fail(Stage::BudgetExhausted, None, why);
        Outcome::Exhausted(Stage::BudgetExhausted)
    }

    /// Asks the provider, showing the wait; an agent's changes outside its worktree are
    /// audited after it exits (`Err`: the attempt's outcome).
    fn ask(
        &mut self,
        attempt: u32,
        dir: &Path,
        rel: &str,
        text: &str,
        meter: &Meter<'_>,
    ) -> Result<Result<Response, ProviderError>, Outcome> {
        let baseline = self.baseline.id().to_string();
        let progress = self
            .ui
            .progress(format!("  SE waiting for {}", self.summary.config.model));
        let on_tokens = |n: u64| progress.set_detail(format!("{n} tokens received"));
        let request = Request {
            root: &self.root,
            run_id: &self.summary.run_id,
            baseline: &baseline,
            allowed: &self.plan.wo.order.allowed_files,
            prompt: text,
            work_order: &self.plan.wo.raw,
            attempt,
            failure_brief: self.brief.as_ref(),
            attempt_dir: dir,
            attempt_rel: rel,
            sandbox: self.sandbox.is_some(),
            on_tokens: &on_tokens,
            candidate: self.candidate,
            meter,
        };
        // What the run's restore does not own (shared refs, other worktrees' HEADs) is
        // recorded before an agent runs, to name anything it changed there.
        let audit = match (self.audited)
            .then(|| Audit::capture(self.repo, self.sandbox.is_some()))
            .transpose()
        {
            Ok(a) => a,
            Err(e) => {
                self.fatal = Some(e.message);
                return Err(Outcome::Fatal(Stage::Exception));
            }
        };
        // An agent runs code as a check does: bytecode it wrote into the kept cache (a forged
        // standard-library module every later check would import) goes the same way.
        let bytecode_mark = self.audited.then(|| self.pycache.mark()).flatten();
        let asked = Instant::now();
        let provider = &mut self.provider;
        let answer = match &audit {
            // Runs that start and end while the agent works are seen under way meanwhile.
            Some(a) => a.sealed.watching(|| provider.propose(&request)),
            None => provider.propose(&request),
        };
        self.drop_checks_bytecode(bytecode_mark);
        let tokens = match &answer {
            Ok(r) => r
                .usage
                .as_ref()
                .map(|u| {
                    format!(
                        ", {} in / {} out tokens",
                        u.input_tokens.unwrap_or(0),
                        u.output_tokens.unwrap_or(0)
                    )
                })
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        let took = asked.elapsed().as_secs_f64();
        progress.finish(
            self.ui,
            Some(match &answer {
                Ok(_) => format!("  SE answered in {took:.1}s{tokens}"),
                Err(_) => format!("  SE failed after {took:.1}s"),
            }),
        );
        if self.audited {
            if let Some(outcome) = self.agent_audit(audit, dir, &answer) {
                return Err(outcome);
            }
        }
        Ok(answer)
    }

    /// The provider's failure as the attempt's outcome; a misconfiguration found by the
    /// first request refuses the run instead.
    fn answered(&mut self, answer: Result<Response, ProviderError>) -> Result<Response, Outcome> {
        if answer.is_err() {
            // What the server refused by name before the failure is recorded all the same.
            let learnt = self.provider.learnt();
            let a = self.current();
            a.record.dropped_params = learnt.dropped_params;
            a.record.api_switch = learnt.api_switch;
            // Requests that were billed and then failed count in --max-tokens too.
            let spent = self.budget.spend(learnt.billed.as_ref());
            let a = self.current();
            a.record.usage = learnt.billed;
            if spent && matches!(answer, Err(ProviderError::Failed(_))) {
                if let Some(outcome) = self.tokens_spent() {
                    return Err(outcome);
                }
            }
        }
        match answer {
            Ok(r) => Ok(r),
            Err(ProviderError::Failed(msg)) => Err(self.fail(Stage::LlmCallFailed, None, &msg)),
            Err(ProviderError::Exhausted(msg)) => {
                let _ = self.fail(Stage::LlmCallFailed, None, &msg);
                Err(Outcome::Exhausted(Stage::LlmCallFailed))
            }
            Err(ProviderError::Fatal(msg)) => {
                let _ = self.fail(Stage::LlmCallFailed, None, &msg);
                self.fatal = Some(msg);
                Err(Outcome::Fatal(Stage::LlmCallFailed))
            }
            Err(ProviderError::OverBudget(why)) => Err(self.over_budget(&why)),
            Err(ProviderError::Unreachable { message, hint }) => {
                if self.summary.attempts.is_empty() {
                    // Misconfiguration, caught before any attempt counts: refused, unrecorded.
                    self.refusal = Some(Error::new(message).hint(hint));
                    return Err(Outcome::Fatal(Stage::Preflight));
                }
                Err(self.fail(Stage::LlmCallFailed, None, &message))
            }
        }
    }

    /// `--max-tokens`: once the tokens reported pass it, the run stops (`Some`), every
    /// candidate in flight too.
    fn tokens_spent(&mut self) -> Option<Outcome> {
        let limit = self.budget.limit()?;
        if self.budget.used() <= limit {
            return None;
        }
        if let Some(board) = self.board {
            board.set(self.candidate.unwrap_or(1), "budget exhausted", false);
        }
        let text = format!(
            "the --max-tokens budget of {limit} tokens is spent ({} reported so far)",
            self.budget.used()
        );
        crate::interrupt::halt();
        let _ = self.fail(Stage::BudgetExhausted, None, &text);
        Some(Outcome::Exhausted(Stage::BudgetExhausted))
    }

    /// Keeps the answer in the attempt's files and record, and spends its tokens: `Some`
    /// when that spent the `--max-tokens` budget.
    fn keep(&mut self, response: &Response, dir: &Path, rel: &str) -> Option<Outcome> {
        let _ = std::fs::write(dir.join("llm_output.txt"), &response.raw);
        let over_budget = self.budget.spend(response.usage.as_ref());
        {
            let a = self.current();
            a.answer = Some((response.text.clone(), response.format));
            a.record.dropped_params = response.dropped_params.clone();
            a.record.api_switch = response.api_switch.clone();
            a.record.served_model = response.served_model.clone();
            a.agent_sandbox = response.sandbox.clone();
        }
        if over_budget {
            if let Some(outcome) = self.tokens_spent() {
                return Some(outcome);
            }
        }
        if let Some(switch) = &response.api_switch {
            self.ui.info(format!(
                "  the server serves this model on the other API: switched {switch}"
            ));
        }
        if !response.dropped_params.is_empty() {
            self.ui.info(format!(
                "  the server refused {}: sent again without (remembered in .git/factory/providers.json)",
                response.dropped_params.join(", ")
            ));
        }
        if let Some(reasoning) = &response.reasoning {
            if std::fs::write(dir.join("reasoning.txt"), reasoning).is_ok() {
                self.current().record.reasoning_path = Some(format!("{rel}/reasoning.txt"));
            }
        }
        None
    }

    /// An answer cut short, refused or too large fails; else it is parsed into a proposal.
    fn judge(&mut self, response: &Response) -> Outcome {
        match &response.stop {
            Stop::Complete => {}
            Stop::Cut(why) => {
                let text = format!(
                    "your answer was cut at the output limit ({why}) before it was complete: propose a smaller change (fewer files, a shorter diff, only the hunks that change), or the user can raise --llm-max-output-tokens"
                );
                return self.fail(Stage::LlmOutputInvalid, None, &text);
            }
            Stop::Refused(why) => {
                let text = format!("the model refused to answer: {why}");
                return self.fail(Stage::LlmOutputInvalid, None, &text);
            }
            Stop::TooLarge(why) => {
                let text = format!("{why}: propose a smaller change (fewer files, a diff of only the hunks that change)");
                return self.fail(Stage::LlmOutputInvalid, None, &text);
            }
        }
        match proposal::parse(&response.text, response.format) {
            Ok(p) => {
                let a = self.current();
                a.record.summary = Some(p.summary.clone());
                a.proposal = Some(p);
                Outcome::Ok
            }
            Err(why) => {
                let start: String = String::from_utf8_lossy(&response.raw)
                    .chars()
                    .take(300)
                    .collect();
                let text = format!("{why}\nyour output began with:\n{start}");
                self.fail(Stage::LlmOutputInvalid, None, &text)
            }
        }
    }
}
