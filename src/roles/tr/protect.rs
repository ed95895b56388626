//! Protected paths (SPEC §3.5): the files that judge a change, which no proposal may touch
//! whatever `allowed_files` says — the model may not bend the checks that judge it.
//!
//! Three sources: `scripts/verify.sh` (the global verification script), the git pathspec
//! globs of the multi-valued git config `factory.protect` (`tests/**`, `.github/**`), and every
//! file a `fail_to_pass` / `pass_to_pass` command names as an argument that exists at the
//! baseline (`pytest tests/test_x.py::test_y` → `tests/test_x.py`).

use crate::store::records::ProtectedPath;
use crate::workorder::{normalise_path, WorkOrder};

/// The verification script is always protected: it is what "verified" means.
const VERIFY_SCRIPT: &str = "scripts/verify.sh";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Matcher {
    /// This path, and everything below it when it is a folder (a literal pathspec).
    Path(String),
    /// A pathspec with glob magic: `*` and `?` stay inside one component, `**` crosses them.
    Glob(String),
}

impl Matcher {
    fn matches(&self, path: &str) -> bool {
        match self {
            Matcher::Path(p) => {
                path == p
                    || (path.len() > p.len()
                        && path.starts_with(p.as_str())
                        && path.as_bytes()[p.len()] == b'/')
            }
            Matcher::Glob(g) => wildmatch(g.as_bytes(), path.as_bytes()),
        }
    }

    fn shown(&self) -> &str {
        match self {
            Matcher::Path(p) | Matcher::Glob(p) => p,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    matcher: Matcher,
    why: String,
}

/// The protected paths of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    rules: Vec<Rule>,
}

impl Protected {
    /// The rules for a run of `order` on the baseline `tree`, with `patterns` from git config
    /// `factory.protect`.
    pub fn for_run(tree: &git2::Tree<'_>, patterns: &[String], order: &WorkOrder) -> Self {
        let mut p = Protected::default();
        p.push(
            Matcher::Path(VERIFY_SCRIPT.to_string()),
            "it is the global verification script".to_string(),
        );
        for pattern in patterns {
            if let Some(m) = pathspec(pattern) {
                p.push(
                    m,
                    format!("it matches git config factory.protect {pattern:?}"),
                );
            }
        }
        let contract = [
            ("fail_to_pass", &order.fail_to_pass),
            ("pass_to_pass", &order.pass_to_pass),
        ];
        for (field, commands) in contract {
            for command in commands {
                let argv = shlex::split(command).unwrap_or_default();
                for path in named_files(&argv, |p| entry_kind(tree, p)) {
                    p.push(
                        Matcher::Path(path),
                        format!("it is named by the {field} command `{command}`"),
                    );
                }
            }
        }
        p
    }

    /// Rules from `factory.protect`-style patterns only (for unit tests of the scope rules).
    #[cfg(test)]
    pub fn from_patterns(patterns: &[&str]) -> Self {
        let mut p = Protected::default();
        for pattern in patterns {
            if let Some(m) = pathspec(pattern) {
                p.push(m, format!("it matches {pattern:?}"));
            }
        }
        p
    }

    fn push(&mut self, matcher: Matcher, why: String) {
        if !self.rules.iter().any(|r| r.matcher == matcher) {
            self.rules.push(Rule { matcher, why });
        }
    }

    /// Why `path` (normalised, repo-relative) is protected, or `None` when it is not.
    pub fn why(&self, path: &str) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| r.matcher.matches(path))
            .map(|r| r.why.as_str())
    }

    /// Refuses a work order whose `allowed_files` names a protected path.
    pub fn check_allowed(&self, allowed: &[String]) -> crate::error::Result<()> {
        for path in allowed {
            if let Some(why) = self.why(path) {
                return Err(crate::error::Error::new(format!(
                    "invalid work order: allowed_files: {path:?} is protected: {why}"
                ))
                .hint(
                    "remove it from allowed_files (and context_files): the model may not edit \
                     the checks that judge it; nothing was changed",
                ));
            }
        }
        Ok(())
    }

    /// Every rule, for the run's record.
    pub fn listing(&self) -> Vec<ProtectedPath> {
        self.rules
            .iter()
            .map(|r| ProtectedPath {
                path: r.matcher.shown().to_string(),
                why: r.why.clone(),
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Folder,
}

fn entry_kind(tree: &git2::Tree<'_>, path: &str) -> Option<Kind> {
    let entry = tree.get_path(std::path::Path::new(path)).ok()?;
    match entry.kind() {
        Some(git2::ObjectType::Tree) => Some(Kind::Folder),
        Some(git2::ObjectType::Blob) => Some(Kind::File),
        _ => None,
    }
}

/// A `factory.protect` value as a matcher: a git pathspec, read with glob magic. A literal
/// pathspec also covers what lies below it, as git's does.
fn pathspec(raw: &str) -> Option<Matcher> {
    let mut s = raw.trim();
    for magic in [":(glob)", ":(top)", ":/"] {
        s = s.strip_prefix(magic).unwrap_or(s);
    }
    let s = s.trim_start_matches("./").trim_start_matches('/');
    let s = s.trim_end_matches('/');
    if s.is_empty() {
        return None;
    }
    if s.bytes().any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\')) {
        Some(Matcher::Glob(s.to_string()))
    } else {
        normalise_path(s).ok().map(Matcher::Path)
    }
}

/// The repo paths a command names, as `kind` finds them at the baseline: arguments that are
/// paths (`tests/test_x.py`), pytest node ids (`tests/test_x.py::test_y`), option values
/// (`--file=x.py`), Python dotted test names (`tests.test_x.TestY.test_z` → `tests/test_x.py`),
/// and the words of a script given to a shell (`sh -c 'pytest tests/t.py'`). The program
/// counts when it is a path (`./check.sh`), not when it is found on PATH (`cargo`).
fn named_files(argv: &[String], kind: impl Fn(&str) -> Option<Kind> + Copy) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, arg) in argv.iter().enumerate() {
        if i == 0 && !arg.contains('/') {
            continue;
        }
        if arg.chars().any(char::is_whitespace) {
            // A script for `sh -c`, `bash -c`, `python -c`: its words may name files too.
            if let Some(words) = shlex::split(arg) {
                for w in named_files_of_words(&words, kind) {
                    if !out.contains(&w) {
                        out.push(w);
                    }
                }
            }
            continue;
        }
        if let Some(path) = named_file(arg, kind) {
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

fn named_files_of_words(
    words: &[String],
    kind: impl Fn(&str) -> Option<Kind> + Copy,
) -> Vec<String> {
    words.iter().filter_map(|w| named_file(w, kind)).collect()
}

fn named_file(arg: &str, kind: impl Fn(&str) -> Option<Kind>) -> Option<String> {
    let value = match arg.strip_prefix('-') {
        Some(_) => arg.split_once('=')?.1,
        None => arg,
    };
    let value = value.split("::").next().unwrap_or(value);
    if let Ok(path) = normalise_path(value) {
        if kind(&path).is_some() {
            return Some(path);
        }
    }
    // A dotted Python name: the longest prefix that is a module file or a package.
    if value.contains('.') && !value.contains('/') {
        let parts: Vec<&str> = value.split('.').collect();
        for n in (1..=parts.len()).rev() {
            let base = parts[..n].join("/");
            let module = format!("{base}.py");
            if normalise_path(&module).is_ok() && kind(&module) == Some(Kind::File) {
                return Some(module);
            }
            if n < parts.len() && normalise_path(&base).is_ok() && kind(&base) == Some(Kind::Folder)
            {
                return Some(base);
            }
        }
    }
    None
}

/// git's wildmatch with `WM_PATHNAME` (what pathspec glob magic uses): `*` and `?` never
/// match `/`, `[...]` is a class (`!` or `^` negates), `\` escapes, and `**` between slashes
/// (or at either end) matches any number of folders.
pub fn wildmatch(p: &[u8], t: &[u8]) -> bool {
    let (mut pi, mut ti) = (0, 0);
    while pi < p.len() {
        match p[pi] {
            b'\\' if pi + 1 < p.len() => {
                if t.get(ti) != Some(&p[pi + 1]) {
                    return false;
                }
                pi += 2;
                ti += 1;
            }
            b'?' => {
                if t.get(ti).is_none_or(|c| *c == b'/') {
                    return false;
                }
                pi += 1;
                ti += 1;
            }
            b'*' => {
                let mut end = pi;
                while end < p.len() && p[end] == b'*' {
                    end += 1;
                }
                let double = end - pi >= 2;
                let at_start = pi == 0 || p[pi - 1] == b'/';
                let at_end = end == p.len() || p[end] == b'/';
                if double && at_start && at_end {
                    if end == p.len() {
                        return true;
                    }
                    // `**/`: zero or more whole folders.
                    let rest = &p[end + 1..];
                    if wildmatch(rest, &t[ti..]) {
                        return true;
                    }
                    return (ti..t.len()).any(|k| t[k] == b'/' && wildmatch(rest, &t[k + 1..]));
                }
                let rest = &p[end..];
                let mut k = ti;
                loop {
                    if wildmatch(rest, &t[k..]) {
                        return true;
                    }
                    if k >= t.len() || t[k] == b'/' {
                        return false;
                    }
                    k += 1;
                }
            }
            b'[' => {
                let Some(&c) = t.get(ti) else {
                    return false;
                };
                match class(&p[pi + 1..], c) {
                    Some((matched, used)) if matched && c != b'/' => {
                        pi += 1 + used;
                        ti += 1;
                    }
                    _ => return false,
                }
            }
            c => {
                if t.get(ti) != Some(&c) {
                    return false;
                }
                pi += 1;
                ti += 1;
            }
        }
    }
    ti == t.len()
}

/// Matches `c` against the class whose body starts at `p` (after `[`): whether it matched and
/// how many pattern bytes the class used (through `]`); `None` when it never closes.
fn class(p: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 0;
    let negated = matches!(p.first(), Some(b'!' | b'^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        let mut lo = p[i];
        if lo == b']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if lo == b'\\' && i + 1 < p.len() {
            i += 1;
            lo = p[i];
        }
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            let hi = p[i + 2];
            matched |= lo <= c && c <= hi;
            i += 3;
        } else {
            matched |= lo == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(p: &str, t: &str) -> bool {
        wildmatch(p.as_bytes(), t.as_bytes())
    }

    #[test]
    fn wildmatch_follows_git_pathspec_glob_magic() {
        assert!(glob("tests/**", "tests/a.py"));
        assert!(glob("tests/**", "tests/deep/er/a.py"));
        assert!(!glob("tests/**", "tests"));
        assert!(!glob("tests/**", "src/tests/a.py"));
        assert!(glob("**/test_*.py", "test_a.py"));
        assert!(glob("**/test_*.py", "a/b/test_a.py"));
        assert!(!glob("**/test_*.py", "a/b/test_a.pyc"));
        assert!(glob("a/**/b", "a/b"));
        assert!(glob("a/**/b", "a/x/y/b"));
        assert!(!glob("a/**/b", "a/xb"));
        assert!(glob("*.py", "setup.py"));
        assert!(!glob("*.py", "src/setup.py"), "* stays in one component");
        assert!(glob(".github/**", ".github/workflows/ci.yml"));
        assert!(glob("t?st/[a-c]*.py", "test/b1.py"));
        assert!(!glob("t?st/[!a-c]*.py", "test/b1.py"));
        assert!(!glob("a?b", "a/b"));
        assert!(glob("a\\*b", "a*b"));
        assert!(!glob("a\\*b", "axb"));
        assert!(!glob("[ab", "a"));
        assert!(glob("**", "any/thing"));
        assert!(glob("x**y", "xaby"), "** not between slashes is a plain *");
        assert!(!glob("x**y", "xa/by"));
    }

    #[test]
    fn literal_pathspecs_cover_their_folder() {
        let m = pathspec("tests").expect("pathspec");
        assert!(m.matches("tests") && m.matches("tests/a.py"));
        assert!(!m.matches("tests2/a.py"));
        assert_eq!(
            pathspec(":(glob)tests/*.py"),
            Some(Matcher::Glob("tests/*.py".into()))
        );
        assert_eq!(pathspec("./docs/"), Some(Matcher::Path("docs".into())));
        assert_eq!(pathspec("  "), None);
        assert_eq!(pathspec("../x"), None);
    }

    #[test]
    fn commands_name_files_that_exist() {
        let files = ["tests/test_x.py", "check.sh", "pkg/mod.py", "data/in.txt"];
        let folders = ["tests", "pkg", "data"];
        let kind = |p: &str| {
            if files.contains(&p) {
                Some(Kind::File)
            } else if folders.contains(&p) {
                Some(Kind::Folder)
            } else {
                None
            }
        };
        let named = |cmd: &str| named_files(&shlex::split(cmd).expect("splits"), kind);
        assert_eq!(named("pytest tests/test_x.py::test_y"), ["tests/test_x.py"]);
        assert_eq!(
            named("pytest ./tests/test_x.py -k neg"),
            ["tests/test_x.py"]
        );
        assert_eq!(named("cargo test parse_empty"), Vec::<String>::new());
        assert_eq!(
            named("./check.sh --input=data/in.txt"),
            ["check.sh", "data/in.txt"]
        );
        assert_eq!(
            named("python -m unittest tests.test_x.T.test_y"),
            ["tests/test_x.py"]
        );
        assert_eq!(named("python -m unittest discover -s tests"), ["tests"]);
        assert_eq!(
            named("sh -c 'python pkg/mod.py && echo ok'"),
            ["pkg/mod.py"]
        );
        assert_eq!(named("pytest /etc/passwd ../x.py"), Vec::<String>::new());
        assert_eq!(
            named("tests"),
            Vec::<String>::new(),
            "a program on PATH is not a file"
        );
    }
}
