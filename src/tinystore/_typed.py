"""Typed payloads: a handler whose payload parameter is annotated with a dataclass or a
pydantic model gets an instance of it, made from the stored JSON.

The type is read once, when the handler is registered. ``add`` stores an
instance's JSON (``_values.encode_json``); a payload that no longer fits the
type (a field renamed since the job was added, a value of another type)
raises ``Unfit``, and the worker fails that job for good with its message:
running it again would not make it fit, and the queue goes on. pydantic is
never imported here: a model is known by its ``model_validate`` method, and
checks its own fields.

A dataclass's fields are checked against the types JSON carries: ``int``
(not ``bool``), ``float`` (an int is made a float), ``str``, ``bool``,
``None``, ``list[X]``, ``dict[str, X]``, ``Literal[...]``, ``Optional`` and
other unions, nested dataclasses; a field whose default is None also takes
null. Any other annotation (``Any``, ``datetime``, an enum, ``tuple``...)
is not checked: the field gets the JSON value as it is. How each field is
checked is worked out once per dataclass (``_shape``, cached), not per job.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
import types
from typing import Any, Callable, Literal, Optional, Union, cast


class Unfit(Exception):
    """A job's payload does not fit the type its handler asks for."""


class _Misfit(Exception):
    """Where a value does not fit a dataclass's field: ``why``, and ``path``, where it is in the payload
    (".address", "[2]", "['k']", outermost first), filled in as the error leaves each container, so that
    a payload that fits builds no path at all."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why
        self.path: list[str] = []

    def __str__(self) -> str:
        return f"{''.join(self.path).lstrip('.') or 'it'} {self.why}"


Decode = Callable[[str], Any]


def decoder(handler: Callable[..., Any]) -> Decode:
    """How to turn a job's stored JSON into what ``handler`` takes as its payload."""
    kind = payload_type(handler)
    if kind is None:
        return json.loads
    name = kind.__name__
    make = cast(Any, kind).model_validate if _is_model(kind) else _dataclass(kind)  # a pydantic model's, or ours

    def decode(text: str) -> Any:
        value = json.loads(text)
        try:
            return make(value)
        except _Misfit as exc:
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


Check = Callable[[Any], Any]  # a JSON value -> what the handler gets; raises _Misfit where it does not fit


def _dataclass(kind: type) -> Check:
    """How to make an instance of dataclass ``kind`` from a JSON object (its fields' checks are read at the
    first use, so that a dataclass may hold itself: a tree of nodes)."""
    def check(value: Any) -> Any:
        return _make(kind, value)
    check.expected = f"an object for {kind.__name__}"  # type: ignore[attr-defined]
    return check


def _make(kind: type, value: Any) -> Any:
    if type(value) is not dict:
        raise _Misfit(f"is {_described(value)}, not an object for {kind.__name__}")
    names, required, checks = _shape(kind)
    if value.keys() != names:
        unknown = sorted(value.keys() - names)
        if unknown:
            raise _Misfit(f"has {', '.join(map(repr, unknown))}, which {kind.__name__} has no field for")
        missing = sorted(required - value.keys())
        if missing:
            raise _Misfit(f"lacks {', '.join(map(repr, missing))}")
    made = {}
    for name, item in value.items():
        check = checks[name]
        if check is None:
            made[name] = item
            continue
        try:
            made[name] = check(item)
        except _Misfit as exc:
            exc.path.insert(0, f".{name}")
            raise
    return kind(**made)


@functools.lru_cache(maxsize=256)
def _shape(kind: type) -> tuple[frozenset[str], frozenset[str], dict[str, Optional[Check]]]:
    """A dataclass's fields, once per type (not once per job): the names ``__init__`` takes, those without
    a default, and how each is checked (None: not at all)."""
    hints = typing.get_type_hints(kind)
    fields = [f for f in dataclasses.fields(kind) if f.init]
    required = frozenset(f.name for f in fields
                         if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    # A default of None takes null, whatever the type says (``tags: list[str] = None``).
    checks = {f.name: _check(Optional[hints.get(f.name, Any)] if f.default is None else hints.get(f.name, Any))
              for f in fields}
    return frozenset(checks), required, checks


def _check(hint: Any) -> Optional[Check]:
    """How a JSON value is checked against ``hint`` and made what it names; None where anything fits."""
    if hint is None or isinstance(hint, type) and hint in _SCALARS:
        return _SCALARS[type(None) if hint is None else hint]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is list or origin is list:
        return _list(_check(args[0]) if args else None)
    if hint is dict or origin is dict:
        return _dict(_check(args[1]) if args else None)
    if origin is Literal:
        return _literal(args)
    if origin is Union or origin is types.UnionType:
        return _union(args)
    return None  # Any, and what JSON does not carry (datetime, an enum, a tuple...): as it is


def _exactly(kind: type, expected: str) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise _Misfit(f"is {_described(value)}, not {expected}")
        return value
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _float(value: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise _Misfit(f"is {_described(value)}, not a number")


_float.expected = "a number"  # type: ignore[attr-defined]
_SCALARS: dict[Any, Check] = {int: _exactly(int, "an integer"), float: _float, str: _exactly(str, "a string"),
                              bool: _exactly(bool, "true or false"), type(None): _exactly(type(None), "null")}


def _list(item: Optional[Check]) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not list:
            raise _Misfit(f"is {_described(value)}, not a list")
        if item is None:
            return value
        made = []
        for i, x in enumerate(value):
            try:
                made.append(item(x))
            except _Misfit as exc:
                exc.path.insert(0, f"[{i}]")
                raise
        return made
    check.expected = "a list"  # type: ignore[attr-defined]
    return check


def _dict(item: Optional[Check]) -> Check:
    def check(value: Any) -> Any:
        if type(value) is not dict:
            raise _Misfit(f"is {_described(value)}, not an object")
        if item is None:
            return value
        made = {}
        for key, x in value.items():
            try:
                made[key] = item(x)
            except _Misfit as exc:
                exc.path.insert(0, f"[{key!r}]")
                raise
        return made
    check.expected = "an object"  # type: ignore[attr-defined]
    return check


def _literal(options: tuple[Any, ...]) -> Check:
    expected = "one of " + ", ".join(json.dumps(o, default=repr) for o in options)

    def check(value: Any) -> Any:
        if not any(type(value) is type(o) and value == o for o in options):  # True is not 1 here
            raise _Misfit(f"is {_described(value)}, not {expected}")
        return value
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _union(args: tuple[Any, ...]) -> Optional[Check]:
    """``Optional[X]``, ``X | None``, ``Union[A, B]``: null where None is one, else the first that fits."""
    null = type(None) in args
    found = [_check(a) for a in args if a is not type(None)]
    options = [o for o in found if o is not None]
    if len(options) < len(found):
        return None  # one of them takes anything
    if len(options) == 1:  # Optional[X]: X's own error says where it does not fit
        return _or_null(options[0]) if null else options[0]
    expected = " or ".join([o.expected for o in options] + (["null"] if null else []))  # type: ignore[attr-defined]

    def check(value: Any) -> Any:
        if value is None and null:
            return None
        for option in options:
            try:
                return option(value)
            except _Misfit:
                continue
        raise _Misfit(f"is {_described(value)}, not {expected}")
    check.expected = expected  # type: ignore[attr-defined]
    return check


def _or_null(inner: Optional[Check]) -> Optional[Check]:
    if inner is None:
        return None

    def check(value: Any) -> Any:
        return None if value is None else inner(value)
    check.expected = f"{inner.expected} or null"  # type: ignore[attr-defined]
    return check


def _described(value: Any) -> str:
    """A JSON value as an error shows it: its kind, and a scalar's value (a string cut at 40 characters)."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    if type(value) in (int, float):
        return f"the number {value!r}"
    if type(value) is str:
        shown = json.dumps(value[:40], ensure_ascii=False)
        return f"the string {shown}" + ("..." if len(value) > 40 else "")
    return "a list" if type(value) is list else "an object"
