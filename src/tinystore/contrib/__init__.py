"""tinystore in other frameworks, each an optional extra imported only where it is used.

- ``django``   a ``django.tasks`` backend, and ``manage.py tinystore_worker``
"""
