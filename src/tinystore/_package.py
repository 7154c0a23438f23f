"""The files tinystore reads from its own installed package at run time: SQL statements, migrations and
the dashboard's page.

A file missing here is an installation that is incomplete (a wheel built without it, a file removed),
not a fault of the store being opened: the error says so and names the file.
"""

from __future__ import annotations

from importlib.resources import files

from ._errors import Error


def read(package: str, name: str) -> str:
    """The text of the file ``name`` of the package ``package`` (``tinystore.backends.sqlite``, say)."""
    try:
        return files(package).joinpath(name).read_text("utf-8")
    except FileNotFoundError:
        raise incomplete(package, name) from None


def migrations(package: str) -> list[tuple[int, str]]:
    """The package's numbered migrations (``migration_NNN.sql``) in order, from 1 without a gap."""
    numbers = sorted(int(entry.name[len("migration_"):-len(".sql")]) for entry in files(package).iterdir()
                     if entry.name.startswith("migration_") and entry.name.endswith(".sql"))
    # Any number below the highest that has no file is one the installation lost (so is the first).
    for number in range(1, (numbers[-1] if numbers else 1) + 1):
        if number not in numbers:
            raise incomplete(package, f"migration_{number:03d}.sql")
    return [(number, read(package, f"migration_{number:03d}.sql")) for number in numbers]


def incomplete(package: str, name: str) -> Error:
    path = "/".join(package.split(".") + [name])
    return Error(f"tinystore's installation is incomplete: its file {path} is missing "
                 f"(reinstall tinystore; a wheel built without its package data lacks it)")
