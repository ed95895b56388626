//! The work order (SPEC §2): parsing, validation and its canonical hash.

use crate::error::{Error, Result};
use crate::identity::{canonical_json, sha256_hex};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::Path;

pub const MAX_CONTEXT_FILES: usize = 10;
pub const CONTEXT_BUDGET_BYTES: usize = 200 * 1024;

const KNOWN_FIELDS: [&str; 13] = [
    "id",
    "title",
    "intent",
    "allowed_files",
    "forbidden",
    "acceptance_commands",
    "context_files",
    "notes",
    "fail_to_pass",
    "pass_to_pass",
    "fail_to_pass_tests",
    "pass_to_pass_tests",
    "tests_may_change",
];

#[derive(Debug, Clone, Serialize)]
pub struct WorkOrder {
    pub id: String,
    pub title: String,
    pub intent: String,
    pub allowed_files: Vec<String>,
    pub forbidden: Vec<String>,
    pub acceptance_commands: Vec<String>,
    pub context_files: Vec<String>,
    pub notes: Option<String>,
    /// Red→green contract (SPEC §3.8): must fail on the baseline and pass after the change.
    pub fail_to_pass: Vec<String>,
    /// Must pass both before and after the change (no regressions).
    pub pass_to_pass: Vec<String>,
    /// Named tests (SPEC §3.9): ids any check command reports; a trailing `*` matches a
    /// prefix. Each must be red on the baseline and pass after the change.
    pub fail_to_pass_tests: Vec<String>,
    /// Named tests that must pass before and after the change.
    pub pass_to_pass_tests: Vec<String>,
    /// The change may skip, remove or loosen tests and change test configuration (SPEC §3.9);
    /// such edits are then listed instead of failing the attempt.
    pub tests_may_change: bool,
}

impl WorkOrder {
    /// Whether the order states a red→green contract (turns the baseline check on by default).
    pub fn has_contract(&self) -> bool {
        !self.fail_to_pass.is_empty() || !self.pass_to_pass.is_empty() || self.names_tests()
    }

    /// Whether the order names tests (SPEC §3.9): the baseline check then runs every check.
    pub fn names_tests(&self) -> bool {
        !self.fail_to_pass_tests.is_empty() || !self.pass_to_pass_tests.is_empty()
    }
}

/// A validated work order together with the exact JSON it was given as.
#[derive(Debug, Clone)]
pub struct LoadedWorkOrder {
    pub order: WorkOrder,
    pub raw: Value,
    pub hash: String,
    /// Where it came from: a path, `-` for stdin, or `inline`.
    pub source: String,
}

impl LoadedWorkOrder {
    pub fn from_json_text(text: &str, source: &str) -> Result<Self> {
        let raw: Value = serde_json::from_str(text).map_err(|e| {
            Error::new(format!("work order {source} is not valid JSON: {e}"))
                .hint("fix the JSON syntax; see the work-order format in git factory run --help")
        })?;
        Self::from_value(raw, source)
    }

    pub fn from_value(raw: Value, source: &str) -> Result<Self> {
        let order = validate(&raw)?;
        let hash = sha256_hex(canonical_json(&raw).as_bytes());
        Ok(LoadedWorkOrder {
            order,
            raw,
            hash,
            source: source.to_string(),
        })
    }

    /// The acceptance commands as argv vectors (validated to split cleanly).
    pub fn acceptance_argv(&self) -> Vec<Vec<String>> {
        argv_list(&self.order.acceptance_commands)
    }

    pub fn fail_to_pass_argv(&self) -> Vec<Vec<String>> {
        argv_list(&self.order.fail_to_pass)
    }

    pub fn pass_to_pass_argv(&self) -> Vec<Vec<String>> {
        argv_list(&self.order.pass_to_pass)
    }
}

fn argv_list(commands: &[String]) -> Vec<Vec<String>> {
    commands
        .iter()
        .map(|c| shlex::split(c).unwrap_or_default())
        .collect()
}

/// What a path names, read without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    File,
    Folder,
    Symlink,
    Other,
}

fn entry_in_tree(tree: &git2::Tree<'_>, path: &str) -> Option<Entry> {
    let e = tree.get_path(Path::new(path)).ok()?;
    Some(match e.filemode() {
        0o100644 | 0o100755 => Entry::File,
        0o040000 => Entry::Folder,
        0o120000 => Entry::Symlink,
        _ => Entry::Other,
    })
}

fn entry_on_disk(root: &Path, path: &str) -> Option<Entry> {
    let kind = std::fs::symlink_metadata(root.join(path)).ok()?.file_type();
    Some(if kind.is_symlink() {
        Entry::Symlink
    } else if kind.is_dir() {
        Entry::Folder
    } else if kind.is_file() {
        Entry::File
    } else {
        Entry::Other
    })
}

/// Refuses a context file that is a symbolic link, lies below one, or is not a regular file
/// (SPEC §7): reading through a link would send files from outside the repo to the provider
/// and into the run record. Checked in `tree` when the context is read from one (worktree
/// mode), else in the work tree at `root`; a missing file is left to the prompt, which notes it.
///
/// Read from the work tree, a context file git ignores and does not track (a `.env`) is
/// refused too: its secrets would go to the provider and into `refs/factory`, which is pushed.
pub fn check_context_files(
    order: &WorkOrder,
    repo: &git2::Repository,
    root: &Path,
    tree: Option<&git2::Tree<'_>>,
) -> Result<()> {
    let entry = |path: &str| match tree {
        Some(t) => entry_in_tree(t, path),
        None => entry_on_disk(root, path),
    };
    let index = repo.index().ok();
    for path in &order.context_files {
        let tracked = index
            .as_ref()
            .is_some_and(|i| i.get_path(Path::new(path), 0).is_some());
        if tree.is_none() && !tracked && repo.is_path_ignored(Path::new(path)).unwrap_or(false) {
            return Err(invalid(
                "context_files",
                format!(
                    "{path:?} is ignored by git and not tracked; its contents would go to the provider and into the run record, which is shared"
                ),
            )
            .hint("track it (git add -f) if it may be shared, or remove it from context_files; nothing was changed"));
        }
        let parts: Vec<&str> = path.split('/').collect();
        for i in 1..=parts.len() {
            let prefix = parts[..i].join("/");
            let last = i == parts.len();
            let why = match entry(&prefix) {
                None => break,
                Some(Entry::Symlink) if last => "is a symbolic link".to_string(),
                Some(Entry::Symlink) => format!("goes through the symbolic link {prefix}"),
                Some(Entry::File) if last => continue,
                Some(Entry::Folder) if !last => continue,
                Some(_) => "is not a regular file".to_string(),
            };
            return Err(invalid(
                "context_files",
                format!(
                    "{path:?} {why}; context files are read only as regular files inside the work tree"
                ),
            ));
        }
    }
    Ok(())
}

fn invalid(field: &str, what: impl std::fmt::Display) -> Error {
    Error::new(format!("invalid work order: {field}: {what}"))
        .hint("fix the work order and run again; nothing was changed")
}

fn validate(raw: &Value) -> Result<WorkOrder> {
    let obj = raw
        .as_object()
        .ok_or_else(|| invalid("(top level)", "expected a JSON object"))?;
    for key in obj.keys() {
        if !KNOWN_FIELDS.contains(&key.as_str()) {
            let near = KNOWN_FIELDS
                .iter()
                .find(|k| k.starts_with(key.as_str()) || key.starts_with(*k))
                .map(|k| format!(" (did you mean {k:?}?)"))
                .unwrap_or_default();
            return Err(invalid(key, format!("unknown field {key:?}{near}")));
        }
    }
    let id = one_line(required_text(obj, "id")?, "id")?;
    let title = one_line(required_text(obj, "title")?, "title")?;
    let intent = required_text(obj, "intent")?;
    let allowed_files = normalised_paths(obj, "allowed_files", true)?;
    let context_files = normalised_paths(obj, "context_files", false)?;
    let forbidden = string_list(obj, "forbidden", false)?;
    let fail_to_pass = commands(obj, "fail_to_pass", false)?;
    let pass_to_pass = commands(obj, "pass_to_pass", false)?;
    let fail_to_pass_tests = test_ids(obj, "fail_to_pass_tests")?;
    let pass_to_pass_tests = test_ids(obj, "pass_to_pass_tests")?;
    // A red→green contract is a complete statement of done: acceptance may then be empty
    // (or left out).
    let red_named = !fail_to_pass.is_empty() || !fail_to_pass_tests.is_empty();
    let acceptance_commands = commands(obj, "acceptance_commands", !red_named)?;
    let tests_may_change = match obj.get("tests_may_change") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(invalid(
                "tests_may_change",
                format!("expected true or false, got {other}"),
            ))
        }
    };
    let notes = match obj.get("notes") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(invalid("notes", format!("expected a string, got {other}"))),
    };

    if acceptance_commands.is_empty() && !red_named {
        return Err(invalid(
            "acceptance_commands",
            "must list at least one command (or give fail_to_pass or fail_to_pass_tests)",
        ));
    }
    if context_files.len() > MAX_CONTEXT_FILES {
        return Err(invalid(
            "context_files",
            format!(
                "{} files given, at most {MAX_CONTEXT_FILES} allowed",
                context_files.len()
            ),
        ));
    }
    for path in &context_files {
        if !allowed_files.contains(path) {
            return Err(invalid(
                "context_files",
                format!("{path:?} is not in allowed_files (context_files must be a subset)"),
            ));
        }
    }
    Ok(WorkOrder {
        id,
        title,
        intent,
        allowed_files,
        forbidden,
        acceptance_commands,
        context_files,
        notes,
        fail_to_pass,
        pass_to_pass,
        fail_to_pass_tests,
        pass_to_pass_tests,
        tests_may_change,
    })
}

/// A list of test ids: non-empty, one line each (an id is printed in briefs and `show`).
fn test_ids(obj: &Map<String, Value>, field: &str) -> Result<Vec<String>> {
    let list = string_list(obj, field, false)?;
    for id in &list {
        if id.is_empty() || id == "*" {
            return Err(invalid(field, format!("{id:?} names no test")));
        }
        one_line(id.clone(), field)?;
    }
    Ok(list)
}

/// Refuses control characters in a one-line field: a newline in the id would forge `log` and
/// notes lines, an escape sequence would drive the terminal of whoever reads them.
fn one_line(text: String, field: &str) -> Result<String> {
    match text.chars().find(|c| c.is_control()) {
        Some(c) => Err(invalid(
            field,
            format!(
                "{:?} holds a control character ({c:?}); it must be one line of plain text",
                crate::ui::escape_line(&text)
            ),
        )),
        None => Ok(text),
    }
}

/// A list of commands, each of which must shlex-split to a non-empty argv.
fn commands(obj: &Map<String, Value>, field: &str, required: bool) -> Result<Vec<String>> {
    let list = string_list(obj, field, required)?;
    for cmd in &list {
        match shlex::split(cmd) {
            Some(argv) if !argv.is_empty() => refuse_shell_operator(field, cmd, &argv)?,
            Some(_) => return Err(invalid(field, format!("{cmd:?} is empty"))),
            None => {
                return Err(invalid(
                    field,
                    format!("{cmd:?} cannot be split into arguments (unbalanced quotes?)"),
                ))
            }
        }
    }
    Ok(list)
}

/// Commands are run as an argv, never by a shell: `grep -q x f && true` hands `&&` to grep,
/// which then checks the wrong thing and may pass; `pytest 2>&1` hands `2>&1` to pytest. A
/// word (after the program) that holds shell syntax outside quotes in the text is a refusal
/// naming the shell to use. Judged on the raw text's shell words, so operators quoted as
/// data (`grep -c '|' f`, `python -c "a; b"`) still pass.
fn refuse_shell_operator(field: &str, cmd: &str, argv: &[String]) -> Result<()> {
    let Some(word) = shell_words(cmd)
        .into_iter()
        .skip(1)
        .find_map(|(word, shell)| shell.then_some(word))
    else {
        return Ok(());
    };
    let quoted = shlex::try_quote(cmd)
        .map(|q| q.into_owned())
        .unwrap_or_default();
    Err(Error::new(format!(
        "invalid work order: {field}: {cmd:?} passes {word:?} to {} as an argument; commands are not run by a shell",
        argv[0]
    ))
    .hint(format!("to use shell syntax, run it through a shell: sh -c {quoted}")))
}

/// The raw text's words as a POSIX shell splits them, each with whether it holds shell
/// syntax: outside quotes a control or redirection operator (`|`, `&`, `;`, `<`, `>`: so
/// `&&`, `|&`, `2>&1`, `>file`, `&>`, a trailing `&`), or, outside single quotes, a command
/// substitution (`$(…)`, backticks), which a shell would run.
fn shell_words(text: &str) -> Vec<(String, bool)> {
    #[derive(PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
    }
    let mut words = Vec::new();
    let mut word = String::new();
    let mut shell = false;
    let mut quote = Quote::None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Quote::Single => {
                if c == '\'' {
                    quote = Quote::None;
                }
                word.push(c);
                continue;
            }
            Quote::Double => {
                match c {
                    '"' => quote = Quote::None,
                    '\\' => {
                        word.push(c);
                        if let Some(n) = chars.next() {
                            word.push(n);
                        }
                        continue;
                    }
                    '`' => shell = true,
                    '$' if chars.peek() == Some(&'(') => shell = true,
                    _ => {}
                }
                word.push(c);
                continue;
            }
            Quote::None => {}
        }
        match c {
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push((std::mem::take(&mut word), shell));
                }
                shell = false;
                continue;
            }
            '\\' => {
                word.push(c);
                if let Some(n) = chars.next() {
                    word.push(n);
                }
                continue;
            }
            '\'' => quote = Quote::Single,
            '"' => quote = Quote::Double,
            '|' | '&' | ';' | '<' | '>' | '`' => shell = true,
            '$' if chars.peek() == Some(&'(') => shell = true,
            _ => {}
        }
        word.push(c);
    }
    if !word.is_empty() {
        words.push((word, shell));
    }
    words
}

fn required_text(obj: &Map<String, Value>, field: &str) -> Result<String> {
    match obj.get(field) {
        None => Err(invalid(field, "missing (required)")),
        Some(Value::String(s)) if s.trim().is_empty() => Err(invalid(field, "must not be empty")),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(invalid(field, format!("expected a string, got {other}"))),
    }
}

fn string_list(obj: &Map<String, Value>, field: &str, required: bool) -> Result<Vec<String>> {
    match obj.get(field) {
        None | Some(Value::Null) if required => Err(invalid(field, "missing (required)")),
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(invalid(field, format!("expected strings, got {other}"))),
            })
            .collect(),
        Some(other) => Err(invalid(
            field,
            format!("expected a list of strings, got {other}"),
        )),
    }
}

fn normalised_paths(obj: &Map<String, Value>, field: &str, required: bool) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in string_list(obj, field, required)? {
        let path = normalise_path(&raw).map_err(|why| invalid(field, format!("{raw:?} {why}")))?;
        if !out.contains(&path) {
            out.push(path);
        }
    }
    if required && out.is_empty() {
        return Err(invalid(field, "must list at least one path"));
    }
    Ok(out)
}

/// Normalises a repo-relative path (`./a//b` → `a/b`) or says why it is not one.
///
/// Shared by work-order validation and the diff scope rules, so both judge a path alike.
pub fn normalise_path(raw: &str) -> std::result::Result<String, &'static str> {
    if raw.is_empty() {
        return Err("is empty");
    }
    if raw.contains('\0') {
        return Err("contains a NUL byte");
    }
    if raw.starts_with('/') || raw.starts_with('\\') {
        return Err("is absolute (paths are relative to the repo root)");
    }
    let bytes = raw.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err("has a drive letter (paths are relative to the repo root)");
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => continue,
            ".." => return Err("has a '..' component"),
            p if p.eq_ignore_ascii_case(".git") => return Err("enters .git/"),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err("names the repo root, not a file");
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"id": "wo-1", "title": "t", "intent": "i", "allowed_files": ["./src//a.py"],
               "acceptance_commands": ["true"]})
    }

    #[test]
    fn normalises_paths() {
        assert_eq!(normalise_path("./a//b").as_deref(), Ok("a/b"));
        assert!(normalise_path("/etc/passwd").is_err());
        assert!(normalise_path("C:/x").is_err());
        assert!(normalise_path("a/../b").is_err());
        assert!(normalise_path(".git/config").is_err());
        assert!(normalise_path("sub/.GIT/hooks/x").is_err());
        assert!(normalise_path("./.").is_err());
    }

    #[test]
    fn accepts_minimal_and_normalises() {
        let wo = LoadedWorkOrder::from_value(base(), "x").expect("valid");
        assert_eq!(wo.order.allowed_files, vec!["src/a.py"]);
        assert_eq!(wo.hash.len(), 64);
    }

    #[test]
    fn refuses_each_rule_naming_the_field() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({"allowed_file": ["a"]}), "allowed_file"),
            (json!({"allowed_files": ["../x"]}), "allowed_files"),
            (json!({"allowed_files": []}), "allowed_files"),
            (json!({"acceptance_commands": []}), "acceptance_commands"),
            (
                json!({"acceptance_commands": ["echo 'x"]}),
                "acceptance_commands",
            ),
            (
                json!({"acceptance_commands": ["  "]}),
                "acceptance_commands",
            ),
            (json!({"context_files": ["b.py"]}), "context_files"),
            (json!({"id": ""}), "id"),
            (json!({"fail_to_pass": ["echo 'x"]}), "fail_to_pass"),
            (json!({"pass_to_pass": [""]}), "pass_to_pass"),
            (json!({"fail_to_pass": "pytest"}), "fail_to_pass"),
            (json!({"title": 3}), "title"),
            (json!({"tests_may_change": "yes"}), "tests_may_change"),
        ];
        for (patch, field) in cases {
            let mut v = base();
            for (k, val) in patch.as_object().expect("object") {
                v[k] = val.clone();
            }
            let err = LoadedWorkOrder::from_value(v, "x").expect_err(field);
            assert!(err.message.contains(field), "{} lacks {field}", err.message);
        }
    }

    #[test]
    fn named_tests_stand_in_for_acceptance_and_must_be_one_line() {
        let mut v = base();
        let plain = LoadedWorkOrder::from_value(v.clone(), "x")
            .expect("valid")
            .hash;
        v.as_object_mut()
            .expect("object")
            .remove("acceptance_commands");
        v["fail_to_pass_tests"] = json!(["tests/test_x.py::test_y*"]);
        let wo = LoadedWorkOrder::from_value(v.clone(), "x").expect("valid");
        assert!(wo.order.names_tests() && wo.order.has_contract());
        assert_ne!(wo.hash, plain);
        for bad in [json!([""]), json!(["a\nb"]), json!([3]), json!("t")] {
            v["fail_to_pass_tests"] = bad;
            let e = LoadedWorkOrder::from_value(v.clone(), "x").expect_err("refused");
            assert!(e.to_string().contains("fail_to_pass_tests"), "{e}");
        }
    }

    #[test]
    fn a_contract_may_stand_in_for_acceptance() {
        let mut v = base();
        v.as_object_mut()
            .expect("object")
            .remove("acceptance_commands");
        v["fail_to_pass"] = json!(["python -m unittest tests/test_x.py"]);
        let wo = LoadedWorkOrder::from_value(v.clone(), "x").expect("valid");
        assert!(wo.order.acceptance_commands.is_empty());
        assert!(wo.order.has_contract());
        assert_eq!(wo.fail_to_pass_argv()[0][3], "tests/test_x.py");
        v["fail_to_pass"] = json!([]);
        v["pass_to_pass"] = json!(["true"]);
        let err = LoadedWorkOrder::from_value(v, "x").expect_err("acceptance needed");
        assert!(
            err.message.contains("acceptance_commands"),
            "{}",
            err.message
        );
    }

    #[test]
    fn the_hash_of_an_order_without_a_contract_is_unchanged() {
        let wo = LoadedWorkOrder::from_value(base(), "x").expect("valid");
        // sha256 of {"acceptance_commands":["true"],"allowed_files":["./src//a.py"],"id":"wo-1","intent":"i","title":"t"}
        assert_eq!(
            wo.hash,
            sha256_hex(br#"{"acceptance_commands":["true"],"allowed_files":["./src//a.py"],"id":"wo-1","intent":"i","title":"t"}"#)
        );
    }

    #[test]
    fn tests_may_change_is_read_and_hashed_as_given() {
        let wo = LoadedWorkOrder::from_value(base(), "x").expect("valid");
        assert!(!wo.order.tests_may_change);
        let mut v = base();
        v["tests_may_change"] = json!(true);
        let allowed = LoadedWorkOrder::from_value(v, "x").expect("valid");
        assert!(allowed.order.tests_may_change);
        assert_ne!(allowed.hash, wo.hash);
    }

    #[test]
    fn shell_syntax_is_found_outside_quotes_only() {
        let shell = |t: &str| -> Vec<String> {
            shell_words(t)
                .into_iter()
                .filter(|(_, s)| *s)
                .map(|(w, _)| w)
                .collect()
        };
        for (text, found) in [
            ("true 2>&1", vec!["2>&1"]),
            ("true 2>/dev/null", vec!["2>/dev/null"]),
            ("true >out", vec![">out"]),
            ("true |& cat", vec!["|&"]),
            ("true &>log", vec!["&>log"]),
            ("sleep 1 &", vec!["&"]),
            ("echo $(id) `id`", vec!["$(id)", "`id`"]),
            ("echo \"$(id)\"", vec!["\"$(id)\""]),
            ("grep -c '|' f", vec![]),
            ("grep -c \"a|b;c>d\" f", vec![]),
            ("grep -c '$(x)' f", vec![]),
            ("grep -c \\| f", vec![]),
            ("python3 -c 'import sys; sys.exit(0)'", vec![]),
        ] {
            assert_eq!(shell(text), found, "{text}");
        }
    }
}
