"""The toolkit's table of aclop-only torch_npu operators: scripts/aclop_ops.py reads op-plugin's
version fields as op-plugin does, and the module it writes, the committed one included, answers
aclop_only() as documented."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from conftest import CONTEXT, RUFF, TEMPLATE

COMMIT = "0123456789abcdef0123456789abcdef01234567"
DATE = "2026-01-31"

# Every form of version field op-plugin's get_version() reads, under `custom:`. Each name says
# where its operator has an acl_op kernel and no op_api one.
FUNCTIONS = """\
all_version: [v2.11, v2.12, v2.13, v2.14, v2.15]
official:
  - func: official_acl(Tensor self) -> Tensor
    acl_op: all_version
custom:
  - func: npu_acl_always(Tensor self) -> Tensor
    acl_op: all_version
  - func: npu_acl_to_12(Tensor self) -> Tensor
    acl_op: [v2.11, v2.12]
  - func: npu_acl_from_13(Tensor self) -> Tensor
    acl_op: [v2.13, newest]
  - func: npu_acl_13(Tensor self) -> Tensor
    acl_op: v2.13
  - func: npu_acl_12_and_14(Tensor self) -> Tensor
    acl_op: v2.12, v2.14
  - func: npu_acl_12_and_13(Tensor self) -> Tensor
    acl_op: v2.12,v2.13
  - func: npu_acl_until_aclnn_from_13(Tensor self) -> Tensor
    acl_op: all_version
    op_api: [v2.13, newest]
  - func: npu_both(Tensor self) -> Tensor
    acl_op: all_version
    op_api: all_version
  - func: npu_aclnn(Tensor self) -> Tensor
    op_api: all_version
  - func: npu_no_kernel(Tensor self) -> Tensor
  - func: npu_pair(Tensor self) -> Tensor
    acl_op: all_version
  - func: npu_pair.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
    acl_op: all_version
  - func: npu_split.dim(Tensor self, int dim) -> Tensor
    acl_op: all_version
  - func: npu_split.names(Tensor self, str name) -> Tensor
    op_api: all_version
  - func: npu_relisted(Tensor self) -> Tensor
    acl_op: [v2.11, v2.12]
  - func: npu_relisted(Tensor self, int scale=1) -> Tensor
    op_api: [v2.13, newest]
"""
EVERY_VERSION = {"npu_acl_always", "npu_pair", "npu_pair.out", "npu_split.dim"}
ONLY_12 = {"npu_acl_to_12", "npu_acl_until_aclnn_from_13", "npu_relisted"}
EXPECTED = {
    "2.12": EVERY_VERSION | ONLY_12 | {"npu_acl_12_and_14", "npu_acl_12_and_13"},
    "2.13": EVERY_VERSION | {"npu_acl_from_13", "npu_acl_13", "npu_acl_12_and_13"},
    "2.14": EVERY_VERSION | {"npu_acl_from_13", "npu_acl_12_and_14"},
    "2.15": EVERY_VERSION | {"npu_acl_from_13"},
}


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


script = load(TEMPLATE / "scripts" / "aclop_ops.py", "aclop_ops_script")
committed = load(script.MODULE, "committed_aclop_ops")


def table_of(text: str, *versions: str) -> dict[str, set[str]]:
    table = script.aclop_only_table(yaml.safe_load(textwrap.dedent(text)), versions)
    return {version: set(names) for version, names in table.items()}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """The module the script writes from FUNCTIONS for torch 2.12 to 2.15."""
    folder = tmp_path_factory.mktemp("aclop_ops")
    (folder / "functions.yaml").write_text(FUNCTIONS)
    arguments = [str(folder / "functions.yaml"), "--commit", COMMIT, "--date", DATE]
    arguments += ["--torch", "2.12", "--torch", "2.13.0", "--torch", "2.14", "--torch", "v2.15"]
    assert script.main([*arguments, "--output", str(folder / "aclop_ops.py")]) == 0
    return folder / "aclop_ops.py"


@pytest.fixture(scope="module")
def module(written) -> ModuleType:
    return load(written, "written_aclop_ops")


def test_every_version_form_is_read_as_op_plugin_reads_it():
    """all_version, [first, last], [first, newest], "vA" and "vA, vB" or "vA,vB" name the versions
    get_version() gives them; an op_api kernel takes an operator off the table."""
    assert table_of(FUNCTIONS, "2.12", "2.13", "2.14", "2.15") == EXPECTED


def test_a_range_reads_only_its_first_two_items():
    """A version list is a range from its first item to its second, as get_version() reads it: a
    third item adds nothing."""
    functions = """\
        all_version: [v2.12, v2.13, v2.14]
        custom:
          - func: npu_range(Tensor self) -> Tensor
            acl_op: [v2.12, v2.12, v2.14]
        """
    assert table_of(functions, "2.12", "2.14") == {"2.12": {"npu_range"}, "2.14": set()}


def test_only_custom_entries_are_tabled():
    """An aclop-only entry of `official:` (an ATen operator) is not torch_npu's own: not listed."""
    assert not any("official_acl" in names for names in table_of(FUNCTIONS, "2.12").values())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("[v2.12, v2.16]", "'v2.16' is not in all_version"),
        ("[v2.10, newest]", "'v2.10' is not in all_version"),
        ("[v2.12]", "a version range is [first, last]"),
        ("2.13", "a version field is all_version, [first, last] or a string"),
    ],
)
def test_a_version_field_op_plugin_cannot_read_is_refused(spec, message):
    """A field that get_version() would fail on is refused, naming the operator and the field."""
    functions = f"all_version: [v2.12, v2.13]\ncustom:\n  - func: npu_bad(Tensor self) -> Tensor\n    acl_op: {spec}\n"
    with pytest.raises(script.FunctionsError, match=re.escape(f"npu_bad: acl_op: {message}")):
        table_of(functions, "2.13")


def test_a_torch_version_op_plugin_does_not_list_is_refused():
    """A torch version outside all_version is refused: an older op-plugin would give it an empty table."""
    with pytest.raises(script.FunctionsError, match=re.escape("all_version does not list v2.16")):
        table_of(FUNCTIONS, "2.16")


def test_an_operator_listed_twice_for_one_version_is_refused():
    """Two entries of one name with kernels for the same version make no table."""
    functions = """\
        all_version: [v2.12, v2.13]
        custom:
          - func: npu_twice(Tensor self) -> Tensor
            acl_op: all_version
          - func: npu_twice(Tensor self, int scale=1) -> Tensor
            op_api: v2.13
        """
    with pytest.raises(script.FunctionsError, match=re.escape("npu_twice is listed twice for v2.13")):
        table_of(functions, "2.13")


def test_the_default_versions_are_those_the_template_pins(tmp_path):
    """Without --torch the versions are the minor versions of the torch_npu releases offered in
    cookiecutter.json, .postN dropped, in release order."""
    offered = tmp_path / "cookiecutter.json"
    offered.write_text(json.dumps({"torch_npu_version": ["2.10.0", "2.9.1.post2", "2.10.0.post1"]}))
    assert script.template_torch_versions(offered) == ["2.9", "2.10"]


def test_the_written_table_is_the_parsed_one(module):
    """The module holds, per torch minor version, the names of its aclop-only operators."""
    assert {version: frozenset(names) for version, names in EXPECTED.items()} == module.ACLOP_ONLY


@pytest.mark.parametrize(
    ("op_name", "torch_version", "answer"),
    [
        ("npu_acl_13", "2.13", True),
        ("npu_acl_13", "2.14", False),
        ("npu_acl_13", "2.13.0+cpu", True),
        ("npu_acl_13.default", "2.13", True),
        ("npu_pair.out", "2.13", True),
        ("npu_acl_13.out", "2.13", False),
        ("npu::npu_acl_13", "2.13", True),
        ("npu.npu_acl_13.default", "2.13", True),
        ("torch.ops.npu.npu_acl_13", "2.13", True),
        ("npu_split", "2.13", True),
        ("npu_split.default", "2.13", False),
        ("npu_split.names", "2.13", False),
        ("npu_acl", "2.13", False),
        ("npu_both", "2.13", False),
        ("npu_acl_always", "2.16", False),
        ("npu_acl_always", "", False),
    ],
)
def test_aclop_only_answers_for_an_overload_a_namespace_and_a_version(module, op_name, torch_version, answer):
    """`.default` is op-plugin's bare name, another overload its own entry, a bare name any
    overload; a namespace is dropped; a torch version without a row gives False."""
    assert module.aclop_only(op_name, torch_version) is answer


def ruff_config(folder: Path) -> Path:
    """The generated projects' ruff settings (line length 100, their rules), as a ruff.toml."""
    pyproject = (TEMPLATE / "{{cookiecutter.project_slug}}" / "pyproject.toml").read_text()
    settings = pyproject[pyproject.index("[tool.ruff]") :].replace("[tool.ruff]", "")
    (folder / "ruff.toml").write_text(settings.replace("[tool.ruff.", "["))
    return folder / "ruff.toml"


def test_the_written_module_is_as_ruff_formats_it(tmp_path):
    """A written module passes the generated projects' `ruff check` and `ruff format --check`,
    an empty row included."""
    written = tmp_path / "aclop_ops.py"
    written.write_text(script.render({"2.13": ["npu_b", "npu_a.out"], "2.14": []}, COMMIT, DATE))
    config = ruff_config(tmp_path)
    for command in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [RUFF, *command, "--no-cache", "--config", str(config), str(written)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_names_are_written_one_a_line_in_order():
    """Each row lists its names sorted, one a line, so that a new op-plugin shows as a short diff."""
    text = script.render({"2.13": ["npu_b", "npu_a.out", "npu_a"]}, COMMIT, DATE)
    lines = [line.strip() for line in text.splitlines() if line.startswith('            "')]
    assert lines == ['"npu_a",', '"npu_a.out",', '"npu_b",']


def test_the_written_docstring_names_its_source_and_the_command_again(module):
    """The docstring names op-plugin's commit, its date and the file, and the commands that
    write the module again."""
    for text in (COMMIT, f"({DATE})", "op_plugin/config/op_plugin_functions.yaml", "git -C op-plugin show"):
        assert text in module.__doc__
    assert "python scripts/aclop_ops.py functions.yaml --commit $COMMIT --date $DATE" in module.__doc__
    assert (module.OP_PLUGIN_COMMIT, module.OP_PLUGIN_DATE) == (COMMIT, DATE)


def test_check_fails_on_a_module_another_file_would_change(written, tmp_path):
    """`--check` exits 1 on a module that is not the file's table, and writes nothing."""
    stale = tmp_path / "aclop_ops.py"
    stale.write_text(written.read_text().replace('"npu_acl_13",\n', ""))
    before = stale.read_text()
    arguments = [str(written.parent / "functions.yaml"), "--commit", COMMIT, "--date", DATE, "--check"]
    arguments += ["--torch", "2.12", "--torch", "2.13", "--torch", "2.14", "--torch", "2.15"]
    assert script.main([*arguments, "--output", str(stale)]) == 1
    assert stale.read_text() == before
    assert script.main([*arguments, "--output", str(written)]) == 0


@pytest.mark.parametrize(("flag", "value"), [("--commit", "517f2e7d"), ("--date", "21.08.2026")])
def test_a_short_commit_or_another_date_form_is_refused(written, tmp_path, flag, value):
    """The commit must be all 40 hex digits and the date YYYY-MM-DD: the docstring cites both."""
    options = {"--commit": COMMIT, "--date": DATE, flag: value, "--output": str(tmp_path / "aclop_ops.py")}
    arguments = [str(written.parent / "functions.yaml"), *(part for item in options.items() for part in item)]
    with pytest.raises(SystemExit):
        script.main(arguments)
    assert not (tmp_path / "aclop_ops.py").exists()


def test_the_committed_module_is_the_scripts_output():
    """The toolkit's module is exactly what the script renders from its own table, commit and date:
    no hand edit."""
    table = {version: sorted(names) for version, names in committed.ACLOP_ONLY.items()}
    rendered = script.render(table, committed.OP_PLUGIN_COMMIT, committed.OP_PLUGIN_DATE)
    assert script.MODULE.read_text() == rendered


def test_the_committed_module_cites_a_full_commit():
    """The committed module's docstring names op-plugin's commit by its 40 hex digits."""
    assert re.search(rf"\b{committed.OP_PLUGIN_COMMIT}\b", committed.__doc__)
    assert re.fullmatch(r"[0-9a-f]{40}", committed.OP_PLUGIN_COMMIT)


def test_the_committed_table_has_a_row_per_offered_torch_npu():
    """Every torch_npu release cookiecutter.json offers has its torch's row, none empty."""
    minors = {".".join(release.split(".")[:2]) for release in CONTEXT["torch_npu_version"]}
    assert set(committed.ACLOP_ONLY) == minors
    assert all(committed.ACLOP_ONLY.values())


def test_the_committed_names_are_operator_names():
    """Every name is an identifier, or one overload of one: `npu_silu`, `npu_conv2d.out`."""
    names = set().union(*committed.ACLOP_ONLY.values())
    assert [name for name in names if not all(part.isidentifier() for part in name.split(".", 1))] == []
    assert [name for name in names if name.count(".") > 1] == []


def test_npu_silu_is_aclop_only_in_torch_2_13():
    """op-plugin gives npu_silu an acl_op kernel alone for v2.13, so capture refuses it there."""
    assert committed.aclop_only("npu_silu", "2.13")
