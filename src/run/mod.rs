//! A run (SPEC §5) as a pipeline of stages, each in its own module and each handing the next
//! a typed result:
//!
//! ```text
//!   RunOptions ─► plan ─► Plan ─► place ─► Place ─► attempt loop / race ─► Ending
//!                                                       │
//!                           RunReport ◄─ record ◄─ deliver (Landed)
//! ```
//!
//! [`run`] is the table of contents: it calls the stages in order and nothing below it
//! imports it. Only `plan` (with `preflight`) reads the options; every later stage reads
//! the [`plan::Plan`].

mod artifacts;
pub mod asked;
pub mod attempt;
pub mod candidates;
mod deliver;
pub mod options;
pub mod orphans;
pub mod place;
pub mod plan;
pub mod preflight;
pub mod race;
mod record;

pub use options::{exit_for, RunOptions, RunReport};

use crate::budget::Budget;
use crate::error::Result;
use crate::git;
use crate::graph::{self, Ending};
use crate::run::attempt::session::Session;
use crate::run::place::Place;
use crate::run::plan::{Plan, Planned, Resolved};
use crate::ui::Ui;

pub fn run(opts: RunOptions, ui: &Ui) -> Result<RunReport> {
    let repo = git::open(opts.repo_dir.as_deref())?;
    // Plan: the preflight refusals, the provider, the identity and the cache (§4.3, §5).
    let Planned {
        plan,
        provider,
        claim,
    } = match plan::resolve(&repo, opts)? {
        Resolved::Run(planned) => *planned,
        Resolved::Cached(summary) => return Ok(RunReport::Cached { summary }),
        Resolved::DryRun(prompt) => return Ok(RunReport::DryRun { prompt }),
    };
    // Place: the user's tree or a worktree; what putting it back needs is captured first.
    let place = Place::enter(&repo, claim, &plan)?;
    let budget = Budget::new(plan.max_tokens).with_max_cost(plan.max_cost);
    let mut session = Session::open(&place, &plan, provider, &budget, ui)?;
    // The baseline check (§3.8) runs before the first record: a refusal leaves no trace.
    let satisfied = match session.check_baseline_if_asked() {
        Ok(satisfied) => satisfied,
        Err(e) => {
            let (journal, _) = session.close();
            place.abandon(&journal, |_| Ok(()))?;
            return Err(e);
        }
    };
    session.announce()?;
    // The attempts: one attempt loop (§2), or a race of candidates (§5.1).
    let ending = attempts(&mut session, &plan, satisfied);
    if let Some(refusal) = session.refusal.take() {
        // The provider is misconfigured (§1.1): nothing was applied; the record written so
        // far is taken back, so the refusal leaves refs as they were.
        let _ = session.rollback();
        let (journal, _) = session.close();
        place.abandon(&journal, |repo| record::withdraw(repo, &plan))?;
        return Err(refusal);
    }
    // Deliver the PASS as asked (§5), then the final record and notes (§4).
    let finished = deliver::land(&mut session, &ending)
        .and_then(|landed| record::finish(&mut session, landed));
    crate::trace::mark("finish (record, notes)");
    let (journal, unrestored) = session.close();
    let (summary, out) = place.leave(&journal, unrestored, finished, plan.out.as_deref())?;
    Ok(RunReport::Finished {
        summary: Box::new(summary),
        out,
    })
}

/// The attempts. Best of N: the candidates race in their own worktrees first; the winner's
/// change is then what this run's single attempt applies and verifies where it lands.
fn attempts(session: &mut Session<'_>, plan: &Plan, satisfied: bool) -> Ending {
    let raced = match (&plan.race, satisfied) {
        (Some(race), false) => race::race(session, race),
        _ => Ok(None),
    };
    let (raced, max_attempts) = match raced {
        Ok(Some(ending)) => (Some(Ok(ending)), plan.max_attempts),
        Ok(None) if plan.race.is_some() && !satisfied => (None, 1),
        Ok(None) => (None, plan.max_attempts),
        Err(e) => (Some(Err(e)), plan.max_attempts),
    };
    let driven = match raced {
        Some(raced) => raced,
        None if satisfied => Ok(session.already_satisfied()),
        None => graph::drive(session, max_attempts, &crate::interrupt::requested),
    };
    let ending = session.ended(driven);
    crate::trace::mark("loop done");
    ending
}
