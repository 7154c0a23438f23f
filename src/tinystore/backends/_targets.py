"""What a store's target is, and how messages show it: a PostgreSQL URL never with its password.

Beside the picker (``backends.open_backend``) and under every backend, so
that a backend needs nothing of the picker's package.
"""

from __future__ import annotations

import os
import re
from typing import Any, TypeGuard

URL_SCHEMES = ("postgresql://", "postgres://")
LOCK_TIMEOUT = 30.0  # seconds a write waits for another process's write lock, unless open says otherwise


def is_url(target: Any) -> TypeGuard[str]:
    """Whether ``target`` names a PostgreSQL store (a ``postgresql://`` or ``postgres://`` URL)."""
    return isinstance(target, str) and target.startswith(URL_SCHEMES)


def shown(target: Any) -> str:
    """``target`` as a message shows it: a PostgreSQL URL without its password, a path as it is.

    ``postgresql://user:secret@host/db`` is shown as ``postgresql://user@host/db``
    (all of the userinfo after the user's name goes, up to the last ``@`` before
    the query), and a ``password=`` parameter of the query is left out.
    """
    if not is_url(target):
        try:
            path: str = os.fspath(target)
            return path
        except TypeError:
            return repr(target)
    scheme, _, rest = target.partition("://")
    ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    at = rest.rfind("@", 0, min(ends) if ends else len(rest))
    if at >= 0:
        user = rest[:at].partition(":")[0]
        rest = (user + "@" if user else "") + rest[at + 1:]
    base, question, query = rest.partition("?")
    if question:
        query, hash_, fragment = query.partition("#")
        kept = [p for p in query.split("&") if p and p.partition("=")[0].lower() != "password"]
        rest = base + ("?" + "&".join(kept) if kept else "") + hash_ + fragment
    return f"{scheme}://{rest}"


def scrubbed(text: str, target: Any) -> str:
    """``text`` with ``target``'s password hidden: the URL shown as ``shown`` shows it wherever it appears
    whole, and a quoted token of the text (as libpq quotes what it cannot read: ``"se%zzret"``) that holds
    the password or is part of it, as ``***``. A text about a path is returned as it is."""
    if not is_url(target):
        return text
    text = text.replace(target, shown(target))
    secrets = [secret for secret in _secrets(target) if secret]
    if not secrets:
        return text

    def hide(found: "re.Match[str]") -> str:
        token = found.group(1)
        if any(token and (token in secret or secret in token) for secret in secrets):
            return '"***"'
        return found.group(0)
    text = re.sub(r'"([^"]*)"', hide, text)
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _secrets(url: str) -> list[str]:
    """What ``shown`` takes out of ``url``: the userinfo after the user's name, and ``password=`` values."""
    rest = url.partition("://")[2]
    ends = [i for i in (rest.find("?"), rest.find("#")) if i >= 0]
    at = rest.rfind("@", 0, min(ends) if ends else len(rest))
    found = []
    if at >= 0 and ":" in rest[:at]:
        found.append(rest[:at].partition(":")[2])
    query = rest.partition("?")[2].partition("#")[0]
    found += [p.partition("=")[2] for p in query.split("&") if p.partition("=")[0].lower() == "password"]
    return found
