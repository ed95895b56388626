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

/// Whether the run should stop: a signal came, or stdout or stderr is a pipe whose reader
/// has gone. The pipe is probed here, not only when a write fails: a quiet run (`-q`,
/// `--json`) or a long check writes nothing for a while, and must not go on to deliver a
/// change nobody is listening for.
pub fn requested() -> bool {
    if FLAG.get().is_some_and(|f| f.load(Ordering::SeqCst)) {
        return true;
    }
    if outputs_closed() {
        request();
        return true;
    }
    false
}

/// A zero-timeout poll of stdout and stderr: the write end of a pipe whose read end is
/// closed reports an error (POLLERR), a hung-up terminal or socket POLLHUP. Terminals,
/// files and `/dev/null` report neither.
fn outputs_closed() -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let mut fds = [
        PollFd::new(&stdout, PollFlags::empty()),
        PollFd::new(&stderr, PollFlags::empty()),
    ];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if poll(&mut fds, Some(&now)).unwrap_or(0) == 0 {
        return false;
    }
    fds.iter()
        .any(|fd| fd.revents().intersects(PollFlags::ERR | PollFlags::HUP))
}

/// Raises the flag from inside the process: a closed stdout or stderr (`git factory run … |
/// head`) ends a run as SIGINT does, rolled back and recorded.
pub fn request() {
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
        .store(true, Ordering::SeqCst);
}

static HALT: AtomicBool = AtomicBool::new(false);

/// Stops every running command and node without a signal: the token budget ran out while
/// several candidates were in flight (SPEC §5.1). Unlike a signal it is not an interrupt of
/// the run: the run still ends with its own verdict.
pub fn halt() {
    HALT.store(true, Ordering::SeqCst);
}

pub fn halted() -> bool {
    HALT.load(Ordering::SeqCst)
}
