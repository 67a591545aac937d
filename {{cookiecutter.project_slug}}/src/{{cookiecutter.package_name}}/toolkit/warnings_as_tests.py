"""The warning filters your tests run under, for a tool that judges your model: the same verdict.

The project's pytest configuration (pyproject.toml, [tool.pytest.ini_options] filterwarnings)
turns every warning into an error but those it names. A warning raised while graph mode compiles
your model (Dynamo's, a library's) then fails your tests, and a tool that judged the same model
under Python's default filters would call it ready. So `check` applies those filters as pytest
does (each in order, the last one first), and a warning it raises as an error is named with the
filter that lets it through, if it is harmless.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

from . import project


def filters_of_the_tests(pyproject: Path | None = None) -> list[str]:
    """The filterwarnings entries of the pytest configuration in `pyproject` (the served project's
    by default), in order."""
    pyproject = pyproject or project.current().pyproject
    try:
        import tomllib
    except ImportError:  # Python 3.10: its tests' filters cannot be read here
        return []
    if not pyproject.is_file():
        return []
    pytest = tomllib.loads(pyproject.read_text()).get("tool", {}).get("pytest", {})
    return list(pytest.get("ini_options", {}).get("filterwarnings", []))


def category(name: str) -> type[Warning]:
    """A warning class by the name a filter gives it, as pytest resolves it."""
    if not name:
        return Warning
    module, _, attribute = name.rpartition(".")
    found = getattr(importlib.import_module(module) if module else builtins, attribute)
    if not (isinstance(found, type) and issubclass(found, Warning)):
        raise TypeError(f"{name} is not a Warning subclass")
    return found


def apply(entry: str) -> None:
    """One filterwarnings entry, `action:message:category:module:lineno`, as pytest applies an
    entry of its configuration file (message and module are regular expressions there)."""
    parts = [part.strip() for part in entry.split(":", 4)]
    action, message, kind, module, lineno = [*parts, "", "", "", ""][:5]
    warnings.filterwarnings(action, message, category(kind), module, int(lineno or 0))


@contextlib.contextmanager
def as_the_tests_do(pyproject: Path | None = None) -> Iterator[None]:
    """Warnings filtered in the block as the project's tests filter them; a filter this module
    cannot apply (a category that does not import) is left out, as it fails the tests anyway."""
    with warnings.catch_warnings():
        for entry in filters_of_the_tests(pyproject):
            with contextlib.suppress(Exception):
                apply(entry)
        yield


def first_warning(error: BaseException) -> Warning | None:
    """The warning raised as an error that `error` is, or that it was raised from."""
    while error is not None:
        if isinstance(error, Warning):
            return error
        error = error.__cause__ or error.__context__
    return None


SPECIAL = re.compile(r"([.^$*+?{}()\[\]|\\])")
"""What a regular expression reads as more than itself."""


def filter_for(warning: Warning) -> str:
    """The filterwarnings entry that ignores this warning: its category, and its message up to
    what varies (a quote, a colon, a line's end), as a regular expression."""
    text = re.split(r"[:'\"\n]", str(warning), maxsplit=1)[0].strip()
    message = SPECIAL.sub(r"\\\1", text)
    return f"ignore:{message}:{type(warning).__name__}"


def warning_hint(warning: Warning) -> str:
    """What to do about a warning your tests turn into an error."""
    return (
        "your tests turn every warning into an error (pyproject.toml, filterwarnings): fix its "
        f"cause, or, if it is harmless, add '{filter_for(warning)}' to filterwarnings (README, "
        "section 'Strict warnings in the tests')"
    )
