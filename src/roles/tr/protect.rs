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
    /// The rules for a run of `order` on the baseline `tree` of `repo`, with `patterns` from
    /// git config `factory.protect`.
    pub fn for_run(
        repo: &git2::Repository,
        tree: &git2::Tree<'_>,
        patterns: &[String],
        order: &WorkOrder,
    ) -> Self {
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
        // A command may name a file by its absolute path inside the repo.
        let mut roots: Vec<String> = Vec::new();
        if let Some(root) = repo.workdir() {
            for r in [Some(root.to_path_buf()), root.canonicalize().ok()]
                .into_iter()
                .flatten()
            {
                let r = r.to_string_lossy().trim_end_matches('/').to_string();
                if !r.is_empty() && !roots.contains(&r) {
                    roots.push(r);
                }
            }
        }
        let contract = [
            ("fail_to_pass", &order.fail_to_pass),
            ("pass_to_pass", &order.pass_to_pass),
        ];
        for (field, commands) in contract {
            for command in commands {
                let argv = shlex::split(command).unwrap_or_default();
                for path in named_files(&argv, &roots, |p| resolve(repo, tree, p)) {
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

/// Symbolic links followed before a path is given up on (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Where `path` leads in the baseline `tree`, resolved component by component as the kernel
/// would: `..` goes up from where the path really is, and a symbolic link inside the repo is
/// followed. Returns every link passed on the way and the final path (all protected: editing
/// the link or its target bends the check alike), with the final entry's kind; `None` when the
/// path does not exist at the baseline or leaves the repo.
fn resolve(
    repo: &git2::Repository,
    tree: &git2::Tree<'_>,
    path: &str,
) -> Option<(Vec<String>, Kind)> {
    let mut todo: std::collections::VecDeque<String> =
        path.split('/').map(str::to_string).collect();
    let mut done: Vec<String> = Vec::new();
    let mut passed: Vec<String> = Vec::new();
    let mut kind = None;
    while let Some(comp) = todo.pop_front() {
        match comp.as_str() {
            "" | "." => continue,
            ".." => {
                done.pop()?;
                kind = Some(Kind::Folder);
                continue;
            }
            c if c.eq_ignore_ascii_case(".git") => return None,
            _ => {}
        }
        if kind == Some(Kind::File) {
            return None; // a file is not a folder
        }
        done.push(comp);
        let here = done.join("/");
        let entry = tree.get_path(std::path::Path::new(&here)).ok()?;
        match (entry.kind(), entry.filemode()) {
            (Some(git2::ObjectType::Blob), 0o120000) => {
                if passed.len() >= MAX_LINKS {
                    return None;
                }
                let blob = repo.find_blob(entry.id()).ok()?;
                let target = std::str::from_utf8(blob.content()).ok()?.to_string();
                if target.starts_with('/') {
                    return None; // out of the repo: nothing in it to protect
                }
                passed.push(here);
                done.pop();
                for c in target.split('/').rev() {
                    todo.push_front(c.to_string());
                }
                kind = Some(Kind::Folder);
            }
            (Some(git2::ObjectType::Tree), _) => kind = Some(Kind::Folder),
            (Some(git2::ObjectType::Blob), _) => kind = Some(Kind::File),
            _ => return None,
        }
    }
    if done.is_empty() {
        return None; // the repo root itself
    }
    passed.push(done.join("/"));
    Some((passed, kind?))
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

/// What a path lookup finds: the paths to protect and the kind of the last.
type Found = Option<(Vec<String>, Kind)>;

/// The repo paths a command names, as `lookup` finds them at the baseline: arguments that are
/// paths (`tests/test_x.py`, `tests/../tests/test_x.py`, or absolute inside one of `roots`),
/// pytest node ids (`tests/test_x.py::test_y`), option values (`--file=x.py`), Python dotted
/// test names (`tests.test_x.TestY.test_z` → `tests/test_x.py`), and the words of a script
/// given to a shell (`sh -c 'pytest tests/t.py; python3 <tests/u.py'`), split as the shell
/// splits them. The program counts when it is a path (`./check.sh`), not when it is found on
/// PATH (`cargo`).
fn named_files(
    argv: &[String],
    roots: &[String],
    lookup: impl Fn(&str) -> Found + Copy,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |paths: Vec<String>| {
        for p in paths {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    };
    for (i, arg) in argv.iter().enumerate() {
        if i == 0 && !arg.contains('/') {
            continue;
        }
        if arg
            .chars()
            .any(|c| c.is_whitespace() || SHELL_OPERATORS.contains(c))
        {
            // A script for `sh -c`, `bash -c`, `python -c`: its words may name files too.
            for word in shell_words(arg) {
                add(named_file(&word, roots, lookup));
            }
        }
        add(named_file(arg, roots, lookup));
    }
    out
}

/// Characters that end a word in a shell script outside quotes (operators and redirections).
const SHELL_OPERATORS: &str = ";&|<>()`";

/// A shell script's words as `sh` splits them: quotes ('…', "…" with its backslash escapes)
/// and backslashes outside quotes are honoured, and operators (`;`, `&&`, `|`, `<`, `>`, …)
/// separate words even when glued to them (`<tests/t.py`, `t.py;`). Expansions stay literal.
fn shell_words(script: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`' | '\n')) => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        q => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    if n != '\n' {
                        word.push(n);
                    }
                }
            }
            c if c.is_whitespace() || SHELL_OPERATORS.contains(c) => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The repo paths one argument names (see [`named_files`]).
fn named_file(arg: &str, roots: &[String], lookup: impl Fn(&str) -> Found) -> Vec<String> {
    let mut values = vec![arg];
    // `--file=x.py`, `VAR=x.py`: the value after `=` may be the path.
    if let Some((_, v)) = arg.split_once('=') {
        values.push(v);
    }
    for value in values {
        let value = value.split("::").next().unwrap_or(value);
        let relative = if value.starts_with('/') {
            roots.iter().find_map(|r| {
                value
                    .strip_prefix(r.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
            })
        } else {
            Some(value)
        };
        if let Some((paths, _)) = relative.and_then(&lookup) {
            return paths;
        }
        // A dotted Python name: the longest prefix that is a module file or a package.
        if value.contains('.') && !value.contains('/') {
            let parts: Vec<&str> = value.split('.').collect();
            for n in (1..=parts.len()).rev() {
                let base = parts[..n].join("/");
                if base.split('/').any(|c| c.is_empty() || c == "..") {
                    continue;
                }
                if let Some((paths, Kind::File)) = lookup(&format!("{base}.py")) {
                    return paths;
                }
                if n < parts.len() {
                    if let Some((paths, Kind::Folder)) = lookup(&base) {
                        return paths;
                    }
                }
            }
        }
    }
    Vec::new()
}

/// git's wildmatch with `WM_PATHNAME` (what pathspec glob magic uses): `*` and `?` never
/// match `/`, `[...]` is a class (`!` or `^` negates, `[:alpha:]` and the other POSIX names),
/// `\` escapes, and `**` between slashes (or at either end) matches any number of folders.
/// gitoxide's port of git's own `wildmatch.c`, which follows git's test cases, rather than a
/// second one of ours.
pub fn wildmatch(p: &[u8], t: &[u8]) -> bool {
    gix_glob::wildmatch(
        p.into(),
        t.into(),
        gix_glob::wildmatch::Mode::NO_MATCH_SLASH_LITERAL,
    )
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

    /// Cases of git's own t3070-wildmatch.sh, its first column (wildmatch with WM_PATHNAME).
    #[test]
    fn wildmatch_agrees_with_gits_own_cases() {
        let cases: &[(bool, &str, &str)] = &[
            (true, "foo", "foo"),
            (false, "foo", "bar"),
            (true, "", ""),
            (true, "foo", "???"),
            (false, "foo", "??"),
            (true, "foo", "*"),
            (true, "foo", "f*"),
            (false, "foo", "*f"),
            (true, "foo", "*foo*"),
            (true, "foobar", "*ob*a*r*"),
            (true, "aaaaaaabababab", "*ab"),
            (true, "foo*", "foo\\*"),
            (false, "foobar", "foo\\*bar"),
            (true, "f\\oo", "f\\\\oo"),
            (true, "ball", "*[al]?"),
            (false, "ten", "[ten]"),
            (true, "ten", "**[!te]"),
            (false, "ten", "**[!ten]"),
            (true, "ten", "t[a-g]n"),
            (false, "ten", "t[!a-g]n"),
            (true, "ton", "t[!a-g]n"),
            (true, "ton", "t[^a-g]n"),
            (true, "a]b", "a[]]b"),
            (true, "a-b", "a[]-]b"),
            (true, "a]b", "a[]-]b"),
            (false, "aab", "a[]-]b"),
            (true, "aab", "a[]a-]b"),
            (true, "]", "]"),
            (false, "foo/baz/bar", "foo*bar"),
            (false, "foo/baz/bar", "foo**bar"),
            (true, "foobazbar", "foo**bar"),
            (true, "foo/baz/bar", "foo/**/bar"),
            (true, "foo/baz/bar", "foo/**/**/bar"),
            (true, "foo/b/a/z/bar", "foo/**/bar"),
            (true, "foo/b/a/z/bar", "foo/**/**/bar"),
            (true, "foo/bar", "foo/**/bar"),
            (true, "foo/bar", "foo/**/**/bar"),
            (false, "foo/bar", "foo?bar"),
            (false, "foo/bar", "foo[/]bar"),
            (false, "foo/bar", "foo[^a-z]bar"),
            (false, "foo/bar", "f[^eiu][^eiu][^eiu][^eiu][^eiu]r"),
            (true, "foo-bar", "f[^eiu][^eiu][^eiu][^eiu][^eiu]r"),
            (true, "foo", "**/foo"),
            (true, "XXX/foo", "**/foo"),
            (true, "bar/baz/foo", "**/foo"),
            (false, "bar/baz/foo", "*/foo"),
            (false, "foo/bar/baz", "**/bar*"),
            (true, "deep/foo/bar/baz", "**/bar/*"),
            (false, "deep/foo/bar/baz/", "**/bar/*"),
            (true, "deep/foo/bar/baz/", "**/bar/**"),
            (false, "deep/foo/bar", "**/bar/*"),
            (true, "deep/foo/bar/", "**/bar/**"),
            (false, "foo/bar/baz", "**/bar**"),
            (true, "foo/bar/baz/x", "*/bar/**"),
            (false, "deep/foo/bar/baz/x", "*/bar/**"),
            (true, "deep/foo/bar/baz/x", "**/bar/*/*"),
            (true, "a1B", "[[:alpha:]][[:digit:]][[:upper:]]"),
            (false, "a", "[[:digit:][:upper:][:space:]]"),
            (true, "A", "[[:digit:][:upper:][:space:]]"),
            (true, "5", "[[:xdigit:]]"),
            (
                true,
                "-adobe-courier-bold-o-normal--12-120-75-75-m-70-iso8859-1",
                "-*-*-*-*-*-*-12-*-*-*-m-*-*-*",
            ),
            (
                false,
                "-adobe-courier-bold-o-normal--12-120-75-75-X-70-iso8859-1",
                "-*-*-*-*-*-*-12-*-*-*-m-*-*-*",
            ),
            (
                true,
                "XXX/adobe/courier/bold/o/normal//12/120/75/75/m/70/iso8859/1",
                "XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*",
            ),
            (
                true,
                "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txt",
                "**/*a*b*g*n*t",
            ),
            (
                false,
                "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz",
                "**/*a*b*g*n*t",
            ),
        ];
        let wrong: Vec<_> = cases
            .iter()
            .filter(|(want, text, pattern)| glob(pattern, text) != *want)
            .collect();
        assert!(wrong.is_empty(), "(expected, text, pattern): {wrong:?}");
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
        // A lexical stand-in for the tree walk: `..` and `.` folded, `link.py` -> `real.py`.
        let kind = |p: &str| {
            let mut parts: Vec<&str> = Vec::new();
            for c in p.split('/') {
                match c {
                    "" | "." => {}
                    ".." => {
                        parts.pop()?;
                    }
                    c => parts.push(c),
                }
            }
            let p = parts.join("/");
            if p == "tests/link.py" {
                return Some((vec![p, "tests/test_x.py".to_string()], Kind::File));
            }
            if files.contains(&p.as_str()) {
                Some((vec![p], Kind::File))
            } else if folders.contains(&p.as_str()) {
                Some((vec![p], Kind::Folder))
            } else {
                None
            }
        };
        let roots = ["/home/u/repo".to_string()];
        let named = |cmd: &str| named_files(&shlex::split(cmd).expect("splits"), &roots, kind);
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
        assert_eq!(
            named("python3 /home/u/repo/tests/test_x.py"),
            ["tests/test_x.py"]
        );
        assert_eq!(
            named("python3 /home/u/repox/tests/test_x.py"),
            Vec::<String>::new()
        );
        assert_eq!(
            named("python3 tests/../tests/test_x.py"),
            ["tests/test_x.py"]
        );
        assert_eq!(
            named("sh -c 'python3 tests/test_x.py;'"),
            ["tests/test_x.py"]
        );
        assert_eq!(
            named("sh -c 'python3 <tests/test_x.py'"),
            ["tests/test_x.py"]
        );
        assert_eq!(
            named("sh -c 'python3<check.sh&&cat data/in.txt|wc'"),
            ["check.sh", "data/in.txt"]
        );
        assert_eq!(
            named("sh -c \"python3 'tests/test_x.py'>/dev/null\""),
            ["tests/test_x.py"]
        );
        assert_eq!(
            named("env T=data/in.txt ./check.sh"),
            ["data/in.txt", "check.sh"]
        );
        assert_eq!(
            named("python3 tests/link.py"),
            ["tests/link.py", "tests/test_x.py"]
        );
    }

    #[test]
    fn shell_words_split_like_sh() {
        assert_eq!(
            shell_words("a 'b c'\"d\\\"e\" f\\ g;h&&i|j<k>l(m)`n`"),
            ["a", "b cd\"e", "f g", "h", "i", "j", "k", "l", "m", "n"]
        );
        assert_eq!(shell_words("  "), Vec::<String>::new());
        assert_eq!(shell_words("''"), [""]);
    }
}
