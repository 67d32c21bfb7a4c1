"""Run by golem in the test interpreter as the suite would run (site, its path), writing
nothing: imports the runner's modules named in argv[1:] and prints, as its last line, the
source file of every module loaded. Read by golem as text and run with -c."""

import importlib, json, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
files = []
for module in list(sys.modules.values()):
    path = getattr(module, "__file__", None)
    if isinstance(path, str) and path.endswith(".py"):
        files.append(path)
print(json.dumps(files))
