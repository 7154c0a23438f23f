"""The named statements of queries.sql and the migrations, loaded once at import."""

from __future__ import annotations

import re
from importlib.resources import files

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.M)


def _load(text: str) -> dict[str, str]:
    parts = _NAME.split(text)
    queries = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        lines = [ln for ln in body.strip().splitlines() if not ln.startswith("--")]
        queries[name] = "\n".join(lines).rstrip().rstrip(";")
    return queries


class _Queries:
    def __init__(self, queries: dict[str, str]):
        self.__dict__.update(queries)


_here = files(__package__)
Q = _Queries(_load(_here.joinpath("queries.sql").read_text("utf-8")))

# Versioned migrations: migration_NNN.sql, applied in order, each once.
MIGRATIONS: list[tuple[int, str]] = sorted(
    (int(p.name[len("migration_"):-len(".sql")]), p.read_text("utf-8"))
    for p in _here.iterdir()
    if p.name.startswith("migration_") and p.name.endswith(".sql")
)
