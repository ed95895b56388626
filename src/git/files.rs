//! A regular file as git records it — its bytes and its executable bit — and a change as the
//! files it turns from one state into another. Shared by the roles that compute a change and
//! by the restore and the journal that put it back, so it lives on the floor below both.

/// A file's bytes and executable bit: all of a regular file that git records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub bytes: Vec<u8>,
    pub executable: bool,
}

/// One path's state before and after the change (`None` = absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutcome {
    pub path: String,
    pub before: Option<FileState>,
    pub after: Option<FileState>,
}

impl FileOutcome {
    pub fn action(&self) -> &'static str {
        match (&self.before, &self.after) {
            (None, Some(_)) => "create",
            (Some(_), None) => "delete",
            (Some(b), Some(a)) if b.bytes == a.bytes => "mode",
            _ => "modify",
        }
    }
}

/// The modes a checkout gives a plain and an executable file under this process's umask
/// (read once: the umask is not changed while we run).
pub fn checkout_modes() -> (u32, u32) {
    static MODES: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *MODES.get_or_init(|| {
        let umask = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022);
        (0o666 & !umask, 0o777 & !umask)
    })
}

/// `mode` with the executable bits set where it can be read (0600 → 0700), or cleared.
pub fn with_exec(mode: u32, executable: bool) -> u32 {
    let plain = mode & !0o111;
    if executable {
        plain | ((plain & 0o444) >> 2)
    } else {
        plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_bits_follow_the_read_bits() {
        assert_eq!(with_exec(0o600, true), 0o700);
        assert_eq!(with_exec(0o644, true), 0o755);
        assert_eq!(with_exec(0o755, false), 0o644);
        assert_eq!(with_exec(0o600, false), 0o600);
    }
}
