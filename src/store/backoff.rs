//! Waiting out another process: jittered, growing pauses until a deadline.
//!
//! The jitter only spreads processes that collide (several clones pushing to one remote,
//! several runs appending notes at once) over time; nothing it draws reaches a record or an
//! identity.

use std::hash::BuildHasher;
use std::time::{Duration, Instant};

/// Pauses that grow from `first` towards `cap`, each drawn at random between half the
/// current pause and the whole of it, until `deadline`.
pub struct Backoff {
    deadline: Instant,
    pause: Duration,
    cap: Duration,
    draws: u64,
    seed: std::collections::hash_map::RandomState,
}

impl Backoff {
    pub fn new(total: Duration, first: Duration, cap: Duration) -> Self {
        Backoff {
            deadline: Instant::now() + total,
            pause: first,
            cap,
            draws: 0,
            seed: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Sleeps before the next try; false (without sleeping) once the deadline has passed.
    pub fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        self.draws += 1;
        let pause = self.jittered(self.pause).min(self.deadline - now);
        std::thread::sleep(pause);
        self.pause = (self.pause * 2).min(self.cap);
        true
    }

    /// A duration between half of `pause` and the whole of it, drawn from a per-process seed.
    fn jittered(&self, pause: Duration) -> Duration {
        let nanos = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX).max(2);
        let half = nanos / 2;
        let draw = self.seed.hash_one(self.draws) % (nanos - half + 1);
        Duration::from_nanos(half + draw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_stay_within_half_and_whole_and_grow_to_the_cap() {
        let b = Backoff::new(
            Duration::from_secs(1),
            Duration::from_millis(8),
            Duration::from_millis(20),
        );
        for _ in 0..200 {
            let p = b.jittered(Duration::from_millis(8));
            assert!(
                p >= Duration::from_millis(4) && p <= Duration::from_millis(8),
                "{p:?}"
            );
        }
        let mut b = Backoff::new(
            Duration::from_millis(60),
            Duration::from_millis(8),
            Duration::from_millis(20),
        );
        let start = Instant::now();
        let mut tries = 0;
        while b.wait() {
            tries += 1;
        }
        assert!(tries >= 2, "{tries}");
        assert_eq!(b.pause, Duration::from_millis(20));
        assert!(start.elapsed() >= Duration::from_millis(60));
        assert!(start.elapsed() < Duration::from_millis(500));
    }
}
