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


# The first line of the GIT_FACTORY_TEST_ONLY file that asks for the collection to be
# narrowed too (no node id begins with "#").
_NARROW = "#narrow"


def _only():
    """The node ids to run and whether to collect only their files, read once."""
    global _ONLY_READ
    if _ONLY_READ is None:
        try:
            with open(_ONLY, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            lines = None
        if lines is None:
            _ONLY_READ = (None, False)
        elif lines and lines[0] == _NARROW:
            _ONLY_READ = (set(lines[1:]), True)
        else:
            _ONLY_READ = (set(lines), False)
    return _ONLY_READ


_ONLY_READ = None
_KEEP = None


def _keep(config):
    """The wanted test files and every folder above them, or None: collect everything (an
    id that names no file, a collection error say, needs the whole collection)."""
    global _KEEP
    if _KEEP is None:
        wanted, narrow = _only()
        keep = set() if narrow and wanted else None
        for nodeid in wanted or ():
            head, sep, _ = nodeid.partition("::")
            if keep is None or not sep or not head:
                keep = None
                break
            path = config.rootpath.joinpath(head).resolve()
            keep.add(path)
            keep.update(path.parents)
        _KEEP = (keep,)
    return _KEEP[0]


def _major():
    try:
        import pytest

        return int(pytest.__version__.split(".")[0])
    except Exception:
        return 0


if _ONLY and _major() >= 7:

    def pytest_ignore_collect(collection_path, config):
        """A narrowed re-run imports only the files of the tests it runs, not the suite:
        re-running one test costs that test (pytest 7 and later name this hook's path
        argument so)."""
        keep = _keep(config)
        if keep is None or collection_path.name in ("__init__.py", "conftest.py"):
            return None
        if collection_path.resolve() in keep:
            return None
        return True


def pytest_collection_modifyitems(config, items):
    """A re-run after a change runs only the tests that failed (GIT_FACTORY_TEST_ONLY names
    a file of node ids, one a line; a first line "#narrow" also narrows the collection)."""
    if not _ONLY:
        return
    wanted, _ = _only()
    if wanted is None:
        return
    keep = [i for i in items if i.nodeid in wanted]
    drop = [i for i in items if i.nodeid not in wanted]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
