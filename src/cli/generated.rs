//! Man pages and shell completions, generated from the clap definitions. The committed copies
//! in `man/` and `completions/` are checked against these by a test.

use super::Cli;
use clap::CommandFactory;
use clap_complete::Shell;

/// What the man pages add to the generated synopsis and options.
const EXIT_STATUS: &str = "0 PASS, or success\n1 FAIL verdict (a refused patch with `git factory patch`, a conflict with `apply`, a failed `verify`, a revision `attest verify` cannot vouch for)\n2 refused before anything changed (usage, invalid work order, preflight, provider misconfigured), or a run that could not finish (verdict ERROR, rolled back first)\n130 interrupted (after rollback)\n101 a bug (panic)";

const CONFIGURATION: &str = "factory.model\tthe model for --llm-model, as [PROVIDER:]MODEL\nfactory.baseUrl\tthe base URL of an OpenAI-compatible server\nfactory.temperature\tsampling temperature (0)\nfactory.maxAttempts\tSE -> TR -> PO attempts (2)\nfactory.timeoutSeconds\ttime limit per command (600)\nfactory.agentTimeout\ttime limit per agent invocation (1800)\nfactory.verify\tglobal verification commands, one per value, when scripts/verify.sh does not exist\nfactory.scrubEnv\tmore environment variables removed from commands (multi-valued)\nfactory.prePush\tfalse turns the pre-push hook off\nfactory.commitHooks\tfalse skips the pre-commit and commit-msg hooks on --commit/--branch\nfactory.attest\ttrue signs a PASS's evidence as --attest does (needs user.signingKey)\nfactory.agentIgnore\tglobs of a coding agent's own files, ignored in its worktree and kept out of its proposal (multi-valued; default .aider*, .codex/, .claude/)\nfactory.agentWritable\tfolders a coding agent may write under --sandbox besides its worktree, e.g. ~/.codex (multi-valued)\nfactory.agentSocket\ta unix socket a coding agent may connect to under --sandbox, which otherwise refuses every unix socket (multi-valued)\nfactory.sandboxBackend\tthe backend of --sandbox: auto (bubblewrap, else Landlock), bwrap or landlock; used only once shown to confine\nfactory.recordLogBytes\tthe most of each command stream a run record keeps: head and tail around a marker; --out keeps it whole (1m)\nfactory.pruneOlderThan\tthe age prune removes runs at when --older-than is not given, e.g. 90d (never)\nfactory.maxCost\tthe dollar budget of a run, as --max-cost\nfactory.priceFile\ta JSON file of your prices in USD per million tokens: {\"MODEL\": {\"input\": N, \"output\": N, \"cacheRead\": N, \"cacheWrite\": N}}\nfactory-price.<model>.input\tyour price of a model's input in USD per million tokens, over the genai-prices table (also .output, .cacheRead, .cacheWrite; the model name is a subsection, so factory-price.gpt-4.1.input and factory-price.llama3.1:8b.output work)\nfactory.poolSize\thow many idle pooled worktrees (under .git/factory/worktrees/) are kept for --worktree runs, candidates, agents' scratch worktrees, verify and the pre-push hook; prune removes idle ones (the number of CPUs)\ncore.hooksPath\twhere hook install writes the pre-push hook";

fn description(name: &str) -> &'static str {
    match name {
        "run" => "Runs one work order through the strict SE -> TR -> PO loop. SE (a model, an agent command, a coding agent in a scratch worktree, or replayed proposals) proposes a change; TR parses it with git factory's own diff parser, checks every touched path against allowed_files and the always-refused rules, computes every resulting file in memory and writes all or nothing; PO runs global verification and the acceptance commands. A failed attempt is rolled back exactly and the next attempt gets a bounded failure brief. Every run is recorded under refs/factory/<run_id> and in refs/notes/factory.",
        "log" => "Lists the runs stored under refs/factory/, newest first, one line each: run id, verdict, attempts, work-order id and title, baseline and age. Runs fetched from a remote show up too.",
        "show" => "Shows one run: its summary, each attempt's stage, apply method, commands with exit codes and durations, and failure brief; or its patch, a command's full output, or the stored run_summary.json.",
        "apply" => "Brings the change of a run that PASSed into the current work tree, merging 3-way when HEAD has moved on since the run's baseline. A conflict is reported and nothing is written.",
        "verify" => "Runs global verification on a revision in a temporary worktree. A pass is cached in refs/notes/factory-verify keyed by tree id, so verifying the same tree again is instant. With --attest a pass is also signed with your git signing key (user.signingKey; gpg.format ssh or openpgp) as an in-toto test-result statement about the tree, in a DSSE envelope noted on the tree in refs/notes/factory-attest; no key configured is refused before any check runs.",
        "attest" => "git factory attest verify [REV...] [--json] [--repo DIR] checks signed evidence without running the checks again. For each revision (default HEAD) it reads the DSSE envelopes noted on the revision's tree in refs/notes/factory-attest and accepts one only if its signature verifies against your own trust (gpg.ssh.allowedSignersFile for SSH signatures, namespace git-factory, never a file inside the work tree, a relative path read from the top of the work tree; your keyring for OpenPGP, the key valid to at least gpg.minTrustLevel, by default marginal, so a key nobody you trust certified does not vouch; never a key carried by the repository or the note), its in-toto subject is exactly that tree, its result is PASSED, and the commands it lists include every check the repository requires for that tree today (scripts/verify.sh, or factory.verify). The evidence survives squash merges, rebases and cherry-picks that keep the tree. Every envelope not accepted is named with its reason: bad signature, untrusted signer, other tree, not passed, other checks, malformed. Lines that are not envelopes cost nothing; envelopes by a key your trust names are checked first; at most 64 signatures are checked per tree, 8 per envelope and 2 per key your trust does not name, and what was not checked is counted. Exit 0 when every revision has an accepted envelope, else 1 (a revision that names no commit too); --json prints every finding on stdout for CI, each envelope's keyid being the key that made its signature.",
        "hook" => "Installs or removes the pre-push hook. On push it verifies each pushed tip in a temporary worktree (cached by tree) and blocks a failing push, and refuses commits whose Factory-Run run did not PASS. A tip whose tree carries signed evidence you trust, covering today's checks (see git factory attest), goes through at once: the hook says \"attested by <signer>\".",
        "reverify" => "Re-runs verification and acceptance on every recorded attempt tree of a run in a temporary worktree, and prints what was recorded next to what happens now.",
        "checkout" => "Writes the tree of one attempt of a run into a folder.",
        "patch" => "The TR engine as plumbing: applies a unified diff, a *** Begin Patch envelope or SEARCH/REPLACE blocks to the work tree under every always-refused rule, all or nothing, trying the strict, recount and fuzzy passes in turn and accepting a pass only where every hunk's location is unique.",
        "recover" => "Finishes a run whose process was killed: stops its commands first, puts back the worktree the run changed exactly (refs, then the index, then the work tree with its modes), records the run as INTERRUPTED and clears the journal. A killed --worktree run or race is finished too: its commands stopped, its worktrees removed, its record INTERRUPTED. Runs whose process is alive are never touched. Run from another worktree of the repo, it restores the run's worktree by its recorded path, or refuses naming it; it never touches the worktree it is run from unless that is the one.",
        "completions" => "Prints the completion script for a shell.",
        "push" => "Sends runs to a remote: first the remote's refs/notes/factory is fetched and merged into yours with git's cat_sort_uniq strategy, then every run ref that is new there (or fast-forwards its record) and the merged notes are pushed. Any number of clones with runs of their own can push without non-fast-forward refusals. A run whose record differs on the two sides keeps its own record on each. The signed evidence in refs/notes/factory-attest is merged and pushed the same way. A notes push refused because another clone pushed first is merged and sent again, with jittered pauses, for up to 60 seconds; a push that still fails names the runs it sent and the refs it did not.",
        "prune" => "Removes run records that started longer ago than --older-than (or git config factory.pruneOlderThan; without either, nothing ages out), beyond the newest --keep N runs of each work order, never a RUNNING run's, together with their lines in refs/notes/factory, and pooled worktrees idle for longer than the same age (one a running command holds is never touched); every other note line is kept byte for byte. --dry-run lists what would go. The objects are left to git gc.",
        "fetch" => "Takes in a remote's runs: run refs that are new here (or fast-forward yours) are created, and the remote's refs/notes/factory and refs/notes/factory-attest are merged into yours with git's cat_sort_uniq strategy.",
        "demo" => "Makes a small repo with a failing check and runs a work order through the loop with a built-in scripted proposer: attempt 1 fails acceptance and is rolled back, attempt 2 passes. Needs nothing but git.",
        _ => "git factory hands a precise work order to a language model or coding agent and gives back either a change that provably passes your checks, or a clean repo and a full record of why not.",
    }
}

fn examples(name: &str) -> &'static str {
    match name {
        "run" => "git factory run -w work_order.json --llm-model openai:gpt-4o\ngit factory run -w wo.json --llm-model openai:qwen2.5-coder --llm-base-url http://127.0.0.1:11434/v1\ngit factory run -w wo.json --agent-edits 'claude -p --permission-mode acceptEdits' --worktree\ngit factory run --id fix-1 --title 'Fix parse' --intent 'parse(\"\") returns []' --allow src/parse.py --accept 'python -m pytest -q' --replay proposals/\ngit factory run -w orders/*.json --jobs 4 --agent-command 'my-agent --json'",
        "log" => "git factory log -3\ngit factory log --oneline --verdict pass\ngit factory log --verdict fail --json",
        "show" => "git factory show\ngit factory show 1a2b\ngit factory show 1a2b --patch --attempt 1\ngit factory show 1a2b --log acceptance:0",
        "apply" => "git factory apply 1a2b",
        "verify" => "git factory verify\ngit factory verify origin/main --no-cache\ngit factory verify --attest",
        "attest" => "git factory attest verify\ngit factory attest verify HEAD origin/main --json",
        "hook" => "git factory hook install\ngit factory hook uninstall",
        "reverify" => "git factory reverify 1a2b",
        "checkout" => "git factory checkout 1a2b --attempt 1 /tmp/attempt1",
        "patch" => "git factory patch --check model.diff\ngit diff | git factory patch --strict -",
        "recover" => "git factory recover",
        "completions" => "mkdir -p ~/.local/share/bash-completion/completions\ngit factory completions bash > ~/.local/share/bash-completion/completions/git-factory",
        "push" => "git factory push\ngit factory push upstream",
        "fetch" => "git factory fetch\ngit factory fetch upstream",
        "prune" => "git factory prune --older-than 90d --keep 5 --dry-run\ngit factory prune --older-than 90d --keep 5\ngit config factory.pruneOlderThan 90d",
        "demo" => "git factory demo ./factory-demo",
        _ => "git factory demo\ngit factory run -w work_order.json --llm-model openai:gpt-4o\ngit factory log\ngit factory push origin",
    }
}

fn roff_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('-', "\\-")
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn section(title: &str, body: &str, verbatim: bool) -> String {
    let mut out = format!(".SH \"{title}\"\n");
    if verbatim {
        out.push_str(".nf\n");
        out.push_str(&roff_escape(body));
        out.push_str("\n.fi\n");
    } else {
        for para in body.split("\n\n") {
            out.push_str(&roff_escape(para));
            out.push_str("\n.PP\n");
        }
    }
    out
}

/// Every man page, as (file name, contents): `git-factory.1` and one per subcommand.
pub fn man_pages() -> Vec<(String, String)> {
    let mut root = Cli::command().name("git-factory").bin_name("git factory");
    root.build();
    let mut pages = Vec::new();
    let mut page = |cmd: clap::Command, file: String, key: &str| {
        let mut buf = Vec::new();
        let man = clap_mangen::Man::new(cmd)
            .date("")
            .source(format!("git-factory {}", env!("CARGO_PKG_VERSION")))
            .manual("Git Manual");
        let _ = man.render_title(&mut buf);
        let _ = man.render_name_section(&mut buf);
        let _ = man.render_synopsis_section(&mut buf);
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        text.push_str(&section("DESCRIPTION", description(key), false));
        let mut buf = Vec::new();
        let _ = man.render_options_section(&mut buf);
        let _ = man.render_subcommands_section(&mut buf);
        text.push_str(&String::from_utf8_lossy(&buf));
        text.push_str(&section("EXAMPLES", examples(key), true));
        if key == "git-factory" || key == "run" {
            text.push_str(&section("CONFIGURATION", CONFIGURATION, true));
        }
        text.push_str(&section("EXIT STATUS", EXIT_STATUS, true));
        let mut buf = Vec::new();
        let _ = man.render_version_section(&mut buf);
        text.push_str(&String::from_utf8_lossy(&buf));
        pages.push((file, text));
    };
    for sub in root.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let name = sub.get_name().to_string();
        let cmd = sub
            .clone()
            .name(format!("git-factory-{name}"))
            .bin_name(format!("git factory {name}"))
            .version(env!("CARGO_PKG_VERSION"));
        page(cmd, format!("git-factory-{name}.1"), &name);
    }
    page(root.clone(), "git-factory.1".to_string(), "git-factory");
    pages.sort();
    pages
}

/// Bash glue so `git factory <TAB>` works: git's completion calls `_git_factory` with git's own
/// words; hand clap's function the words from `factory` on, as if `git-factory` had been typed.
const BASH_GIT_GLUE: &str = r#"
# git's own completion calls _git_<subcommand> for `git factory <TAB>`.
_git_factory() {
    local i at=1 words_=("git-factory")
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ "${COMP_WORDS[i]}" == factory ]]; then
            at=$i
            break
        fi
    done
    for ((i = at + 1; i < ${#COMP_WORDS[@]}; i++)); do
        words_+=("${COMP_WORDS[i]}")
    done
    local COMP_WORDS=("${words_[@]}") COMP_CWORD=$((COMP_CWORD - at))
    _git__factory git-factory "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
}
"#;

/// clap_complete names a subcommand's state from its bin name, turning the `-` of
/// `git-factory` into a separator (`git__subcmd__factory__subcmd__run`), while the loop that
/// walks the words sets `git__factory__subcmd__run`: no state would ever match a case arm and
/// completion below the subcommand would be dead. Name the arms as the loop does.
fn bash_states_matched(text: &str) -> String {
    text.replace("git__subcmd__factory__subcmd__", "git__factory__subcmd__")
}

const FISH_GIT_GLUE: &str = "\n# `git factory <TAB>` through git's own completion\ncomplete -c git -f -n '__fish_git_using_command factory' -a 'run log show apply reverify checkout verify attest hook recover prune patch push fetch completions demo'\n";

/// The completion script for one shell.
pub fn completion(shell: Shell) -> String {
    let mut cmd = Cli::command().name("git-factory").bin_name("git-factory");
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "git-factory", &mut buf);
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    match shell {
        Shell::Bash => {
            text = bash_states_matched(&text);
            text.push_str(BASH_GIT_GLUE);
        }
        Shell::Fish => text.push_str(FISH_GIT_GLUE),
        _ => {}
    }
    text
}

/// Every completion file, as (file name, contents).
pub fn completion_files() -> Vec<(String, String)> {
    vec![
        ("git-factory.bash".to_string(), completion(Shell::Bash)),
        ("_git-factory".to_string(), completion(Shell::Zsh)),
        ("git-factory.fish".to_string(), completion(Shell::Fish)),
    ]
}

#[cfg(test)]
mod tests {
    /// Every state the bash script's word loop can set has a case arm, and every arm is a state.
    #[test]
    fn bash_states_have_arms() {
        let text = super::completion(clap_complete::Shell::Bash);
        let states: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("cmd=\""))
            .filter_map(|l| l.strip_suffix('"'))
            .filter(|s| !s.is_empty())
            .collect();
        let arms: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.starts_with("        git__") && l.ends_with(')'))
            .map(|l| l.trim().trim_end_matches(')'))
            .collect();
        assert!(states.contains("git__factory__subcmd__run"), "{states:?}");
        assert_eq!(states, arms);
    }
}
