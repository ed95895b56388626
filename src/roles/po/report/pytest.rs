//! pytest's results (SPEC §3.9), through the harness's own plugin: one JSON line per test
//! phase that says something, folded here into one status per node id.

use super::{bound, first_line, Folded};
use crate::store::records::TestStatus;
use serde::Deserialize;

/// The plugin's source, written into the private folder as `<MODULE>.py`.
pub const PLUGIN: &str = include_str!("plugin.py");
/// The module name given to `-p`: unlikely to clash with anything of the user's.
pub const MODULE: &str = "_git_factory_tests";

#[derive(Deserialize)]
struct Line {
    id: String,
    when: String,
    outcome: String,
    #[serde(default)]
    xfail: bool,
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    text: String,
}

/// The status one phase's line says.
fn status(l: &Line) -> TestStatus {
    match (l.when.as_str(), l.outcome.as_str(), l.xfail) {
        ("call", "passed", true) => TestStatus::Xpassed,
        ("call", "passed", false) => TestStatus::Passed,
        ("call", "failed", _) => TestStatus::Failed,
        (_, "skipped", true) => TestStatus::Xfailed,
        (_, "skipped", false) => TestStatus::Skipped,
        // A failing setup, teardown or collection is an error of the test, not a failure.
        (_, "failed", _) => TestStatus::Error,
        _ => TestStatus::Passed,
    }
}

/// Folds the plugin's lines (several pytest runs may have appended) into tests.
pub fn parse(text: &str, out: &mut Folded) {
    for raw in text.lines() {
        let Ok(l) = serde_json::from_str::<Line>(raw) else {
            continue;
        };
        let st = status(&l);
        let message = (!l.message.is_empty()).then(|| first_line(&l.message));
        let excerpt = (!l.text.is_empty()).then(|| bound(&l.text));
        let call = l.when == "call";
        out.put(&l.id, st, l.duration.filter(|_| call), message, excerpt);
    }
}
