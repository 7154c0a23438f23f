"""A shop whose tasks are tinystore jobs in its own database: SQLite's file, or PostgreSQL."""

import os
from urllib.parse import unquote, urlsplit


def database(target: str, test: "str | None") -> dict:
    """Django's DATABASES entry for a SQLite file or a ``postgresql://user@host:port/name`` URL; ``test``
    names the test database (a file, or a database on the same server) where given."""
    if not target.startswith("postgresql://"):
        entry = {"ENGINE": "django.db.backends.sqlite3", "NAME": target,
                 "OPTIONS": {"transaction_mode": "IMMEDIATE"}}
    else:
        url = urlsplit(target)
        entry = {"ENGINE": "django.db.backends.postgresql", "NAME": url.path.lstrip("/"),
                 "USER": unquote(url.username or ""), "PASSWORD": unquote(url.password or ""),
                 "HOST": url.hostname or "", "PORT": str(url.port or "")}
    return {**entry, "TEST": {"NAME": test}} if test else entry


SECRET_KEY = "the test project's, not secret"
DEBUG = False
INSTALLED_APPS = ["tinystore.contrib.django", "shop"]
ROOT_URLCONF = "shopsite.urls"
# SHOP_TEST_DATABASE: the test database of manage.py test (on SQLite a file: the backend needs one)
DATABASES = {"default": database(os.environ["SHOP_DATABASE"], os.environ.get("SHOP_TEST_DATABASE"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = os.environ.get("SHOP_USE_TZ", "1") == "1"
TASKS = {
    "default": {
        "BACKEND": "tinystore.contrib.django.TaskBackend",
        "QUEUES": [] if os.environ.get("SHOP_EVERY_QUEUE") else ["default", "payments", "reports", "ranked"],
        # SHOP_DIRECT: where SHOP_DATABASE is a pooler's URL, the server's own, for the worker's session
        "OPTIONS": {"database": "default", "direct": os.environ.get("SHOP_DIRECT"),
                    "queue_options": {"payments": {"attempts": 1}, "ranked": {"concurrency": 1}}},
    },
    "archive": {  # a second backend, in the same database: reports enqueued with .using(backend="archive")
        "BACKEND": "tinystore.contrib.django.TaskBackend",
        "QUEUES": ["reports"],
        "OPTIONS": {"database": "default"},
    },
}
