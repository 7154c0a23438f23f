"""The Django app: it makes the queues of SQLite databases ready when Django connects, and adds the
``tinystore_worker`` management command."""

from django.apps import AppConfig
from django.db.backends.signals import connection_created


class TinystoreConfig(AppConfig):
    name = "tinystore.contrib.django"
    label = "tinystore"
    verbose_name = "tinystore"

    def ready(self) -> None:
        from ._stores import prepare_on_connect
        connection_created.connect(prepare_on_connect, dispatch_uid="tinystore.contrib.django.prepare_on_connect")
