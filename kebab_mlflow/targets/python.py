"""``--target python:module:attr`` or ``python:file.py:attr``: a Pipeline object, a class or factory
returning one, or a plain function ``f(query, k) -> hits``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kebab_mlflow.errors import TargetError
from kebab_mlflow.records import UNKNOWN, Answer, Hit, VersionSnapshot
from kebab_mlflow.targets.base import Target
from kebab_mlflow.targets.reply import ReplyError, parse_answer, parse_hits, parse_reply, type_name
from kebab_mlflow.targets.spec import TargetOptions, parse_options, snapshot, split_options


class PythonTarget(Target):
    """A Pipeline-protocol object (``search``, optional ``ask``) or a plain search function."""

    kind = "python"

    def __init__(self, spec: str, obj: Any, versions: VersionSnapshot, concurrency: int):
        super().__init__(spec, versions, concurrency)
        self.obj = obj
        self.is_function = not callable(getattr(obj, "search", None))
        # a plain function may still return full replies {"hits", "answer"}
        self.answers = not self.is_function and callable(getattr(obj, "ask", None))

    def warm_up(self) -> None:
        """The object's own ``warm_up()`` when it has one (a model or tokenizer to load):
        timed apart as ``latency/load_ms``, never charged to the queries."""
        warm = getattr(self.obj, "warm_up", None)
        if not self.is_function and callable(warm):
            warm()

    def query(self, text: str, k: int, ask: bool) -> tuple[tuple[Hit, ...], Answer | None]:
        if self.is_function:
            result = self.obj(text, k)
            if isinstance(result, Mapping):  # a full reply {"hits", "answer"}
                return parse_reply(result, ask)
            return parse_hits(_as_list(result, "the function")), None
        hits = parse_hits(_as_list(self.obj.search(text, k), "search"))
        if not ask or not self.answers:  # a search-only object
            return hits, None
        answer = self.obj.ask(text, hits)
        if answer is not None and not isinstance(answer, Answer | Mapping):
            raise ReplyError(f"ask returned a {type_name(answer)}, not an Answer")
        return hits, parse_answer(answer)


def _as_list(result: Any, who: str) -> list[Any]:
    if isinstance(result, list | tuple):
        return list(result)
    if isinstance(result, str | bytes | Mapping) or not hasattr(result, "__iter__"):
        raise ReplyError(f"{who} returned a {type_name(result)}, not a list of hits")
    return list(result)


def parse_python(spec: str) -> tuple[str, str, TargetOptions]:
    """(module or file, attribute, options) of a ``python:`` spec; a file must exist."""
    body, raw = split_options(spec[len("python:"):], "python", strict=True)
    options = parse_options(raw, spec)
    module_name, sep, attr = body.rpartition(":")
    if not sep or not module_name or not attr:
        raise TargetError(f"--target {spec!r}: expected python:package.module:attr or "
                          "python:path/to/file.py:attr")
    path = _file_of(module_name)
    if path is not None and not path.is_file():
        raise TargetError(f"--target {spec!r}: no such file {module_name}")
    return module_name, attr, options


def _file_of(module_name: str) -> Path | None:
    """The file a ``python:`` spec names (``dir/x.py``), or None for a module name."""
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        return Path(module_name).resolve()
    return None


def load_python(spec: str, concurrency: int) -> PythonTarget:
    module_name, attr, options = parse_python(spec)
    module = _import(module_name, spec)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(module) if not n.startswith("_"))
            raise TargetError(f"--target {spec!r}: {module_name} has no attribute {attr!r} "
                              f"(it has: {', '.join(public[:30]) or 'nothing public'})")
        obj = getattr(obj, part)
    obj = _instantiate(obj, spec)
    return PythonTarget(spec, obj, snapshot(_reported(obj, spec), options.versions, spec),
                        concurrency)


def from_object(obj: Any, name: str, concurrency: int = 1) -> PythonTarget:
    """A Python target from an object in hand (the API's ``evaluate(function, ...)``)."""
    obj = _instantiate(obj, name)
    return PythonTarget(name, obj, snapshot(_reported(obj, name), {}, name), concurrency)


def _reported(obj: Any, spec: str) -> Mapping[str, Any] | None:
    """The versions a pipeline object reports (an attribute or a method), if any."""
    versions = getattr(obj, "versions", None)
    if callable(versions) and not isinstance(versions, VersionSnapshot):
        try:
            versions = versions()
        except Exception as exc:  # noqa: BLE001 - user code
            raise TargetError(f"--target {spec!r}: versions() raised "
                              f"{type(exc).__name__}: {exc}") from None
    if isinstance(versions, VersionSnapshot):
        return {k: v for k, v in versions.as_dict().items() if v != UNKNOWN}
    if isinstance(versions, Mapping) or versions is None:
        return versions
    raise TargetError(f"--target {spec!r}: versions is a {type_name(versions)}, not a "
                      "VersionSnapshot or a mapping")


def _import(module_name: str, spec: str) -> Any:
    if (path := _file_of(module_name)) is not None:  # checked to exist by parse_python
        name = "kebab_target_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name]
        loader_spec = importlib.util.spec_from_file_location(name, path)
        if loader_spec is None or loader_spec.loader is None:  # not a suffix Python imports
            raise TargetError(f"--target {spec!r}: {path} is not a Python file to import")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - report the user's error, not a traceback
            del sys.modules[name]
            raise TargetError(f"--target {spec!r}: importing {module_name} raised "
                              f"{type(exc).__name__}: {exc}") from None
        return module
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:  # like `python -m`: the working folder
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name is not None and (module_name + ".").startswith(exc.name + ".")
        where = "" if missing else f" (while importing it: {exc})"
        raise TargetError(f"--target {spec!r}: cannot import {module_name}{where}; is it "
                          "installed or in the working folder?") from None
    except Exception as exc:  # noqa: BLE001
        raise TargetError(f"--target {spec!r}: importing {module_name} raised "
                          f"{type(exc).__name__}: {exc}") from None


def _instantiate(obj: Any, spec: str) -> Any:
    """A class or a zero-argument factory is called; a pipeline object or a search function
    ``f(query, k)`` is used as it is."""
    if callable(getattr(obj, "search", None)) and not inspect.isclass(obj):
        return obj
    if not callable(obj):
        raise TargetError(f"--target {spec!r}: is a {type_name(obj)}, not a pipeline, class, "
                          "factory or search function")
    try:
        params: Iterable[inspect.Parameter] = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        params = ()
    required = [p for p in params if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if inspect.isclass(obj) or not required:
        try:
            made = obj()
        except Exception as exc:  # noqa: BLE001
            raise TargetError(f"--target {spec!r}: calling it raised "
                              f"{type(exc).__name__}: {exc}") from None
        if not callable(getattr(made, "search", None)):
            raise TargetError(f"--target {spec!r}: calling it returned a {type_name(made)} "
                              "with no search(query, k) method")
        return made
    if len(required) == 2:
        return obj
    raise TargetError(f"--target {spec!r}: a function target takes (query, k); this one "
                      f"takes {len(required)} required argument(s)")
