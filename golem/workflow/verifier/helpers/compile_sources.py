"""Run by golem in the test interpreter (`-I -S`, hash-checked bytecode): compiles a batch
of sources. argv[1] is golem's batch (where, name, source bytes, strict), argv[2] the
directory it writes each `where` below. A source that does not compile is left out, and so
is, when `strict`, one whose compiling warns (a run that makes warnings errors must see the
warning, as it would compiling the source itself). Read by golem as text and run with -c."""

import importlib._bootstrap_external as external, importlib.util, marshal, os, sys, warnings
with open(sys.argv[1], "rb") as handle:
    batch = marshal.load(handle)
out = sys.argv[2]
for where, name, source, strict in batch:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error" if strict else "ignore")
            code = compile(source, name, "exec", dont_inherit=True)
        data = external._code_to_hash_pyc(code, importlib.util.source_hash(source), True)
        path = os.path.join(out, where)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except Exception:
        continue
    part = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(part, path)
