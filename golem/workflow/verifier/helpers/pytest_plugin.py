"""golem's pytest plugin: reports each test to golem as it finishes.

Loaded by golem's pytest launcher (pytest_launcher.py) from golem's read-only directory, and
registered with `pytest.main(plugins=[...])`, so no name on sys.path can stand in for it. It
imports nothing from pytest: pytest finds its hooks by name.

Records (evidence.py): where pytest found its configuration; a failing collection, as a
test of its own named after the file; each test's outcome (from its setup, call and
teardown), the file it was collected from and the workspace files its code came from, once
it has finished; the workspace files of the modules pytest has as plugins after collection;
and, at the end of the session, what the code under test replaced in pytest, pluggy, doctest
or this plugin, and in the test modules and classes, and the plugins registered since
collection.
"""

import os
import sys
import unittest     # loaded already: pytest's own support for unittest's test cases

FAILING = ("failed", "error")
STORE = "@pytest"       # where golem's cache keeps rewritten test modules, below the prefix
RANK = {"error": 5, "failed": 4, "xpass": 3, "xfail": 2, "skipped": 1, "passed": 0}
MACHINERY = ("_pytest", "pytest", "pluggy", "doctest")
# what a unittest test class inherits from unittest (its assertEqual, run, setUp, ...)
CASE_NAMES = tuple(name for name in dir(unittest.TestCase) if not name.startswith("__"))


class Plugin:
    """The hooks; one instance per run."""

    def __init__(self, evidence, cwd):
        self.evidence = evidence
        self.stream = evidence.Stream()
        self.cwd = cwd
        self.root = cwd
        self.items = {}
        self.outcomes = {}
        self.spaces = []
        self.collected = ([], 0)
        self.before = None
        self.plugins = None
        self.last = (object(), None)    # the last item's path, and its file
        self.missed = []    # what pytest rewrote that golem's cache lacked (rewrite_from_cache)
        self.early = []     # the guard's snapshots taken as each module was handed over
        self.early_owners, self.early_kept = set(), []      # their modules and classes
        self.early_data = []    # the data of the same modules and classes (evidence.data)

    def _rel(self, path):
        return self.evidence.relative(str(path) if path is not None else None, self.cwd)

    def pytest_configure(self, config):
        self.root = str(config.rootpath)
        inifile = getattr(config, "inipath", None)
        confcut = getattr(config.known_args_namespace, "confcutdir", None)
        self.stream.emit(e="config", rootdir=self.root,
                         inifile=str(inifile) if inifile else None,
                         confcutdir=str(confcut) if confcut else None)
        # each module pytest looks through for `pytest_plugins` (a test module right after
        # its code ran, a conftest.py): checked, and the guard's snapshot of it and its
        # classes taken before pytest collects from it
        manager, handed = config.pluginmanager, self.evidence.handed
        consider = manager.consider_module

        def consider_module(module):
            space = vars(module) if type(module) is type(os) else {}
            path = space.get("__file__")
            spaces = handed(self._rel(path) if type(path) is str else "?", module)
            if spaces:
                self.early.append(self.evidence.namespace([(label, names)
                                                           for label, names, _ in spaces]))
                file = self._rel(path) if type(path) is str else None
                self.early_data.append(self.evidence.data([(label, names, file)
                                                           for label, names, _ in spaces]))
                self.early_owners.update(id(owner) for _, _, owner in spaces)
                self.early_kept.extend(owner for _, _, owner in spaces)
            return consider(module)
        manager.consider_module = consider_module
        # before any test module (or the code it imports) is collected
        self.before = self._machinery()

    def pytest_collectreport(self, report):
        if not report.failed:
            return
        nodeid = report.nodeid or "<collection>"
        path = os.path.join(self.root, nodeid.split("::")[0]) if report.nodeid else None
        self.stream.emit(e="test", id=nodeid, outcome="error", file=self._rel(path),
                         pseudo=True, origins=[])

    def pytest_collection_finish(self, session):
        items = list(getattr(session, "items", ()))
        self.items = {item.nodeid: item for item in items}
        self.stream.emit(e="collected", count=len(items), ids=list(self.items))
        seen, modules = set(), {}
        for item in items:
            module = getattr(item, "module", None)
            if module is not None and id(module) not in modules:
                path = getattr(item, "path", None)
                modules[id(module)] = (self._rel(path) or getattr(module, "__name__", "?"),
                                       module, str(path) if path is not None else None)
            for owner in (getattr(item, "cls", None), module):
                if owner is not None and id(owner) not in seen:
                    seen.add(id(owner))
                    if id(owner) in self.early_owners:
                        continue    # in the snapshot taken when its module was handed over
                    label = getattr(owner, "__qualname__", None) or owner.__name__
                    if isinstance(owner, type):
                        label = owner.__module__ + "." + label
                    self.spaces.append((label, vars(owner)))
        # each test module loaded by the import system from its file, not made by other means
        self.evidence.imported(list(modules.values()))
        self.collected = self.evidence.namespace(self.spaces)
        self.plugins = self._plugins(session.config)

    def _plugins(self, config) -> dict:
        """id -> (plugin, name) of every plugin registered now; the workspace files of their
        modules go to golem once (its test machinery, protected like conftest.py)."""
        manager = config.pluginmanager
        try:
            found = {id(p): (p, name) for name, p in manager.list_name_plugin()
                     if p is not None}
        except Exception:   # a plugin pytest itself cannot list: nothing here is trusted
            found = {0: (None, "(they could not be listed)")}
        if self.plugins is None:
            files = set()
            for plugin, _ in found.values():
                module = plugin if isinstance(plugin, type(os)) else \
                    sys.modules.get(getattr(type(plugin), "__module__", ""))
                rel = self._rel(getattr(module, "__file__", None))
                if rel:
                    files.add(rel)
            self.stream.emit(e="plugins", files=sorted(files))
        return found

    def _machinery(self):
        import sys
        return self.evidence.members(MACHINERY, [sys.modules[__name__], self.evidence])

    def pytest_runtest_logreport(self, report):
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
        elif report.skipped:
            outcome = "xfail" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call":
            outcome = "xpass" if hasattr(report, "wasxfail") else "passed"
        else:
            return
        old = self.outcomes.get(report.nodeid)
        if old is None or RANK[outcome] > RANK[old]:
            self.outcomes[report.nodeid] = outcome

    def pytest_runtest_logfinish(self, nodeid, location):
        self._report(nodeid, self.outcomes.pop(nodeid, None) or "error")

    def _report(self, nodeid, outcome):
        item = self.items.get(nodeid)
        file, origins = None, []
        if item is not None:
            path = getattr(item, "path", None) or getattr(item, "fspath", None)
            if path is not self.last[0]:    # the items of a module share their path object
                self.last = (path, self._rel(path))
            file = self.last[1]
            obj = getattr(item, "obj", None)
            origins = self.evidence.test_origins([obj] if obj is not None else [],
                                                 getattr(item, "cls", None), self.cwd)
        self.stream.test(nodeid, outcome, file, False, origins)

    def pytest_sessionfinish(self, session, exitstatus):
        for nodeid, outcome in list(self.outcomes.items()):
            self._report(nodeid, outcome if outcome in FAILING else "error")
        self.outcomes.clear()
        if self.before is None:
            return
        self.evidence.imported([])      # the import system's settings as they were
        replaced = self.evidence.changed(self.before, self._machinery())
        for snapshot in (*self.early, self.collected):
            replaced += self.evidence.rebound(snapshot)
            replaced += self.evidence.gained(snapshot, CASE_NAMES)
        if self.plugins is not None:    # registered while the tests ran: not the project's
            replaced += [f"pytest's plugins (registered while the tests ran: {name})"
                         for key, (_, name) in self._plugins(session.config).items()
                         if key not in self.plugins]
        if replaced:
            self.stream.emit(e="guard", replaced=replaced)
        for snapshot in self.early_data:    # golem judges each against the baseline and
            for change in self.evidence.data_changed(snapshot):     # its writer
                self.stream.emit(e="data", **change)


def rewrite_from_cache(rewrite, prefix, missed):
    """Make pytest's assertion rewriter (the module `rewrite`) take the rewritten code of a
    source from golem's cache when it holds it, instead of rewriting the source again (what
    pytest's own cache beside the sources would save a developer's second run, which a graded
    copy does not have). golem's compiler wrote it there (bytecode.rewrite_tests) with
    pytest's own rewriter, from the bytes of the source, under the source's SHA-256 and
    pytest's version, below `prefix` (golem's view of its cache, bound read-only). A source
    the cache lacks is rewritten as pytest would and its path added to `missed`, the list
    golem asks for after its baseline. Installed before pytest configures itself, so the
    guard counts any later change to it. Returns (the directory, pytest's version) where it
    looks, for the audit hook to hold what pytest's loader executes to (evidence.trust), or
    None where it was not installed."""
    original = getattr(rewrite, "_rewrite_test", None)
    version = getattr(sys.modules.get("_pytest._version"), "version", None)
    if original is None or not prefix or not isinstance(version, str) \
            or not version.replace(".", "").replace("+", "").replace("-", "").isalnum() \
            or getattr(original, "__code__", None) is None \
            or original.__code__.co_varnames[:2] != ("fn", "config"):   # pytest 5 and newer
        return None
    import _imp
    import importlib.util
    import marshal
    import types
    try:
        from _sha256 import sha256
    except ImportError:     # Python 3.12 and newer
        from hashlib import sha256
    store = os.path.join(prefix, STORE, sys.implementation.cache_tag)
    magic, code_type, fix = importlib.util.MAGIC_NUMBER, types.CodeType, _imp._fix_co_filename
    # what the wrapper calls, bound now: nothing the code under test rebinds later
    fspath, stat, join, opened, loads, kind, same = os.fspath, os.stat, os.path.join, open, \
        marshal.loads, type, id
    plain = {}      # id of a config -> whether its rewriting is pytest's plain one

    def _rewrite_test(fn, config):
        if config is not None:
            known = plain.get(same(config))
            if known is None:
                try:    # the assertion-pass hook's rewriting is not what golem keeps
                    known = not config.getini("enable_assertion_pass_hook")
                except Exception:
                    known = False
                plain[same(config)] = known
            if not known:
                return original(fn, config)
        code, path = None, None
        try:
            path = fspath(fn)
            info = stat(path)
            with opened(path, "rb") as handle:
                source = handle.read()
            with opened(join(store, f"{sha256(source).hexdigest()}-{version}.pyc"),
                        "rb") as handle:
                data = handle.read()
            if data[:len(magic)] == magic:
                code = loads(memoryview(data)[len(magic):])
        except (OSError, TypeError, ValueError, EOFError):
            code = None
        if kind(code) is not code_type or kind(path) is not str:
            missed.append(path if kind(path) is str else repr(fn))
            return original(fn, config)
        fix(code, path)     # the file it runs from here, as the import system does
        return info, code

    rewrite._rewrite_test = _rewrite_test
    return store, version
