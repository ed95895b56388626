//! Which harness process a command belongs to (SPEC §7). Every command the harness starts
//! carries [`VAR`] in its environment: the harness's pid and the time it started, which no
//! other process has (a pid can be reused; the pair cannot). After a harness was killed,
//! `recover` finds the commands it left by that marker alone — even one started a moment
//! before the kill, whose process group was never noted anywhere — and stops them, without
//! ever touching a command of a harness that is still alive.

use rustix::process::{getpgid, getpgrp, kill_process, kill_process_group, Pid, Signal};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The runs this process has under way outside the user's tree (a batch's, by run id): what
/// the agent audit takes as another run's writes when the owner file naming this process is
/// one an agent could have written (it knows this process's marker from its environment).
static RUNS_HERE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Notes that this process has run `run_id` under way (`on`) or no more.
pub fn note_run_here(run_id: &str, on: bool) {
    let mut runs = match RUNS_HERE.lock() {
        Ok(r) => r,
        Err(poisoned) => poisoned.into_inner(),
    };
    match runs.iter().position(|r| r == run_id) {
        Some(i) if !on => {
            runs.remove(i);
        }
        None if on => runs.push(run_id.to_string()),
        _ => {}
    }
}

/// The runs this process has under way, as [`note_run_here`] noted them.
pub fn runs_here() -> Vec<String> {
    match RUNS_HERE.lock() {
        Ok(r) => r.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// The environment variable naming a command's harness: `<pid>.<start time>`.
pub const VAR: &str = "GIT_FACTORY_HARNESS";

/// This process as a harness: what its commands carry, and what its run files name.
pub fn marker() -> &'static str {
    static MARKER: OnceLock<String> = OnceLock::new();
    MARKER.get_or_init(|| {
        let pid = std::process::id();
        marker_of(pid).unwrap_or_else(|| format!("{pid}.0"))
    })
}

/// The marker of process `pid` as it runs now, if it runs.
fn marker_of(pid: u32) -> Option<String> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields after the last ')'.
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = String::from_utf8_lossy(&stat[close + 1..]).into_owned();
    // Field 3 (state) comes first; field 22 is the start time in clock ticks since boot.
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid}.{start}"))
}

/// The pid a marker names.
pub fn pid_of(marker: &str) -> Option<u32> {
    marker.split('.').next()?.parse().ok()
}

/// Whether the harness `marker` names still runs (the same process, not a reused pid). A
/// zombie has no start to compare and counts as gone.
pub fn alive(marker: &str) -> bool {
    let Some(pid) = pid_of(marker) else {
        return false;
    };
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    if state
        .rsplit(')')
        .next()
        .is_some_and(|r| r.trim_start().starts_with('Z'))
    {
        return false;
    }
    marker_of(pid).as_deref() == Some(marker)
}

/// Live processes whose environment carries `VAR=marker` (this process aside).
fn carrying(marker: &str) -> Vec<Pid> {
    let wanted = format!("{VAR}={marker}").into_bytes();
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == wanted.as_slice()) {
            found.extend(i32::try_from(pid).ok().and_then(Pid::from_raw));
        }
    }
    found
}

/// Whether process `pid` is a command a harness that is gone started (it carries a marker
/// naming no live harness): a process group noted in a file of `.git/factory/`, which an
/// unconfined command can write, is stopped only when its leader is one.
pub fn started_by_a_gone_harness(pid: i32) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let prefix = format!("{VAR}=").into_bytes();
    env.split(|b| *b == 0)
        .filter_map(|kv| kv.strip_prefix(prefix.as_slice()))
        .any(|m| std::str::from_utf8(m).is_ok_and(|m| !alive(m)))
}

/// Stops every command the harness `marker` left (their process groups, and each process
/// itself in case it left its group), until none is left or 5 s pass. Returns how many
/// processes were found. Never stops this process's own group.
pub fn stop_commands_of(marker: &str) -> usize {
    let ours = getpgrp();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = 0;
    loop {
        let found = carrying(marker);
        if found.is_empty() || Instant::now() > deadline {
            return seen;
        }
        seen = seen.max(found.len());
        for pid in found {
            if let Ok(group) = getpgid(Some(pid)) {
                if group != ours {
                    let _ = kill_process_group(group, Signal::KILL);
                }
            }
            let _ = kill_process(pid, Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_under_its_marker_and_a_made_up_one_is_not() {
        let m = marker();
        assert_eq!(pid_of(m), Some(std::process::id()));
        assert!(alive(m));
        assert!(!alive(&format!("{}.1", std::process::id())));
        assert!(!alive("not-a-marker"));
    }

    #[test]
    fn only_the_commands_of_the_named_harness_are_stopped() {
        use std::os::unix::process::ExitStatusExt;
        // In this process's group: the command runner's orphan sweep, run by other tests in
        // this process meanwhile, takes any other child of ours for a leftover.
        let spawn = |marker: &str| {
            std::process::Command::new("sleep")
                .arg("30")
                .env(VAR, marker)
                .spawn()
                .expect("sleep")
        };
        let mut gone = spawn("1.gone");
        let mut kept = spawn("1.kept");
        // Its environment is its own once it has exec'd.
        let deadline = Instant::now() + Duration::from_secs(10);
        while carrying("1.gone").is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(stop_commands_of("1.gone"), 1);
        assert_eq!(gone.wait().expect("waits").signal(), Some(9));
        assert!(
            kept.try_wait().expect("polls").is_none(),
            "another harness's command runs on"
        );
        let _ = kept.kill();
        let _ = kept.wait();
    }
}
