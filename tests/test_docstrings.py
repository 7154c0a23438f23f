"""Every public name has a docstring, which the API reference of the manual is made from.

The public names are those of ``__all__`` in ``tinystore``, ``tinystore.testing`` and
``tinystore.metrics``, ``tinystore.web.app``, and Django's ``TaskBackend``; with each public class,
every public method and property it defines or inherits from tinystore's own classes, and every
public attribute of its instances, which its docstring names (as ``name``).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
from pathlib import Path
from typing import Any, Iterator

import pytest

MODULES = ("tinystore", "tinystore.testing", "tinystore.metrics")


def public_names() -> Iterator[tuple[str, Any]]:
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        assert module.__doc__, f"{module_name} has no docstring"
        for name in module.__all__:
            yield f"{module_name}.{name}", getattr(module, name)
    web = pytest.importorskip("tinystore.web")
    yield "tinystore.web.app", web.app


SRC = Path(__file__).resolve().parent.parent / "src" / "tinystore"


def alias_docstring(name: str) -> str | None:
    """The string under ``name = ...`` at the top level of a module of the package: how a type alias (a
    ``Literal``, which has no docstring of its own at run time) is documented, for the reference too."""
    for path in sorted(SRC.rglob("*.py")):
        body = ast.parse(path.read_text("utf-8")).body
        for node, after in zip(body, body[1:]):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            if (any(getattr(t, "id", None) == name for t in targets) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                return after.value.value
    return None


def own_docstring(obj: Any, name: str = "") -> str | None:
    """The docstring written for ``obj`` itself: not a dataclass's generated signature, not a base's, and
    for a type alias the string under its assignment."""
    if not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)):
        return alias_docstring(name)
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
        if doc and doc.startswith(f"{obj.__name__}("):  # made by @dataclass
            return None
        return doc
    return getattr(obj, "__doc__", None)


def members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties of ``cls``, from it and from tinystore's classes it derives from."""
    seen = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("tinystore"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property):
                yield name, value.fget
            elif inspect.isfunction(value):
                yield name, value


def attributes(cls: type) -> list[str]:
    """The public attributes of ``cls``'s instances: its dataclass fields and its slots."""
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    for klass in cls.__mro__:
        names += [s for s in vars(klass).get("__slots__", ()) if isinstance(s, str)]
    return [n for n in names if not n.startswith("_")]


def undocumented() -> list[str]:
    missing = []
    for qualname, obj in public_names():
        if isinstance(obj, (str, int, float, tuple)):
            continue  # a constant: its module's docstring says what it is
        doc = own_docstring(obj, qualname.rpartition(".")[2])
        if not doc:
            missing.append(qualname)
            continue
        if inspect.isclass(obj):
            missing += [f"{qualname}.{name}" for name, fn in members(obj) if not (fn.__doc__ or "").strip()]
            missing += [f"{qualname}.{name} (its class's docstring does not name it)"
                        for name in attributes(obj) if f"``{name}``" not in doc]
    return missing


def test_every_public_name_method_property_and_attribute_has_a_docstring() -> None:
    assert undocumented() == []


def test_every_public_module_says_what_it_is_and_lists_its_constants() -> None:
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        constants = [n for n in module.__all__ if isinstance(getattr(module, n), (str, int, float, tuple))]
        assert all(f"``{n}``" in module.__doc__ for n in constants), (module_name, constants)


def test_django_s_task_backend_and_its_public_methods_have_docstrings() -> None:
    """Read from the source, as the reference is: Django 6 needs a newer Python than the suite's."""
    source = Path(__file__).resolve().parent.parent / "src/tinystore/contrib/django/_backend.py"
    backend = next(node for node in ast.parse(source.read_text("utf-8")).body
                   if isinstance(node, ast.ClassDef) and node.name == "TaskBackend")
    assert ast.get_docstring(backend)
    missing = [node.name for node in backend.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               and not node.name.startswith("_") and not ast.get_docstring(node)]
    assert missing == []
