//! The house rules of ARCHITECTURE.md, checked on the source itself: every room sits on a floor,
//! lower floors never import higher ones, no rooms import each other in a circle, and no file or
//! function grows past the size a newcomer can read at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest function body, in lines, that a reader is expected to hold at once.
const MAX_FN_LINES: usize = 120;
/// Longest file under src/, in lines, unit-test modules aside.
const MAX_FILE_LINES: usize = 1200;

/// The floors, lowest first, as ARCHITECTURE.md names them. A room is a module path; a folder
/// entry covers every room below it unless a longer entry says otherwise.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "base",
        &[
            "env",
            "error",
            "crash",
            "trace",
            "interrupt",
            "identity",
            "secrets",
            "config",
            "ui",
            "budget",
            "cost",
            "workorder",
            "clock",
            "harness",
            "store/records",
        ],
    ),
    ("git", &["git", "store", "journal", "sandbox"]),
    ("roles", &["roles", "evidence"]),
    ("run", &["run", "graph", "delivery", "ops"]),
    ("cli", &["cli", "main", "lib"]),
];

/// Imports that go up a floor on purpose, each with its reason. The target is at most one.
const ALLOWED_UPWARD: &[(&str, &str)] = &[];

type Room = Vec<String>;

struct Source {
    room: Room,
    file: PathBuf,
    /// The file's text with its `#[cfg(test)]` modules cut out.
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn read_sources() -> Vec<Source> {
    let mut out = Vec::new();
    let mut stack = vec![src_dir()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src_dir()).expect("under src");
                let mut room: Room = rel
                    .with_extension("")
                    .iter()
                    .map(|c| c.to_string_lossy().into_owned())
                    .collect();
                if room.last().is_some_and(|l| l == "mod") {
                    room.pop();
                }
                let text = std::fs::read_to_string(&path).expect("source is UTF-8");
                out.push(Source {
                    room,
                    file: rel.to_path_buf(),
                    code: without_test_modules(&text),
                });
            }
        }
    }
    out.sort_by(|a, b| a.room.cmp(&b.room));
    out
}

/// Cuts every `#[cfg(test)] mod x { … }` block (braces counted outside strings and chars).
fn without_test_modules(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let is_mod = after.starts_with("mod ") || after.starts_with("pub mod ");
        if !is_mod {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
            continue;
        }
        out.push_str(&rest[..at]);
        let Some(open) = rest[at..].find('{') else {
            return out;
        };
        let body = &rest[at + open..];
        let end = matching_brace(body).unwrap_or(body.len());
        rest = &body[end..];
    }
    out.push_str(rest);
    out
}

/// Byte offset just past the brace that closes the one `text` starts with.
fn matching_brace(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Every `a::b::c` path a file names through `crate::`, `super::` or `use`, as module paths.
fn named_paths(src: &Source) -> Vec<Room> {
    let mut paths = Vec::new();
    let code = &src.code;
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        let Some(tree) = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .find_map(|p| line.strip_prefix(p))
        else {
            continue;
        };
        let mut statement = tree.to_owned();
        while !statement.contains(';') {
            match lines.next() {
                Some(more) => statement.push_str(more),
                None => break,
            }
        }
        let end = statement.find(';').unwrap_or(statement.len());
        expand_use(&statement[..end], &mut Vec::new(), &mut paths);
    }
    for root in ["crate", "super", "self"] {
        inline_paths(code, root, &mut paths);
    }
    paths
        .into_iter()
        .filter_map(|p| absolute(&src.room, &p))
        .collect()
}

/// Every inline `root::a::b` path in `code`, where `root` starts a token (so `x::super::y` and
/// `my_crate::z` are not read as `super::y` or `crate::z`).
fn inline_paths(code: &str, root: &str, paths: &mut Vec<Room>) {
    let marker = format!("{root}::");
    let mut from = 0;
    while let Some(found) = code[from..].find(&marker) {
        let at = from + found;
        let tail = &code[at + marker.len()..];
        let len = tail
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        from = at + marker.len() + len;
        let starts_token = code[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
        if !starts_token {
            continue;
        }
        paths.push(
            std::iter::once(root)
                .chain(tail[..len].split("::").filter(|s| !s.is_empty()))
                .map(str::to_owned)
                .collect(),
        );
    }
}

/// Expands `a::{b, c::{d}}` into `a::b`, `a::c::d`.
fn expand_use(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Room>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let len = prefix.len();
        prefix.extend(head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[start..], prefix, out);
        prefix.truncate(len);
    } else if !tree.is_empty() {
        let tree = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix.clone();
        path.extend(tree.split("::").map(|s| s.trim().to_owned()));
        out.push(path);
    }
}

/// Resolves `crate::`, `super::` and `self::` against the room that names the path.
fn absolute(room: &Room, path: &Room) -> Option<Room> {
    let first = path.first()?;
    let mut base: Room = match first.as_str() {
        "crate" | "git_factory" => Vec::new(),
        "self" => room.clone(),
        "super" => room.clone(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if first == "super" {
        base.pop();
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The longest room that is a prefix of `path`.
fn room_of(rooms: &BTreeSet<Room>, path: &Room) -> Option<Room> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| rooms.contains(p))
}

fn imports(sources: &[Source]) -> BTreeMap<Room, BTreeSet<Room>> {
    let rooms: BTreeSet<Room> = sources.iter().map(|s| s.room.clone()).collect();
    let mut edges: BTreeMap<Room, BTreeSet<Room>> = BTreeMap::new();
    for src in sources {
        let to = edges.entry(src.room.clone()).or_default();
        for path in named_paths(src) {
            if let Some(target) = room_of(&rooms, &path) {
                // A parent module is where a room is declared, not a room it uses.
                let is_ancestor = src.room.starts_with(&target);
                if target != src.room && !target.is_empty() && !is_ancestor {
                    to.insert(target);
                }
            }
        }
    }
    edges
}

fn floor_of(room: &Room) -> Option<(usize, &'static str)> {
    let name = room.join("/");
    let mut best: Option<(usize, usize, &'static str)> = None;
    for (floor, (label, members)) in FLOORS.iter().enumerate() {
        for member in *members {
            let covers = name == *member || name.starts_with(&format!("{member}/"));
            if covers && best.is_none_or(|(len, _, _)| member.len() > len) {
                best = Some((member.len(), floor, label));
            }
        }
    }
    best.map(|(_, floor, label)| (floor, label))
}

fn show(room: &Room) -> String {
    if room.is_empty() {
        "lib".to_owned()
    } else {
        room.join("/")
    }
}

/// Strongly connected sets of two or more rooms (Tarjan).
fn circles(edges: &BTreeMap<Room, BTreeSet<Room>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Room, BTreeSet<Room>>,
        index: BTreeMap<&'a Room, usize>,
        low: BTreeMap<&'a Room, usize>,
        stack: Vec<&'a Room>,
        on_stack: BTreeSet<&'a Room>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Room) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    set.push(show(w));
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn every_room_sits_on_a_floor() {
    let missing: Vec<String> = read_sources()
        .iter()
        .filter(|s| floor_of(&s.room).is_none() && !s.room.is_empty())
        .map(|s| show(&s.room))
        .collect();
    assert!(
        missing.is_empty(),
        "rooms on no floor (place them in ARCHITECTURE.md and in FLOORS here): {missing:?}"
    );
}

#[test]
fn no_rooms_import_each_other_in_a_circle() {
    let found = circles(&imports(&read_sources()));
    assert!(found.is_empty(), "circles of imports: {found:?}");
}

#[test]
fn lower_floors_never_import_higher_ones() {
    let mut upward = Vec::new();
    for (from, targets) in imports(&read_sources()) {
        let Some((floor, _)) = floor_of(&from) else {
            continue;
        };
        for to in targets {
            let Some((target_floor, label)) = floor_of(&to) else {
                continue;
            };
            let allowed = ALLOWED_UPWARD.contains(&(show(&from).as_str(), show(&to).as_str()));
            if target_floor > floor && !allowed {
                upward.push(format!("{} -> {} (floor {label})", show(&from), show(&to)));
            }
        }
    }
    assert!(ALLOWED_UPWARD.len() <= 1, "at most one arrow back up");
    assert!(upward.is_empty(), "imports going up a floor: {upward:#?}");
}

#[test]
fn files_and_functions_stay_readable() {
    let mut long = Vec::new();
    for src in read_sources() {
        let lines: Vec<&str> = src.code.lines().collect();
        if lines.len() > MAX_FILE_LINES {
            long.push(format!("{}: {} lines", src.file.display(), lines.len()));
        }
        for (start, line) in lines.iter().enumerate() {
            let Some(name) = fn_name(line) else {
                continue;
            };
            let indent = line.len() - line.trim_start().len();
            if line.trim_end().ends_with(';') {
                continue;
            }
            let close = format!("{}}}", " ".repeat(indent));
            let end = lines[start + 1..]
                .iter()
                .position(|l| l.starts_with(&close) && l.len() - l.trim_start().len() == indent)
                .map_or(lines.len(), |p| start + 1 + p);
            let len = end - start + 1;
            if len > MAX_FN_LINES {
                long.push(format!("{}: fn {name} is {len} lines", src.file.display()));
            }
        }
    }
    assert!(long.is_empty(), "too long to read at once: {long:#?}");
}

/// The name of the function a line declares, if it declares one.
fn fn_name(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace().peekable();
    while let Some(word) = words.next() {
        match word {
            "pub" | "const" | "async" | "unsafe" | "extern" | "\"C\"" => continue,
            w if w.starts_with("pub(") => continue,
            "fn" => {
                let name = words.next()?;
                let end = name.find(['(', '<']).unwrap_or(name.len());
                return Some(&name[..end]);
            }
            _ => return None,
        }
    }
    None
}

/// The import reader itself: inline `super::`/`self::`/`crate::` paths count as imports, but
/// not the tail of a longer path (`x::super::y`, `my_crate::z`).
#[test]
fn inline_paths_are_read_as_imports() {
    let src = Source {
        room: vec!["roles".into(), "tr".into(), "apply".into()],
        file: PathBuf::from("roles/tr/apply.rs"),
        code: "fn f() { super::ladder::Index::default(); self::inner::g(); crate::git::pool::h(); \
               a::super::skipped::x(); my_crate::also_skipped(); }"
            .to_owned(),
    };
    let found: BTreeSet<String> = named_paths(&src).iter().map(|p| p.join("/")).collect();
    let want: BTreeSet<String> = [
        "roles/tr/ladder/Index/default",
        "roles/tr/apply/inner/g",
        "git/pool/h",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(found, want);
}
