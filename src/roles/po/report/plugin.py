"""git-factory's per-test report (SPEC 3.9): one JSON line per test phase that says
something, appended to the file GIT_FACTORY_TEST_REPORT names. Loaded with -p from a
private folder; it changes nothing of the run."""

import json
import os

_PATH = os.environ.get("GIT_FACTORY_TEST_REPORT")
_ONLY = os.environ.get("GIT_FACTORY_TEST_ONLY")


def _message(report):
    longrepr = getattr(report, "longrepr", None)
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return str(crash.message)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    if hasattr(report, "wasxfail"):
        return str(report.wasxfail)
    return ""


def _put(nodeid, when, report):
    if not _PATH:
        return
    text = ""
    if report.outcome != "passed":
        try:
            text = report.longreprtext or ""
        except Exception:
            text = ""
    record = {
        "id": nodeid,
        "when": when,
        "outcome": report.outcome,
        "xfail": hasattr(report, "wasxfail"),
        "duration": getattr(report, "duration", None),
        "message": _message(report) if report.outcome != "passed" else "",
        "text": text[-4000:],
    }
    try:
        with open(_PATH, "a", encoding="utf-8", errors="replace") as out:
            out.write(json.dumps(record) + "\n")
    except OSError:
        pass


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        _put(report.nodeid, report.when, report)


def pytest_collectreport(report):
    if report.failed:
        _put(report.nodeid or "<collection>", "collect", report)


def pytest_collection_modifyitems(config, items):
    """A re-run after a change runs only the tests that failed (GIT_FACTORY_TEST_ONLY names
    a file of node ids, one a line)."""
    if not _ONLY:
        return
    try:
        with open(_ONLY, encoding="utf-8", errors="replace") as f:
            wanted = set(f.read().splitlines())
    except OSError:
        return
    keep = [i for i in items if i.nodeid in wanted]
    drop = [i for i in items if i.nodeid not in wanted]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
