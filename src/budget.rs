//! The `--max-tokens` budget (SPEC §1.1): one count over every attempt of every candidate,
//! from the tokens the providers report. Shared by the threads of a race, so it is atomic.

use crate::store::records::Usage;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Budget {
    limit: Option<u64>,
    used: AtomicU64,
    exceeded: AtomicBool,
}

impl Budget {
    pub fn new(limit: Option<u64>) -> Self {
        Budget {
            limit,
            used: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
        }
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
}
