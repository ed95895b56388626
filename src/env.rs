//! The only place that reads environment variables.

pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
pub const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";

/// Variables never passed to commands the harness runs: the code under test was written by
/// a model.
pub const ALWAYS_SCRUBBED: [&str; 2] = [OPENAI_API_KEY, ANTHROPIC_API_KEY];

pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

pub fn openai_key() -> Option<String> {
    var(OPENAI_API_KEY)
}

pub fn anthropic_key() -> Option<String> {
    var(ANTHROPIC_API_KEY)
}

pub fn openai_base_url() -> Option<String> {
    var(OPENAI_BASE_URL)
}

pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

pub fn pytest_addopts() -> Option<String> {
    var("PYTEST_ADDOPTS")
}

/// A named stop point for crash-injection tests: the binary exits at once when it is reached.
pub fn crash_point() -> Option<String> {
    var("GIT_FACTORY_TEST_CRASH_AT")
}

/// `GIT_FACTORY_TRACE=1`: print how long each phase of a run took, for profiling.
pub fn trace() -> bool {
    std::env::var_os("GIT_FACTORY_TRACE").is_some()
}
