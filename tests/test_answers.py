"""Whatever a user types becomes data: fuzzed free text bakes a valid project or is refused cleanly,
and each answer's value reaches what it controls."""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import bake, isolated_config, package_of, run_in
from cookiecutter import prompt
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# Quotes, backslashes, braces, newlines, tabs, non-ASCII and astral characters, and the
# sequences each target format treats specially.
NASTY = st.sampled_from(['"', "'", "\\", "\n", "\t", "{", "}", "#", "`", "$", "<", ">", "é", "汉", "😀"])
FREE_TEXT = st.lists(st.one_of(NASTY, st.characters(codec="utf-8")), max_size=30).map("".join)
# cookiecutter renders --no-input answers as Jinja itself (documented behaviour), so `{{`/`{%`
# there are cookiecutter's business; typed answers are checked for that below.
NO_JINJA = FREE_TEXT.filter(lambda text: "{{" not in text and "{%" not in text and "{#" not in text)


def outcome(workdir: Path, **answers: str) -> Path | None:
    """The baked project, or None when cookiecutter refused the answers."""
    try:
        return bake(workdir, **answers)
    except FailedHookException:
        return None


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NO_JINJA, description=NO_JINJA, author=NO_JINJA)
def test_fuzzed_free_text_is_refused_or_round_trips(name, description, author):
    """Any text bakes a project whose metadata reads back exactly, or is refused leaving nothing."""
    with tempfile.TemporaryDirectory() as workdir:
        answers = {"project_name": name, "description": description, "author_name": author}
        answers["package_name"] = "fuzzed"  # a name slugify empties falls back to a valid slug
        project = outcome(Path(workdir), **answers)
        if project is None:
            assert not any((Path(workdir) / "out").iterdir())
            # Refused only for a reason the hook states: an empty name or a non-printable character.
            assert not name.strip() or not all(text.isprintable() for text in answers.values())
            return
        metadata = tomllib.loads((project / "pyproject.toml").read_text())["project"]
        assert metadata["description"] == description
        assert metadata["authors"][0]["name"] == author
        assert name in (project / "README.md").read_text()
        for path in project.rglob("*.py"):
            ast.parse(path.read_text())


def test_printable_text_is_accepted_and_control_characters_refused(tmp_path):
    """One line of printable text is fine; a newline gets an ERROR naming the variable."""
    assert outcome(tmp_path / "a", description='Say "hi" \\ to 汉字 😀') is not None
    with pytest.raises(FailedHookException):
        bake(tmp_path / "b", description="two\nlines")


def test_typed_jinja_is_kept_literally(tmp_path, monkeypatch):
    """`{{ ... }}` typed at a prompt reaches the files as text, never evaluated."""
    typed = {"project_name": "Demo {{ 7 * 7 }}", "description": "{% raw %}{{ cookiecutter }}"}
    original = prompt.read_user_variable

    def answer(name, default, *args, **kwargs):
        return typed.get(name, default if not isinstance(default, dict) else original(name, default))

    monkeypatch.setattr(prompt, "read_user_variable", answer)
    monkeypatch.setattr(prompt, "read_user_choice", lambda name, options, *args, **kwargs: options[0])
    monkeypatch.setattr(prompt, "read_user_yes_no", lambda *args, **kwargs: True)
    (tmp_path / "out").mkdir()
    project = Path(
        cookiecutter(
            str(Path(__file__).resolve().parents[1]),
            output_dir=str(tmp_path / "out"),
            config_file=str(isolated_config(tmp_path)),
        )
    )
    readme = (project / "README.md").read_text()
    assert "# Demo {{ 7 * 7 }}" in readme
    assert "{% raw %}{{ cookiecutter }}" in readme


def test_replay_bakes_the_same_project_again(tmp_path):
    """`cookiecutter --replay` re-creates a project from the answers it recorded."""
    first = bake(tmp_path / "first", mode="cache_compile", custom_op="in_place")
    replayed = cookiecutter(
        str(Path(__file__).resolve().parents[1]),
        replay=True,
        output_dir=str(tmp_path / "again"),
        config_file=str(isolated_config(tmp_path / "first")),
    )
    first_files = {path.relative_to(first) for path in first.rglob("*") if path.is_file()}
    replayed_files = {path.relative_to(replayed) for path in Path(replayed).rglob("*") if path.is_file()}
    assert replayed_files == first_files  # nothing missing, nothing extra
    for relative in first_files:
        assert (Path(replayed) / relative).read_text() == (first / relative).read_text()


# --- Each answer's value reaches what it controls, not only which option was chosen: one bake
# whose every value differs from its default (the op's namespace from the package name too), a
# decode bake with an op-plugin op, each imported into this process under a package name of its own.

VALUES = {
    "project_name": "Ascend Zeta Service",
    "package_name": "answer_values",
    "mode": "cache_compile",
    "cache_dir": "graphs/npu-cache",
    "input_shape": "3, 5, 48",
    "torch_npu_version": "2.12.0.post3",
    "custom_op": "out_of_place",
    "op_registration": "torch_library",
    "op_name": "fused_add",
    "op_namespace": "team_ops",
}
DECODE_VALUES = {
    "package_name": "decode_values",
    "workload": "decode",
    "input_shape": "3, 6, 48",
    "custom_op": "in_place",
    "op_registration": "op_plugin",
    "op_name": "cache_write",
}
OPS = [(VALUES, "team_ops::fused_add"), (DECODE_VALUES, "npu::cache_write")]
"""Each bake, and the op its model must call."""


def imported(project: Path, module: str) -> ModuleType:
    """`<package>.<module>` of a baked project, imported into this process."""
    if str(project / "src") not in sys.path:
        sys.path.insert(0, str(project / "src"))
    return importlib.import_module(f"{package_of(project)}.{module}")


def one_step(project: Path, device: str = "cpu") -> Any:
    """The baked model's output on its example inputs (a decode model's prefill), from seed 0."""
    import torch

    model, contract = imported(project, "model"), imported(project, "toolkit.contract")
    torch.manual_seed(0)
    built = model.build_model().to(device).eval()
    inputs = contract.to_device(model.example_inputs(), device)
    with torch.no_grad():
        if imported(project, "toolkit.project").DECODE:
            return imported(project, "toolkit.decode").prefill(built, *inputs)
        return built(*inputs)


def test_the_project_name_is_the_readmes_title(baked):
    """The README starts with the project's name as its title."""
    readme = (baked(**VALUES) / "README.md").read_text()
    assert readme.splitlines()[0] == f"# {VALUES['project_name']}"


@pytest.mark.parametrize(("answers", "op"), OPS, ids=["torch_library", "op_plugin"])
def test_the_model_calls_the_op_by_the_name_given(baked, answers, op):
    """The model's step calls the custom operator by the namespace and name answered (op-plugin
    ops in torch.ops.npu), and settings.py names that operator."""
    from torch.utils._python_dispatch import TorchDispatchMode

    called = set()

    class Recorded(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            called.add(func._schema.name)
            return func(*args, **(kwargs or {}))

    project = baked(**answers)
    with Recorded():
        one_step(project)
    assert op in called
    settings = imported(project, "settings")
    assert f"{settings.OP_NAMESPACE}::{settings.OP_NAME}" == op


def test_the_op_plugin_ops_meta_function_is_registered_under_the_name_given(baked):
    """The model runs on the meta device, as graph mode traces it: its op-plugin op has its Meta
    function under the name answered."""
    output = one_step(baked(**DECODE_VALUES), device="meta")
    assert (output.device.type, tuple(output.shape)) == ("meta", (3, 1))


def test_the_input_has_the_shape_given(baked):
    """example_inputs() is the shape answered, and the model's width is its last size."""
    project = baked(**VALUES)
    (dummy_input,) = imported(project, "model").example_inputs()
    assert tuple(dummy_input.shape) == tuple(one_step(project).shape) == (3, 5, 48)


def test_the_decode_prompt_has_the_shape_given(baked):
    """A decode project's prompt is the answered shape's (batch, length), its hidden size the
    model's width, and its batch a capture size."""
    project = baked(**DECODE_VALUES)
    model = imported(project, "model")
    (prompt,) = model.example_inputs()
    assert tuple(prompt.shape) == (3, 6)
    assert model.build_model().embed.embedding_dim == 48
    assert 3 in model.CAPTURE_SIZES


def test_the_toolkit_reads_the_release_pinned(baked):
    """settings.py gives the toolkit the torch_npu release answered, which the doctor compares
    with the installed one."""
    project = imported(baked(**VALUES), "toolkit.project")
    assert VALUES["torch_npu_version"] == project.TORCH_NPU


# The cache folder is observable only when the MRE runs: on an NPU, npugraph_ex's cache_compile
# writes it. Here a stand-in for it writes a file where it is told to, as the real one writes
# <cache_dir>/code_<hash>/CachedModel_static_aclgraphcache_<md5>/.../compiled_module.
CACHE_COMPILE_RUN = """\
import runpy, sys, types
from pathlib import Path
import torch
from {package}.toolkit import backend

backend.select_backend = lambda: backend.Backend("npugraph_ex", "cpu", "a stand-in cache_compile")


def cache_compile(method, *, dynamic, cache_dir, options, **ranks):
    folder = Path(cache_dir) / "CachedModel_static_aclgraphcache_0" / method.__name__
    folder.mkdir(parents=True)
    (folder / "compiled_module").write_text("")
    return torch.compile(method, backend="aot_eager", fullgraph=True, dynamic=dynamic)


inference = types.SimpleNamespace(cache_compile=cache_compile)
torch.npu = types.SimpleNamespace(npugraph_ex=types.SimpleNamespace(inference=inference))
runpy.run_module("{package}.mre", run_name="__main__")
"""


@pytest.fixture(scope="module")
def cache_run(baked, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A copy of the VALUES project in a git repository, where its MRE ran with npugraph_ex's
    cache_compile standing in: the folder, and the run."""
    folder = shutil.copytree(baked(**VALUES), tmp_path_factory.mktemp("cache") / "project")
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    script = CACHE_COMPILE_RUN.format(package=package_of(folder))
    result = run_in(folder, "-c", script)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder, result


@pytest.mark.xdist_group("cache_run")
def test_the_cache_lands_in_the_folder_given(cache_run):
    """The MRE hands cache_compile the folder answered, relative to where it runs: the cache is
    written there, and nothing in npugraph_ex's default folder."""
    folder, _ = cache_run
    (written,) = [path.relative_to(folder).as_posix() for path in folder.rglob("compiled_module")]
    # In the folder of the model's code (compile_cache.keyed()).
    code = r"code_[0-9a-f]{12}"
    cache = re.escape(VALUES["cache_dir"])
    assert re.fullmatch(
        f"{cache}/{code}/CachedModel_static_aclgraphcache_0/_forward/compiled_module", written
    )
    assert not (folder / ".torchair_cache").exists()


@pytest.mark.xdist_group("cache_run")
def test_git_ignores_the_cache_folder_given(cache_run):
    """What cache_compile writes in the folder answered is never committed: git ignores it."""
    folder, _ = cache_run
    ignored = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", VALUES["cache_dir"]],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ignored.stdout == ""


@pytest.mark.xdist_group("cache_run")
def test_the_readme_shows_the_input_and_output_the_mre_prints(cache_run):
    """The README's sample report has the input and output rows of the MRE's own, for the shape
    answered."""
    folder, result = cache_run
    rows = [line for line in result.stdout.splitlines() if line.startswith(("input ", "output "))]
    readme = (folder / "README.md").read_text().splitlines()
    assert len(rows) == 2
    assert all(row in readme for row in rows)


def test_the_readme_names_the_cache_folder_given(baked):
    """The README says where the cache goes: the folder answered."""
    readme = (baked(**VALUES) / "README.md").read_text()
    assert f"(`{VALUES['cache_dir']}/`)" in readme
