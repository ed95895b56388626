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

/// The folders of `PATH`, in order, as bytes (an empty entry is the current folder, as the
/// shell reads it).
pub fn path_dirs() -> Vec<std::path::PathBuf> {
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| {
                    if d.as_os_str().is_empty() {
                        std::path::PathBuf::from(".")
                    } else {
                        d
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The user's home folder (`~/` in git config values).
pub fn home() -> Option<std::path::PathBuf> {
    var("HOME").map(std::path::PathBuf::from)
}

/// git's `core.excludesFile` when it is unset: `$XDG_CONFIG_HOME/git/ignore`, else
/// `~/.config/git/ignore`.
pub fn default_excludes_file() -> Option<std::path::PathBuf> {
    match var("XDG_CONFIG_HOME") {
        Some(xdg) => Some(std::path::PathBuf::from(xdg).join("git/ignore")),
        None => home().map(|h| h.join(".config/git/ignore")),
    }
}

/// The commit a batch's runs start from (SPEC §5.2): the batch sets it for each run it
/// starts; the run refuses it unless it runs in a worktree at a commit of the repository.
/// Commands the harness runs never see it.
pub const BATCH_BASELINE: &str = "GIT_FACTORY_BATCH_BASELINE";

pub fn batch_baseline() -> Option<String> {
    var(BATCH_BASELINE)
}

pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

pub fn pytest_addopts() -> Option<String> {
    var("PYTEST_ADDOPTS")
}

/// The user's `PYTHONPATH`, which the harness's pytest plugin folder is put in front of.
pub fn pythonpath() -> Option<String> {
    var("PYTHONPATH")
}

/// A named stop point for crash-injection tests: the binary exits at once when it is reached.
pub fn crash_point() -> Option<String> {
    var("GIT_FACTORY_TEST_CRASH_AT")
}

/// With the `test-hooks` feature, `GIT_FACTORY_TEST_CLOCK_AHEAD` (seconds) moves the clock
/// that ages are measured with (`prune`) into the future, so tests can look at today's runs
/// from months ahead. Without the feature it is never read.
#[cfg(feature = "test-hooks")]
pub fn test_clock_ahead() -> Option<u64> {
    var("GIT_FACTORY_TEST_CLOCK_AHEAD").and_then(|v| v.parse().ok())
}

#[cfg(not(feature = "test-hooks"))]
pub fn test_clock_ahead() -> Option<u64> {
    None
}

/// `GIT_FACTORY_TRACE=1`: print how long each phase of a run took, for profiling.
pub fn trace() -> bool {
    std::env::var_os("GIT_FACTORY_TRACE").is_some()
}

/// The `-c key=value` settings git hands a subcommand (`git -c factory.maxAttempts=1
/// factory run`), from `GIT_CONFIG_PARAMETERS` and `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/
/// `GIT_CONFIG_VALUE_<n>`, in order. libgit2 reads neither. A key without a value is `true`.
pub fn git_config_parameters() -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(params) = var("GIT_CONFIG_PARAMETERS") {
        // Shell-quoted words: `'key'='value'` (git 2.31+) or `'key=value'`; unquoted, both
        // are `key=value`.
        for word in shlex::split(&params).unwrap_or_default() {
            match word.split_once('=') {
                Some((k, v)) => out.push((k.to_string(), v.to_string())),
                None => out.push((word, "true".to_string())),
            }
        }
    }
    let count = var("GIT_CONFIG_COUNT")
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    for i in 0..count {
        if let Some(k) = var(&format!("GIT_CONFIG_KEY_{i}")) {
            let v = std::env::var(format!("GIT_CONFIG_VALUE_{i}")).unwrap_or_default();
            out.push((k, v));
        }
    }
    out
}

/// `GIT_PAGER`, then `PAGER`: git's order, with `core.pager` between them.
pub fn git_pager() -> Option<String> {
    std::env::var("GIT_PAGER").ok()
}

pub fn pager() -> Option<String> {
    std::env::var("PAGER").ok()
}

/// Whether `LESS` / `LV` are set (git sets `LESS=FRX` and `LV=-c` only when they are not).
pub fn is_set(name: &str) -> bool {
    std::env::var_os(name).is_some()
}
