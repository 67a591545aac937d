"""Time what users wait for: a bake (cookiecutter's and copier's), a baked project's MRE, profile
and tests, `import torch`.

The suites are those of the representative variants (tests/conftest.py), the default tier's; a
tensor-parallel MRE runs as its users launch it, two ranks under torchrun.

Run with `nox -s speed` (or `python benchmarks/speed.py [repeats] [--cookie FOLDER]`). Prints
medians; asserts nothing, since timings belong in notes and reviews, not in tests. With `--cookie`
(a checkout of scientific-python/cookie, the bake to match), both templates are baked by the
`cookiecutter --no-input` command, in turns.
"""

from __future__ import annotations

import argparse
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


def interleaved_medians(actions, repeats: int) -> list[tuple[float, float]]:
    """Each action's median wall-clock and CPU seconds, the actions run in turn: on a machine whose
    load changes, each sees the same conditions as the others, and CPU time hardly depends on it."""
    timings: list[list[tuple[float, float]]] = [[] for _ in actions]
    for _ in range(repeats):
        for action, times in zip(actions, timings, strict=True):
            wall, cpu = time.perf_counter(), cpu_seconds()
            action()
            times.append((time.perf_counter() - wall, cpu_seconds() - cpu))
    return [
        (statistics.median(wall for wall, _ in times), statistics.median(cpu for _, cpu in times))
        for times in timings
    ]


def succeeds(project: Path, *command: str) -> None:
    """run_in(project, *command), stopping the benchmark if it fails: a failed run's time means
    nothing."""
    result = run_in(project, *command)
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("repeats", nargs="?", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--cookie", type=Path, help="a checkout of scientific-python/cookie")
    parsed = parser.parse_args()
    if parsed.cookie:
        compare_with_cookie(parsed.cookie, max(parsed.repeats, 7))
    main(parsed.repeats)
