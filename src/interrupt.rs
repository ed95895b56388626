//! SIGINT and SIGTERM during a run only raise a flag: the running command's group is stopped,
//! the tree rolled back and the record written, then the process exits 130. A second signal
//! while rolling back just raises the flag again; it cannot abandon the rollback. A closed
//! output pipe raises the same flag (see `ui`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Routes SIGINT and SIGTERM to the flag for the rest of the process's life.
pub fn install() {
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, Arc::clone(flag));
    }
}

pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// Raises the flag from inside the process: a closed stdout or stderr (`git factory run … |
/// head`) ends a run as SIGINT does, rolled back and recorded.
pub fn request() {
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
        .store(true, Ordering::SeqCst);
}
