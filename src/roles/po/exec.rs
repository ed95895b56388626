//! The one command runner (SPEC §3.7): argv only, no shell, stdin null (or given bytes),
//! its own process group, a timeout that takes the whole group down, output streamed to
//! files with a cap, excerpts read back from the files' tails.

use crate::store::records::CmdResult;
use rustix::process::{kill_process_group, Pid, Signal};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Per-stream cap on what is kept on disk.
pub const OUTPUT_CAP: u64 = 64 * 1024 * 1024;
const EXCERPT_LINES: usize = 200;
const EXCERPT_CHARS: usize = 8000;
/// Time a group gets between SIGTERM and SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// How long to wait for output pipes after the command ended (a daemon may hold them open).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Everything about how to run one command.
#[derive(Debug, Clone, Default)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub timeout: Duration,
    pub env_remove: Vec<String>,
    pub env_set: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    /// What the command is for (`verify`, `acceptance`, `agent`), for kill points.
    pub label: &'static str,
    pub sandbox: Option<Sandbox>,
    /// Where to note the command's process group while it runs, so `recover` can stop a
    /// command whose harness was killed.
    pub pgid_file: Option<PathBuf>,
}

/// `--sandbox`: the one policy of SPEC §7.1 and the backend that enforces it.
pub use crate::sandbox::Confinement as Sandbox;

/// Where one command's output goes: absolute files, and the names recorded in CmdResult.
pub struct LogFiles {
    pub stdout: PathBuf,
    pub stderr: PathBuf,
    pub stdout_rel: String,
    pub stderr_rel: String,
}

impl LogFiles {
    /// `<dir>/<stem>_stdout.txt` and `_stderr.txt`, recorded relative to the artifact root.
    pub fn in_dir(dir: &Path, rel_dir: &str, stem: &str) -> Self {
        let rel = |s: &str| {
            if rel_dir.is_empty() {
                format!("{stem}_{s}.txt")
            } else {
                format!("{rel_dir}/{stem}_{s}.txt")
            }
        };
        LogFiles {
            stdout: dir.join(format!("{stem}_stdout.txt")),
            stderr: dir.join(format!("{stem}_stderr.txt")),
            stdout_rel: rel("stdout"),
            stderr_rel: rel("stderr"),
        }
    }
}

fn blank_result(spec: &CommandSpec, logs: &LogFiles) -> CmdResult {
    CmdResult {
        stdout_path: logs.stdout_rel.clone(),
        stderr_path: logs.stderr_rel.clone(),
        ..CmdResult::new(spec.argv.clone())
    }
}

/// Runs a command to completion or timeout. Never panics and never returns an error: every
/// way a command can go wrong is a field of the CmdResult.
pub fn run(spec: &CommandSpec, logs: &LogFiles) -> CmdResult {
    let start = Instant::now();
    let mut result = blank_result(spec, logs);
    let (out_file, err_file) = match (File::create(&logs.stdout), File::create(&logs.stderr)) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => {
            result.spawn_error = Some(format!("cannot create log file: {e}"));
            return result;
        }
    };
    if spec.argv.is_empty() {
        result.spawn_error = Some("empty command".to_string());
        return result;
    }
    let mut confined = match confine(spec, &mut result) {
        Ok(c) => c,
        Err(()) => return result,
    };
    let argv: Vec<OsString> = match &confined {
        Some(p) => p.argv.clone(),
        None => spec.argv.iter().map(OsString::from).collect(),
    };
    let Some((program, args)) = argv.split_first() else {
        result.spawn_error = Some("empty command".to_string());
        return result;
    };
    become_subreaper();
    let cmd = command(spec, program, args, confined.as_ref());
    // Spawning and registering happen under the lock the orphan sweep takes, so a sweep
    // never mistakes a command being started for a leftover.
    let spawned = {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        in_a_session_of_its_own(cmd).inspect(|c| live.push(c.id() as i32))
    };
    if let Some(p) = &mut confined {
        p.started();
    }
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            result.spawn_error = Some(spawn_error_text(&program.to_string_lossy(), &e));
            result.duration_seconds = start.elapsed().as_secs_f64();
            return result;
        }
    };
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let readers = [
        child
            .stdout
            .take()
            .map(|p| drain(p, out_file, done_tx.clone())),
        child
            .stderr
            .take()
            .map(|p| drain(p, err_file, done_tx.clone())),
    ];
    drop(done_tx);
    if let (Some(bytes), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let group = Pid::from_child(&child);
    let _live = LiveChild(group.as_raw_nonzero().get());
    // A kill here leaves a running command no file names: recover finds it by its marker.
    crate::crash::point(&format!("spawned_{}", spec.label));
    if let Some(file) = &spec.pgid_file {
        note_group(file, Some(group));
    }
    crate::crash::point(&format!("during_{}", spec.label));
    let (status, ending) = wait_with_timeout(child, group, spec.timeout);
    // Leftovers in the group (backgrounded grandchildren) do not outlive the command, nor do
    // descendants that left the group: as subreaper we inherit them when their parent dies.
    let leftovers = kill_process_group(group, Signal::KILL).is_ok();
    sweep_orphans(leftovers);
    if let Some(file) = &spec.pgid_file {
        note_group(file, None);
    }
    let drain_deadline = Instant::now() + DRAIN_GRACE;
    let mut finished = 0;
    while finished < readers.iter().flatten().count() {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break; // a process outside the group still holds a pipe: stop waiting for it
        }
        finished += 1;
    }
    result.duration_seconds = start.elapsed().as_secs_f64();
    result.timed_out = ending == Ending::TimedOut;
    result.interrupted = ending == Ending::Interrupted;
    match status {
        Some(s) => {
            result.exit_code = s.code();
            result.signal = s.signal();
        }
        None => result.spawn_error = Some("lost track of the process".to_string()),
    }
    for handle in readers.into_iter().flatten() {
        if handle.is_finished() {
            let _ = handle.join();
        }
    }
    result.stdout_bytes = file_len(&logs.stdout);
    result.stderr_bytes = file_len(&logs.stderr);
    if let Some(p) = confined {
        confined_ended(p, logs, &mut result);
    }
    result.stdout_trunc = excerpt_of_file(&logs.stdout);
    result.stderr_trunc = excerpt_of_file(&logs.stderr);
    result
}

/// The process to start: `program` (the command's own, or its sandbox's) with the spec's
/// folder, process group, pipes and environment (the sandbox's on top).
fn command(
    spec: &CommandSpec,
    program: &OsString,
    args: &[OsString],
    confined: Option<&crate::sandbox::Prepared>,
) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&spec.cwd)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in &spec.env_remove {
        cmd.env_remove(name);
    }
    // A batch's baseline is for its own runs, not for a `git factory` a check starts.
    cmd.env_remove(crate::env::BATCH_BASELINE);
    for (k, v) in &spec.env_set {
        cmd.env(k, v);
    }
    for (k, v) in confined.iter().flat_map(|p| &p.env_set) {
        cmd.env(k, v);
    }
    // Which harness started it: recover finds a killed harness's commands by it (SPEC §7).
    cmd.env(crate::harness::VAR, crate::harness::marker());
    // Checks and agents never reach the user's ssh or gpg agent (SPEC §6.1).
    crate::secrets::keep_from_signing(&mut cmd);
    cmd
}

/// Starts `cmd` as the leader of a session (and so a process group) of its own: it has no
/// controlling terminal, so nothing it runs can open the user's terminal (`/dev/tty`) and type
/// a command line into it (`TIOCSTI`) for the user's shell to run after we return; and its
/// group (its pid) is what a timeout, an interruption and `recover` stop, as before. Nothing
/// a command needs comes from the terminal: its stdin is null or given bytes, and Ctrl-C
/// reaches it through the harness, which stops its group.
fn in_a_session_of_its_own(cmd: Command) -> io::Result<Child> {
    use process_wrap::std::{ProcessSession, StdCommandWrap};
    let child = StdCommandWrap::from(cmd).wrap(ProcessSession).spawn()?;
    Ok(child.into_inner())
}

/// Prepares the sandbox of a `--sandbox` command; `Err` when it cannot start (the reason is
/// then in `result.spawn_error`).
fn confine(
    spec: &CommandSpec,
    result: &mut CmdResult,
) -> Result<Option<crate::sandbox::Prepared>, ()> {
    let Some(sandbox) = &spec.sandbox else {
        return Ok(None);
    };
    result.sandbox = Some(sandbox.backend.name().to_string());
    // A program that is not there is the command's own failure, told before any sandbox
    // starts (inside, it would look like the sandbox's).
    if let Some(missing) = not_on_path(&spec.argv[0], &spec.cwd, &spec.env_set) {
        result.spawn_error = Some(missing);
        return Err(());
    }
    match sandbox.prepare(&spec.cwd, &spec.argv) {
        Ok(p) => Ok(Some(p)),
        Err(e) => {
            result.spawn_error = Some(format!(
                "the sandbox ({}) cannot be set up: {e}",
                sandbox.backend.name()
            ));
            Err(())
        }
    }
}

/// After a confined command: a sandbox that never started it makes the result a
/// `spawn_error` naming the sandbox (with its own complaint from stderr), never the
/// command's exit code; read-only files it put back are noted.
fn confined_ended(p: crate::sandbox::Prepared, logs: &LogFiles, result: &mut CmdResult) {
    let finished = p.finish(result.exit_code);
    if let Some(why) = finished.not_started {
        let said = excerpt_of_file(&logs.stderr);
        let said = said
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        result.spawn_error = Some(if said.is_empty() {
            why
        } else {
            format!("{why}: {}", said.trim())
        });
        result.exit_code = None;
    }
    result.sandbox_put_back = (finished.put_back.iter())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    for failed in finished.not_put_back {
        result
            .sandbox_put_back
            .push(format!("not put back: {failed}"));
    }
}

/// `Some(why)` when `program` names no executable file: a path that is not one, or a bare
/// name found in no folder of the `PATH` the command gets.
fn not_on_path(program: &str, cwd: &Path, env_set: &[(String, String)]) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let path = cwd.join(program);
        return (!runnable(&path))
            .then(|| spawn_error_text(program, &io::ErrorKind::NotFound.into()));
    }
    let path = (env_set.iter().rev().find(|(k, _)| k == "PATH"))
        .map(|(_, v)| OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    let found = std::env::split_paths(&path).any(|d| runnable(&d.join(program)));
    (!found).then(|| spawn_error_text(program, &io::ErrorKind::NotFound.into()))
}

fn spawn_error_text(program: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("{program}: command not found"),
        io::ErrorKind::PermissionDenied => {
            format!("{program}: permission denied (not executable?)")
        }
        _ => format!("{program}: {e}"),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Exited,
    TimedOut,
    Interrupted,
}

/// Waits on a thread that blocks in `wait()`, so a command's end is seen at once; the timeout
/// and interruption are checked every 50 ms meanwhile.
fn wait_with_timeout(
    child: Child,
    group: Pid,
    timeout: Duration,
) -> (Option<std::process::ExitStatus>, Ending) {
    let (tx, rx) = mpsc::channel();
    let mut child = child;
    thread::spawn(move || {
        let _ = tx.send(child.wait().ok());
    });
    let deadline = Instant::now() + timeout;
    let ending = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(50))) {
            Ok(status) => return (status, Ending::Exited),
            Err(mpsc::RecvTimeoutError::Disconnected) => return (None, Ending::Exited),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if crate::interrupt::requested() || crate::interrupt::halted() {
            break Ending::Interrupted;
        }
        if Instant::now() >= deadline {
            break Ending::TimedOut;
        }
    };
    let _ = kill_process_group(group, Signal::TERM);
    if let Ok(status) = rx.recv_timeout(KILL_GRACE) {
        let _ = kill_process_group(group, Signal::KILL);
        return (status, ending);
    }
    let _ = kill_process_group(group, Signal::KILL);
    (rx.recv().ok().flatten(), ending)
}

/// Notes the running command's process group in `file`, or (`None`, once the group is
/// stopped) that none runs: an empty file. The file is the run's, rewritten in place for each
/// of its commands — made once, not made and removed per command — and removed with the
/// run's session; [`stop_noted_group`] reads an empty one as nothing to stop.
fn note_group(file: &Path, group: Option<Pid>) {
    let text = group.map_or(String::new(), |g| g.as_raw_nonzero().get().to_string());
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(group.is_some())
        .truncate(true)
        .open(file)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if written.is_err() && group.is_none() {
        // A file that cannot be emptied must not name a stopped group whose number the
        // kernel may hand out again.
        let _ = std::fs::remove_file(file);
    }
}

/// Stops a command group noted in `file` by a harness that was killed, if it still runs.
pub fn stop_noted_group(file: &Path) {
    if let Some(pid) = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .filter(|&p| p > 0 && crate::harness::started_by_a_gone_harness(p))
        .and_then(Pid::from_raw)
    {
        let _ = kill_process_group(pid, Signal::KILL);
    }
    let _ = std::fs::remove_file(file);
}

/// Commands running now (their pids are their process groups): the orphan sweep spares them,
/// so commands run side by side never stop each other.
static LIVE: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

struct LiveChild(i32);

impl Drop for LiveChild {
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|p| *p != self.0);
        }
    }
}

/// Makes this process the reaper of its orphaned descendants, so a command's daemon that left
/// its process group (`setsid`) is re-parented here instead of to init, and can be stopped.
fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    });
}

/// Processes that may be our children: the kernel's list in `/proc/self/task/*/children`
/// when it offers one, else every process (the caller checks each one's parent).
fn candidate_children() -> Vec<i32> {
    let parse = |text: &str| -> Vec<i32> {
        text.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let listed: Option<Vec<i32>> = std::fs::read_dir("/proc/self/task").ok().and_then(|tasks| {
        let lists: Vec<String> = tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .collect();
        (!lists.is_empty()).then(|| lists.iter().flat_map(|l| parse(l)).collect())
    });
    listed.unwrap_or_else(|| {
        std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// A process as the sweep sees it, from `/proc/<pid>/stat`.
struct ProcStat {
    parent: i32,
    group: i32,
    /// Exited, waiting to be reaped: its children were re-parented when it exited.
    zombie: bool,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name: state, ppid, pgrp, …
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let zombie = fields.next()? == "Z";
    Some(ProcStat {
        parent: fields.next()?.parse().ok()?,
        group: fields.next()?.parse().ok()?,
        zombie,
    })
}

/// How long the sweep keeps at it when every round still finds leftovers (a fork bomb
/// outrunning it): far longer than any bounded one needs, never forever.
const SWEEP_LIMIT: Duration = Duration::from_secs(30);

/// Kills and reaps every process re-parented to us after a command ended, and every
/// descendant of those, however deep: a chain of processes each in a session of its own
/// would otherwise outlive the run, a generation re-parented per round, keeping what rights
/// its sandbox gave it to the tree. No child is expected to live past its command, so any
/// child here is a leftover. `settle`: processes were just killed, so give their children a
/// moment to be re-parented.
fn sweep_orphans(settle: bool) {
    use rustix::process::{waitid, WaitId, WaitIdOptions};
    // No child at all (the usual case, checked without reaping anything): nothing to sweep.
    if waitid(
        WaitId::All,
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    )
    .is_err()
    {
        return;
    }
    let deadline = Instant::now() + SWEEP_LIMIT;
    for round in 0.. {
        let found = sweep_round();
        if (!found && (round > 0 || !settle)) || Instant::now() > deadline {
            return;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// One round of [`sweep_orphans`]: whether any leftover still ran.
fn sweep_round() -> bool {
    use rustix::process::{waitpid, WaitOptions};
    let me = rustix::process::getpid().as_raw_nonzero().get();
    // Children in our own process group, and the harness's own git that runs in a group of
    // its own (`git worktree add` while a race's candidates run), are helpers another thread
    // started, never a command's leftovers; and killing our group would kill us.
    let own_group = rustix::process::getpgrp().as_raw_nonzero().get();
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let mut leftovers = Vec::new();
    let mut found = false;
    for pid in candidate_children() {
        let Some(stat) = proc_stat(pid) else {
            continue;
        };
        let spared = live.contains(&pid)
            || live.contains(&stat.group)
            || stat.group == own_group
            || u32::try_from(pid).is_ok_and(crate::git::worktree::is_helper);
        if stat.parent == me && !spared {
            // An exited leftover (a sandbox's own process, whose parent ended first) is
            // only reaped: nothing of it is left to settle.
            found |= !stat.zombie;
            leftovers.push((pid, stat));
        }
    }
    if found {
        // Their descendants first, all at once (a killed parent's children would only come
        // back to us a generation at a time): each is killed, so none forks again.
        let roots: Vec<i32> = leftovers.iter().map(|(p, _)| *p).collect();
        for pid in descendants_of(&roots) {
            if let Some(p) = Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(p, Signal::KILL);
            }
        }
    }
    for (pid, stat) in leftovers {
        if let Some(p) = Pid::from_raw(stat.group) {
            let _ = kill_process_group(p, Signal::KILL);
        }
        if let Some(p) = Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(p, Signal::KILL);
            let _ = waitpid(Some(p), WaitOptions::NOHANG);
        }
    }
    drop(live);
    found
}

/// Every process below `roots` (not the roots), from one walk of `/proc`.
fn descendants_of(roots: &[i32]) -> Vec<i32> {
    let mut children: std::collections::HashMap<i32, Vec<i32>> = Default::default();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if let Some(stat) = proc_stat(pid) {
            children.entry(stat.parent).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut todo: Vec<i32> = roots.to_vec();
    let mut seen: std::collections::HashSet<i32> = roots.iter().copied().collect();
    while let Some(pid) = todo.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            if seen.insert(child) {
                out.push(child);
                todo.push(child);
            }
        }
    }
    out
}

/// Copies a pipe to a file up to the cap, then keeps reading (so the writer never blocks)
/// but discards, after writing a marker.
fn drain(
    mut pipe: impl Read + Send + 'static,
    mut file: File,
    done: mpsc::Sender<()>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut written: u64 = 0;
        let mut capped = false;
        loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if capped {
                continue;
            }
            let room = (OUTPUT_CAP - written) as usize;
            let take = n.min(room);
            if file.write_all(&buf[..take]).is_err() {
                capped = true;
                continue;
            }
            written += take as u64;
            if take < n {
                let _ = file.write_all(
                    format!(
                        "\n[git-factory: output capped at {} MiB]\n",
                        OUTPUT_CAP >> 20
                    )
                    .as_bytes(),
                );
                capped = true;
            }
        }
        let _ = done.send(());
    })
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The last 200 lines or 8,000 characters of a log, whichever is shorter.
pub fn excerpt_of_file(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let window = (EXCERPT_CHARS as u64) * 4;
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(window)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    // The keys are scrubbed from the commands' environment; redacted here too, in case a
    // command found one elsewhere.
    excerpt(&crate::secrets::redact(&String::from_utf8_lossy(&buf)))
}

pub fn excerpt(text: &str) -> String {
    tail_chars(&tail_lines(text, EXCERPT_LINES), EXCERPT_CHARS)
}

pub fn tail_lines(text: &str, n: usize) -> String {
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let starts: Vec<usize> = trimmed.match_indices('\n').map(|(i, _)| i + 1).collect();
    if starts.len() < n {
        return text.to_string();
    }
    text[starts[starts.len() - n]..].to_string()
}

pub fn tail_chars(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        return text.to_string();
    }
    text.chars().skip(count - n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(argv: &[&str], timeout_ms: u64) -> CommandSpec {
        CommandSpec {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: std::env::temp_dir(),
            timeout: Duration::from_millis(timeout_ms),
            ..CommandSpec::default()
        }
    }

    fn go(s: &CommandSpec) -> CmdResult {
        let dir = tempfile::tempdir().expect("tempdir");
        let logs = LogFiles::in_dir(dir.path(), "a", "x_0");
        run(s, &logs)
    }

    #[test]
    fn exit_codes_and_output() {
        let r = go(&spec(&["sh", "-c", "echo out; echo err >&2; exit 3"], 5000));
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(r.stdout_trunc, "out\n");
        assert_eq!(r.stderr_trunc, "err\n");
        assert_eq!(r.stdout_path, "a/x_0_stdout.txt");
    }

    #[test]
    fn spawn_errors_are_results() {
        let r = go(&spec(&["definitely-not-a-program-xyz"], 5000));
        assert!(r.spawn_error.as_deref().unwrap_or("").contains("not found"));
        assert!(!r.succeeded());
    }

    #[test]
    fn timeout_and_signal_are_told_apart() {
        let r = go(&spec(&["sleep", "5"], 100));
        assert!(r.timed_out);
        let r = go(&spec(&["sh", "-c", "kill -9 $$"], 5000));
        assert_eq!(r.signal, Some(9));
        assert!(!r.timed_out);
    }

    #[test]
    fn excerpt_keeps_the_tail() {
        let text: String = (0..300).map(|i| format!("{i}\n")).collect();
        let e = excerpt(&text);
        assert!(e.starts_with("100\n") && e.ends_with("299\n"));
        assert_eq!(tail_chars("abcdef", 3), "def");
    }
}
