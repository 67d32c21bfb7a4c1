"""Fail when anything under golem/ imports outside the standard library or does not compile."""

import ast
import pathlib
import sys

allowed = set(sys.stdlib_module_names) | {"golem", "__future__"}
problems = []
for path in sorted(pathlib.Path("golem").rglob("*.py")):
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as exc:
        problems.append(f"{path}:{exc.lineno}: does not parse: {exc.msg}")
        continue
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in allowed:
                problems.append(f"{path}:{node.lineno}: imports {name} (not the standard library)")
for problem in problems:
    print(problem, file=sys.stderr)
print(f"check: {len(list(pathlib.Path('golem').rglob('*.py')))} modules, "
      f"{len(problems)} problem(s)")
sys.exit(1 if problems else 0)
