//! Phase timings on stderr with `GIT_FACTORY_TRACE=1`: where a run's own time goes.

use std::sync::OnceLock;
use std::time::Instant;

fn start() -> &'static Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now)
}

/// Marks the end of a phase: `[  12.345 ms] name`.
pub fn mark(name: &str) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(crate::env::trace) {
        let ms = start().elapsed().as_secs_f64() * 1000.0;
        #[allow(clippy::print_stderr)]
        {
            eprintln!("[{ms:9.3} ms] {name}");
        }
    } else {
        let _ = start();
    }
}
