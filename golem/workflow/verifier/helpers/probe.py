"""Run by golem in the test interpreter (`-I`): argv[1] is the workspace, argv[2:] its
dependency trees; prints the module names the interpreter imports from outside the
workspace and the module suffixes it knows, as JSON. Read by golem as text and run with -c."""

import importlib.machinery, json, os, pkgutil, sys
ws = os.path.realpath(sys.argv[1])
deps = [os.path.realpath(d) for d in sys.argv[2:]]
def inside(path, top):
    return path == top or path.startswith(top + os.sep)
suffixes = sorted(set(importlib.machinery.all_suffixes()), key=len, reverse=True)
names = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))
for entry in sys.path:
    real = os.path.realpath(entry or ".")
    if inside(real, ws) and not any(inside(real, d) for d in deps):
        continue
    if os.path.isdir(real):
        try:
            listing = os.listdir(real)
        except OSError:
            listing = []
        for name in listing:
            full = os.path.join(real, name)
            if os.path.isdir(full):
                if name.isidentifier():
                    names.add(name)
                continue
            for suffix in suffixes:
                if name.endswith(suffix) and name[:-len(suffix)].isidentifier():
                    names.add(name[:-len(suffix)])
                    break
    else:
        try:
            names.update(m.name for m in pkgutil.iter_modules([entry]))
        except Exception:
            pass
print(json.dumps({"names": sorted(names), "suffixes": suffixes}))
