"""tinystore's release (PEP 440). The package's metadata reads it from here (pyproject.toml), and each store
records the release that last opened it (``tinystore_release``)."""

__version__ = "0.2.0.dev0"
