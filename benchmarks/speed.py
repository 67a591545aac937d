"""Time what users wait for: a bake (cookiecutter's and copier's), a baked project's MRE, profile
and tests, `import torch`, and every tool on a model whose compile dominates their time.

The suites are those of the representative variants (tests/conftest.py), the default tier's; a
tensor-parallel MRE runs as its users launch it, two ranks under torchrun.

The compile-dominated case: the transformers Llama of tests/own_models/language_model.py, grown to
12 layers of width 128, is dropped into a default bake as the user's model.py. The MRE, `check`,
`bench` (its defaults), `profile`, `export --target portable`, and the project's own tests each run
as a fresh process, in turns, round after round; the table gives each one's median against the
MRE's, its spread, and the Dynamo graphs it compiled (summed over its processes: export's file and
the suite's run in their own), counted by a sitecustomize on the path, the toolkit untouched.

Run with `nox -s speed` (or `python benchmarks/speed.py [repeats] [--cookie FOLDER] [--llama]`;
the compile-dominated case needs transformers, which the session installs). Prints medians; asserts
nothing, since timings belong in notes and reviews, not in tests. With `--cookie` (a checkout of
scientific-python/cookie, the bake to match), both templates are baked by the
`cookiecutter --no-input` command, in turns. With `--llama`, the compile-dominated case alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import REPRESENTATIVE_VARIANTS, TEMPLATE, bake, copier_bake, package_of, run_in, variant_id
from copier.errors import DirtyLocalWarning
from test_own_models import OWN_MODELS, edited, use_model

# The transformers language model of the bring-your-own-model tests (the contract's model.py:
# use_cache=False, logits only), grown until compiling it dominates each tool's time.
LLAMA = edited(
    (OWN_MODELS / "language_model.py").read_text(),
    ("hidden_size=64,", "hidden_size=128,"),
    ("intermediate_size=128,", "intermediate_size=256,"),
    ("num_hidden_layers=2,", "num_hidden_layers=12,\n    max_position_embeddings=256,"),
)

COUNTS = "SPEED_DYNAMO_COUNTS"
"""The folder each process writes its Dynamo counts to (COUNTING)."""
COUNTING = f"""\
import atexit
import os
import sys


def record():
    # A process that never imported Dynamo compiled nothing; reading the counters imports nothing.
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is not None:
        counters = utils.counters
        counts = counters["stats"]["unique_graphs"], counters["aot_autograd"]["total"]
        with open(os.path.join(os.environ["{COUNTS}"], str(os.getpid())), "w") as file:
            file.write(" ".join(map(str, counts)))


atexit.register(record)
"""
"""sitecustomize.py: at its exit, each Python process writes the Dynamo graphs it compiled and
the AOTAutograd compiles among them (counters that torch._dynamo.reset() keeps) to a file named
by its PID."""


def median_seconds(action, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (git, the hooks)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def interleaved_timings(actions, repeats: int) -> list[list[tuple[float, float]]]:
    """Each action's wall-clock and CPU seconds in each round, the actions run in turn: on a
    machine whose load changes, each sees the same conditions as the others, and CPU time hardly
    depends on it."""
    timings: list[list[tuple[float, float]]] = [[] for _ in actions]
    for _ in range(repeats):
        for action, times in zip(actions, timings, strict=True):
            wall, cpu = time.perf_counter(), cpu_seconds()
            action()
            times.append((time.perf_counter() - wall, cpu_seconds() - cpu))
    return timings


def interleaved_medians(actions, repeats: int) -> list[tuple[float, float]]:
    """Each action's median wall-clock and CPU seconds, the actions run in turn."""
    return [
        (statistics.median(wall for wall, _ in times), statistics.median(cpu for _, cpu in times))
        for times in interleaved_timings(actions, repeats)
    ]


def succeeds(project: Path, *command: str, **env: str) -> None:
    """run_in(project, *command, **env), stopping the benchmark if it fails: a failed run's time
    means nothing."""
    result = run_in(project, *command, **env)
    if result.returncode:
        sys.exit(f"{' '.join(command)} exited {result.returncode} in {project}:\n{result.stderr[-3000:]}")


def cookiecutter_command(template: Path, output: Path) -> None:
    """A default bake as users run it: the `cookiecutter` command, a process of its own."""
    command = [sys.executable, "-m", "cookiecutter", "--no-input", "-o", str(output), str(template)]
    subprocess.run(command, check=True, capture_output=True)


def compare_with_cookie(cookie: Path, repeats: int) -> None:
    """This template's default bake against scientific-python/cookie's, paired runs of the same
    command."""
    with tempfile.TemporaryDirectory() as workdir:
        counter = iter(range(10_000))
        actions = [
            lambda template=template: cookiecutter_command(template, Path(workdir) / str(next(counter)))
            for template in (TEMPLATE, cookie)
        ]
        (ours, _), (theirs, _) = interleaved_medians(actions, repeats)
    print(f"cookiecutter --no-input, this template {ours:6.2f} s")
    print(
        f"cookiecutter --no-input, cookie        {theirs:6.2f} s"
        f"  (ours = {ours / theirs:.2f} x cookie's, goal <= 1)"
    )


def main(repeats: int) -> None:
    import_torch = median_seconds(
        lambda: subprocess.run([sys.executable, "-c", "import torch"], check=True), repeats
    )
    print(f"import torch                          {import_torch:6.2f} s")
    with tempfile.TemporaryDirectory() as workdir:
        counter = iter(range(10_000))

        def bake_fresh(**answers: str) -> Path:
            folder = Path(workdir) / str(next(counter))
            folder.mkdir()
            return bake(folder, **answers)

        def copier_bake_fresh() -> None:
            # From the checkout, as `copier copy . DIR` bakes: a clone of it, uncommitted changes
            # included (which copier warns about). The clone hardlinks each loose object of the
            # checkout's repository and removes it after the bake: a checkout with many local
            # commits not yet packed (`git count-objects`) times copier slower than a fresh clone.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DirtyLocalWarning)
                copier_bake(TEMPLATE, Path(workdir) / f"copier{next(counter)}")

        (seconds, cpu), (copier_seconds, copier_cpu) = interleaved_medians(
            [bake_fresh, copier_bake_fresh], max(repeats, 5)
        )
        print(f"bake (default answers, in-process)    {seconds:6.2f} s  ({cpu:.2f} s CPU)")
        print(
            f"copier bake (default answers)         {copier_seconds:6.2f} s  ({copier_cpu:.2f} s CPU)"
            f"  = {copier_seconds / seconds:.2f} x cookiecutter's (goal <= 1.5),"
            f" {copier_cpu / cpu:.2f} x in CPU time"
        )
        for answers in REPRESENTATIVE_VARIANTS:
            project = bake_fresh(**answers)
            tensor_parallel = answers.get("parallel") == "tensor_parallel"
            mre_module = ["-m", f"{package_of(project)}.mre"]
            if tensor_parallel:
                # The MRE as a tensor-parallel user runs it: two ranks under torchrun.
                mre_module = [
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    "--nproc-per-node=2",
                    *mre_module,
                ]
            mre = median_seconds(
                lambda project=project, command=mre_module: succeeds(project, *command), repeats
            )
            # profile as its users run it (two ranks under torchrun in a tensor-parallel project),
            # with its default steps, into a scratch folder.
            profile_command = [*mre_module[:-1], package_of(project), "profile"]
            profile_command += ["--out", str(Path(workdir) / "prof")]
            profile = median_seconds(
                lambda project=project, command=profile_command: succeeds(project, *command), repeats
            )
            suite = median_seconds(
                lambda project=project: succeeds(project, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
                repeats,
            )
            # Tensor-parallel and decode suites carry a second run (two ranks; generation).
            goal = 2.0 if tensor_parallel or answers.get("workload") == "decode" else 1.5
            print(f"{variant_id(answers)}")
            print(f"  MRE run                             {mre:6.2f} s")
            print(
                f"  profile                             {profile:6.2f} s"
                f"  = {profile / mre:.2f} x its MRE run (goal <= 2)"
            )
            print(
                f"  project tests                       {suite:6.2f} s"
                f"  = {suite / mre:.2f} x its MRE run (goal <= {goal}), {suite / import_torch:.1f} x import torch"
            )


def compile_dominated(repeats: int) -> None:
    """Every tool on the Llama (LLAMA) in a default bake, each a fresh process, in turns: each
    one's wall-clock and CPU seconds against the MRE's, and the Dynamo compiles it made."""
    with tempfile.TemporaryDirectory() as workdir:
        scratch = Path(workdir)
        project = bake(scratch / "bake")
        use_model(project, LLAMA)
        package = package_of(project)
        (scratch / "hook").mkdir()
        (scratch / "hook" / "sitecustomize.py").write_text(COUNTING)
        # The project's src, as run_in puts it on the path, then the counting sitecustomize.
        path = os.pathsep.join([str(project / "src"), str(scratch / "hook")])
        tools = {
            "MRE": ["-m", f"{package}.mre"],
            "check": ["-m", package, "check"],
            "bench (defaults)": ["-m", package, "bench"],
            "profile": ["-m", package, "profile", "--out", str(scratch / "prof")],
            "export --target portable": [
                *("-m", package, "export", "--target", "portable"),
                *("-o", str(scratch / "mre_export.py")),
            ],
            "tests (pytest)": ["-m", "pytest", "-q", "-p", "no:cacheprovider"],
        }
        # Each run's (graphs, AOT compiles) per process that compiled, by tool.
        compiles: dict[str, list[list[tuple[int, int]]]] = {tool: [] for tool in tools}
        counter = iter(range(10_000))

        def run(tool: str) -> None:
            counts = scratch / f"counts{next(counter)}"
            counts.mkdir()
            succeeds(project, *tools[tool], PYTHONPATH=path, **{COUNTS: str(counts)})
            found = [tuple(map(int, file.read_text().split())) for file in counts.iterdir()]
            compiles[tool].append([(graphs, aot) for graphs, aot in found if graphs or aot])

        # A first MRE run, untimed: it warms the file caches, and checks the counting, since the
        # MRE compiles the model once, as one graph, in its one process.
        run("MRE")
        if [[graphs for graphs, _ in processes] for processes in compiles["MRE"]] != [[1]]:
            sys.exit(f"the MRE's Dynamo counts, (graphs, AOT compiles) by process: {compiles['MRE']}")
        compiles["MRE"].clear()
        timings = interleaved_timings([lambda tool=tool: run(tool) for tool in tools], repeats)

    def one_or_range(values: list[float]) -> str:
        return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"

    print(
        "a 12-layer transformers Llama as model.py in a default bake, each tool a fresh process in"
        f" turn (rounds: {repeats}); medians, ranges, Dynamo graphs and AOT compiles"
    )
    columns = ("wall s", "wall x MRE", "wall range", "CPU s", "CPU x MRE", "graphs", "AOT", "processes")
    print(f"  {'':<25}" + "".join(f"{column:>12}" for column in columns))
    mre_wall, mre_cpu = (statistics.median(times) for times in zip(*timings[0], strict=True))
    for (tool, runs), times in zip(compiles.items(), timings, strict=True):
        walls, cpus = zip(*times, strict=True)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        cells = (
            f"{wall:.2f}",
            f"{wall / mre_wall:.2f}",
            f"{min(walls):.1f}-{max(walls):.1f}",
            f"{cpu:.2f}",
            f"{cpu / mre_cpu:.2f}",
            one_or_range([sum(graphs for graphs, _ in processes) for processes in runs]),
            one_or_range([sum(aot for _, aot in processes) for processes in runs]),
            one_or_range([len(processes) for processes in runs]),
        )
        print(f"  {tool:<25}" + "".join(f"{cell:>12}" for cell in cells))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("repeats", nargs="?", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--cookie", type=Path, help="a checkout of scientific-python/cookie")
    parser.add_argument(
        "--llama", action="store_true", help="only the compile-dominated case: every tool on a Llama"
    )
    parsed = parser.parse_args()
    # Before the other cases' minutes: the compile-dominated case's model needs transformers.
    if importlib.util.find_spec("transformers") is None:
        sys.exit("the compile-dominated case needs transformers (`nox -s speed` installs it)")
    if parsed.cookie:
        compare_with_cookie(parsed.cookie, max(parsed.repeats, 7))
    if not parsed.llama:
        main(parsed.repeats)
    compile_dominated(parsed.repeats)
