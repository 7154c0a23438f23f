"""Opening a PostgreSQL store: migrations once, concurrent opens, its tables, errors at open."""

from __future__ import annotations

import subprocess

import pytest

import tinystore

TABLES = {"attempts", "cancelled", "changes", "counts", "groups", "jobs", "leases", "migrations", "processes", "queues",
          "release", "starts", "steps", "watched"}


def test_open_makes_the_schema_and_its_tables_once(pg):
    pg.open().close()
    pg.open().close()  # a second open migrates nothing
    names = {name for (name,) in pg.rows(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (pg.schema,))}
    assert TABLES <= names
    assert pg.rows("SELECT version FROM {s}.migrations ORDER BY version") == [(v,) for v in range(1, 13)]
    assert not pg.rows("SELECT 1 FROM information_schema.tables WHERE table_schema = 'public' "
                       "AND table_name LIKE 'tinystore%%'")


def test_two_processes_open_a_new_schema_at_once(pg, child_env):
    children = [subprocess.Popen(pg.child("open"), env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for _ in range(2)]
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert out.strip() == "opened"
    assert pg.rows("SELECT version FROM {s}.migrations ORDER BY version") == [(v,) for v in range(1, 13)]
    assert pg.rows("SELECT count(*) FROM {s}.processes") == [(0,)]  # both closed: registrations gone


def test_registration_and_close(pg):
    store = pg.open()
    rows = pg.rows("SELECT id, pid FROM {s}.processes")
    assert len(rows) == 1
    store.close()
    assert pg.rows("SELECT count(*) FROM {s}.processes") == [(0,)]


def test_an_unreachable_server_is_an_error_naming_host_and_database_not_the_password():
    with pytest.raises(tinystore.Error) as caught:
        tinystore.open("postgresql://someone:s3cretpass@127.0.0.1:1/appdb")
    message = str(caught.value)
    assert "127.0.0.1" in message and ":1" in message and "appdb" in message
    assert "s3cretpass" not in message
    assert "s3cretpass" not in repr(caught.value.__cause__) if caught.value.__cause__ else True


def test_a_refused_login_is_an_error_naming_the_database(pg):
    with pytest.raises(tinystore.Error) as caught:
        tinystore.open(pg.url.rsplit("/", 1)[0] + "/no_such_database_here", schema=pg.schema)
    assert "no_such_database_here" in str(caught.value)


def test_bad_arguments(pg):
    with pytest.raises(tinystore.InvalidArgument):
        tinystore.open(pg.url, schema="Bad-Name")
    with pytest.raises(tinystore.InvalidArgument):
        tinystore.open(pg.url, schema=pg.schema, durability="sometimes")


def test_location_has_no_password():
    from tinystore.backends.postgres._connection import Where
    where = Where("postgresql://app:pw123@db.internal:6543/app", "jobs")
    assert "pw123" not in where.location
    assert where.location.startswith("postgresql://app@db.internal:6543/app")


@pytest.mark.parametrize("durability", ["full", "normal", "off"])
def test_durability_sets_synchronous_commit(pg, durability):
    store = pg.open(durability=durability)
    backend = store._backend
    setting = backend._writer._conn.raw.execute("SHOW synchronous_commit").fetchone()[0]
    assert setting == ("on" if durability == "full" else "off")


def test_a_url_that_cannot_be_read_does_not_show_its_password():
    with pytest.raises(tinystore.InvalidArgument) as caught:
        tinystore.open("postgresql://someone:se%zzret@127.0.0.1:1/appdb")
    assert "zzret" not in str(caught.value)


def test_a_forked_child_cannot_use_its_parents_store_and_leaves_it_alone(pg):
    import os
    store = pg.open()
    q = store.queue("f")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its copy refuses, and closing it lets go of nothing of the parent's
        code = 1
        try:
            q.add({"x": 1})
        except tinystore.Error as exc:
            code = 0 if "forked" in str(exc) else 2
        store.close()
        os.write(write, bytes([code]))
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"\x00"
    assert q.add({"x": 2}).added  # the parent's connections still work
    assert len(pg.rows("SELECT id FROM {s}.processes")) == 1
