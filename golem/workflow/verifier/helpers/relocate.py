"""Where a graded run imports from: the tree under test, never the workspace.

golem grades a copy of the workspace (or an export of a revision), but an editable install
in the project's virtual environment points at the workspace itself: a path entry
(`__editable__.calc-0.1.pth` holding `/ws/src`) or an import hook
(`__editable___calc_0_1_finder.py`, a MAPPING from package to `/ws/src/calc`). `site` has run
those before any of golem's code. golem's driver and launcher call `apply` first: it puts the
entries of PYTHONPATH where Python would have (isolated mode ignores the variable), moves
every path entry and import-hook mapping under the workspace to the same place in the tree
under test, and then, for the rest of the run, refuses to open or list anything in the
workspace, so code from the workspace cannot be graded in place of the copy's, in any
sandbox mode. A module already imported from the workspace cannot be moved: the run stops
before its first record, saying so. Python processes the tests start get the moved entries
first on their PYTHONPATH.

    GOLEM_RELOCATE   JSON: {"from": [workspace directories], "keep": [directories under
                     them that stay where they are: the dependency trees and .git the tree
                     under test links to]}; removed from the environment here
"""

import json
import os
import sys

_EVENTS = ("open", "os.listdir", "os.scandir")
_HOOK_MODULES = ("__editable__", "_editable_impl_")


def _inside(path, tops):
    return any(path == top or path.startswith(top + os.sep) for top in tops)


def _python_path(cwd):
    """PYTHONPATH's entries, absolute, before the standard library, as Python puts them."""
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    entries = [os.path.normpath(os.path.join(cwd, e)) for e in entries]
    sys.path[0:0] = [e for e in entries if e not in sys.path]


def _mover(sources, keep, cwd):
    def move(value):
        if not isinstance(value, str) or not value:
            return value
        for path in (value, os.path.realpath(value)):
            if _inside(path, keep):
                return value
            for top in sources:
                if _inside(path, [top]):
                    return cwd + path[len(top):]
        return value
    return move


def _hidden_entries(move):
    """The path entries of `.pth` files that `site` left out because their directory cannot
    be seen (a sandbox hides the workspace), moved."""
    import site
    found = []
    try:
        dirs = site.getsitepackages()
    except AttributeError:
        return found
    for sitedir in dirs:
        try:
            names = sorted(n for n in os.listdir(sitedir) if n.endswith(".pth"))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(sitedir, name), encoding="utf-8") as handle:
                    lines = handle.read().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                entry = os.path.normpath(os.path.join(sitedir, line))
                moved = move(entry)
                if moved != entry and moved not in sys.path and moved not in found:
                    found.append(moved)
    return found


def _move_mappings(namespace, move):
    """Path values of the dicts (and lists in them) of an import hook, moved in place."""
    for value in list(namespace.values()):
        if not isinstance(value, dict):
            continue
        for key, item in list(value.items()):
            if isinstance(item, str):
                value[key] = move(item)
            elif isinstance(item, list):
                item[:] = [move(i) for i in item]


def apply(cwd=None):
    """Relocate this process's imports to `cwd` (default: the working directory)."""
    raw = os.environ.pop("GOLEM_RELOCATE", None)
    cwd = os.path.realpath(cwd or os.getcwd())
    _python_path(cwd)
    if not raw:
        return
    spec = json.loads(raw)
    sources = []
    for top in spec.get("from", []):
        for form in (os.path.abspath(top), os.path.realpath(top)):
            if form not in sources and not _inside(cwd, [form]):
                sources.append(form)
    keep = [os.path.realpath(k) for k in spec.get("keep", [])]
    keep += [os.path.abspath(k) for k in spec.get("keep", [])]
    move = _mover(sources, keep, cwd)
    before = list(sys.path)
    sys.path[:] = [move(p) for p in sys.path] + _hidden_entries(move)
    sys.path_importer_cache.clear()
    children = [p for p in sys.path if p not in before]
    moved = []

    def mapped(value):
        new = move(value)
        if new != value:
            moved.append(new)
        return new

    for name, module in list(sys.modules.items()):
        if name.startswith(_HOOK_MODULES):
            _move_mappings(vars(module), mapped)
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and move(where) != where:
            sys.stderr.write(f"golem: {name} was imported from the workspace ({where}) before "
                             "the tests started, so the graded run cannot use the copy's "
                             "code\n")
            sys.stderr.flush()
            os._exit(3)
    for finder in sys.meta_path:
        for owner in (finder, type(finder)):
            try:
                _move_mappings(vars(owner), mapped)
            except TypeError:
                pass
    # Python processes the tests start do not run this: the moved entries (and the
    # directories the moved mappings' packages are in) lead their PYTHONPATH
    children += [os.path.dirname(m) for m in moved if os.path.dirname(m) not in children]
    if children:
        rest = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
        os.environ["PYTHONPATH"] = os.pathsep.join(children + rest)

    def guard(event, args):
        if event not in _EVENTS or not args:
            return
        path = args[0]
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        full = os.path.abspath(path)
        if _inside(full, sources) and not _inside(full, keep):
            raise PermissionError(f"golem: the graded run may not use {full}: it is in the "
                                  "workspace, and the copy under test is graded instead")

    sys.addaudithook(guard)
