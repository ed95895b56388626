//! The attempt loop's side of the bytecode cache (SPEC §3.7): filled from the baseline, seen
//! through a view by sandboxed checks, and forgotten for every path a change or restore writes.

use crate::roles::po::pycache;
use crate::run::attempt::session::Session;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A compile's log folder (see [`Session::compile_logs`]): removed, with what the compile
/// wrote in it, when dropped; nothing to remove when nothing was compiled.
struct CompileLogs(PathBuf);

impl Drop for CompileLogs {
    fn drop(&mut self) {
        match std::fs::symlink_metadata(&self.0) {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir_all(&self.0);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(&self.0);
            }
            Err(_) => {}
        }
    }
}

impl Session<'_> {
    /// The bytecode cache as the next checks see it, with the entries of `changed` forgotten
    /// first: the shared cache itself, or under `--sandbox` a per-attempt view of it (dropped
    /// with the attempt) whose shared entries are read-only.
    pub(crate) fn check_cache(&mut self, changed: &[&str]) -> std::io::Result<PathBuf> {
        self.pycache.forget_with(
            &self.root,
            Some(self.repo),
            changed.iter().map(|p| p.as_bytes()),
        );
        let _ = self.pycache.create();
        if self.sandbox.is_none() {
            return Ok(self.pycache.dir().to_path_buf());
        }
        let scratch = self.plan.factory_dir.join("tmp");
        match &mut self.pyview {
            Some(view) => self.pycache.refresh(view, &scratch, &self.root)?,
            None => self.pyview = Some(self.pycache.view(&scratch, &self.root)?),
        }
        Ok(self
            .pyview
            .as_ref()
            .map_or(self.pycache.dir(), pycache::View::path)
            .to_path_buf())
    }

    /// Unsandboxed checks wrote the shared bytecode cache: what they compiled of the work tree
    /// goes (SPEC §3.7), and what they wrote for files outside it (a forged standard-library
    /// module would rule every later check, SPEC §7.1) goes too, compiled again by the
    /// harness from the real sources. Sandboxed checks wrote only their view, refreshed
    /// before the next.
    pub(crate) fn drop_checks_bytecode(&self, mark: Option<(i64, i64)>) {
        let Some(mark) = mark else {
            return;
        };
        self.pycache.drop_compiled_since(&self.root, mark);
        let dropped = self.pycache.drop_outside_since(&self.root, mark);
        crate::trace::mark("  bytecode the checks wrote dropped");
        if dropped.is_empty() {
            return;
        }
        let interpreter = self.interpreter();
        let logs = self.compile_logs();
        let how = self.compiler(&interpreter, &logs.0);
        let _ = self.pycache.relearn(dropped, &how);
    }

    /// Where a compile of the harness writes its logs: a folder named by this harness
    /// process, made by the compile itself only when something is compiled (usually nothing
    /// is), and removed when the returned value is dropped.
    fn compile_logs(&self) -> CompileLogs {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("pycache-logs-{}.{n}", crate::harness::marker());
        CompileLogs(self.plan.factory_dir.join("tmp").join(name))
    }

    /// The interpreter the checks use: the harness compiles with it, so the tags match.
    fn interpreter(&self) -> String {
        pycache::interpreter_of(&[
            &self.verify_cmds,
            &self.pass_to_pass,
            &self.fail_to_pass,
            &self.acceptance,
        ])
    }

    /// How the harness compiles into the cache for this session's checks.
    fn compiler<'a>(
        &'a self,
        interpreter: &'a str,
        log_dir: &'a std::path::Path,
    ) -> pycache::Compiler<'a> {
        pycache::Compiler {
            root: &self.root,
            interpreter,
            sandbox: self.sandbox.as_ref(),
            env_remove: &self.plan.env_remove,
            timeout: self.plan.timeout,
            log_dir,
        }
    }

    /// See [`PyCache::mark`]; `None` under `--sandbox` (nothing to drop).
    pub(crate) fn bytecode_mark(&self) -> Option<(i64, i64)> {
        self.sandbox
            .is_none()
            .then(|| self.pycache.mark())
            .flatten()
    }

    /// Fills the bytecode cache from the baseline's own files before any change is applied
    /// (`after: None`; SPEC §3.7), and under `--sandbox`, whose checks cannot write it, after
    /// an attempt's checks compiles the interpreter's modules they needed but the cache
    /// lacked (`after: Some(view)`).
    pub(crate) fn warm_pycache(&self, after: Option<&pycache::View>) {
        let Ok(tree) = self.baseline.tree() else {
            return;
        };
        let interpreter = self.interpreter();
        let logs = self.compile_logs();
        let how = self.compiler(&interpreter, &logs.0);
        let Some(view) = after else {
            // Incremental (SPEC §3.7): only what differs from the tree the cache holds.
            let runs_python = pycache::runs_python(&[
                &self.verify_cmds,
                &self.pass_to_pass,
                &self.fail_to_pass,
                &self.acceptance,
            ]);
            let list = (self.pycache).fill_list(self.repo, &tree, &self.root, runs_python);
            if list.is_empty() {
                return;
            }
            let progress = self
                .ui
                .progress("  PO filling the bytecode cache".to_string());
            let filled = (self.pycache).prefill(list, &how);
            progress.finish(self.ui, None);
            let started = filled.as_ref().is_some_and(|r| r.spawn_error.is_none());
            (self.pycache).filled(&self.root, tree.id(), started);
            if filled.is_some_and(|r| r.spawn_error.is_none() && !r.succeeded()) {
                self.ui.detail(
                    "    compileall reported errors in the baseline; the cache is partly cold",
                );
            }
            return;
        };
        let _ = (self.pycache).learn(view, &how);
    }
}
