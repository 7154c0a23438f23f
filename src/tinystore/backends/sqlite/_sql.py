"""The statements the SQLite backend runs, by name (the engine's shared ones and queries.sql's), and its
migrations, loaded once at import."""

from __future__ import annotations

from importlib.resources import files

from .._engine.statements import Statements, catalogue, parse

_here = files(__package__)
Q = Statements(catalogue(parse(_here.joinpath("queries.sql").read_text("utf-8"))))
R = Statements(parse(_here.joinpath("reads.sql").read_text("utf-8")))  # an operator's page (_reads)

# Versioned migrations: migration_NNN.sql, applied in order, each once.
MIGRATIONS: list[tuple[int, str]] = sorted(
    (int(p.name[len("migration_"):-len(".sql")]), p.read_text("utf-8"))
    for p in _here.iterdir()
    if p.name.startswith("migration_") and p.name.endswith(".sql")
)
