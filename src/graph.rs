//! The state machine: SE → TR → PO → route. Routing is a pure function of the node that just
//! ran, its outcome and the attempt counters — never of anything a model said.

use crate::error::Result;
use crate::store::records::{Stage, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Se,
    Tr,
    Po,
}

/// What a node reports back to the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// This attempt failed at `Stage`; a new proposal may fix it.
    Failed(Stage),
    /// This attempt failed and no later attempt can do better (a replay ran out).
    Exhausted(Stage),
    /// The run cannot finish (provider refused us, an internal error): verdict ERROR.
    Fatal(Stage),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Go(Node),
    NextAttempt,
    Finish(Verdict),
}

/// Stages no new proposal can fix end the run at once.
fn ends_run(stage: Stage) -> Option<Verdict> {
    match stage {
        Stage::Preflight | Stage::Exception => Some(Verdict::Error),
        Stage::Interrupted => Some(Verdict::Interrupted),
        Stage::BudgetExhausted => Some(Verdict::Fail),
        _ => None,
    }
}

pub fn route(node: Node, outcome: Outcome, attempt: u32, max_attempts: u32) -> Next {
    match outcome {
        Outcome::Ok => match node {
            Node::Se => Next::Go(Node::Tr),
            Node::Tr => Next::Go(Node::Po),
            Node::Po => Next::Finish(Verdict::Pass),
        },
        Outcome::Failed(stage) => match ends_run(stage) {
            Some(verdict) => Next::Finish(verdict),
            None if attempt < max_attempts => Next::NextAttempt,
            None => Next::Finish(Verdict::Fail),
        },
        Outcome::Exhausted(stage) => Next::Finish(ends_run(stage).unwrap_or(Verdict::Fail)),
        Outcome::Fatal(stage) => Next::Finish(ends_run(stage).unwrap_or(Verdict::Error)),
    }
}

/// The side of each node: the driver only sequences them.
pub trait Nodes {
    fn se(&mut self, attempt: u32) -> Outcome;
    fn tr(&mut self, attempt: u32) -> Outcome;
    fn po(&mut self, attempt: u32) -> Outcome;
    /// Closes an attempt: records it, and rolls the tree back unless it passed. `last` says the
    /// run ends with it (the final record follows at once).
    fn end_attempt(&mut self, attempt: u32, passed: bool, last: bool) -> Result<()>;
    /// Records that the run was interrupted during this attempt.
    fn interrupt(&mut self, attempt: u32) -> Outcome;
}

/// How a run ended: its verdict and the stage it ended at (`success` on PASS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub verdict: Verdict,
    pub stage: String,
    pub attempts: u32,
}

/// Runs the loop to a verdict. `interrupted` is asked before and after every node; once it
/// says yes, the attempt ends with stage `interrupted` (and so the run).
pub fn drive(
    nodes: &mut dyn Nodes,
    max_attempts: u32,
    interrupted: &dyn Fn() -> bool,
) -> Result<Ending> {
    let mut attempt = 1;
    let mut node = Node::Se;
    loop {
        let mut outcome = if interrupted() {
            nodes.interrupt(attempt)
        } else {
            match node {
                Node::Se => nodes.se(attempt),
                Node::Tr => nodes.tr(attempt),
                Node::Po => nodes.po(attempt),
            }
        };
        if interrupted() && outcome != Outcome::Failed(Stage::Interrupted) {
            outcome = nodes.interrupt(attempt);
        }
        match route(node, outcome, attempt, max_attempts) {
            Next::Go(next) => node = next,
            Next::NextAttempt => {
                nodes.end_attempt(attempt, false, false)?;
                attempt += 1;
                node = Node::Se;
            }
            Next::Finish(verdict) => {
                nodes.end_attempt(attempt, verdict == Verdict::Pass, true)?;
                let stage = match outcome {
                    Outcome::Ok => "success".to_string(),
                    Outcome::Failed(s) | Outcome::Exhausted(s) | Outcome::Fatal(s) => {
                        s.as_str().to_string()
                    }
                };
                return Ok(Ending {
                    verdict,
                    stage,
                    attempts: attempt,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted set of nodes: each attempt's outcomes, in SE, TR, PO order.
    struct Script {
        outcomes: Vec<Vec<Outcome>>,
        trace: Vec<String>,
    }

    impl Script {
        fn next(&mut self, attempt: u32, name: &str, index: usize) -> Outcome {
            self.trace.push(format!("{name}{attempt}"));
            self.outcomes[(attempt - 1) as usize][index]
        }
    }

    impl Nodes for Script {
        fn se(&mut self, attempt: u32) -> Outcome {
            self.next(attempt, "se", 0)
        }
        fn tr(&mut self, attempt: u32) -> Outcome {
            self.next(attempt, "tr", 1)
        }
        fn po(&mut self, attempt: u32) -> Outcome {
            self.next(attempt, "po", 2)
        }
        fn interrupt(&mut self, attempt: u32) -> Outcome {
            self.trace.push(format!("int{attempt}"));
            Failed(Stage::Interrupted)
        }
        fn end_attempt(&mut self, attempt: u32, passed: bool, _last: bool) -> Result<()> {
            self.trace.push(format!(
                "{}{attempt}",
                if passed { "keep" } else { "rollback" }
            ));
            std::result::Result::Ok(())
        }
    }

    fn run(outcomes: Vec<Vec<Outcome>>, max: u32) -> (Ending, String) {
        let mut s = Script {
            outcomes,
            trace: vec![],
        };
        let ending = drive(&mut s, max, &|| false).expect("drives");
        (ending, s.trace.join(" "))
    }

    use Outcome::*;
    const OK3: [Outcome; 3] = [Ok, Ok, Ok];

    #[test]
    fn pass_on_attempt_one() {
        let (e, t) = run(vec![OK3.to_vec()], 2);
        assert_eq!(e.verdict, Verdict::Pass);
        assert_eq!(e.stage, "success");
        assert_eq!(t, "se1 tr1 po1 keep1");
    }

    #[test]
    fn fail_then_pass() {
        let (e, t) = run(
            vec![vec![Ok, Ok, Failed(Stage::AcceptanceFailed)], OK3.to_vec()],
            2,
        );
        assert_eq!(e.verdict, Verdict::Pass);
        assert_eq!(e.attempts, 2);
        assert_eq!(t, "se1 tr1 po1 rollback1 se2 tr2 po2 keep2");
    }

    #[test]
    fn fail_until_attempts_run_out() {
        let f = vec![Ok, Ok, Failed(Stage::VerifyFailed)];
        let (e, t) = run(vec![f.clone(), f.clone(), f], 3);
        assert_eq!(e.verdict, Verdict::Fail);
        assert_eq!(e.stage, "verify_failed");
        assert_eq!(
            t,
            "se1 tr1 po1 rollback1 se2 tr2 po2 rollback2 se3 tr3 po3 rollback3"
        );
    }

    #[test]
    fn invalid_output_skips_tr_and_po() {
        let (e, t) = run(
            vec![vec![Failed(Stage::LlmOutputInvalid), Ok, Ok], OK3.to_vec()],
            2,
        );
        assert_eq!(e.verdict, Verdict::Pass);
        assert_eq!(t, "se1 rollback1 se2 tr2 po2 keep2");
    }

    #[test]
    fn scope_violation_skips_po() {
        let (e, t) = run(vec![vec![Ok, Failed(Stage::PatchScopeViolation), Ok]], 1);
        assert_eq!(e.verdict, Verdict::Fail);
        assert_eq!(e.stage, "patch_scope_violation");
        assert_eq!(t, "se1 tr1 rollback1");
    }

    #[test]
    fn weakened_tests_are_retried_like_a_scope_violation() {
        let (e, t) = run(
            vec![vec![Ok, Failed(Stage::TestsWeakened), Ok], OK3.to_vec()],
            2,
        );
        assert_eq!(e.verdict, Verdict::Pass);
        assert_eq!(t, "se1 tr1 rollback1 se2 tr2 po2 keep2");
        let (e, _) = run(vec![vec![Ok, Failed(Stage::TestsWeakened), Ok]], 1);
        assert_eq!(e.verdict, Verdict::Fail);
        assert_eq!(e.stage, "tests_weakened");
    }

    #[test]
    fn unfixable_stages_end_at_once() {
        let (e, _) = run(vec![vec![Fatal(Stage::LlmCallFailed), Ok, Ok]], 3);
        assert_eq!(e.verdict, Verdict::Error);
        let (e, t) = run(vec![vec![Exhausted(Stage::LlmCallFailed), Ok, Ok]], 3);
        assert_eq!(e.verdict, Verdict::Fail);
        assert_eq!(t, "se1 rollback1");
        let (e, _) = run(vec![vec![Ok, Failed(Stage::Exception), Ok]], 3);
        assert_eq!(e.verdict, Verdict::Error);
        let (e, _) = run(vec![vec![Ok, Ok, Failed(Stage::Interrupted)]], 3);
        assert_eq!(e.verdict, Verdict::Interrupted);
    }

    #[test]
    fn an_interrupt_ends_the_attempt_and_the_run() {
        let mut s = Script {
            outcomes: vec![OK3.to_vec(), OK3.to_vec()],
            trace: vec![],
        };
        let calls = std::cell::Cell::new(0);
        // Interrupted once SE of attempt 1 has run.
        let ending = drive(&mut s, 2, &|| {
            calls.set(calls.get() + 1);
            calls.get() > 2
        })
        .expect("drives");
        assert_eq!(ending.verdict, Verdict::Interrupted);
        assert_eq!(ending.stage, "interrupted");
        assert_eq!(s.trace.join(" "), "se1 int1 rollback1");
    }

    #[test]
    fn route_table_is_total() {
        for node in [Node::Se, Node::Tr, Node::Po] {
            for attempt in 1..=2 {
                let next = route(node, Failed(Stage::PatchApplyFailed), attempt, 2);
                let want = if attempt < 2 {
                    Next::NextAttempt
                } else {
                    Next::Finish(Verdict::Fail)
                };
                assert_eq!(next, want);
            }
        }
    }
}
