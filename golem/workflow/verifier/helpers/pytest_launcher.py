"""golem's pytest launcher: runs `python -m pytest ARGS` (or the `pytest` script) with golem's
plugin, started so nothing beside it or in the working directory is imported first.

    PYTHON -I -X pycache_prefix=DIR pytest_launcher.py [--golem-cwd] ARGS...

`--golem-cwd` puts the working directory first on sys.path, as `python -m pytest` does (the
`pytest` script does not). The last record gives pytest's exit status; the launcher then
leaves with os._exit, so no atexit handler of the code under test runs after it.
"""

import sys

import importlib.util
import os


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    evidence = _load("golem_evidence", os.path.join(here, "evidence.py"))
    plugin_module = _load("golem_pytest_plugin", os.path.join(here, "pytest_plugin.py"))
    cwd = os.path.realpath(os.getcwd())
    _load("golem_relocate", os.path.join(here, "relocate.py")).apply(cwd)
    args = sys.argv[1:]
    if args[:1] == ["--golem-cwd"]:
        args = args[1:]
        sys.path.insert(0, cwd)
    plugin = plugin_module.Plugin(evidence, cwd)
    plugin.stream.emit(e="start", runner="pytest", cwd=cwd)
    sys.argv = ["pytest", *args]
    try:
        import pytest
        code = int(pytest.main(args, plugins=[plugin]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 3
    plugin.stream.emit(e="end", ok=code == 0, exit=code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
