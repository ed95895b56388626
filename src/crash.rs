//! Named kill points for the crash-injection tests: with the `test-hooks` feature, reaching the
//! point named by `GIT_FACTORY_TEST_CRASH_AT` kills the process with SIGKILL on the spot.
//! Without the feature this compiles to nothing.

#[cfg(feature = "test-hooks")]
pub fn point(name: &str) {
    if crate::env::crash_point().as_deref() == Some(name) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn point(_name: &str) {}
