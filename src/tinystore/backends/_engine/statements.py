"""Statement catalogues: the shared ``queries.sql`` and a backend's dialect file, read into one by name.

Every file holds statements under ``-- name: NAME`` with a line or more of
description. The shared file's statements are the same on every backend:
they are written with SQLite's placeholders (``?``, ``:name``) and table
names (``tinystore_jobs``); a backend that spells them otherwise rewrites
them (``rewritten``). A dialect file holds the statements whose text differs,
each with a comment saying why. A name in both is an error: a statement has
one text per backend.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from ..._package import read

NAME = re.compile(r"^-- name: (\w+)\s*$", re.M)
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_TABLE = re.compile(r"\btinystore_(\w+)")


def parse(text: str) -> dict[str, str]:
    """The statements of a file by name, their comment lines left out."""
    parts = NAME.split(text)
    statements = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        lines = [ln for ln in body.strip().splitlines() if not ln.startswith("--")]
        statements[name] = "\n".join(lines).rstrip().rstrip(";")
    return statements


SHARED = parse(read(__package__, "queries.sql"))


class Statements(dict[str, str]):
    """Statements by name: ``q["take"]``, or ``q.take`` where a module reads one by its own name."""

    def __getattr__(self, name: str) -> str:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def catalogue(dialect: dict[str, str], rewrite: Callable[[str], str] = lambda sql: sql) -> dict[str, str]:
    """Every statement of a backend: the shared ones (``rewrite`` gives each its spelling) and its dialect's."""
    both = SHARED.keys() & dialect.keys()
    if both:
        raise ValueError(f"statements named both in the shared catalogue and in a dialect: {sorted(both)}")
    return {**{name: rewrite(sql) for name, sql in SHARED.items()}, **dialect}


def pyformat(sql: str, tables: str) -> str:
    """A shared statement in psycopg's spelling: ``?`` as ``%s``, ``:name`` as ``%(name)s``, and
    ``tinystore_X`` as ``X`` in the schema ``tables`` names."""
    if "%" in sql:
        raise ValueError(f"a shared statement holds '%', which psycopg would read as a placeholder: {sql}")
    sql = _NAMED.sub(r"%(\1)s", sql.replace("?", "%s"))
    return _TABLE.sub(tables + r".\1", sql)
