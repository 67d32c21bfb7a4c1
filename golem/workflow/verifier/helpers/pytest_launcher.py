"""golem's pytest launcher: runs `python -m pytest ARGS` (or the `pytest` script) with golem's
plugin, started so nothing beside it or in the working directory is imported first.

    PYTHON -I -X pycache_prefix=DIR pytest_launcher.py [--golem-cwd] ARGS...

`--golem-cwd` puts the working directory first on sys.path, as `python -m pytest` does (the
`pytest` script does not). Plugins that would run the tests in worker processes (pytest-xdist)
are told to keep them in this one, with a note. The last record gives pytest's exit status; the launcher then
leaves with os._exit, so no atexit handler of the code under test runs after it.
"""

import sys

import doctest    # noqa: F401 - loaded before any code under test: the guard covers it
import importlib.util
import os


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# plugins that run the tests in worker processes, and the options that keep them in this one
IN_PROCESS = (("xdist", ["-n", "0", "--dist", "no"]),)


def _in_process(stream, args) -> list:
    """Options that keep every test in this process, where golem's plugin sees its outcome
    and the files it reads; a note for each plugin turned off this way."""
    extra = []
    autoload = not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") and \
        "--disable-plugin-autoload" not in args
    for name, options in IN_PROCESS:
        named = [a for a in args if a.endswith(name) or a.endswith(name + ".plugin")]
        if any("no:" in a for a in named) or not (autoload or named):
            continue    # not loaded: its options would be unknown to pytest
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            extra += options
            stream.emit(e="note", message=f"pytest-{name} is installed: golem's runs keep the "
                        f"tests in one process ({' '.join(options)}), so every outcome and "
                        "every file a test reads is seen")
    return extra


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    evidence = _load("golem_evidence", os.path.join(here, "evidence.py"))
    plugin_module = _load("golem_pytest_plugin", os.path.join(here, "pytest_plugin.py"))
    cwd = os.path.realpath(os.getcwd())
    prefix = sys.pycache_prefix     # before any code under test could change it
    _load("golem_relocate", os.path.join(here, "relocate.py")).apply(cwd)
    args = sys.argv[1:]
    if args[:1] == ["--golem-cwd"]:
        args = args[1:]
        sys.path.insert(0, cwd)
    plugin = plugin_module.Plugin(evidence, cwd)
    plugin.stream.emit(e="start", runner="pytest", cwd=cwd)
    sealed = evidence.Sealed.start(plugin.stream)   # before any code under test is imported
    # before pytest imports a conftest.py or a test module: what they read while collected
    # is the tests' as much as what a test reads
    evidence.watch_reads(plugin.stream, cwd)
    args += _in_process(plugin.stream, args)
    sys.argv = ["pytest", *args]
    evidence.look_plain("pytest", args)
    try:
        import pytest
        # the loader that executes rewritten test modules (imported with pytest), named
        # before any test module runs
        rewrite = sys.modules.get("_pytest.assertion.rewrite")
        hook = getattr(getattr(rewrite, "AssertionRewritingHook", None), "exec_module", None)
        # the rewritten test modules golem keeps, in golem's bytecode view as the interpreter
        # was started: what that loader executes must match them
        kept = plugin_module.rewrite_from_cache(rewrite, prefix, plugin.missed) \
            if rewrite is not None else None
        evidence.trust(getattr(hook, "__code__", None), kept)
        code = int(pytest.main(args, plugins=[plugin]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 3
    plugin.stream.emit(e="modules", files=evidence.loaded(), rewritten=plugin.missed[:5000])
    plugin.stream.emit(e="end", ok=code == 0, exit=code)
    sealed.end()    # straight from here: the seal says this function reached its end
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
