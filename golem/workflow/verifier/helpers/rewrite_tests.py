"""Run by golem in the test interpreter, with the directories of pytest's installation
(argv[3:]) after the standard library's: the batch's sources rewritten by pytest's own
assertion rewriter, as pytest would rewrite them (its default, without the assertion-pass
hook), each written to `where`-VERSION.pyc (the interpreter's magic number, then the
marshalled code). A source whose rewriting or compiling warns is left out, for the run to
rewrite and warn. Read by golem as text and run with -c."""

import importlib.util, marshal, os, sys, warnings
sys.path.extend(sys.argv[3:])
with open(sys.argv[1], "rb") as handle:
    batch = marshal.load(handle)
out = sys.argv[2]
try:    # pytest's own modules, found on the paths above (named, not imported by statement:
    import ast      # golem itself imports only the standard library)
    version = importlib.import_module("_pytest._version").version
    rewrite_asserts = importlib.import_module("_pytest.assertion.rewrite").rewrite_asserts
except Exception:
    batch = []
for where, name, source, strict in batch:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tree = ast.parse(source, filename=name)
            rewrite_asserts(tree, source, name, None)
            code = compile(tree, name, "exec", dont_inherit=True)
        data = importlib.util.MAGIC_NUMBER + marshal.dumps(code)
        path = os.path.join(out, f"{where}-{version}.pyc")
        os.makedirs(out, mode=0o700, exist_ok=True)
    except Exception:
        continue
    part = os.path.join(out, "." + os.path.basename(path) + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(part, path)
