"""The Django app: it makes the queues of SQLite databases ready when Django connects, closes the stores
in a test database before Django's test runner destroys it, and adds the ``tinystore_worker`` management
command."""

from django.apps import AppConfig
from django.db.backends.signals import connection_created


class TinystoreConfig(AppConfig):  # type: ignore[misc]  # Django ships no types: its base class is Any to mypy
    name = "tinystore.contrib.django"
    label = "tinystore"
    verbose_name = "tinystore"

    def ready(self) -> None:
        from ._stores import on_connect
        connection_created.connect(on_connect, dispatch_uid="tinystore.contrib.django.on_connect")
