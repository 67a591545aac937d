"""A baked project runs: its MRE works and its own test suite passes, in every mode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from conftest import (
    CHOICES,
    CODE_VARIANTS,
    REPRESENTATIVE_VARIANTS,
    RUFF,
    SUITE_VARIANTS,
    again_if_torch_crashed,
    once,
    package_of,
    run_folder,
    run_in,
    variant_id,
)

VERSIONS = CHOICES["torch_npu_version"]


def tree(root: Path, *, but: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file below root with its text, each string in `but` replaced by a placeholder."""
    texts = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            text = path.read_text()
            for string in but:
                text = text.replace(string, "<version>")
            texts[path.relative_to(root).as_posix()] = text
    return texts


@pytest.mark.parametrize("answers", CODE_VARIANTS, ids=variant_id)
def test_torch_npu_choice_changes_only_its_version_strings(baked, answers):
    """src/ and tests/ differ between torch_npu versions only where the version is written, so
    testing one version tests them all. (The toolkit, which names every pinned release, is the
    same file in every bake: tests/test_toolkit_layout.py.)"""
    default, *others = VERSIONS

    def own(project: Path, folder: str, version: str) -> dict[str, str]:
        texts = tree(project / folder, but=(version,))
        return {name: text for name, text in texts.items() if "/toolkit/" not in name}

    expected = {folder: own(baked(**answers), folder, default) for folder in ("src", "tests")}
    for version in others:
        project = baked(**answers, torch_npu_version=version)
        for folder, texts in expected.items():
            assert own(project, folder, version) == texts


@pytest.mark.parametrize("mode", CHOICES["mode"])
def test_op_registration_is_unused_without_a_custom_op(baked, mode):
    """With custom_op=none both registration answers bake the same project."""
    first, other = (
        baked(mode=mode, custom_op="none", op_registration=registration)
        for registration in CHOICES["op_registration"]
    )
    assert tree(first) == tree(other)


# Each variant's own suite and its two exports run in one process (one torch import); the tests
# that read the results share it. The suite runs export whole, running the file it writes
# (test_export.py): here only the two texts are linted.
SUITE_AND_EXPORTS = """\
import pathlib, sys, pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", "-rs"])
from {package}.toolkit.export import export
for target in ("npu", "portable"):
    pathlib.Path(f"{folder}/{{target}}.py").write_text(export(target))
sys.exit(int(code))
"""


OUTCOME = ("returncode", "stdout", "stderr")
"""What the tests read of the suite's run."""


class VariantRun(NamedTuple):
    suite: subprocess.CompletedProcess[str]
    exports: Path
    """Folder holding npu.py and portable.py, the project's exports."""


@pytest.fixture(scope="session")
def variant_run(baked, tmp_path_factory: pytest.TempPathFactory):
    """run(answers): the variant's own suite and exports, run once across xdist workers. Its tests
    share an xdist group too, so that no worker waits for another's run."""
    runs = run_folder(tmp_path_factory) / "variant-runs"

    def run(answers: dict[str, str]) -> VariantRun:
        project = baked(**answers)

        def suite_and_exports(folder: Path) -> dict[str, Any]:
            folder.mkdir()
            script = SUITE_AND_EXPORTS.format(package=package_of(project), folder=folder)
            result = again_if_torch_crashed(lambda: run_in(project, "-c", script))
            return {"exports": str(folder), **{name: getattr(result, name) for name in OUTCOME}}

        outcome = once(runs, variant_id(answers), suite_and_exports)
        suite = subprocess.CompletedProcess(project, **{name: outcome[name] for name in OUTCOME})
        return VariantRun(suite, Path(outcome["exports"]))

    return run


def per_variant(test):
    """Parametrize over the suite variants, each in its own xdist group (its tests share a run);
    variants other than the representative ones are in the full tier."""
    cases = [
        pytest.param(
            answers,
            id=variant_id(answers),
            marks=[pytest.mark.xdist_group(variant_id(answers))]
            + ([] if answers in REPRESENTATIVE_VARIANTS else [pytest.mark.full])
            # Two ranks under torchrun take longest: start them first.
            + ([pytest.mark.slow] if answers.get("parallel") == "tensor_parallel" else []),
        )
        for answers in SUITE_VARIANTS
    ]
    return pytest.mark.parametrize("answers", cases)(test)


def distinct_lines(project: Path) -> set[tuple[str, str]]:
    """Each non-blank line of a project's Python files, stripped, with its file."""
    return {
        (path.relative_to(project).as_posix(), line.strip())
        for path in project.rglob("*.py")
        for line in path.read_text().splitlines()
        if line.strip()
    }


def test_the_representative_suites_hold_nearly_every_line_of_the_variants(baked):
    """The default tier's suites hold at least 97% of the distinct lines of every suite variant's
    code and tests: a variant's own lines that none of them holds run in the full tier only."""
    lines = {variant_id(answers): distinct_lines(baked(**answers)) for answers in SUITE_VARIANTS}
    every = set().union(*lines.values())
    held = set().union(*(lines[variant_id(answers)] for answers in REPRESENTATIVE_VARIANTS))
    assert len(held) / len(every) >= 0.97, sorted(every - held)[:20]


@pytest.mark.xdist_group("probe")
def test_xdist_keeps_a_group_on_one_worker(request):
    """Under `--dist loadgroup` a grouped test's id ends with its group, which is what sends a
    group to one worker; pytest 9.2's node ids drop it silently (pytest-dev/pytest-xdist#1386)."""
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("runs under xdist's --dist loadgroup only")
    assert request.node.nodeid.endswith("@probe")


@per_variant
def test_own_test_suite_passes(variant_run, answers):
    """`python -m pytest` in the baked project passes; whatever skips says it needs an NPU, or
    matplotlib (the `plot` extra, which this suite's environment leaves out)."""
    result = variant_run(answers).suite
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    needs = ("needs an Ascend NPU", "needs matplotlib, the plot extra")
    assert all(any(need in line for need in needs) for line in skips), skips


@per_variant
def test_exported_mre_lints_clean(variant_run, answers):
    """Both exported files pass ruff check (isort included) and ruff format, standalone."""
    files = [str(variant_run(answers).exports / f"{target}.py") for target in ("npu", "portable")]
    for command in (["check", "--extend-select", "I,W"], ["format", "--check", "--line-length", "100"]):
        result = subprocess.run(
            [RUFF, *command, "--isolated", "--no-cache", *files],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout


# Every variant's own suite runs infer_one_step() in-process; these two also run the module as a
# user does and the portable file their run exported in a separate interpreter, one per mode,
# with the op styles split between them (each run costs a torch import).
ENTRY_POINT_VARIANTS = [
    {"mode": "npugraph_ex", "custom_op": "out_of_place", "op_registration": "torch_library"},
    {"mode": "cache_compile", "custom_op": "in_place", "op_registration": "op_plugin"},
]


@pytest.mark.full  # each variant's own suite runs its portable export alone (test_export.py)
@pytest.mark.parametrize(
    "answers",
    [
        pytest.param(answers, id=variant_id(answers), marks=pytest.mark.xdist_group(variant_id(answers)))
        for answers in ENTRY_POINT_VARIANTS
    ],
)
def test_mre_module_and_portable_export_agree(baked, variant_run, answers, tmp_path):
    """`python -m <package>.mre` reports the stand-in and why; the portable export, run where only
    torch can be imported, computes the same output."""
    project, clean = baked(**answers), tmp_path / "clean"
    package, output = package_of(project), clean / "output.pt"
    clean.mkdir()
    shutil.copy(variant_run(answers).exports / "portable.py", clean / "mre.py")
    run_alone = (
        "import importlib.util, runpy, torch\n"
        f"assert importlib.util.find_spec({package!r}) is None, 'the project is importable'\n"
        "step = runpy.run_path('mre.py', run_name='exported')['infer_one_step']\n"
        "torch.save(step(), 'output.pt')\n"
    )
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    alone = subprocess.run(
        [sys.executable, "-c", run_alone],
        cwd=clean,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert alone.returncode == 0, alone.stderr
    # Run the MRE module as `python -m` does, then compare its output (one torch import for both).
    compare = (
        f"import runpy, torch\nstep = runpy.run_module('{package}.mre', run_name='__main__')\n"
        f"torch.testing.assert_close(step['infer_one_step'](), torch.load({str(output)!r}))\n"
    )
    result = run_in(project, "-c", compare)
    assert result.returncode == 0, result.stderr
    assert "backend     aot_eager (no usable NPU (torch_npu is not installed)" in result.stdout
    assert "output      (2, 8, 32) float32 on cpu" in result.stdout


BROKEN_TORCH_NPU = {
    # A torch_npu that fails like the real one without CANN, registered for torch's autoload.
    "torch_npu/__init__.py": 'raise ImportError("libhccl.so: cannot open shared object file")\n',
    "torch_npu-2.13.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: torch-npu\nVersion: 2.13.0\n",
    "torch_npu-2.13.0.dist-info/entry_points.txt": "[torch.backends]\ntorch_npu = torch_npu:_autoload\n",
}


DEFAULT_VARIANT = REPRESENTATIVE_VARIANTS[0]
"""The default answers' project."""


# In the default project's group: the portable export of its run is the file this test runs.
@pytest.mark.xdist_group(variant_id(DEFAULT_VARIANT))
def test_autoload_trap_becomes_a_reason_not_a_traceback(baked, variant_run, tmp_path):
    """With torch_npu installed but CANN missing, `import torch` dies, yet the MRE runs and says why."""
    for name, text in BROKEN_TORCH_NPU.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    project = baked(**DEFAULT_VARIANT)
    site = f"{project / 'src'}:{tmp_path}"

    trap = run_in(project, "-c", "import torch", PYTHONPATH=site)
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD" in trap.stderr  # the trap is real here

    result = run_in(project, "-m", f"{package_of(project)}.mre", PYTHONPATH=site)
    assert result.returncode == 0, result.stderr
    assert "CANN is not sourced (libhccl.so: cannot open shared object file)" in result.stdout
    assert "Traceback" not in result.stderr

    # The exports defuse the same trap on their own, without the project: the portable file runs,
    # the npu file says in one sentence what it needs, exit 2.
    for target in ("portable", "npu"):
        shutil.copy(variant_run(DEFAULT_VARIANT).exports / f"{target}.py", tmp_path / f"{target}.py")
    exported = run_in(project, str(tmp_path / "portable.py"), PYTHONPATH=str(tmp_path))
    assert exported.returncode == 0, exported.stderr
    needs = run_in(project, str(tmp_path / "npu.py"), PYTHONPATH=str(tmp_path))
    assert needs.returncode == 2, needs.stderr
    assert "needs torch_npu with CANN sourced" in needs.stderr
    assert "Traceback" not in exported.stderr + needs.stderr
