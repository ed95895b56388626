//! What a line of test code means, per language: a skip marker, an assertion, a definition
//! and whether it is a test. Each reads one line's bytes (trimmed), nothing else; whether a
//! file holds tests at all is decided from its path, and from its baseline lines where the path
//! does not settle it.

use bstr::ByteSlice;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    Python,
    Rust,
    Go,
    Js,
    /// Java and Kotlin (JUnit, TestNG).
    Java,
}

/// What a file's path alone says about whether it holds tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ByPath {
    Yes,
    /// Only its lines can tell (a Rust module with `#[test]`s, a Python module with `def test_`).
    Maybe,
    No,
}

pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn in_folder(path: &str, folder: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    parts.pop();
    parts.contains(&folder)
}

pub(super) fn lang_of(path: &str) -> Option<Lang> {
    let (_, ext) = file_name(path).rsplit_once('.')?;
    Some(match ext {
        "py" => Lang::Python,
        "rs" => Lang::Rust,
        "go" => Lang::Go,
        "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts" => Lang::Js,
        "java" | "kt" => Lang::Java,
        _ => return None,
    })
}

/// The naming rules of each language's test runners (pytest, `go test`, Jest/Vitest/Mocha,
/// Surefire).
pub(super) fn by_path(path: &str, lang: Lang) -> ByPath {
    let name = file_name(path);
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let yes = match lang {
        Lang::Python => name.starts_with("test_") || stem.ends_with("_test"),
        Lang::Go => {
            return if stem.ends_with("_test") {
                ByPath::Yes
            } else {
                ByPath::No
            }
        }
        Lang::Js => {
            if name.contains(".test.") || name.contains(".spec.") || in_folder(path, "__tests__") {
                return ByPath::Yes;
            }
            // Mocha's default spec folder.
            if in_folder(path, "test") || in_folder(path, "tests") {
                return ByPath::Maybe;
            }
            return ByPath::No;
        }
        Lang::Java => ["Test", "Tests", "IT"].iter().any(|s| stem.ends_with(s)),
        Lang::Rust => false,
    };
    if yes {
        ByPath::Yes
    } else {
        ByPath::Maybe
    }
}

/// Whether a baseline line shows that its file holds tests.
pub(super) fn shows_tests(lang: Lang, line: &[u8]) -> bool {
    let t = line.trim_ascii();
    match lang {
        Lang::Rust | Lang::Java => test_attribute(lang, t),
        Lang::Js => js_test_call(t).is_some() || starts_word(t, b"describe("),
        _ => test_def(lang, t).is_some(),
    }
}

/// Where `needle` first occurs in `t` at or after `from`. Lines are short and needles shorter:
/// a byte search for the first byte beats building a substring searcher per line and needle.
fn find_at(t: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    let (&first, _) = needle.split_first()?;
    let mut i = from;
    while i < t.len() {
        let at = i + t[i..].find_byte(first)?;
        if t[at..].starts_with(needle) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

fn contains(t: &[u8], needle: &[u8]) -> bool {
    find_at(t, needle, 0).is_some()
}

fn ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Whether `needle` occurs in `t` at the start of a word: not after an identifier character,
/// nor after a `.` unless `after_dot` (so `self.assertEqual` is an assertion, `x.it(` no test).
fn has_word(t: &[u8], needle: &[u8], after_dot: bool) -> bool {
    let mut from = 0;
    while let Some(i) = find_at(t, needle, from) {
        let ok = i == 0 || {
            let b = t[i - 1];
            !ident(b) && (after_dot || b != b'.')
        };
        if ok {
            return true;
        }
        from = i + 1;
    }
    false
}

fn starts_word(t: &[u8], needle: &[u8]) -> bool {
    has_word(t, needle, false)
}

pub(super) fn is_comment(lang: Lang, t: &[u8]) -> bool {
    match lang {
        Lang::Python => t.starts_with(b"#"),
        _ => t.starts_with(b"//") || t.starts_with(b"/*") || t.starts_with(b"*"),
    }
}

/// A skip or expected-failure marker (or `.only`, which skips every other test).
pub(super) fn marker(lang: Lang, t: &[u8]) -> bool {
    if is_comment(lang, t) {
        return false;
    }
    let any = |list: &[&[u8]]| list.iter().any(|n| contains(t, n));
    match lang {
        Lang::Python => {
            any(&[
                b"mark.skip",
                b"mark.xfail",
                b"pytest.skip(",
                b"pytest.xfail(",
                b"importorskip(",
                b"unittest.skip",
                b"expectedFailure",
                b"skipTest(",
                b"SkipTest",
            ]) || has_word(t, b"@skip", false)
        }
        Lang::Rust => {
            contains(t, b"#[ignore") || (t.starts_with(b"#[cfg_attr(") && contains(t, b"ignore"))
        }
        Lang::Go => any(&[b".Skip(", b".Skipf(", b".SkipNow("]),
        Lang::Js => {
            any(&[
                b".skip(",
                b".skip.",
                b".skipIf(",
                b".todo(",
                b".only(",
                b".only.",
                b".failing(",
                b".fixme(",
            ]) || [
                &b"xit("[..],
                b"xtest(",
                b"xdescribe(",
                b"xcontext(",
                b"fit(",
                b"fdescribe(",
            ]
            .iter()
            .any(|n| starts_word(t, n))
        }
        Lang::Java => {
            any(&[b"@Disabled", b"@Ignore"])
                || ["assumeTrue(", "assumeFalse(", "assumeThat(", "assume("]
                    .iter()
                    .any(|n| has_word(t, n.as_bytes(), true))
        }
    }
}

/// A line that checks something: an assertion of the language's runners and common libraries.
pub(super) fn assertion(lang: Lang, t: &[u8]) -> bool {
    if is_comment(lang, t) {
        return false;
    }
    match lang {
        Lang::Python => {
            has_word(t, b"assert", true)
                || [&b"pytest.raises("[..], b"pytest.warns(", b"pytest.fail("]
                    .iter()
                    .any(|n| contains(t, n))
        }
        Lang::Rust => rust_assert_macro(t),
        Lang::Go => [
            &b"t.Error"[..],
            b"t.Fatal",
            b"t.Fail",
            b"b.Error",
            b"b.Fatal",
            b"b.Fail",
            b"tb.Error",
            b"tb.Fatal",
            b"tb.Fail",
            b"assert.",
            b"require.",
        ]
        .iter()
        .any(|n| starts_word(t, n)),
        Lang::Js => {
            [&b"expect("[..], b"expect.", b"assert(", b"assert."]
                .iter()
                .any(|n| has_word(t, n, true))
                || contains(t, b".should")
        }
        Lang::Java => has_word(t, b"assert", true) || has_word(t, b"fail(", true),
    }
}

/// `assert!`, `assert_eq!`, `debug_assert_ne!`, `prop_assert!`…: an identifier holding
/// `assert` and invoked as a macro.
fn rust_assert_macro(t: &[u8]) -> bool {
    let mut from = 0;
    while let Some(i) = find_at(t, b"assert", from) {
        let end = t[i..].iter().position(|b| !ident(*b)).map(|p| p + i);
        if end.is_some_and(|e| t[e] == b'!') {
            return true;
        }
        from = i + 1;
    }
    false
}

/// An attribute or annotation that makes the next function a test.
pub(super) fn test_attribute(lang: Lang, t: &[u8]) -> bool {
    match lang {
        Lang::Rust => {
            let Some(rest) = t.strip_prefix(b"#[") else {
                return false;
            };
            let end = rest
                .iter()
                .position(|b| matches!(b, b'(' | b']' | b'=' | b' '))
                .unwrap_or(rest.len());
            let path = &rest[..end];
            let last = path.rsplit_str("::").next().unwrap_or(path);
            matches!(
                last,
                b"test" | b"rstest" | b"test_case" | b"quickcheck" | b"test_log"
            )
        }
        Lang::Java => [
            &b"@Test"[..],
            b"@ParameterizedTest",
            b"@RepeatedTest",
            b"@TestFactory",
            b"@TestTemplate",
        ]
        .iter()
        .any(|a| {
            t.strip_prefix(*a)
                .is_some_and(|rest| rest.first().is_none_or(|b| !ident(*b)))
        }),
        _ => false,
    }
}

/// The identifier that starts `t` (after leading spaces).
fn leading_ident(t: &[u8]) -> &[u8] {
    let t = t.trim_ascii_start();
    let end = t.iter().position(|b| !ident(*b)).unwrap_or(t.len());
    &t[..end]
}

/// The name a definition line defines (any function or class, test or not): what a marker
/// written above it belongs to.
pub(super) fn def_name(lang: Lang, t: &[u8]) -> Option<&[u8]> {
    let after = |kw: &[u8]| -> Option<&[u8]> {
        let mut from = 0;
        while let Some(i) = find_at(t, kw, from) {
            if i == 0 || !ident(t[i - 1]) {
                let name = leading_ident(&t[i + kw.len()..]);
                return (!name.is_empty()).then_some(name);
            }
            from = i + 1;
        }
        None
    };
    match lang {
        Lang::Python => {
            let t2 = t.strip_prefix(b"async ").unwrap_or(t);
            if let Some(rest) = t2.strip_prefix(b"def ") {
                return Some(leading_ident(rest)).filter(|n| !n.is_empty());
            }
            t.strip_prefix(b"class ")
                .map(leading_ident)
                .filter(|n| !n.is_empty())
        }
        Lang::Rust => after(b"fn "),
        Lang::Go => t
            .strip_prefix(b"func ")
            .map(leading_ident)
            .filter(|n| !n.is_empty()),
        Lang::Js => js_test_call(t).or_else(|| {
            starts_word(t, b"describe(")
                .then(|| string_literal(t))
                .flatten()
        }),
        Lang::Java => after(b"fun ").or_else(|| {
            let open = t.find_byte(b'(')?;
            let head = &t[..open];
            let looks_like_method = contains(head, b"void ")
                || head.starts_with(b"public ")
                || head.starts_with(b"private ")
                || head.starts_with(b"protected ");
            if !looks_like_method || t.find_byte(b'=').is_some_and(|e| e < open) {
                return None;
            }
            let end = head.trim_ascii_end();
            let start = end.iter().rposition(|b| !ident(*b)).map_or(0, |p| p + 1);
            Some(&end[start..]).filter(|n| !n.is_empty())
        }),
    }
}

/// The name of a test a definition line defines by itself (Python's `def test_…` and
/// `class Test…`, Go's `func Test…`, a JS `it(`/`test(` call, a Go subtest `t.Run("…"`); Rust
/// and Java tests are functions under a test attribute, which the caller pairs.
pub(super) fn test_def(lang: Lang, t: &[u8]) -> Option<&[u8]> {
    match lang {
        Lang::Python => {
            let name = def_name(lang, t)?;
            let is_class = t.starts_with(b"class ");
            let test = if is_class {
                name.starts_with(b"Test")
            } else {
                name.starts_with(b"test")
            };
            test.then_some(name)
        }
        Lang::Go => {
            if let Some(name) = def_name(lang, t) {
                let test = [&b"Test"[..], b"Fuzz", b"Example"].iter().any(|p| {
                    name.strip_prefix(*p)
                        .is_some_and(|rest| rest.first().is_none_or(|b| !b.is_ascii_lowercase()))
                });
                return test.then_some(name);
            }
            has_word(t, b"t.Run(", true)
                .then(|| string_literal(t))
                .flatten()
        }
        Lang::Js => js_test_call(t),
        Lang::Rust | Lang::Java => None,
    }
}

/// `it(`, `test(`, `specify(` and their variants (`it.skip(`, `xit(`, `test.each(…)(`): the
/// test's name, its first string literal (else the line).
fn js_test_call(t: &[u8]) -> Option<&[u8]> {
    let head = leading_ident(t);
    if !matches!(
        head,
        b"it" | b"test" | b"specify" | b"xit" | b"xtest" | b"fit" | b"xspecify"
    ) || !t.starts_with(head)
    {
        return None;
    }
    let rest = &t[head.len()..];
    let open = rest.find_byte(b'(')?;
    // Only `.modifier` chains between the name and the call.
    if !rest[..open]
        .iter()
        .all(|b| ident(*b) || *b == b'.' || *b == b' ')
    {
        return None;
    }
    string_literal(&rest[open..]).or(Some(t))
}

/// The first string literal of a line (`'…'`, `"…"` or `` `…` ``), with its quotes.
fn string_literal(t: &[u8]) -> Option<&[u8]> {
    let start = t.iter().position(|b| matches!(b, b'\'' | b'"' | b'`'))?;
    let quote = t[start];
    let mut i = start + 1;
    while i < t.len() {
        match t[i] {
            b'\\' => i += 2,
            b if b == quote => return Some(&t[start..=i]),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_per_language() {
        let yes = [
            (Lang::Python, "@pytest.mark.skip(reason='x')"),
            (Lang::Python, "@pytest.mark.skipif(True, reason='x')"),
            (Lang::Python, "@pytest.mark.xfail"),
            (Lang::Python, "pytestmark = pytest.mark.skip"),
            (Lang::Python, "@unittest.skip('x')"),
            (Lang::Python, "@unittest.skipIf(True, 'x')"),
            (Lang::Python, "@skip('x')"),
            (Lang::Python, "pytest.skip('later')"),
            (Lang::Python, "self.skipTest('x')"),
            (Lang::Python, "@unittest.expectedFailure"),
            (Lang::Rust, "#[ignore]"),
            (Lang::Rust, "#[ignore = \"slow\"]"),
            (Lang::Rust, "#[cfg_attr(unix, ignore)]"),
            (Lang::Go, "t.Skip(\"later\")"),
            (Lang::Go, "t.Skipf(\"%d\", 1)"),
            (Lang::Go, "t.SkipNow()"),
            (Lang::Js, "it.skip('adds', () => {"),
            (Lang::Js, "xit('adds', () => {"),
            (Lang::Js, "describe.skip('calc', () => {"),
            (Lang::Js, "test.skip('adds', () => {"),
            (Lang::Js, "test.todo('adds')"),
            (Lang::Js, "it.only('adds', () => {"),
            (Lang::Java, "@Disabled(\"later\")"),
            (Lang::Java, "@Ignore"),
        ];
        for (lang, line) in yes {
            assert!(marker(lang, line.as_bytes()), "{line}");
        }
        let no = [
            (Lang::Python, "# pytest.mark.skip was here"),
            (Lang::Python, "def skip_blank(lines):"),
            (Lang::Python, "skip = True"),
            (Lang::Rust, "// #[ignore]"),
            (Lang::Rust, "let ignore = true;"),
            (Lang::Go, "skip := true"),
            (Lang::Js, "const skip = 1;"),
            (Lang::Js, "items.split(',')"),
            (Lang::Java, "int ignored = 0;"),
        ];
        for (lang, line) in no {
            assert!(!marker(lang, line.as_bytes()), "{line}");
        }
    }

    #[test]
    fn assertions_per_language() {
        let yes = [
            (Lang::Python, "assert add(2, 3) == 5"),
            (Lang::Python, "self.assertEqual(add(2, 3), 5)"),
            (Lang::Python, "with pytest.raises(ValueError):"),
            (Lang::Rust, "assert_eq!(add(2, 3), 5);"),
            (Lang::Rust, "assert!(ok);"),
            (Lang::Rust, "debug_assert_ne!(a, b);"),
            (Lang::Go, "t.Errorf(\"got %d\", got)"),
            (Lang::Go, "t.Fatal(err)"),
            (Lang::Go, "require.NoError(t, err)"),
            (Lang::Js, "expect(add(2, 3)).toBe(5);"),
            (Lang::Js, "assert.strictEqual(add(2, 3), 5);"),
            (Lang::Java, "assertEquals(5, add(2, 3));"),
        ];
        for (lang, line) in yes {
            assert!(assertion(lang, line.as_bytes()), "{line}");
        }
        let no = [
            (Lang::Python, "# assert nothing"),
            (Lang::Python, "reassert = 1"),
            (Lang::Rust, "let asserted = 1;"),
            (Lang::Go, "if err.Error() != \"x\" {"),
            (Lang::Js, "const expected = 5;"),
        ];
        for (lang, line) in no {
            assert!(!assertion(lang, line.as_bytes()), "{line}");
        }
    }

    #[test]
    fn definitions_and_tests() {
        let t = |lang, l: &str| test_def(lang, l.as_bytes()).map(|n| n.to_str_lossy().into_owned());
        assert_eq!(
            t(Lang::Python, "def test_add(self):").as_deref(),
            Some("test_add")
        );
        assert_eq!(
            t(Lang::Python, "async def test_io():").as_deref(),
            Some("test_io")
        );
        assert_eq!(
            t(Lang::Python, "class TestCalc:").as_deref(),
            Some("TestCalc")
        );
        assert_eq!(t(Lang::Python, "def helper():"), None);
        assert_eq!(
            t(Lang::Go, "func TestAdd(t *testing.T) {").as_deref(),
            Some("TestAdd")
        );
        assert_eq!(t(Lang::Go, "func Testing() {"), None);
        assert_eq!(
            t(Lang::Go, "t.Run(\"neg\", func(t *testing.T) {").as_deref(),
            Some("\"neg\"")
        );
        assert_eq!(t(Lang::Js, "it('adds', () => {").as_deref(), Some("'adds'"));
        assert_eq!(
            t(Lang::Js, "test.skip(\"adds\", () => {").as_deref(),
            Some("\"adds\"")
        );
        assert_eq!(t(Lang::Js, "const re = /x/; re.test(s)"), None);
        let d = |lang, l: &str| def_name(lang, l.as_bytes()).map(|n| n.to_str_lossy().into_owned());
        assert_eq!(
            d(Lang::Rust, "pub(crate) async fn adds() {").as_deref(),
            Some("adds")
        );
        assert_eq!(d(Lang::Java, "void adds() {").as_deref(), Some("adds"));
        assert_eq!(
            d(Lang::Java, "public void adds() throws Exception {").as_deref(),
            Some("adds")
        );
        assert_eq!(d(Lang::Java, "fun adds() {").as_deref(), Some("adds"));
        assert!(test_attribute(Lang::Rust, b"#[test]"));
        assert!(test_attribute(
            Lang::Rust,
            b"#[tokio::test(flavor = \"multi_thread\")]"
        ));
        assert!(!test_attribute(Lang::Rust, b"#[cfg(test)]"));
        assert!(test_attribute(Lang::Java, b"@Test"));
        assert!(!test_attribute(Lang::Java, b"@TestInstance(PER_CLASS)"));
    }

    #[test]
    fn test_files_by_path() {
        assert_eq!(by_path("tests/test_calc.py", Lang::Python), ByPath::Yes);
        assert_eq!(by_path("calc_test.py", Lang::Python), ByPath::Yes);
        assert_eq!(by_path("calc.py", Lang::Python), ByPath::Maybe);
        assert_eq!(by_path("calc_test.go", Lang::Go), ByPath::Yes);
        assert_eq!(by_path("calc.go", Lang::Go), ByPath::No);
        assert_eq!(by_path("src/calc.test.ts", Lang::Js), ByPath::Yes);
        assert_eq!(by_path("src/__tests__/calc.js", Lang::Js), ByPath::Yes);
        assert_eq!(by_path("test/calc.js", Lang::Js), ByPath::Maybe);
        assert_eq!(by_path("src/calc.js", Lang::Js), ByPath::No);
        assert_eq!(by_path("src/CalcTest.java", Lang::Java), ByPath::Yes);
        assert_eq!(lang_of("Makefile"), None);
        assert_eq!(lang_of("a/b.rs"), Some(Lang::Rust));
    }
}
