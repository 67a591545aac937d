"""The mutation score: mutmut over the code users run, against the tests that guard it.

    python tests/mutation_score.py [--workers N] [--again] [TARGET[:MODULE] ...]   (`nox -s mutation_score`)

tests/mutations.py replays the bugs the team thought of; this measures the rest. mutmut makes
every small change it knows (a flipped comparison, a constant, a dropped argument, ...) to each
function of a TARGET, one at a time, and runs the tests that reach that function: a mutant that
no test fails on survived.

A target is the toolkit, mutated once and tested by tests/toolkit in every project it installs
(each project's toolkit files are links to one mutated copy, so a mutant is one mutant whichever
project's tests kill it: mutation_tracing.py); a baked project, mutating the files whose code is
new in it (`mutate`, relative to the package) against that project's own suite; or the template
itself, mutating the hooks against their tests. Another bake is one more entry in TARGETS. Each
target works in build/mutation/<name>, where mutmut keeps its results: the next run tests only
the mutants of functions that changed, and again every survivor when anything else (the tests)
changed. Delete the folder to start afresh. `TARGET:MODULE` (`toolkit:toolkit/report.py`) tests
that module's mutants again, all of them, and no other; `--again` only those no run has killed
yet (the survivors, and mutants of code changed since), to see what the tests written since kill.

It prints a table per module (mutants, killed, survived, timed out, score: the share killed or
timed out, as a test run that hangs fails too) and writes every survivor to
tests/mutation_survivors.md, keeping the verdict written against each one that survives again.
A survivor is either killed by a new test or marked `equivalent: <why no test can tell>`; a new
one is `unexplained`, and the run exits 1 while any is.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from toolkit.projects import PROJECTS, install
from toolkit.projects import TOOLKIT as TOOLKIT_SOURCE

TEMPLATE = Path(__file__).resolve().parents[1]
BUILD = TEMPLATE / "build" / "mutation"
SURVIVORS = TEMPLATE / "tests" / "mutation_survivors.md"
PACKAGE = "npu_graph_demo"  # the default answers' package
GOAL = 0.97  # the share of each module's mutants to kill


@dataclass(frozen=True)
class Target:
    name: str
    answers: dict[str, str] | None
    """A bake's answers over the defaults; None: the template itself."""
    mutate: tuple[str, ...]
    """Files to mutate: globs relative to the package, or to the template."""
    tests: tuple[str, ...] = ()
    """pytest arguments that select the tests to run; none: the whole suite."""


TOOLKIT_PROJECTS = "src"
"""Where the toolkit target's working folder holds the projects of tests/toolkit, installed."""
SHARED_TOOLKIT = "shared_toolkit"
"""The one copy of the toolkit that mutmut mutates, beside those projects; theirs link to it."""
TOOLKIT = Target(
    "toolkit",
    None,
    (f"{TOOLKIT_PROJECTS}/{SHARED_TOOLKIT}/*.py",),
    ("tests/toolkit",),
)


# The rooms of the baked projects: the code rendered for the user, tested by the project's own
# suite. The answers are those of code variants the template's tests bake anyway (tests/conftest.py):
# shared bakes.
TARGETS = (
    TOOLKIT,
    Target(
        "full",
        {"mode": "npugraph_ex", "custom_op": "in_place", "op_registration": "torch_library"},
        ("__main__.py", "custom_op.py"),
    ),
    Target(
        "op_plugin",
        {"mode": "npugraph_ex", "custom_op": "in_place", "op_registration": "op_plugin"},
        ("meta_registrations.py", "op_reference.py"),
    ),
    Target(
        "decode",
        {
            "workload": "decode",
            "mode": "cache_compile",
            "custom_op": "in_place",
            "op_registration": "op_plugin",
        },
        ("generate.py",),
    ),
    Target(
        "hooks",
        None,
        ("hooks/*.py",),
        (
            "tests/test_hooks.py",
            "tests/test_answers.py",
            # Two minutes of every survivor's run, for no kill of their own: hypothesis' random
            # answers would kill a mutant by luck, where the fixed answers of the other tests do
            # it every time, and the other checks a constant (mutmut mutates code in functions).
            "--deselect=tests/test_answers.py::test_fuzzed_free_text_is_refused_or_round_trips",
            "--deselect=tests/test_hooks.py::test_generated_names_list_what_model_class_could_clash_with",
        ),
    ),
)

# mutmut's exit codes for a mutant's test run (mutmut.stats.status_by_exit_code).
KILLED = {1, 3, -11, -9}  # a test failed, pytest failed, or the run crashed
TIMED_OUT = {36, 24, -24, 152, 255}
NOT_RUN = {None}
SKIPPED = {34}  # mutmut's "skipped"

# Not copied into the template's working copy: caches, and what runs write.
SKIPPED_NAMES = {
    ".git",
    ".nox",
    "build",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    ".venv",
}
KEPT_NAMES = {"mutants", "setup.cfg"}  # mutmut's own, in a working folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "targets", nargs="*", metavar="TARGET[:MODULE]", help=", ".join(t.name for t in TARGETS)
    )
    parser.add_argument("--workers", type=int, default=2, help="mutants tested side by side (default 2)")
    parser.add_argument(
        "--report", action="store_true", help="test nothing: the table and survivors of the last runs"
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="test only the mutants not killed yet, survivors and new ones (of each MODULE given)",
    )
    arguments = parser.parse_args()
    modules: dict[str, list[str]] = {}
    for argument in arguments.targets:
        name, _, module = argument.partition(":")
        modules.setdefault(name, []).extend([module] if module else [])
    unknown = set(modules) - {target.name for target in TARGETS}
    if unknown:
        parser.error(
            f"no target {', '.join(sorted(unknown))}; the targets: {', '.join(t.name for t in TARGETS)}"
        )
    chosen = [t for t in TARGETS if not modules or t.name in modules]
    install_tracing()
    os.nice(10)  # tens of minutes of work: whatever else runs on the machine comes first
    rows, survivors, tested = [], [], set()
    for target in chosen:
        started, cpu = time.perf_counter(), children_cpu()
        folder = BUILD / target.name
        if not arguments.report:
            prepare(target)
            run_mutmut(target, folder, arguments.workers, modules.get(target.name, []), arguments.again)
        elif not (folder / "mutants").exists():
            continue
        results = read_results(folder)
        rows += table_rows(target, results)
        survivors += [(target.name, *survivor) for survivor in survivors_of(target, folder, results)]
        tested |= fully_tested(target.name, results)
        # The CPU time too: on a shared machine the wall-clock time says little.
        print(
            f"{target.name}: {time.perf_counter() - started:.0f} s, {children_cpu() - cpu:.0f} CPU s",
            flush=True,
        )
    print_table(rows)
    unexplained = write_survivors(survivors, tested)
    if unexplained:
        print(f"{unexplained} survivor(s) unexplained in {SURVIVORS.relative_to(TEMPLATE)}")
    return 1 if unexplained else 0


def children_cpu() -> float:
    """CPU seconds used so far by the processes this one started and waited for, and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def install_tracing() -> None:
    """Put tests/mutation_tracing.py where every process of this environment finds it, and start
    it in each (a .pth file): it credits tests that reach code through fixtures or children."""
    packages = Path(sysconfig.get_paths()["purelib"])
    if not str(packages).startswith(sys.prefix) or sys.prefix == sys.base_prefix:
        sys.exit("run this in its own virtual environment (nox -s mutation_score): it adds a .pth file")
    shutil.copy2(TEMPLATE / "tests" / "mutation_tracing.py", packages / "mutation_tracing.py")
    (packages / "mutation_tracing.pth").write_text(
        'import os; os.environ.get("MUTANT_UNDER_TEST") and __import__("mutation_tracing").child_process()\n'
    )


def prepare(target: Target) -> Path:
    """The target's working folder, updated in place: only files whose content changed are
    written, so mutmut re-mutates those alone."""
    work = BUILD / target.name
    with tempfile.TemporaryDirectory() as scratch:
        if target.answers is None:
            fresh = TEMPLATE
        else:
            from cookiecutter.main import cookiecutter

            fresh = Path(
                cookiecutter(
                    str(TEMPLATE),
                    no_input=True,
                    extra_context=target.answers,
                    output_dir=scratch,
                    config_file=isolated_config(Path(scratch)),
                )
            )
        sync(fresh, work, keep=TOOLKIT_PROJECTS if target is TOOLKIT else None)
        if target is TOOLKIT:
            projects = install(Path(scratch), toolkit=None)
            shutil.copytree(
                TOOLKIT_SOURCE, projects / SHARED_TOOLKIT, ignore=shutil.ignore_patterns("__pycache__")
            )
            sync(projects, work / TOOLKIT_PROJECTS)
    config = mutmut_config(target, work)
    config_file = work / "setup.cfg"
    if config_file.exists() and config_file.read_text() != config:
        shutil.rmtree(work / "mutants", ignore_errors=True)  # other files or tests: start afresh
    config_file.write_text(config)
    if target is TOOLKIT:
        link_toolkits(work / "mutants" / TOOLKIT_PROJECTS)
    return work


def link_toolkits(projects: Path) -> None:
    """Make every toolkit module of each project under `projects` (mutmut's copy) a link to the
    shared copy's: mutmut never writes these, as they are not among its source files."""
    for name in PROJECTS:
        toolkit = projects / name / "toolkit"
        shutil.rmtree(toolkit, ignore_errors=True)
        toolkit.mkdir(parents=True)
        for module in sorted(TOOLKIT_SOURCE.glob("*.py")):
            (toolkit / module.name).symlink_to(Path("..", "..", SHARED_TOOLKIT, module.name))


def isolated_config(scratch: Path) -> str:
    """A cookiecutter config of its own: the user's replay and defaults stay out of it."""
    config = scratch / "cookiecutter-config.json"
    config.write_text(json.dumps({"replay_dir": str(scratch / "replay"), "default_context": {}}))
    return str(config)


def sync(source: Path, target: Path, keep: str | None = None) -> None:
    """Make target a copy of source, writing only the files that differ; a top-level folder
    named `keep` is left as it is."""
    target.mkdir(parents=True, exist_ok=True)
    wanted = set()
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if SKIPPED_NAMES & set(relative.parts) or not path.is_file():
            continue
        wanted.add(relative)
        copy = target / relative
        if not copy.exists() or copy.read_bytes() != path.read_bytes():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
    for path in sorted(target.rglob("*"), reverse=True):
        relative = path.relative_to(target)
        if relative.parts[0] in {*KEPT_NAMES, keep} or SKIPPED_NAMES & set(relative.parts):
            continue
        if path.is_file() and relative not in wanted:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def package_folder(target: Target) -> str:
    return "." if target.answers is None else f"src/{PACKAGE}"


def mutmut_config(target: Target, work: Path) -> str:
    base = package_folder(target)
    only = [f"{base}/{glob}".removeprefix("./") for glob in target.mutate]
    if target.answers is None:
        sources = sorted({glob.split("/")[0] for glob in target.mutate})
        # The template's pytest runs with xdist (-n auto): one process here, mutmut forks. mutmut
        # lists the tests with --collect-only, which syrupy would fail as leaving every snapshot
        # unused.
        arguments = ["-p", "no:cacheprovider", "-n", "0", "-p", "mutation_tracing", "--snapshot-warn-unused"]
        also_copy = ["answer_check.py", "cookiecutter.json", "{{cookiecutter.project_slug}}"]
    else:
        sources = [base]
        arguments = ["-p", "no:cacheprovider", "-p", "mutation_tracing"]
        also_copy = [path.name for path in work.iterdir() if path.name not in {"src", "tests", *KEPT_NAMES}]
    lines = [
        "# Written by tests/mutation_score.py: mutmut's settings for this target.",
        "[mutmut]",
        "source_paths =",
        *(f"    {source}" for source in sources),
        "only_mutate =",
        *(f"    {glob}" for glob in only),
        "also_copy =",
        *(f"    {path}" for path in sorted(also_copy)),
        "pytest_add_cli_args =",
        *(f"    {argument}" for argument in arguments),
        "pytest_add_cli_args_test_selection =",
        *(f"    {argument}" for argument in target.tests),
        # torch is not fork-safe once it has run: fork each mutant's run from a process that has
        # only imported the tests.
        "process_isolation = forkserver",
        "use_setproctitle = false",
        "",
    ]
    return "\n".join(lines)


def run_mutmut(target: Target, work: Path, workers: int, modules: list[str], again: bool = False) -> None:
    """mutmut run; then the survivors again if anything but the mutated code changed. With
    `modules`, every mutant of those modules again instead; with `again`, only those that no run
    has killed yet, survivors and mutants not run (of those modules, if any)."""
    if again:
        results = read_results(work)
        names = [
            name
            for name, code in sorted(results.items())
            if code not in KILLED | TIMED_OUT | SKIPPED and (not modules or module_of(name) in modules)
        ]
        print(f"{target.name}: {len(names)} mutant(s) not killed yet, again", flush=True)
        if names:
            mutmut(work, "run", "--max-children", str(workers), *names)
        return
    if modules:
        patterns = [mutant_pattern(target, module) for module in modules]
        mutmut(work, "run", "--max-children", str(workers), *patterns)
        return
    fingerprint = fingerprint_of(target, work)
    marker = work / "mutants" / "tests-fingerprint"
    # Results without a marker are those of a run that was stopped: tested against tests that
    # may have changed since, as mutmut re-tests only the mutants of functions that changed.
    retest = (work / "mutants").exists() and (not marker.exists() or marker.read_text() != fingerprint)
    # Only the results kept from before may be stale: what this run tests, it tests afresh.
    kept = {name for name, code in read_results(work).items() if code is not None} if retest else set()
    if retest:
        # New and changed tests reach other functions: count again which tests reach which.
        (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    mutmut(work, "run", "--max-children", str(workers))
    if retest:
        results = read_results(work)
        again = [name for name in sorted(kept) if results.get(name) not in KILLED | TIMED_OUT | SKIPPED]
        if again:
            print(f"{target.name}: the tests changed; {len(again)} survivor(s) again", flush=True)
            mutmut(work, "run", "--max-children", str(workers), *again)
    marker.write_text(fingerprint)


def mutant_pattern(target: Target, module: str) -> str:
    """mutmut's pattern for every mutant of `module` (`toolkit/report.py`, `generate.py`)."""
    if target is TOOLKIT:
        return f"{SHARED_TOOLKIT}.{Path(module).stem}.*"
    base = "" if target.answers is None else f"{PACKAGE}."
    return base + module.removesuffix(".py").replace("/", ".") + ".*"


def mutmut(work: Path, *arguments: str) -> None:
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",  # one thread a worker: the workers share the cores
        "PYTHONDONTWRITEBYTECODE": "1",
        # The working folder is a copy of files in a git checkout, not one: no git diffs.
        "GIT_CEILING_DIRECTORIES": str(work.parent),
    }
    if work.name == "hooks":
        environment["MUTATION_SCRIPTS"] = str(work / "mutants" / "hooks")
    elif work.name == TOOLKIT.name:
        # The mutated projects, which tests/toolkit imports instead of baking its own.
        environment["TOOLKIT_PROJECTS"] = str(work / "mutants" / TOOLKIT_PROJECTS)
        environment["MUTATION_SHARED_TOOLKIT"] = SHARED_TOOLKIT
    else:
        environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # a project's own run has no plugins
    command = [sys.executable, "-c", "from mutmut.__main__ import cli; cli()", *arguments]
    process = subprocess.run(command, cwd=work, env=environment, check=False)
    if process.returncode:
        sys.exit(f"mutmut {arguments[0]} failed in {work} (exit {process.returncode}): see above")


def fingerprint_of(target: Target, work: Path) -> str:
    """A digest of every file but the mutated ones: the tests, and the code they run besides."""
    digest = hashlib.sha256()
    only = mutmut_config(target, work).split("only_mutate =")[1].split("also_copy")[0].split()
    for path in sorted(work.rglob("*")):
        relative = path.relative_to(work)
        if relative.parts[0] in KEPT_NAMES or not path.is_file() or "__pycache__" in relative.parts:
            continue
        if any(fnmatch.fnmatch(relative.as_posix(), glob) for glob in only):
            continue
        digest.update(relative.as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def read_results(work: Path) -> dict[str, int | None]:
    """Every mutant of the target and mutmut's exit code for it."""
    results = {}
    for meta in sorted((work / "mutants").rglob("*.meta")):
        results.update(json.loads(meta.read_text())["exit_code_by_key"])
    return results


def module_of(name: str) -> str:
    """`npu_graph_demo.toolkit.report.x_first_call__mutmut_3` -> `toolkit/report.py`; the same
    for the toolkit's shared copy (`shared_toolkit.report...`)."""
    module = name.partition("__mutmut_")[0].rsplit(".", 1)[0]
    package, _, rest = module.partition(".")
    if package == PACKAGE:
        module = rest
    elif package == SHARED_TOOLKIT:
        module = f"toolkit.{rest}"
    return module.replace(".", "/") + ".py"


def table_rows(target: Target, results: dict[str, int | None]) -> list[tuple]:
    by_module: dict[str, Counter] = {}
    for name, code in results.items():
        counts = by_module.setdefault(module_of(name), Counter())
        counts["mutants"] += 1
        if code in KILLED:
            counts["killed"] += 1
        elif code in TIMED_OUT:
            counts["timed out"] += 1
        elif code in NOT_RUN | SKIPPED:
            counts["not run"] += 1
        else:
            counts["survived"] += 1
    return [(target.name, module, counts) for module, counts in sorted(by_module.items())]


def print_table(rows: list[tuple]) -> None:
    header = f"{'target':<16} {'module':<28} {'mutants':>7} {'killed':>6} {'survived':>8} {'timed out':>9} {'score':>6}"
    print(header)
    print("-" * len(header))
    for target, module, counts in rows:
        tested = counts["mutants"] - counts["not run"]
        score = (counts["killed"] + counts["timed out"]) / tested if tested else None
        flag = "" if score is None or score >= GOAL else f"  < {GOAL:.0%}"
        shown = "-" if score is None else f"{score:.1%}"
        untested = f"  ({counts['not run']} not run yet)" if counts["not run"] else ""
        print(
            f"{target:<16} {module:<28} {counts['mutants']:>7} {counts['killed']:>6} "
            f"{counts['survived']:>8} {counts['timed out']:>9} {shown:>6}{flag}{untested}"
        )


def fully_tested(target: str, results: dict[str, int | None]) -> set[tuple[str, str]]:
    """(target, function) of each function whose mutants have all run, not all of them skipped:
    a run stopped midway keeps the rows of a function's untested mutants, verdicts and all."""
    codes: dict[tuple[str, str], list[int | None]] = {}
    for name, code in results.items():
        codes.setdefault((target, function_of(name)), []).append(code)
    return {key for key, each in codes.items() if not NOT_RUN & set(each) and not set(each) <= SKIPPED}


def survivors_of(target: Target, work: Path, results: dict[str, int | None]) -> list[tuple[str, str, str]]:
    """(module, mutant, its diff) for each mutant that survived."""
    names = [name for name, code in results.items() if code not in KILLED | TIMED_OUT | NOT_RUN | SKIPPED]
    if not names:
        return []
    script = (
        "import json, sys\n"
        "from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant\n"
        "names = json.loads(sys.stdin.read())\n"
        "print(json.dumps({n: get_diff_for_mutant(n, path=find_mutant(n).path) for n in names}))\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", script],
        cwd=work,
        input=json.dumps(names),
        capture_output=True,
        text=True,
        check=True,
    )
    diffs = json.loads(process.stdout)
    return [(module_of(name), name, changed_lines(diffs[name])) for name in names]


def changed_lines(diff: str) -> str:
    """The lines a mutant changes, `-old` then `+new`, stripped of indentation."""
    lines = [line for line in diff.splitlines()[2:] if line[:1] in "-+"]
    return " ⏎ ".join(f"{line[0]}{line[1:].strip()}" for line in lines)


# The change sits in a double-backtick code span: the code it quotes may hold single backticks.
ROW = re.compile(
    r"^\| (?P<target>[^|]+) \| (?P<function>[^|]+) \| `` (?P<change>.*) `` \| (?P<verdict>.*) \|$"
)


def survivor_key(target: str, function: str, change: str) -> tuple[str, str, str]:
    return target.strip(), function.strip(), change.strip()


def function_of(name: str) -> str:
    """`npu_graph_demo.toolkit.report.x_first_call__mutmut_3` -> `report.first_call`: stable
    while other code changes, unlike the mutant's number."""
    module, _, mangled = name.partition("__mutmut_")[0].rpartition(".")
    # mutmut's mangling: x_<function>, or xǁ<class>ǁ<method>.
    function = mangled.removeprefix("x_").removeprefix("xǁ").replace("ǁ", ".")
    return f"{module.rsplit('.', 1)[-1]}.{function}"


def read_verdicts() -> dict[tuple[str, str, str], str]:
    verdicts = {}
    if SURVIVORS.exists():
        for line in SURVIVORS.read_text().splitlines():
            if match := ROW.match(line):
                key = survivor_key(match["target"], match["function"], match["change"].replace("\\|", "|"))
                verdicts[key] = match["verdict"].strip()
    return verdicts


SURVIVORS_HEADER = """# Mutation survivors

Written by `nox -s mutation_score` (tests/mutation_score.py): each mutant that no test kills,
with its change and a verdict kept from run to run. A survivor is either killed by a new test
(then it leaves this list) or `equivalent: <why no test can tell the difference>`; a new one is
`unexplained` until then.

| target | function | change | verdict |
| --- | --- | --- | --- |
"""


def write_survivors(survivors: list[tuple[str, str, str, str]], tested: set[tuple[str, str]]) -> int:
    """Rewrite the rows of the functions whose mutants were tested, (target, function) in
    `tested`; keep the others' rows (a function left untested by a run of one module, or of a
    fresh start that was stopped); count the unexplained."""
    verdicts = read_verdicts()  # now: they may have been written while the mutants ran
    rows = {}
    for key, verdict in verdicts.items():
        if key[:2] not in tested:
            rows[key] = verdict
    for target, _module, name, change in survivors:
        key = survivor_key(target, function_of(name), change)
        rows[key] = verdicts.get(key, "unexplained")
    lines = [
        f"| {target} | {function} | `` {escaped(change)} `` | {verdict} |"
        for (target, function, change), verdict in sorted(rows.items())
    ]
    SURVIVORS.write_text(SURVIVORS_HEADER + "".join(line + "\n" for line in lines))
    return sum(verdict == "unexplained" for verdict in rows.values())


def escaped(change: str) -> str:
    """A Markdown table cell's text: its pipes escaped."""
    return change.replace("|", "\\|")


if __name__ == "__main__":
    sys.exit(main())
