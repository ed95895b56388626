# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_git_factory_global_optspecs
    string join \n color= q/quiet v/verbose no-pager V/version json h/help
end

function __fish_git_factory_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_git_factory_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_git_factory_using_subcommand
    set -l cmd (__fish_git_factory_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c git-factory -n "__fish_git_factory_needs_command" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_needs_command" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_needs_command" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_needs_command" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_needs_command" -s V -l version -d 'Print the version, the commit it was built from and the sandbox backends built in'
complete -c git-factory -n "__fish_git_factory_needs_command" -l json -d 'With --version: print it as one JSON object, for scripts'
complete -c git-factory -n "__fish_git_factory_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "run" -d 'Run one work order through the SE → TR → PO loop'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "log" -d 'List past runs, newest first'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "show" -d 'Show one run: summary, attempts, failure briefs, patch, logs'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "report" -d 'Many runs side by side: verdicts, attempts, time per model; --html writes one page'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "apply" -d 'Bring a PASSed run\'s change into the current work tree (3-way if HEAD moved on)'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "verify" -d 'Run global verification on a revision in a temporary worktree (cached by tree)'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "hook" -d 'Install or remove the pre-push hook that verifies what you push'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "checkout" -d 'Materialise the tree of one attempt of a run into a folder'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "reverify" -d 'Re-run verification and acceptance on every recorded attempt tree of a run'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "patch" -d 'Apply a diff (unified, Begin Patch envelope or SEARCH/REPLACE) with the TR engine'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "push" -d 'Send runs to a remote: refs/factory/* and the notes, merged (default remote: origin)'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "fetch" -d 'Take in a remote\'s runs and merge its notes into yours (default remote: origin)'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "recover" -d 'Roll back a run that was killed mid-way and record it as INTERRUPTED'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "attest" -d 'Check the signed evidence that a revision\'s tree passed its checks'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "prune" -d 'Remove old run records and their note lines (objects are left to git gc)'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "completions" -d 'Print the completion script for bash, zsh, fish, elvish or powershell'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "demo" -d 'Make a demo repo and run a work order through the loop with a scripted proposer'
complete -c git-factory -n "__fish_git_factory_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -s w -l work-order -d 'The work order JSON file (`-` reads stdin); several files (`-w orders/*.json`, or -w given more than once) are a batch: each its own run in a worktree, --jobs at once' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l repo -d 'The product repo (default: discovered from the current directory, like git)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l out -d 'Also write the file artifacts to DIR/<run_id>/ (must be outside the work tree)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l llm-model -d 'The model, as [PROVIDER:]MODEL: openai: (default) or anthropic: [config: factory.model]; repeatable with --candidates: candidate i uses the models in turn' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l llm-base-url -d 'Base URL of an OpenAI-compatible server [env: OPENAI_BASE_URL] [config: factory.baseUrl]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l llm-temperature -d 'Sampling temperature [default: 0] [config: factory.temperature]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l llm-api -d 'Which OpenAI API to speak [default: responses on OpenAI\'s own URL, chat elsewhere] [config: factory.api]' -r -f -a "responses\t''
chat\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l llm-max-output-tokens -d 'Output limit per answer, in tokens [default: the provider\'s] [config: factory.maxOutputTokens]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l llm-reasoning-effort -d 'Reasoning effort where the API has it: low, medium, high (or the API\'s higher levels) [config: factory.reasoningEffort]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l agent-command -d 'SE is an external program that reads the request as JSON on stdin and prints its proposal' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l agent-edits -d 'SE is a coding agent that edits files in a scratch worktree; its diff is the proposal ({prompt_file} and {attempt} in an argument are replaced)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l agent-timeout -d 'Time limit in seconds for one agent invocation [default: 1800] [config: factory.agentTimeout]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l replay -d 'SE replays recorded proposals from a folder (1.json, 2.json, … or 1.diff, 2.diff, …)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l max-attempts -d 'SE → TR → PO attempts [default: 2] [config: factory.maxAttempts]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l timeout-seconds -d 'Time limit in seconds for each command [default: 600] [config: factory.timeoutSeconds]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l branch -d 'On PASS, deliver the change on branch NAME (in-situ: created at the baseline and checked out)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l candidates -d 'Best of N: N independent candidates in their own worktrees; the checks pick the winner' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l jobs -d 'Candidates (or a batch\'s runs) at once [default: min(N, CPUs); a batch: CPUs]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l max-tokens -d 'Token budget for the whole run (all attempts and candidates), from the providers\' reported usage; exceeded → the run stops with stage budget_exhausted (FAIL)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l max-cost -d 'Dollar budget for the whole run (all attempts and candidates): the run stops with stage budget_exhausted (FAIL) before a request whose worst case would pass it; refused up front when a model has no price [config: factory.maxCost]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l id -d 'Inline work order: its id' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l title -d 'Inline work order: its title' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l intent -d 'Inline work order: what to change and why' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l allow -d 'Inline work order: a file the change may touch (repeatable)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l context -d 'Inline work order: a file shown to the model (repeatable; must also be allowed)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l accept -d 'Inline work order: an acceptance command (repeatable)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l forbid -d 'Inline work order: a constraint shown to the model (repeatable)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l strict-apply -d 'Only the strict apply pass: every hunk exactly where its header says'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l force -d 'Run again even though a finished run with this run_id exists; with --branch, move an existing branch'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l dry-run -d 'Validate, preflight and print the first prompt; call nothing, change nothing'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l json -d 'Print the final run summary as JSON on stdout'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l worktree -d 'Run in a fresh worktree at HEAD; your tree, index and branch are never touched; a PASS is committed on branch factory/run-<run_id> (or --branch NAME)'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l commit -d 'On PASS, commit the change on the current branch (Conventional Commits message)'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l sandbox -d 'Run verification and acceptance confined (bubblewrap or Landlock, by factory.sandboxBackend): no network, nothing writable but the tree\'s own files (never .git, never pre-existing ignored files) and a private TMPDIR; an --agent-edits agent too, with the network on, writing only its worktree and factory.agentWritable [config: factory.sandbox]'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l no-sandbox -d 'Run the checks without the sandbox, whatever factory.sandbox says'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l baseline-check -d 'Before any model call, run verification and the contract (pass_to_pass, fail_to_pass) on the baseline [default: on when the work order has a contract] [config: factory.baselineCheck]'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l no-baseline-check -d 'Do not run the baseline check'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l attest -d 'On PASS, sign the evidence for the result tree with your git signing key (an in-toto statement in a DSSE envelope, noted in refs/notes/factory-attest); no key configured is refused before anything runs [config: factory.attest]'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l no-attest -d 'Do not sign evidence, whatever factory.attest says'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand run" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -s n -l max-count -d 'Show at most N runs (also -N, as in git log -3)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -l verdict -d 'Only runs with this verdict (any case: pass, PASS)' -r -f -a "pass\t''
fail\t''
error\t''
interrupted\t''
running\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -l oneline -d 'One short line per run: run id, verdict, title'
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -l cost -d 'Sum what the runs listed cost, per model and per work order (with --json: as JSON)'
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -l json -d 'Print the runs as a JSON array on stdout'
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand log" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l attempt -d 'Show only attempt N (with --patch: that attempt\'s patch)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l log -d 'Print a command\'s full output, e.g. acceptance:0 or verify:1 (of --attempt N, default the last)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -s o -l output -d 'With --html: the file to write' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l patch -d 'Print the passing (or else the last) attempt\'s proposed patch'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l tests -d 'List every test of each attempt, per command, with its status before (baseline) and after'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l json -d 'Print the stored run_summary.json exactly'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l html -d 'Write the run as one self-contained HTML page (default file: factory-<run_id>.html)'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand show" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -l since -d 'Only runs started at or after DATE (as git log --since takes it: 2.weeks, yesterday, 2026-11-01)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -s o -l output -d 'With --html: the file to write' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -l html -d 'Write the report as one self-contained HTML page (default file: factory-report.html)'
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand report" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand apply" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand apply" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand apply" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand apply" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand apply" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand apply" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -l timeout-seconds -d 'Time limit in seconds for each command [default: 600] [config: factory.timeoutSeconds]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -l no-cache -d 'Verify again even if this tree already passed'
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -l attest -d 'On a pass, sign the evidence that this tree passed (with user.signingKey) in refs/notes/factory-attest'
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand verify" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -f -a "install" -d 'Install the pre-push hook (honours core.hooksPath)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -f -a "uninstall" -d 'Remove the pre-push hook git factory installed (restoring a saved one)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -f -a "pre-push" -d 'The hook itself, as git runs it: `git factory hook pre-push <remote> <url>`'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and not __fish_seen_subcommand_from install uninstall pre-push help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from install" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from install" -l force -d 'Replace a pre-push hook git factory did not write (it is kept as pre-push.factory-saved)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from install" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from install" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from install" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from install" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from uninstall" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from uninstall" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from uninstall" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from uninstall" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from uninstall" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from pre-push" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from pre-push" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from pre-push" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from pre-push" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from pre-push" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "install" -d 'Install the pre-push hook (honours core.hooksPath)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "uninstall" -d 'Remove the pre-push hook git factory installed (restoring a saved one)'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "pre-push" -d 'The hook itself, as git runs it: `git factory hook pre-push <remote> <url>`'
complete -c git-factory -n "__fish_git_factory_using_subcommand hook; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-factory -n "__fish_git_factory_using_subcommand checkout" -l attempt -d 'The attempt whose tree to write' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand checkout" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand checkout" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand checkout" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand checkout" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand checkout" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand checkout" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -l timeout-seconds -d 'Time limit in seconds for each command [default: the run\'s own]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -l json -d 'Print the comparison as JSON on stdout'
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -l sandbox -d 'Run the checks confined, as `run --sandbox` does: the attempts\' trees are model-written code, and a fetched record\'s came from anyone [config: factory.sandbox]'
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -l no-sandbox -d 'Run the checks without the sandbox, whatever factory.sandbox says'
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand reverify" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -s p -d 'Remove N leading path components from unified-diff paths (default: git\'s a/ and b/)' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -l check -d 'Only check that it would apply; write nothing'
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -l strict -d 'Only the strict pass: every hunk exactly where its header says'
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand patch" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand push" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand push" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand push" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand push" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand push" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand push" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand fetch" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand fetch" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand fetch" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand fetch" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand fetch" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand fetch" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand recover" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand recover" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand recover" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand recover" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand recover" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand recover" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and not __fish_seen_subcommand_from verify help" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and not __fish_seen_subcommand_from verify help" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and not __fish_seen_subcommand_from verify help" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and not __fish_seen_subcommand_from verify help" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and not __fish_seen_subcommand_from verify help" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and not __fish_seen_subcommand_from verify help" -f -a "verify" -d 'Check the signed evidence on each revision\'s tree (exit 0: every one has an envelope that verifies; 1: not)'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and not __fish_seen_subcommand_from verify help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from verify" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from verify" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from verify" -l json -d 'Print the findings as JSON on stdout'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from verify" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from verify" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from verify" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from verify" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from help" -f -a "verify" -d 'Check the signed evidence on each revision\'s tree (exit 0: every one has an envelope that verifies; 1: not)'
complete -c git-factory -n "__fish_git_factory_using_subcommand attest; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -l older-than -d 'Remove runs that started longer ago than AGE: a number and s, m, h, d or w (90d), or never [default: git config factory.pruneOlderThan, else never]' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -l keep -d 'Keep the newest N runs of each work order, whatever their age' -r
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -l repo -d 'The repository (default: discovered from the current directory)' -r -F
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -l dry-run -d 'List what would be removed; remove nothing'
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand prune" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand completions" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand completions" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand completions" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand completions" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand completions" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand demo" -l color -d 'When to colour output' -r -f -a "auto\t''
always\t''
never\t''"
complete -c git-factory -n "__fish_git_factory_using_subcommand demo" -s q -l quiet -d 'Print only results and the final verdict line'
complete -c git-factory -n "__fish_git_factory_using_subcommand demo" -s v -l verbose -d 'Print more detail about each stage'
complete -c git-factory -n "__fish_git_factory_using_subcommand demo" -l no-pager -d 'Do not pipe long output into a pager (as git --no-pager)'
complete -c git-factory -n "__fish_git_factory_using_subcommand demo" -s h -l help -d 'Print help'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "run" -d 'Run one work order through the SE → TR → PO loop'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "log" -d 'List past runs, newest first'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "show" -d 'Show one run: summary, attempts, failure briefs, patch, logs'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "report" -d 'Many runs side by side: verdicts, attempts, time per model; --html writes one page'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "apply" -d 'Bring a PASSed run\'s change into the current work tree (3-way if HEAD moved on)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "verify" -d 'Run global verification on a revision in a temporary worktree (cached by tree)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "hook" -d 'Install or remove the pre-push hook that verifies what you push'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "checkout" -d 'Materialise the tree of one attempt of a run into a folder'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "reverify" -d 'Re-run verification and acceptance on every recorded attempt tree of a run'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "patch" -d 'Apply a diff (unified, Begin Patch envelope or SEARCH/REPLACE) with the TR engine'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "push" -d 'Send runs to a remote: refs/factory/* and the notes, merged (default remote: origin)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "fetch" -d 'Take in a remote\'s runs and merge its notes into yours (default remote: origin)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "recover" -d 'Roll back a run that was killed mid-way and record it as INTERRUPTED'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "attest" -d 'Check the signed evidence that a revision\'s tree passed its checks'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "prune" -d 'Remove old run records and their note lines (objects are left to git gc)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "completions" -d 'Print the completion script for bash, zsh, fish, elvish or powershell'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "demo" -d 'Make a demo repo and run a work order through the loop with a scripted proposer'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and not __fish_seen_subcommand_from run log show report apply verify hook checkout reverify patch push fetch recover attest prune completions demo help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and __fish_seen_subcommand_from hook" -f -a "install" -d 'Install the pre-push hook (honours core.hooksPath)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and __fish_seen_subcommand_from hook" -f -a "uninstall" -d 'Remove the pre-push hook git factory installed (restoring a saved one)'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and __fish_seen_subcommand_from hook" -f -a "pre-push" -d 'The hook itself, as git runs it: `git factory hook pre-push <remote> <url>`'
complete -c git-factory -n "__fish_git_factory_using_subcommand help; and __fish_seen_subcommand_from attest" -f -a "verify" -d 'Check the signed evidence on each revision\'s tree (exit 0: every one has an envelope that verifies; 1: not)'

# `git factory <TAB>` through git's own completion
complete -c git -f -n '__fish_git_using_command factory' -a 'run log show apply reverify checkout verify attest hook recover prune patch push fetch completions demo'
