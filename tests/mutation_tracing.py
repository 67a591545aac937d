"""Which tests reach which function, for mutmut: through shared fixtures and child processes too.

mutmut 3 runs each mutant against only the tests that called its function while it collected
its stats, and it sees a call only in its own pytest process, during the test then running. Two
ways a test reaches code escape that view, and their mutants would go untested or unkillable:

- a session or module fixture (the MRE run once, a background export) runs inside whichever test
  asked for it first, so only that test is credited, though every test using it reads its result;
- a child process (a bake's hooks, `python -m <package> export`, torchrun ranks) calls the code
  where mutmut cannot count it, and a hook that cookiecutter runs as a script is `__main__`, a
  module name no mutant of `hooks.<name>` matches.

As a pytest plugin (`-p mutation_tracing`), this module credits a fixture's calls to every test
using the fixture, and collects the calls child processes write to a file named in MUTATION_HITS.
It also times what mutmut leaves out, its call alone being timed: a test's setup, where a
shared fixture (the MRE's compile, a background export) runs for the first test that uses it. A
mutant's timeout allows for each setup once, as its run pays it; its tests run cheapest first,
each charged with every shared fixture it uses (it may be the one that pays), so the tests that
wait for a background run come after the quick tests that usually kill the mutant.
At the start of every child process (a `.pth` file calls child_process()), it makes that process
write its calls there while stats are collected, and run the mutant under test inside hook
scripts. tests/mutation_score.py installs both; nothing else loads this module.

The toolkit is one set of files, which each project of tests/toolkit imports under its own
package name. mutmut mutates one copy, `<MUTATION_SHARED_TOOLKIT>/<module>.py`, that every
project's toolkit file links to; its trampolines run a mutant only in the module the mutant's
name names, so here each project's `<project>.toolkit.<module>` answers to the shared copy's
name (share_toolkit_mutants): a mutant runs, and a call is credited, whichever project ran it.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

# Not pytest: child processes load this module too, and most never import pytest.
from pluggy import HookimplMarker

if TYPE_CHECKING:
    import pytest

hookimpl = HookimplMarker("pytest")

MUTANT = "MUTANT_UNDER_TEST"
HITS = "MUTATION_HITS"
"""The file a child process appends the functions it calls to, one qualified name a line."""
COSTS = Path("mutation-costs.json")
"""What each test costs a mutant's run that starts with it: written by the stats run, in the
folder mutmut runs the tests in."""
SCRIPTS = "MUTATION_SCRIPTS"
"""A folder of modules that also run as scripts (the hooks): `__main__` is one of them."""
SHARED = "MUTATION_SHARED_TOOLKIT"
"""The package name of the toolkit's one mutated copy, where the projects' toolkits link to it."""


def collecting_stats() -> bool:
    return os.environ.get(MUTANT) == "stats"


def read_hits(path: Path) -> set[str]:
    return set(path.read_text().split()) if path.exists() else set()


class Tracer:
    """Credit each test with the calls made for it by shared fixtures and by child processes."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="mutation-hits-"))
        self.fixture_calls: defaultdict[str, set[str]] = defaultdict(set)
        self.fixture_files: dict[str, Path] = {}
        self.shared_seconds = 0.0
        """Shared fixtures' setup time within the current test's setup."""
        self.nested: list[float] = []
        """For each shared fixture being set up, the time of those it set up meanwhile."""
        self.test_files: dict[str, Path] = {}
        self.fixture_seconds: dict[str, float] = {}
        """How long each shared fixture took to set up."""
        self.setup_seconds: dict[str, float] = {}
        """Each test's setup, the shared fixtures it set up first included."""
        self.own_setup_seconds: dict[str, float] = {}
        """Each test's setup without the shared fixtures: its function fixtures."""

    @hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest):
        if fixturedef.scope == "function" or not collecting_stats():
            return (yield)
        from mutmut.state import state

        name = fixturedef.argname
        self.fixture_files[name] = self.folder / f"fixture-{len(self.fixture_files)}"
        outer, state()._stats = state()._stats, set()
        started = time.perf_counter()
        self.nested.append(0.0)
        with child_hits(self.fixture_files[name]):
            try:
                return (yield)
            finally:
                self.fixture_calls[name] |= state()._stats
                state()._stats = outer | state()._stats
                # Its own time: a test using it uses the fixtures it set up too, and pays those.
                seconds = time.perf_counter() - started
                own = seconds - self.nested.pop()
                self.fixture_seconds[name] = self.fixture_seconds.get(name, 0.0) + own
                if self.nested:
                    self.nested[-1] += seconds
                else:
                    self.shared_seconds += seconds

    @hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        if not collecting_stats():
            return (yield)
        self.shared_seconds, started = 0.0, time.perf_counter()
        try:
            return (yield)
        finally:
            elapsed = time.perf_counter() - started
            self.setup_seconds[item.nodeid] = elapsed
            self.own_setup_seconds[item.nodeid] = max(elapsed - self.shared_seconds, 0.0)

    @hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        if not collecting_stats():
            return (yield)
        self.test_files[item.nodeid] = self.folder / f"test-{len(self.test_files)}"
        with child_hits(self.test_files[item.nodeid]):
            return (yield)

    @hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Testing a mutant: its fastest tests first, so a kill (the run stops at the first
        failure) seldom waits for a slow test that another test beats to it."""
        if "__mutmut_" not in os.environ.get(MUTANT, ""):
            return
        # mutmut runs the tests in its mutants/ folder, where the stats run wrote the costs.
        costs = json.loads(COSTS.read_text()) if COSTS.exists() else {}
        items.sort(key=lambda item: costs.get(item.nodeid, 0.0))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Read the files last: a process a fixture started in the background may end any time."""
        if not collecting_stats():
            return
        from mutmut.state import state

        costs = {}
        for item in session.items:
            if item.nodeid not in self.test_files:
                continue  # not run (-x stopped the session)
            calls = read_hits(self.test_files[item.nodeid])
            for fixture in getattr(item, "fixturenames", ()):
                calls |= self.fixture_calls.get(fixture, set())
                if fixture in self.fixture_files:
                    calls |= read_hits(self.fixture_files[fixture])
            test = item.nodeid.removeprefix("mutants/")
            for function in calls:
                state().tests_by_mangled_function_name[function].add(test)
            call = state().duration_by_test[item.nodeid]  # mutmut's: the call alone
            state().duration_by_test[item.nodeid] += self.setup_seconds.get(item.nodeid, 0.0)
            shared = self.fixture_seconds.keys() & set(getattr(item, "fixturenames", ()))
            costs[item.nodeid] = (
                call
                + self.own_setup_seconds.get(item.nodeid, 0.0)
                + sum(self.fixture_seconds[name] for name in shared)
            )
        COSTS.write_text(json.dumps(costs))


@contextmanager
def child_hits(path: Path) -> Iterator[None]:
    """Child processes started inside the block write their calls to `path`."""
    previous = os.environ.get(HITS)
    os.environ[HITS] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(HITS, None)
        else:
            os.environ[HITS] = previous


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Tracer(), "mutation-tracer")


def shared_name(module: str, shared: str) -> str:
    """`decode_project.toolkit.report` -> `<shared>.report`: a project's toolkit module by the
    name of the copy it links to; any other module keeps its name."""
    parts = module.split(".")
    return f"{shared}.{parts[2]}" if len(parts) == 3 and parts[1] == "toolkit" else module


def share_toolkit_mutants() -> None:
    """Name every toolkit function that mutmut wraps by the shared copy's module, before any
    mutated module is imported (its trampoline runs a mutant where that name is the mutant's),
    and record each call under that name (mutmut's stats choose a mutant's tests by it)."""
    shared = os.environ.get(SHARED)
    if not shared:
        return
    from mutmut.mutation import trampoline

    if not getattr(trampoline.wrap_in_trampoline, "shared", False):
        wrap = trampoline.wrap_in_trampoline

        def wrap_shared(mutants_dict: dict[str, Callable], is_classmethod: bool = False) -> Callable:
            decorate = wrap(mutants_dict, is_classmethod)

            def decorate_shared(function: Callable) -> Callable:
                function.__module__ = shared_name(function.__module__, shared)
                return decorate(function)

            return decorate_shared

        wrap_shared.shared = True
        trampoline.wrap_in_trampoline = wrap_shared
    if not getattr(trampoline.record_trampoline_hit, "shared", False):
        record = trampoline.record_trampoline_hit

        def record_shared(name: str, caller: str | None = None) -> None:
            module, _, function = name.rpartition(".")
            record(f"{shared_name(module, shared)}.{function}", caller)

        record_shared.shared = True
        trampoline.record_trampoline_hit = record_shared


share_toolkit_mutants()  # as a pytest plugin (-p), before the tests import the toolkit


def script_module() -> str:
    """The module `__main__` is, when it is one of the SCRIPTS (matched by its docstring)."""
    main = sys.modules.get("__main__")
    folder = os.environ.get(SCRIPTS)
    if not folder or main is None or not main.__doc__:
        return ""
    for path in sorted(Path(folder).glob("*.py")):
        if ast.get_docstring(ast.parse(path.read_text())) == main.__doc__.strip():
            return f"{Path(folder).name}.{path.stem}"
    return ""


def remembered(function: Callable[[], str]) -> Callable[[], str]:
    cache: list[str] = []

    def once() -> str:
        if not cache:
            cache.append(function())
        return cache[0]

    return once


def child_process() -> None:
    """At the start of a process the tests launched: collect its calls, or run the mutant."""
    if not os.environ.get(MUTANT):
        return
    from mutmut.mutation import trampoline

    module = remembered(script_module)
    if collecting_stats():
        path = os.environ.get(HITS)
        seen: set[str] = set()

        def record(name: str, caller: str | None = None) -> None:
            if name.startswith("__main__.") and module():
                name = module() + name.removeprefix("__main__")
            if path and name not in seen:
                seen.add(name)
                with Path(path).open("a") as hits:
                    hits.write(name + "\n")

        trampoline.record_trampoline_hit = record
    elif os.environ.get(SCRIPTS):
        under_test = trampoline.get_mutant_under_test

        def mapped() -> str:
            name = under_test()
            owner, _, mutant = name.rpartition(".")
            return f"__main__.{mutant}" if owner and owner == module() else name

        trampoline.get_mutant_under_test = mapped
    share_toolkit_mutants()  # again: around the recorder set above
