//! The in-toto Statement v1 the evidence is (SPEC §6.1): its subject is the result tree (and
//! the result commit, when there is one), its predicate the in-toto test-result predicate
//! v0.1: `result`, `passedTests` (the commands that ran, in order), `configuration` (the work
//! order, the run, the environment the checks ran in) and `url` (the run ref).

use serde_json::{json, Map, Value};
use std::io::Read as _;
use std::time::{Duration, Instant};

pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const TEST_RESULT_TYPE: &str = "https://in-toto.io/attestation/test-result/v0.1";

/// The tests behind the commands (SPEC §3.9), each `COMMAND :: TEST`.
#[derive(Debug, Clone, Default)]
pub struct TestLists {
    pub passed: Vec<String>,
    /// Flaky: failed once, passed when run again.
    pub warned: Vec<String>,
    pub failed: Vec<String>,
}

/// What a statement says about one PASS.
pub struct Facts<'a> {
    pub tree: git2::Oid,
    pub commit: Option<git2::Oid>,
    /// The commands that ran, in order (verification, `pass_to_pass`, `fail_to_pass`,
    /// acceptance), as argv.
    pub commands: &'a [Vec<String>],
    pub work_order_sha256: Option<&'a str>,
    /// `refs/factory/<run_id>`.
    pub run_ref: Option<&'a str>,
    pub environment: Value,
    pub tests: &'a TestLists,
}

/// A command as one test name: its argv in shell quoting, so it reads back word for word.
pub fn command_text(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

/// The statement's bytes (JSON with its keys in order, so the same facts give the same
/// payload).
pub fn build(facts: &Facts<'_>) -> Vec<u8> {
    let mut subject = vec![json!({
        "name": "tree",
        "digest": {"gitTree": facts.tree.to_string()},
    })];
    if let Some(commit) = facts.commit {
        subject.push(json!({
            "name": "commit",
            "digest": {"gitCommit": commit.to_string()},
        }));
    }
    let mut configuration = Vec::new();
    if let Some(sha) = facts.work_order_sha256 {
        configuration.push(json!({"name": "work-order", "digest": {"sha256": sha}}));
    }
    if let Some(run) = facts.run_ref {
        configuration.push(json!({"name": "run", "uri": run}));
    }
    let env_digest =
        crate::identity::sha256_hex(crate::identity::canonical_json(&facts.environment).as_bytes());
    configuration.push(json!({
        "name": "environment",
        "digest": {"sha256": env_digest},
        "annotations": facts.environment,
    }));
    let mut predicate = Map::new();
    predicate.insert("result".into(), "PASSED".into());
    // The commands first (what `attest verify` checks), then their tests one by one.
    let passed: Vec<Value> = (facts.commands.iter().map(|c| Value::from(command_text(c))))
        .chain(facts.tests.passed.iter().map(|t| Value::from(t.as_str())))
        .collect();
    predicate.insert("passedTests".into(), passed.into());
    predicate.insert("warnedTests".into(), json!(facts.tests.warned));
    predicate.insert("failedTests".into(), json!(facts.tests.failed));
    predicate.insert("configuration".into(), configuration.into());
    if let Some(run) = facts.run_ref {
        predicate.insert("url".into(), run.into());
    }
    let statement = json!({
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": TEST_RESULT_TYPE,
        "predicate": predicate,
    });
    serde_json::to_vec(&statement).unwrap_or_default()
}

/// What a verifier reads from a statement.
#[derive(Debug)]
pub struct Claims {
    /// Every `gitTree` digest among the subjects.
    pub trees: Vec<String>,
    pub result: String,
    /// `passedTests`, as written.
    pub passed: Vec<String>,
}

impl Claims {
    /// Whether the statement lists `argv` among the commands that passed (compared word for
    /// word, however it was quoted).
    pub fn passed_command(&self, argv: &[String]) -> bool {
        self.passed
            .iter()
            .any(|t| shlex::split(t).is_some_and(|words| words == argv))
    }
}

/// Any JSON value, refused when one of its objects names a key twice.
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "the key {key:?} appears twice"
                )));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }
}

/// Reads a statement: an in-toto Statement v1 with the test-result predicate, else why not.
pub fn read(payload: &[u8]) -> Result<Claims, String> {
    // A key named twice is read differently by different parsers (serde_json keeps the last):
    // the signer may have meant the other one, so such a payload says nothing.
    serde_json::from_slice::<UniqueKeys>(payload)
        .map_err(|e| format!("payload is not JSON with each key once: {e}"))?;
    let value: Value =
        serde_json::from_slice(payload).map_err(|e| format!("payload is not JSON: {e}"))?;
    let field = |v: &Value, name: &str| v.get(name).and_then(Value::as_str).map(str::to_string);
    if field(&value, "_type").as_deref() != Some(STATEMENT_TYPE) {
        return Err(format!(
            "payload is not an in-toto Statement v1 ({STATEMENT_TYPE})"
        ));
    }
    if field(&value, "predicateType").as_deref() != Some(TEST_RESULT_TYPE) {
        return Err(format!(
            "statement's predicateType is not {TEST_RESULT_TYPE}"
        ));
    }
    let trees = value
        .get("subject")
        .and_then(Value::as_array)
        .map(|subjects| {
            subjects
                .iter()
                .filter_map(|s| s.get("digest")?.get("gitTree")?.as_str())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let predicate = value.get("predicate").cloned().unwrap_or_default();
    let passed = predicate
        .get("passedTests")
        .and_then(Value::as_array)
        .map(|tests| {
            tests
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ok(Claims {
        trees,
        result: field(&predicate, "result").unwrap_or_default(),
        passed,
    })
}

/// The environment the checks ran in: the OS, and the version each command's program gives
/// (`PROGRAM --version`, first line) for programs found on PATH. A program named by a path
/// (`./run-tests`) is part of the tree the statement is about, so it is not asked.
pub fn environment(commands: &[Vec<String>]) -> Value {
    let mut programs = Map::new();
    for argv in commands {
        let Some(program) = argv.first() else {
            continue;
        };
        if program.contains('/') || programs.contains_key(program) {
            continue;
        }
        let version = version_of(program).unwrap_or_else(|| "unknown".to_string());
        programs.insert(program.clone(), version.into());
    }
    let mut env = Map::new();
    env.insert("os".into(), std::env::consts::OS.into());
    env.insert("arch".into(), std::env::consts::ARCH.into());
    if let Some(name) = os_release_name() {
        env.insert("distribution".into(), name.into());
    }
    if let Ok(kernel) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        env.insert("kernel".into(), kernel.trim().into());
    }
    env.insert("programs".into(), programs.into());
    Value::Object(env)
}

fn os_release_name() -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    let line = text.lines().find(|l| l.starts_with("PRETTY_NAME="))?;
    Some(line["PRETTY_NAME=".len()..].trim_matches('"').to_string())
}

/// How long a program may take to say its version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(3);

/// `PROGRAM --version`'s first line, asked in an empty folder, without the provider keys or
/// a way to sign, for at most three seconds.
fn version_of(program: &str) -> Option<String> {
    let dir = tempfile::tempdir().ok()?;
    let out_path = dir.path().join("version");
    let out = std::fs::File::create(&out_path).ok()?;
    let mut cmd = std::process::Command::new(program);
    cmd.arg("--version")
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(std::process::Stdio::null());
    for name in crate::env::ALWAYS_SCRUBBED {
        cmd.env_remove(name);
    }
    crate::secrets::keep_from_signing(&mut cmd);
    let mut child = cmd.spawn().ok()?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < VERSION_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    if !status.success() {
        return None;
    }
    let mut text = Vec::new();
    std::fs::File::open(&out_path)
        .ok()?
        .take(4096)
        .read_to_end(&mut text)
        .ok()?;
    let text = String::from_utf8_lossy(&text);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().filter(|c| !c.is_control()).take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn statements_name_the_tree_the_commit_and_the_commands() {
        let tree = git2::Oid::from_str("4b825dc642cb6eb9a060e54bf8d69288fbee4904").expect("oid");
        let commit = git2::Oid::from_str("1111111111111111111111111111111111111111").expect("oid");
        let commands = vec![
            argv(&["bash", "scripts/verify.sh"]),
            argv(&["sh", "-c", "a && b"]),
        ];
        let bytes = build(&Facts {
            tree,
            commit: Some(commit),
            commands: &commands,
            work_order_sha256: Some("ab"),
            run_ref: Some("refs/factory/0123456789ab"),
            environment: json!({"os": "linux"}),
            tests: &TestLists {
                passed: vec!["pytest -q :: tests/t.py::test_a".into()],
                warned: vec!["pytest -q :: tests/t.py::test_b".into()],
                failed: Vec::new(),
            },
        });
        let v: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(v["_type"], STATEMENT_TYPE);
        assert_eq!(v["subject"][0]["digest"]["gitTree"], tree.to_string());
        assert_eq!(v["subject"][1]["digest"]["gitCommit"], commit.to_string());
        assert_eq!(v["predicate"]["url"], "refs/factory/0123456789ab");
        assert_eq!(v["predicate"]["passedTests"][1], "sh -c 'a && b'");
        assert_eq!(
            v["predicate"]["passedTests"][commands.len()],
            "pytest -q :: tests/t.py::test_a"
        );
        assert_eq!(
            v["predicate"]["warnedTests"][0],
            "pytest -q :: tests/t.py::test_b"
        );
        let claims = read(&bytes).expect("reads");
        assert_eq!(claims.trees, [tree.to_string()]);
        assert_eq!(claims.result, "PASSED");
        assert!(claims.passed_command(&commands[1]));
        assert!(!claims.passed_command(&argv(&["sh", "-c", "a", "&&", "b"])));
        assert!(read(b"{\"_type\": \"x\"}").is_err());
        assert!(read(b"nope").is_err());
    }

    #[test]
    fn versions_are_asked_of_programs_on_path_only() {
        let env = environment(&[
            argv(&["git", "diff", "--check"]),
            argv(&["./run-tests"]),
            argv(&["no-such-program-here"]),
        ]);
        let programs = &env["programs"];
        assert!(programs["git"]
            .as_str()
            .is_some_and(|v| v.starts_with("git version")));
        assert!(programs.get("./run-tests").is_none());
        assert_eq!(programs["no-such-program-here"], "unknown");
    }

    #[test]
    fn a_key_named_twice_makes_the_statement_say_nothing() {
        let tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        let body = |predicate: &str| {
            format!(
                r#"{{"_type":"{STATEMENT_TYPE}","subject":[{{"digest":{{"gitTree":"{tree}"}}}}],"predicateType":"{TEST_RESULT_TYPE}","predicate":{predicate}}}"#
            )
        };
        let once = body(r#"{"result":"PASSED","passedTests":["true"]}"#);
        assert_eq!(read(once.as_bytes()).expect("reads").result, "PASSED");
        let twice = body(r#"{"result":"FAILED","result":"PASSED","passedTests":["true"]}"#);
        let Err(err) = read(twice.as_bytes()) else {
            panic!("a statement with a key named twice was read");
        };
        assert!(err.contains("\"result\" appears twice"), "{err}");
    }
}
