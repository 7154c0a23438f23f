"""The core's layout: no import circle, no module reading another's private names, no document cited that
the repository does not have. The core is ``src/tinystore`` without its backends and its Django app."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "tinystore"
OUTSIDE = ("tinystore.backends", "tinystore.contrib")
STANDARD = {"_exit"}  # os._exit


def core_modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if not name.startswith(OUTSIDE):
            modules[name] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The core modules ``name`` imports, those imported only for type checking too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            for alias in node.names:
                for candidate in (f"{base}.{alias.name}", base):
                    if candidate in modules and candidate != name:
                        found.add(candidate)
                        break
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules and a.name != name)
    return found


def test_no_two_modules_of_the_core_import_each_other_even_through_others_or_for_type_checking_only():
    modules = core_modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    graph["tinystore"] = set()  # the package's face: it imports everything, and nothing below needs it
    circles = []

    def reaches(start: str, node: str, seen: set[str]) -> bool:
        for nxt in graph.get(node, ()):
            if nxt == start:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(start, nxt, seen):
                    return True
        return False

    for name in graph:
        if reaches(name, name, set()):
            circles.append(name)
    assert circles == [], f"modules in an import circle: {circles}"


def private_names(tree: ast.Module) -> set[str]:
    """The private names a module gives its own classes and objects: methods, attributes set, fields."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_"):
            names.add(node.name)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            names.update(c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant))
    return names


def test_no_module_of_the_core_reads_or_writes_a_private_name_another_module_defines():
    reach_ins = []
    for name, path in core_modules().items():
        tree = ast.parse(path.read_text())
        own = private_names(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and node.attr not in own and node.attr not in STANDARD):
                reach_ins.append(f"{path.relative_to(SRC)}:{node.lineno}: .{node.attr}")
    assert reach_ins == []


def test_no_module_outside_the_backends_cites_the_spec_which_the_repository_does_not_have():
    cited = [f"{path.relative_to(SRC)}:{n}" for path in PACKAGE.rglob("*.py") if "backends" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(r"SPEC\s*§", line)]
    assert cited == []


def test_no_file_of_the_repository_holds_a_merge_left_unresolved():
    root = SRC.parent
    texts = [root / "README.md", *(root / "docs").rglob("*.md"), *SRC.rglob("*.py"), *SRC.rglob("*.sql"),
             *(root / "tests").rglob("*.py"), *(root / "benchmarks").rglob("*.py"), *(root / "examples").rglob("*.py")]
    marked = [f"{path.relative_to(root)}:{n}" for path in texts
              for n, line in enumerate(path.read_text().splitlines(), 1)
              if re.match(r"(<{7}|>{7})( |$)|={7}$", line)]
    assert marked == []
