//! The `--max-tokens` and `--max-cost` budgets (SPEC §1.1, §3.3 Cost): one count over every
//! attempt of every candidate. Shared by the threads of a race: tokens are atomic, dollars
//! are spent under a lock, and a request in flight holds its worst case until it is settled,
//! so candidates asking at once can never pass the budget together.

use crate::store::records::Usage;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Budget {
    limit: Option<u64>,
    used: AtomicU64,
    exceeded: AtomicBool,
    max_cost: Option<f64>,
    dollars: Mutex<Dollars>,
}

/// Dollars spent, and held by requests in flight (their worst case).
#[derive(Debug, Default, Clone, Copy)]
struct Dollars {
    spent: f64,
    held: f64,
}

/// What `reserve` refused: the request's worst case and what was spent and held then.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WouldPass {
    pub worst: f64,
    pub committed: f64,
    pub limit: f64,
}

impl Budget {
    pub fn new(limit: Option<u64>) -> Self {
        Budget {
            limit,
            used: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
            max_cost: None,
            dollars: Mutex::new(Dollars::default()),
        }
    }

    /// With a dollar budget (`--max-cost`).
    pub fn with_max_cost(mut self, max_cost: Option<f64>) -> Self {
        self.max_cost = max_cost;
        self
    }

    pub fn max_cost(&self) -> Option<f64> {
        self.max_cost
    }

    fn dollars(&self) -> std::sync::MutexGuard<'_, Dollars> {
        self.dollars.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds a request's worst case before it is sent; refused (and the budget marked
    /// spent) when it would pass what is left. Without a dollar budget nothing is held.
    pub fn reserve(&self, worst: f64) -> Result<(), WouldPass> {
        let Some(limit) = self.max_cost else {
            return Ok(());
        };
        let mut d = self.dollars();
        let committed = d.spent + d.held;
        if committed + worst > limit {
            self.exceeded.store(true, Ordering::SeqCst);
            return Err(WouldPass {
                worst,
                committed,
                limit,
            });
        }
        d.held += worst;
        Ok(())
    }

    /// A request held with `reserve(worst)` is done: what it cost is spent (its worst case
    /// when it has no price, or made no request at all: `Some(0.0)`).
    pub fn settle(&self, worst: f64, cost: Option<f64>) {
        let Some(limit) = self.max_cost else {
            return;
        };
        let mut d = self.dollars();
        d.held = (d.held - worst).max(0.0);
        d.spent += cost.unwrap_or(worst);
        if d.spent > limit {
            self.exceeded.store(true, Ordering::SeqCst);
        }
    }

    /// Dollars spent so far.
    pub fn spent_usd(&self) -> f64 {
        self.dollars().spent
    }

    /// Counts an answer's reported tokens (input and output); true when the budget is now
    /// exceeded. An answer without usage costs nothing: the budget counts what is reported.
    pub fn spend(&self, usage: Option<&Usage>) -> bool {
        let tokens = tokens_of(usage);
        let used = self
            .used
            .fetch_add(tokens, Ordering::SeqCst)
            .saturating_add(tokens);
        if self.limit.is_some_and(|limit| used > limit) {
            self.exceeded.store(true, Ordering::SeqCst);
        }
        self.exhausted()
    }

    pub fn exhausted(&self) -> bool {
        self.exceeded.load(Ordering::SeqCst)
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    pub fn limit(&self) -> Option<u64> {
        self.limit
    }
}

/// The tokens an attempt's answer reported.
pub fn tokens_of(usage: Option<&Usage>) -> u64 {
    usage
        .map(|u| {
            u.input_tokens
                .unwrap_or(0)
                .saturating_add(u.output_tokens.unwrap_or(0))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceeded_only_past_the_limit() {
        let b = Budget::new(Some(100));
        let u = |i, o| Usage {
            input_tokens: Some(i),
            output_tokens: Some(o),
            ..Usage::default()
        };
        assert!(!b.spend(Some(&u(40, 10))));
        assert!(!b.spend(Some(&u(40, 10))));
        assert!(!b.spend(None));
        assert!(b.spend(Some(&u(1, 0))));
        assert_eq!(b.used(), 101);
        let unlimited = Budget::new(None);
        assert!(!unlimited.spend(Some(&u(u64::MAX / 4, 0))));
    }

    #[test]
    fn dollars_in_flight_are_held_until_settled() {
        let b = Budget::new(None).with_max_cost(Some(1.0));
        assert!(b.reserve(0.4).is_ok());
        assert!(b.reserve(0.4).is_ok());
        // Two requests in flight hold 0.8: a third of 0.4 would pass the dollar.
        assert_eq!(
            b.reserve(0.4),
            Err(WouldPass {
                worst: 0.4,
                committed: 0.8,
                limit: 1.0
            })
        );
        assert!(b.exhausted());
        b.settle(0.4, Some(0.1));
        b.settle(0.4, None);
        assert!((b.spent_usd() - 0.5).abs() < 1e-12);
        assert!(Budget::new(None).reserve(1e9).is_ok());
    }
}
