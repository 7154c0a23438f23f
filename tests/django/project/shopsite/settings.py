"""A shop whose tasks are tinystore jobs in its own database: SQLite's file, or PostgreSQL."""

import os
from urllib.parse import unquote, urlsplit


def database(target: str) -> dict:
    """Django's DATABASES entry for a SQLite file or a ``postgresql://user@host:port/name`` URL."""
    if not target.startswith("postgresql://"):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": target,
                "OPTIONS": {"transaction_mode": "IMMEDIATE"}}
    url = urlsplit(target)
    return {"ENGINE": "django.db.backends.postgresql", "NAME": url.path.lstrip("/"),
            "USER": unquote(url.username or ""), "PASSWORD": unquote(url.password or ""),
            "HOST": url.hostname or "", "PORT": str(url.port or "")}


SECRET_KEY = "the test project's, not secret"
DEBUG = False
INSTALLED_APPS = ["tinystore.contrib.django", "shop"]
DATABASES = {"default": database(os.environ["SHOP_DATABASE"])}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TASKS = {
    "default": {
        "BACKEND": "tinystore.contrib.django.TaskBackend",
        "QUEUES": ["default", "payments", "ranked"],
        "OPTIONS": {"database": "default",
                    "queue_options": {"payments": {"attempts": 1}, "ranked": {"concurrency": 1}}},
    },
}
