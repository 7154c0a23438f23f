"""MkDocs hooks for the manual (mkdocs.yml names this file).

The contracts page lists, under each promise, the tests named after it, read from
the test files when the site is built: ``<!-- tests: JOB-05 -->`` is the tests of
JOB-05, ``<!-- tests: PAU-* -->`` every contract numbered PAU-, each with its
tests, and ``<!-- tests: the rest -->`` the contracts the page names nowhere else.
So the page cannot name a test that is gone, nor miss one that was added.

The API reference's first page ends with every name of ``tinystore.__all__`` that no page of
``docs/reference/`` renders (``::: tinystore.NAME``), so that a public name is never left out.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TEST = re.compile(r"^\s*(?:async\s+)?def\s+(test_([A-Z]+)_(\d+)_\w*)\s*\(", re.M)
MARKER = re.compile(r"<!-- tests: (?P<what>[A-Z]+-(?:\d+|\*)|the rest) -->")


def tests_by_contract(root: Path = ROOT) -> dict[str, list[tuple[str, str]]]:
    """Each contract's tests, ``{"JOB-05": [(file, test name), ...]}``, from every test file."""
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for path in sorted((root / "tests").rglob("test_*.py")):
        for name, family, number in TEST.findall(path.read_text("utf-8")):
            found[f"{family}-{int(number):02d}" if family != "SPEC" else f"SPEC-{number}"].append(
                (path.relative_to(root).as_posix(), name))
    return dict(found)


def _order(contract: str) -> tuple[str, int]:
    family, _, number = contract.partition("-")
    return family, int(number)


def _list(tests: list[tuple[str, str]]) -> str:
    return "\n".join(f"- `{name}` in `{file}`" for file, name in tests)


def _one(contract: str, tests: list[tuple[str, str]]) -> str:
    if not tests:
        raise ValueError(f"the contracts page names {contract}, but no test is named after it")
    count = f"{len(tests)} test" + ("s" if len(tests) > 1 else "")
    return f'??? success "{count}"\n\n' + "\n".join("    " + line for line in _list(tests).splitlines()) + "\n"


def _family(contracts: list[str], found: dict[str, list[tuple[str, str]]]) -> str:
    blocks = []
    for contract in sorted(contracts, key=_order):
        blocks.append(f"**{contract}**\n{{: #{contract.lower()} }}\n\n{_list(found[contract])}\n")
    return "\n".join(blocks)


def contracts_page(markdown: str, found: dict[str, list[tuple[str, str]]]) -> str:
    """The page with each marker replaced by its tests."""
    named = {m["what"] for m in MARKER.finditer(markdown)}
    placed = {c for c in found if c in named or f"{c.partition('-')[0]}-*" in named}

    def replace(match: re.Match[str]) -> str:
        what = match["what"]
        if what == "the rest":
            rest = [c for c in found if c not in placed]
            return _family(rest, found) if rest else "None: every contract tested is on this page."
        if what.endswith("-*"):
            family = [c for c in found if c.partition("-")[0] == what[:-2]]
            if not family:
                raise ValueError(f"the contracts page names {what}, but no test is named after one")
            return _family(family, found)
        return _one(what, found.get(what, []))

    return MARKER.sub(replace, markdown)


def public_names(root: Path = ROOT) -> list[str]:
    """``tinystore.__all__``, read from the source without importing it."""
    tree = ast.parse((root / "src" / "tinystore" / "__init__.py").read_text("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def names_left_out(root: Path = ROOT) -> list[str]:
    """The names of ``tinystore.__all__`` that no reference page renders."""
    rendered = set()
    for page in (root / "docs" / "reference").glob("*.md"):
        rendered.update(re.findall(r"^::: tinystore\.(\w+)\s*$", page.read_text("utf-8"), re.M))
    return [name for name in public_names(root) if name not in rendered]


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (MkDocs' hook signature)
    if page.file.src_uri == "contracts.md":
        return contracts_page(markdown, tests_by_contract())
    if page.file.src_uri == "reference/index.md":
        left_out = names_left_out()
        if left_out:
            markdown += "\n## Other names\n\n" + "\n".join(f"::: tinystore.{name}\n" for name in left_out)
    return markdown
