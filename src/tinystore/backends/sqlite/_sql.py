"""The statements the SQLite backend runs, by name (the engine's shared ones and queries.sql's), and its
migrations, loaded once at import."""

from __future__ import annotations

from ..._package import migrations, read
from .._engine.statements import Statements, catalogue, parse

Q = Statements(catalogue(parse(read(__package__, "queries.sql"))))
R = Statements(parse(read(__package__, "reads.sql")))  # an operator's page (_reads)

# Versioned migrations: migration_NNN.sql, applied in order, each once.
MIGRATIONS: list[tuple[int, str]] = migrations(__package__)
