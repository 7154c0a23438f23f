"""Typed payloads: a handler whose payload parameter is annotated with a dataclass or a
pydantic model gets an instance of it, made from the stored JSON.

The type is read once, when the handler is registered. ``add`` stores an
instance's JSON (``_values.encode_json``); a payload that no longer fits the
type (a field renamed since the job was added) raises ``Unfit``, and the
worker fails that job for good with its message: running it again would not
make it fit, and the queue goes on. pydantic is never imported here: a model
is known by its ``model_validate`` method.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from typing import Any, Callable, Optional


class Unfit(Exception):
    """A job's payload does not fit the type its handler asks for."""


Decode = Callable[[str], Any]


def decoder(handler: Callable[..., Any]) -> Decode:
    """How to turn a job's stored JSON into what ``handler`` takes as its payload."""
    kind = payload_type(handler)
    if kind is None:
        return json.loads
    name = kind.__name__

    def decode(text: str) -> Any:
        value = json.loads(text)
        try:
            return kind.model_validate(value) if _is_model(kind) else _dataclass(kind, value)
        except Unfit as exc:
            raise Unfit(f"the payload does not fit {name}: {exc}") from None
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise Unfit(f"the payload does not fit {name}: {exc}") from None
    return decode


def payload_type(handler: Callable[..., Any]) -> Optional[type]:
    """The dataclass or pydantic model ``handler``'s first parameter is annotated with, or None."""
    try:
        first = next(iter(inspect.signature(handler).parameters.values()), None)
    except (TypeError, ValueError):  # a builtin without a signature
        return None
    if first is None or first.annotation is inspect.Parameter.empty:
        return None
    annotation = first.annotation
    if isinstance(annotation, str):  # ``from __future__ import annotations``
        try:
            annotation = typing.get_type_hints(handler).get(first.name)
        except Exception:  # a name the handler's module cannot resolve: treat the payload as plain JSON
            return None
    if isinstance(annotation, type) and (dataclasses.is_dataclass(annotation) or _is_model(annotation)):
        return annotation
    return None


def _is_model(kind: type) -> bool:
    return callable(getattr(kind, "model_validate", None))


def _dataclass(kind: type, value: Any) -> Any:
    """An instance of dataclass ``kind`` from JSON ``value``; fields that are dataclasses are made too."""
    if not isinstance(value, dict):
        raise Unfit(f"it is {type(value).__name__} JSON, not an object")
    names, required, nested = _shape(kind)
    unknown = sorted(set(value) - names)
    if unknown:
        raise Unfit(f"it has {', '.join(map(repr, unknown))}, which {kind.__name__} has no field for")
    missing = sorted(required - set(value))
    if missing:
        raise Unfit(f"it lacks {', '.join(map(repr, missing))}")
    made = {}
    for name, item in value.items():
        inner = nested.get(name)
        made[name] = _dataclass(inner, item) if inner is not None and item is not None else item
    return kind(**made)


@functools.lru_cache(maxsize=256)
def _shape(kind: type) -> tuple[frozenset[str], frozenset[str], dict[str, type]]:
    """A dataclass's fields, once per type (not once per job): the names ``__init__`` takes, those without
    a default, and those whose type is a dataclass (or an Optional one), with that dataclass."""
    hints = typing.get_type_hints(kind)
    fields = [f for f in dataclasses.fields(kind) if f.init]
    required = frozenset(f.name for f in fields
                         if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    nested = {f.name: inner for f in fields if (inner := _dataclass_of(hints.get(f.name))) is not None}
    return frozenset(f.name for f in fields), required, nested


def _dataclass_of(hint: Any) -> Optional[type]:
    """The dataclass a field's type names: ``Address``, or ``Optional[Address]``; else None."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    options = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(options) == 1 and isinstance(options[0], type) and dataclasses.is_dataclass(options[0]):
        return options[0]
    return None
