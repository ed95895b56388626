//! A real interactive bash in a tmux pane, for what only a terminal shows: completion
//! through git's own completion, status lines on a narrow terminal.

use super::TestRepo;
use std::path::Path;

/// An interactive bash in a tmux pane with bash-completion and git's own completion, the
/// committed completion file installed where the README puts it, and `git-factory` on PATH.
/// None (a skip) only off CI when tmux or bash-completion is not installed.
pub struct Pane {
    socket: std::path::PathBuf,
}

const BASH_COMPLETION: &str = "/usr/share/bash-completion/bash_completion";

impl Pane {
    pub fn start(r: &TestRepo, width: u16) -> Option<Pane> {
        let have_tmux = std::process::Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have_tmux || !Path::new(BASH_COMPLETION).exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must install tmux and bash-completion (see .ci/run)"
            );
            eprintln!("skipped: tmux or bash-completion is not installed");
            return None;
        }
        let completions = r.home.join(".local/share/bash-completion/completions");
        std::fs::create_dir_all(&completions).expect("mkdir");
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("completions/git-factory.bash"),
            completions.join("git-factory"),
        )
        .expect("install the completion file");
        let bin = assert_cmd::cargo::cargo_bin("git-factory");
        Pane::launch(r, width, bin.parent().expect("the binary's folder"))
    }

    /// As [`Pane::start`], but with what is already installed in `r.home`: `git-factory` from
    /// `bin_dir` and whatever completion file lies where bash-completion looks.
    pub fn start_installed(r: &TestRepo, width: u16, bin_dir: &Path) -> Option<Pane> {
        let have_tmux = std::process::Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have_tmux || !Path::new(BASH_COMPLETION).exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must install tmux and bash-completion (see .ci/run)"
            );
            eprintln!("skipped: tmux or bash-completion is not installed");
            return None;
        }
        Pane::launch(r, width, bin_dir)
    }

    fn launch(r: &TestRepo, width: u16, bin_dir: &Path) -> Option<Pane> {
        let rc = r.home.join(".bashrc");
        std::fs::write(
            &rc,
            format!(
                "PS1='$ '\nexport PATH={}:$PATH\nsource {BASH_COMPLETION}\ncd {}\n",
                bin_dir.display(),
                r.root.display()
            ),
        )
        .expect("write .bashrc");
        let socket = r.tmp.path().join("tmux.sock");
        let status = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-x"])
            .arg(width.to_string())
            .args(["-y", "50"])
            .arg(format!("bash --noprofile --rcfile {} -i", rc.display()))
            .env("HOME", &r.home)
            .env("TERM", "xterm")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env_remove("XDG_DATA_HOME")
            .env_remove("BASH_COMPLETION_USER_DIR")
            .env_remove("NO_COLOR")
            .env_remove("GIT_PAGER")
            .env_remove("PAGER")
            .status()
            .expect("tmux starts");
        assert!(status.success());
        let pane = Pane { socket };
        pane.wait_for("$ ");
        Some(pane)
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types a command line and presses Enter.
    pub fn type_line(&self, line: &str) {
        self.tmux(&["send-keys", "-t", "0", "-l", line]);
        self.tmux(&["send-keys", "-t", "0", "Enter"]);
    }

    /// Every row the pane has shown, its scrollback included, as rows (not joined).
    pub fn history(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-S", "-", "-t", "0"])
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-t", "0"])
    }

    /// Waits (bounded) until the screen shows `text`; returns the screen either way.
    pub fn wait_for(&self, text: &str) -> String {
        // Up to 30 s: a loaded machine loads bash-completion slowly; a pass returns at once.
        for _ in 0..600 {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.screen()
    }

    /// Types `line`, presses TAB twice, and returns the screen once `expect` shows (or not).
    pub fn complete(&self, line: &str, expect: &str) -> String {
        // An empty prompt first: a completion still running on a loaded machine can swallow
        // one C-c, and the next step's words would then go on the previous line.
        for _ in 0..100 {
            self.tmux(&["send-keys", "-t", "0", "C-c"]);
            std::thread::sleep(std::time::Duration::from_millis(100));
            let screen = self.screen();
            let last = screen.lines().rev().find(|l| !l.trim().is_empty());
            if last.is_some_and(|l| l.trim() == "$") {
                break;
            }
        }
        self.tmux(&["send-keys", "-t", "0", "clear", "Enter"]);
        // A clean screen first, so nothing of the previous step can match.
        for _ in 0..200 {
            if self.screen().trim() == "$" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.tmux(&["send-keys", "-t", "0", "-l", line]);
        self.tmux(&["send-keys", "-t", "0", "Tab"]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        self.tmux(&["send-keys", "-t", "0", "Tab"]);
        let s = self.wait_for(expect);
        if s.contains(expect) {
            return s;
        }
        // The first TAB may have arrived while bash was still loading the completion code.
        self.tmux(&["send-keys", "-t", "0", "Tab"]);
        std::thread::sleep(std::time::Duration::from_millis(200));
        self.tmux(&["send-keys", "-t", "0", "Tab"]);
        self.wait_for(expect)
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}
