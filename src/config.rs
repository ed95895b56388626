//! `factory.*` git-config keys, read once; the command line wins over every one of them.

use git2::Repository;

pub const MODEL: &str = "factory.model";
pub const BASE_URL: &str = "factory.baseUrl";
pub const MAX_ATTEMPTS: &str = "factory.maxAttempts";
pub const TIMEOUT_SECONDS: &str = "factory.timeoutSeconds";
pub const TEMPERATURE: &str = "factory.temperature";
pub const API: &str = "factory.api";
pub const MAX_OUTPUT_TOKENS: &str = "factory.maxOutputTokens";
/// The dollar budget of a run (`--max-cost`, SPEC §3.3 Cost).
pub const MAX_COST: &str = "factory.maxCost";
pub const REASONING_EFFORT: &str = "factory.reasoningEffort";
pub const LLM_TIMEOUT: &str = "factory.llmTimeout";
pub const AGENT_TIMEOUT: &str = "factory.agentTimeout";
pub const VERIFY: &str = "factory.verify";
pub const SCRUB_ENV: &str = "factory.scrubEnv";
pub const PRE_PUSH: &str = "factory.prePush";
/// `false` skips the pre-commit and commit-msg hooks on `--commit`/`--branch` (default true).
pub const COMMIT_HOOKS: &str = "factory.commitHooks";
/// Multi-valued: git pathspec globs no proposal may touch (SPEC §3.5).
pub const PROTECT: &str = "factory.protect";
/// Multi-valued: gitignore globs of agents' own files, kept out of their proposals (SPEC §3.3).
pub const AGENT_IGNORE: &str = "factory.agentIgnore";
/// Multi-valued: folders a sandboxed agent may write besides its worktree (SPEC §7).
pub const AGENT_WRITABLE: &str = "factory.agentWritable";
/// What aider, Codex CLI and Claude Code keep in the folder they work in.
pub const DEFAULT_AGENT_IGNORE: [&str; 3] = [".aider*", ".codex/", ".claude/"];
/// Whether `run` checks the contract on the baseline first (SPEC §3.8).
pub const BASELINE_CHECK: &str = "factory.baselineCheck";
/// Whether a test that failed and passed when re-run fails its command (`fail`) or not
/// (`pass`, the default; SPEC §3.9); `fail` is part of a run's identity (SPEC §4.3).
pub const FLAKY: &str = "factory.flaky";
/// JUnit XML files a check writes, as globs relative to the tree root (multi-valued, SPEC §3.9).
pub const TEST_REPORT: &str = "factory.testReport";
/// Whether `run` and `reverify` run their checks under bubblewrap (`--sandbox`).
pub const SANDBOX: &str = "factory.sandbox";
/// Whether a PASS of `run` is recorded as signed evidence (`--attest`, SPEC §6.1).
pub const ATTEST: &str = "factory.attest";
/// The most of each command stream a run record keeps (SPEC §4.1); `--out` keeps it whole.
pub const RECORD_LOG_BYTES: &str = "factory.recordLogBytes";
/// The age past which `prune` removes run records (`90d`; default: never).
pub const PRUNE_OLDER_THAN: &str = "factory.pruneOlderThan";
/// How many idle pooled worktrees a repo keeps (SPEC §5; default: the number of CPUs).
pub const POOL_SIZE: &str = "factory.poolSize";

pub const DEFAULT_MAX_ATTEMPTS: u32 = 2;
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 600;
pub const DEFAULT_AGENT_TIMEOUT: u64 = 1800;
/// Seconds one model request may take in all (streamed or not).
pub const DEFAULT_LLM_TIMEOUT: u64 = 900;
pub const DEFAULT_RECORD_LOG_BYTES: u64 = 1024 * 1024;

/// The repository's effective configuration (system, global, local, worktree), with the
/// `git -c` settings of the command line over it.
pub struct Config {
    cfg: Option<git2::Config>,
    /// `git -c` settings as (canonical key, value), in order.
    overrides: Vec<(String, String)>,
}

/// A config key as git compares it: section and variable name case-insensitive, a
/// subsection (the middle part) as written.
fn canonical(key: &str) -> String {
    match (key.find('.'), key.rfind('.')) {
        (Some(first), Some(last)) if first != last => format!(
            "{}{}{}",
            key[..first].to_ascii_lowercase(),
            &key[first..last],
            key[last..].to_ascii_lowercase()
        ),
        _ => key.to_ascii_lowercase(),
    }
}

/// A boolean as git reads one: `true`/`yes`/`on`/a non-zero number, `false`/`no`/`off`/`0`/
/// empty, case aside.
fn git_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" | "" => Some(false),
        n => n.parse::<i64>().ok().map(|n| n != 0),
    }
}

impl Config {
    pub fn of(repo: &Repository) -> Self {
        Self::from(repo.config().and_then(|mut c| c.snapshot()).ok())
    }

    /// The configuration outside any repository (system and global), with `git -c`.
    pub fn default_only() -> Self {
        Self::from(
            git2::Config::open_default()
                .and_then(|mut c| c.snapshot())
                .ok(),
        )
    }

    fn from(cfg: Option<git2::Config>) -> Self {
        Config {
            cfg,
            overrides: crate::env::git_config_parameters()
                .into_iter()
                .map(|(k, v)| (canonical(&k), v))
                .collect(),
        }
    }

    pub fn string(&self, key: &str) -> Option<String> {
        let wanted = canonical(key);
        if let Some((_, v)) = self.overrides.iter().rev().find(|(k, _)| *k == wanted) {
            return Some(v.clone()).filter(|s| !s.is_empty());
        }
        self.cfg
            .as_ref()?
            .get_string(key)
            .ok()
            .filter(|s| !s.is_empty())
    }

    /// The command line's value if given, else the config key's, else the default. A value
    /// in the config that does not parse is a refusal naming the key.
    pub fn value<T: std::str::FromStr>(
        &self,
        flag: Option<T>,
        key: &str,
        default: T,
    ) -> crate::error::Result<T> {
        if let Some(v) = flag {
            return Ok(v);
        }
        match self.string(key) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| {
                crate::error::Error::new(format!("git config {key} has an invalid value {v:?}"))
                    .hint(format!(
                        "fix it with git config {key} VALUE, or give the flag on the command line"
                    ))
            }),
        }
    }

    /// A boolean key as git reads one (`true`/`yes`/`on`/`1`, `false`/`no`/`off`/`0`); a
    /// value git would not accept is a refusal naming the key.
    pub fn bool(&self, key: &str) -> crate::error::Result<Option<bool>> {
        let invalid = |v: &str| {
            crate::error::Error::new(format!("git config {key} has an invalid value {v:?}"))
                .hint(format!("set it with git config {key} true (or false)"))
        };
        // `git -c` first, as git reads it (a bare `git -c key` is true).
        let wanted = canonical(key);
        if let Some((_, v)) = self.overrides.iter().rev().find(|(k, _)| *k == wanted) {
            return git_bool(v).map(Some).ok_or_else(|| invalid(v));
        }
        let Some(cfg) = &self.cfg else {
            return Ok(None);
        };
        match cfg.get_entry(key) {
            Err(_) => Ok(None),
            Ok(_) => cfg.get_bool(key).map(Some).map_err(|_| {
                crate::error::Error::new(format!(
                    "git config {key} has an invalid value {:?}",
                    self.string(key).unwrap_or_default()
                ))
                .hint(format!("set it with git config {key} true (or false)"))
            }),
        }
    }

    /// A boolean key, or `default` when unset or unreadable.
    pub fn flag(&self, key: &str, default: bool) -> bool {
        self.bool(key).ok().flatten().unwrap_or(default)
    }

    /// Every value of a multi-valued key, in config order.
    /// Every value of a multi-valued key, in config order; `git -c` values come last, as in git.
    pub fn multi(&self, key: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(cfg) = &self.cfg {
            if let Ok(mut entries) = cfg.multivar(key, None) {
                while let Some(Ok(entry)) = entries.next() {
                    if let Some(v) = entry.value() {
                        out.push(v.to_string());
                    }
                }
            }
        }
        let wanted = canonical(key);
        out.extend(
            self.overrides
                .iter()
                .filter(|(k, _)| *k == wanted)
                .map(|(_, v)| v.clone()),
        );
        out
    }

    /// Every `section.<subsection>.<name>` key of a section with its value, as git names it
    /// (section and name lowercased, the subsection as written); `git -c` keys last.
    pub fn section(&self, section: &str) -> Vec<(String, String)> {
        let prefix = format!("{}.", section.to_ascii_lowercase());
        let mut out = Vec::new();
        if let Some(cfg) = &self.cfg {
            if let Ok(mut entries) = cfg.entries(None) {
                while let Some(Ok(entry)) = entries.next() {
                    if let (Some(name), Some(value)) = (entry.name(), entry.value()) {
                        if name.to_ascii_lowercase().starts_with(&prefix) {
                            out.push((name.to_string(), value.to_string()));
                        }
                    }
                }
            }
        }
        out.extend(
            (self.overrides.iter())
                .filter(|(k, _)| k.starts_with(&prefix))
                .cloned(),
        );
        out
    }

    /// `color.ui` as a colour decision: Some(false) for never/false, Some(true) for always,
    /// None for auto (or unset).
    pub fn color_ui(&self) -> Option<bool> {
        match self.string("color.ui")?.to_ascii_lowercase().as_str() {
            "never" | "false" | "no" | "off" | "0" => Some(false),
            "always" => Some(true),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_compare_as_git_compares_them() {
        assert_eq!(
            super::canonical("factory.maxAttempts"),
            "factory.maxattempts"
        );
        assert_eq!(super::canonical("Color.UI"), "color.ui");
        assert_eq!(
            super::canonical("url.Git@Host.insteadOf"),
            "url.Git@Host.insteadof"
        );
    }
}
