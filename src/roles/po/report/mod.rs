//! Per-test reports (SPEC §3.9): where a check command's tests come from, one parser per
//! format. pytest reports through a plugin of ours loaded from a private folder; `go test
//! -json`, TAP and libtest's lines are recognised on stdout. A command that reports nothing
//! costs one short read of its stdout's head, and is judged by its exit code alone.

mod gotest;
pub mod junit;
mod libtest;
pub mod pytest;
mod tap;

use crate::store::records::{CommandTests, TestResult, TestStatus};
use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bound on a test's failure excerpt.
const EXCERPT_CHARS: usize = 1500;
/// How much of stdout is read to recognise a stream's shape.
const SNIFF_BYTES: u64 = 64 * 1024;

/// The variable naming the pytest plugin's output file for one command.
pub const REPORT_VAR: &str = "GIT_FACTORY_TEST_REPORT";
/// How a run's private folder begins (then the run id and its repository, see [`run_folder_prefix`]).
pub const RUN_PREFIX: &str = "git-factory-tests.";
/// Names a file of pytest node ids: the plugin deselects every other test (a re-run).
pub const ONLY_VAR: &str = "GIT_FACTORY_TEST_ONLY";
/// A first line of that file asking the plugin to collect only the named tests' files too:
/// re-running one test then costs that test, not the whole suite's collection.
pub const NARROW: &str = "#narrow";

/// The private folder of a run's checks (or of one `verify`/`reverify`): the pytest plugin
/// and the files it writes, in the system's temporary folder under a random name — outside
/// the tree (a check walking the tree, `compileall .` say, never meets it) and at no path the
/// tree's code can know ahead. Under `--sandbox` it is the one folder outside the tree the
/// checks may write. Made on first use, once for all the run's passes, and removed when
/// dropped: a run whose checks never start pays nothing for it (SPEC §3.9 Speed).
pub struct Private {
    /// `None` until first use; `Some(None)` when it could not be made (exit codes only).
    dir: std::sync::OnceLock<Option<tempfile::TempDir>>,
    /// How the folder's name begins.
    prefix: String,
    next: AtomicUsize,
    /// `factory.testReport`: JUnit files' globs, relative to the tree root.
    pub junit: Vec<String>,
}

/// Where the private folders are made when the system has it (FHS: temporary files kept
/// between reboots, so never a tmpfs a sandbox puts over /tmp).
const SHARED_TMP: &str = "/var/tmp";

/// The folder the private folders are made in.
pub fn shared_tmp() -> PathBuf {
    let shared = Path::new(SHARED_TMP);
    if shared.is_dir() {
        shared.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The name a run's private folder starts with: the run and its repository, so `recover` of
/// one clone never removes the folder of a live run of the same id in another.
pub fn run_folder_prefix(factory_dir: &Path, run_id: &str) -> String {
    let repo = crate::identity::sha256_hex(factory_dir.as_os_str().as_encoded_bytes());
    format!("{RUN_PREFIX}{run_id}.{}.", &repo[..12])
}

impl Private {
    pub fn new(junit: Vec<String>) -> Private {
        Self::named(junit, "git-factory-tests-".to_string())
    }

    /// The private folder of run `run_id` of the repository whose factory folder is
    /// `factory_dir`, named after both ([`run_folder_prefix`]): a run killed with SIGKILL
    /// cannot remove it, so `recover` does. Outside the repository, where no check's
    /// `compileall .` or tree walk meets the plugin.
    pub fn for_run(junit: Vec<String>, factory_dir: &Path, run_id: &str) -> Private {
        Self::named(junit, run_folder_prefix(factory_dir, run_id))
    }

    fn named(junit: Vec<String>, prefix: String) -> Private {
        Private {
            dir: std::sync::OnceLock::new(),
            prefix,
            next: AtomicUsize::new(0),
            junit,
        }
    }

    /// The folder, made with the plugin in it on first use; `None` when it cannot be made
    /// (the commands are then judged by their exit codes).
    pub fn path(&self) -> Option<&Path> {
        self.dir
            .get_or_init(|| {
                // Not in /tmp: a sandboxed check gets a /tmp of its own, and a folder granted
                // to it there would show in that /tmp's listing.
                let dir = tempfile::Builder::new()
                    .prefix(&self.prefix)
                    .tempdir_in(shared_tmp())
                    .ok()?;
                crate::git::nofollow::rewrite_own(
                    &dir.path().join(plugin_file()),
                    pytest::PLUGIN.as_bytes(),
                )
                .ok()?;
                Some(dir)
            })
            .as_ref()
            .map(tempfile::TempDir::path)
    }

    /// Before a pass: the folder holds the plugin and nothing else. A check of an earlier
    /// pass could write here (under `--sandbox` the folder is the checks' to write), and the
    /// folder is first on every later check's `PYTHONPATH`: a `sitecustomize.py` or a module
    /// it left would run in the next attempt's checks, though no diff of that attempt holds
    /// it. So whatever else is there goes, and a changed plugin is put back. Nothing when the
    /// folder is not made.
    pub fn fresh_pass(&self) {
        let Some(Some(dir)) = self.dir.get() else {
            return;
        };
        use crate::git::nofollow;
        use std::io::Read as _;
        let plugin = dir.path().join(plugin_file());
        remove_all_in(dir.path(), Some(&plugin));
        // A link (symbolic, or a second name a check could write through later) is replaced.
        let intact =
            nofollow::open_own(&plugin, rustix::fs::OFlags::RDONLY).is_some_and(|mut f| {
                let mut now = Vec::new();
                f.read_to_end(&mut now).is_ok() && now == pytest::PLUGIN.as_bytes()
            });
        if !intact {
            let _ = nofollow::rewrite_own(&plugin, pytest::PLUGIN.as_bytes());
        }
    }

    /// A fresh file for one command's pytest results (a file of that name planted by an
    /// earlier check is removed first); `None` without the folder.
    pub fn next_file(&self, stem: &str) -> Option<PathBuf> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let file = self.path()?.join(format!("{stem}-{n}.jsonl"));
        let _ = std::fs::remove_file(&file);
        Some(file)
    }

    /// Writes `text` to a new file `name` in the folder: whatever a check left under that
    /// name (a link to a file of the user's, say) is removed first, never written through.
    pub fn write_new(&self, name: &str, text: &str) -> Option<PathBuf> {
        let file = self.path()?.join(name);
        crate::git::nofollow::rewrite_own(&file, text.as_bytes()).ok()?;
        Some(file)
    }

    /// The environment that loads the plugin, writing to `file`: `-p` appended to the
    /// `PYTEST_ADDOPTS` already set (the user's come first), the folder put before the user's
    /// `PYTHONPATH`.
    pub fn add_env(&self, env: &mut Vec<(String, String)>, file: &Path) {
        let load = format!("-p {}", pytest::MODULE);
        match env.iter_mut().find(|(k, _)| k == "PYTEST_ADDOPTS") {
            Some((_, v)) => *v = format!("{v} {load}"),
            None => env.push((
                "PYTEST_ADDOPTS".to_string(),
                match crate::env::pytest_addopts() {
                    Some(v) => format!("{v} {load}"),
                    None => load,
                },
            )),
        }
        let dir = (self.path().unwrap_or(Path::new("")))
            .to_string_lossy()
            .into_owned();
        let path = match crate::env::pythonpath().filter(|p| !p.is_empty()) {
            Some(user) => format!("{dir}:{user}"),
            None => dir,
        };
        env.push(("PYTHONPATH".to_string(), path));
        env.push((REPORT_VAR.to_string(), file.to_string_lossy().into_owned()));
    }
}

/// Removes everything in `dir` but the regular file `keep`, whatever modes a check gave it
/// (a folder made unwritable would otherwise keep what it holds). Links are removed, never
/// followed.
fn remove_all_in(dir: &Path, keep: Option<&Path>) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_file() && keep == Some(path.as_path()) {
            continue;
        }
        if meta.is_dir() {
            remove_all_in(&path, None);
            let _ = std::fs::remove_dir(&path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The plugin's file name in the private folder.
fn plugin_file() -> String {
    format!("{}.py", pytest::MODULE)
}

/// Tests folded by id, in the order first seen: each id counts once per command.
#[derive(Default)]
pub struct Folded {
    tests: Vec<TestResult>,
    index: HashMap<String, usize>,
}

impl Folded {
    /// How many distinct tests it holds.
    pub fn len(&self) -> usize {
        self.tests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tests.is_empty()
    }

    /// Records a result for `id`: a later one replaces an earlier one, except that a red
    /// result stays (a test that failed in one of a command's runs failed the command).
    pub fn put(
        &mut self,
        id: &str,
        status: TestStatus,
        duration: Option<f64>,
        message: Option<String>,
        excerpt: Option<String>,
    ) {
        match self.index.get(id) {
            Some(&i) => {
                let t = &mut self.tests[i];
                if duration.is_some() {
                    t.duration_seconds = duration;
                }
                if t.status.is_red() {
                    // It stays red; a later line may still say why.
                    if t.message.is_none() {
                        t.message = message;
                    }
                    if t.excerpt.is_none() {
                        t.excerpt = excerpt;
                    }
                    return;
                }
                t.status = status;
                if message.is_some() {
                    t.message = message;
                }
                if excerpt.is_some() {
                    t.excerpt = excerpt;
                }
            }
            None => {
                self.index.insert(id.to_string(), self.tests.len());
                self.tests.push(TestResult {
                    id: id.to_string(),
                    status,
                    duration_seconds: duration,
                    message,
                    excerpt,
                    flaky: false,
                    baseline: None,
                });
            }
        }
    }

    fn into_report(self, kind: &str, argv: &[String], source: &str) -> Option<CommandTests> {
        (!self.tests.is_empty()).then(|| CommandTests {
            kind: kind.to_string(),
            command: argv.to_vec(),
            source: source.to_string(),
            tests: self.tests,
            rerun: false,
        })
    }
}

/// The first line of a message, bounded.
pub(crate) fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.trim().chars().take(300).collect()
}

/// A bounded excerpt of a failure text (its head: where the assertion is named).
pub(crate) fn bound(text: &str) -> String {
    let text = text.trim_end();
    if text.chars().count() <= EXCERPT_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(EXCERPT_CHARS).collect();
    s.push_str("\n[…]");
    s
}

/// The most of one JUnit file that is read.
const JUNIT_BYTES: u64 = 64 * 1024 * 1024;

/// The tests one command reported: the pytest plugin's file when it wrote one, else the
/// JUnit files it wrote, else a stream recognised on stdout. `None`: no per-test report.
pub fn read(
    kind: &str,
    argv: &[String],
    pytest_file: Option<&Path>,
    junit_files: &[PathBuf],
    stdout: &Path,
    stdout_bytes: u64,
) -> Option<CommandTests> {
    if let Some(file) = pytest_file {
        if let Ok(text) = std::fs::read(file) {
            let mut folded = Folded::default();
            pytest::parse(&String::from_utf8_lossy(&text), &mut folded);
            let _ = std::fs::remove_file(file);
            if let Some(r) = folded.into_report(kind, argv, "pytest") {
                return Some(r);
            }
        }
    }
    if !junit_files.is_empty() {
        let mut folded = Folded::default();
        for f in junit_files {
            let mut bytes = Vec::new();
            if std::fs::File::open(f)
                .and_then(|h| h.take(JUNIT_BYTES).read_to_end(&mut bytes))
                .is_ok()
            {
                junit::parse(&String::from_utf8_lossy(&bytes), &mut folded);
            }
        }
        if let Some(r) = folded.into_report(kind, argv, "junit") {
            return Some(r);
        }
    }
    if stdout_bytes == 0 {
        return None;
    }
    let mut head = Vec::new();
    std::fs::File::open(stdout)
        .and_then(|f| f.take(SNIFF_BYTES).read_to_end(&mut head))
        .ok()?;
    let head = String::from_utf8_lossy(&head);
    let (source, parse): (&str, fn(&str, &mut Folded)) = if gotest::recognise(&head) {
        ("go", gotest::parse)
    } else if tap::recognise(&head) {
        ("tap", tap::parse)
    } else if libtest::recognise(&head) {
        ("libtest", libtest::parse)
    } else {
        return None;
    };
    let whole = if stdout_bytes <= SNIFF_BYTES {
        head.into_owned()
    } else {
        String::from_utf8_lossy(&std::fs::read(stdout).ok()?).into_owned()
    };
    let mut folded = Folded::default();
    parse(&whole, &mut folded);
    folded.into_report(kind, argv, source)
}

/// Each test's id and status, in the order read (what the parsers' tests compare).
#[cfg(test)]
fn statuses(f: &Folded) -> Vec<(&str, TestStatus)> {
    f.tests.iter().map(|t| (t.id.as_str(), t.status)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_lines_fold_into_one_status_per_node_id() {
        let text = r#"{"id":"t.py::a","when":"call","outcome":"passed","xfail":false,"duration":0.1,"message":"","text":""}
{"id":"t.py::b","when":"call","outcome":"failed","xfail":false,"duration":0.1,"message":"assert 1 == 2","text":"def test_b():\n>  assert 1 == 2\nE  assert 1 == 2"}
{"id":"t.py::c","when":"setup","outcome":"skipped","xfail":false,"message":"no"}
{"id":"t.py::d","when":"call","outcome":"skipped","xfail":true,"message":"known"}
{"id":"t.py::a","when":"teardown","outcome":"failed","xfail":false,"message":"boom"}
not json
{"id":"t.py::e","when":"call","outcome":"passed","xfail":true}"#;
        let mut f = Folded::default();
        pytest::parse(text, &mut f);
        let got = statuses(&f);
        assert_eq!(
            got,
            [
                ("t.py::a", TestStatus::Error),
                ("t.py::b", TestStatus::Failed),
                ("t.py::c", TestStatus::Skipped),
                ("t.py::d", TestStatus::Xfailed),
                ("t.py::e", TestStatus::Xpassed),
            ]
        );
        assert_eq!(f.tests[1].message.as_deref(), Some("assert 1 == 2"));
    }
}
