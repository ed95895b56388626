//! `git factory --version`: what this binary is — its version, the commit it was built from
//! (`build.rs`; `unknown` when built from the crates.io package or any copy without git), the
//! target it was built for, and the sandbox backends built in — for a person, or as JSON for
//! scripts (`--version --json`), so a fleet can check what it downloaded.

use crate::error::Exit;
use crate::ui::Ui;

/// The commit `build.rs` read from this package's checkout, or `unknown`.
pub const COMMIT: &str = env!("GIT_FACTORY_COMMIT");
/// The target triple it was built for (a release binary says `…-linux-musl`).
pub const TARGET: &str = env!("GIT_FACTORY_TARGET");

/// The `--sandbox` backends this build has (SPEC §7.1): both, on Linux, the only system it
/// builds for (the confinement itself is probed on the machine when a run asks for it).
pub const SANDBOX_BACKENDS: &[&str] = if cfg!(target_os = "linux") {
    &["bwrap", "landlock"]
} else {
    &[]
};

/// Cargo features built in: `test-hooks` (crash points for the tests) never in a release.
fn features() -> Vec<&'static str> {
    let mut on = Vec::new();
    if cfg!(feature = "test-hooks") {
        on.push("test-hooks");
    }
    on
}

/// The `--version --json` object (keys sorted, as all our JSON).
pub fn json() -> serde_json::Value {
    serde_json::json!({
        "name": env!("CARGO_PKG_NAME"),
        "version": env!("CARGO_PKG_VERSION"),
        "commit": COMMIT,
        "target": TARGET,
        "sandbox_backends": SANDBOX_BACKENDS,
        "features": features(),
    })
}

/// The lines `--version` prints.
pub fn text() -> String {
    let backends = if SANDBOX_BACKENDS.is_empty() {
        "none (not built for Linux)".to_string()
    } else {
        SANDBOX_BACKENDS.join(", ")
    };
    let mut out = format!(
        "{} {}\ncommit: {COMMIT}\ntarget: {TARGET}\nsandbox backends: {backends}\n",
        env!("CARGO_PKG_NAME"),
        env!("CARGO_PKG_VERSION"),
    );
    let features = features();
    if !features.is_empty() {
        out.push_str(&format!("features: {}\n", features.join(", ")));
    }
    out
}

pub fn cmd_version(ui: &Ui, as_json: bool) -> Exit {
    if as_json {
        ui.out(format!("{}\n", json()));
    } else {
        ui.out(text());
    }
    Exit::Success
}
