"""The op-plugin schema: the project's yaml is clean, the op is defined from it, the checker finds faults."""

import re
import textwrap
from importlib.resources import files

import pytest
import torch

from {{ cookiecutter.package_name }}.op_reference import reference
from {{ cookiecutter.package_name }}.toolkit import op_plugin, opschema

HEADER = "all_version: [v2.1, v2.6, v2.7]\ncustom:\n"


def findings(tmp_path, entries: str, *, header: str = HEADER) -> list[str]:
    """The checker's findings for a file of the given custom entries, FILE replaced by `f`."""
    path = tmp_path / "f"
    path.write_text(header + textwrap.dedent(entries))
    return [str(finding).removeprefix(f"{path}:") for finding in opschema.check(path)]


def test_project_schema_passes_strict(capsys):
    """This project's op_plugin_functions.yaml has no finding, warnings included."""
    assert opschema.main(["--strict", str(op_plugin.SCHEMA_FILE)]) == 0
    assert capsys.readouterr().out == ""


def test_op_is_defined_from_the_yaml():
    """torch.ops.npu.{{ cookiecutter.op_name }} has exactly the schema the yaml's func declares."""
    declared = torch._C.parse_schema(f"npu::{op_plugin.schema()}")
    assert getattr(torch.ops.npu, op_plugin.OP_NAME).default._schema == declared


def test_op_missing_on_an_npu_is_an_error_with_the_steps():
    """Where an NPU runs but torch_npu lacks the op, the stand-in refuses with each step: where
    the entry goes, the kernel, the rebuild, and the README section that walks through them."""
    with pytest.raises(RuntimeError) as refused:
        op_plugin.define_if_missing(
            "not_built", "not_built(Tensor x) -> Tensor", reference, npu_ok=True
        )
    assert str(refused.value) == (
        "torch_npu has no npu::not_built. Add the entry of op_plugin_functions.yaml under `custom:` "
        "in op-plugin's op_plugin_functions.yaml, deploy your Ascend C kernel and rebuild "
        "torch_npu: README, section 'The op-plugin operator'."
    )


def test_an_existing_op_with_another_schema_is_refused():
    """An op torch_npu already has under this name, with another schema, is a clash, not a match."""
    name = op_plugin.OP_NAME
    with pytest.raises(RuntimeError, match=r"already has an npu::\w+ with another schema"):
        op_plugin.define_if_missing(name, "x(Tensor a) -> Tensor", reference, npu_ok=False)


def test_existing_op_is_left_alone():
    """An op torch_npu already has (here: the one defined at import) is not defined again."""
    name, func = op_plugin.OP_NAME, op_plugin.schema()
    assert op_plugin.define_if_missing(name, func, reference, npu_ok=False) is None


def test_accepts_every_schema_in_atens_native_functions():
    """Every func of ATen's own native_functions.yaml (shipped with torch's torchgen) parses."""
    native_functions = files("torchgen") / "packaged" / "ATen" / "native" / "native_functions.yaml"
    text = native_functions.read_text()
    # Every entry opens with its func: those 2,500 lines are all a YAML load (0.1 s) would give here.
    funcs = re.findall(r"^- func: (.+)$", text, flags=re.MULTILINE)
    assert len(funcs) == len(re.findall(r"^- ", text, flags=re.MULTILINE)) > 2000
    assert [func for func in funcs if isinstance(opschema.parse_schema(func), str)] == []


def test_accepts_the_forms_op_plugin_itself_uses(tmp_path):
    """Named outputs, new_params locals, retired Dimname overloads, and an op relisted per version."""
    entries = """\
        - func: add_norm(Tensor x, Tensor y, *, ScalarType? dst_dtype=None) -> (Tensor y_out, Tensor rstd)
          op_api: all_version
          exposed: all_version
          device_check: NoCheck
          tags: nondeterministic_seeded
          gen_opapi:
            y_out:
              size: x
              dtype: dst_type
            rstd:
              size: '{x.size(0), 1}'
              dtype: at::kFloat
            new_params:
              dst_type: 'add_norm_dst_type(dst_dtype)'
            exec: aclnnAddNorm, x, y, dst_type, y_out, rstd
        - func: max_of.names_dim(Tensor self, Dimname dim, bool keepdim=False) -> (Tensor values, Tensor indices)
          acl_op: all_version
        - func: scaled(Tensor x, int k) -> Tensor
          op_api: [v2.1, v2.6]
        - func: scaled(Tensor x, SymInt k) -> Tensor
          op_api: [v2.7, newest]
      symint:
        - func: scaled(Tensor x, SymInt k) -> Tensor
          op_api: [v2.7, newest]
    """
    assert findings(tmp_path, entries) == []


def test_accepts_version_forms(tmp_path):
    """all_version, a [first, last] range, [first, newest] and a comma list are all valid."""
    entries = """\
        - func: a(Tensor x) -> Tensor
          op_api: [v2.1, v2.7]
          acl_op: [v2.6, newest]
          exposed: v2.1, v2.6
        - func: b(Tensor x) -> Tensor
          op_api: all_version
          gen_opapi:
            out:
              size: '{x.size(0), 2}'
              dtype: at::kFloat
            exec: aclnnB
    """
    assert findings(tmp_path, entries) == []


BROKEN = {
    "yaml that does not parse": (
        "- func: a(Tensor x) -> Tensor\n  op_api: [v2.1\n",
        "4: <yaml>: does not parse",
    ),
    "unknown entry key": (
        "- func: a(Tensor x) -> Tensor\n  op_apii: all_version\n",
        "4: a: unknown key 'op_apii'",
    ),
    "invalid func": ("- func: a(Tensr x) -> Tensor\n", "3: a: func is not a valid schema"),
    "version outside all_version": (
        "- func: a(Tensor x) -> Tensor\n  op_api: [v2.1, v2.9]\n",
        "4: a: op_api: v2.9 is not in all_version",
    ),
    "out size naming no argument": (
        "- func: a(Tensor x) -> Tensor\n  gen_opapi:\n    out:\n      size: self\n      dtype: x\n",
        "6: a: gen_opapi.out.size: self is not an argument of the op",
    ),
    "duplicate op name": (
        "- func: a(Tensor x) -> Tensor\n- func: a(Tensor y) -> Tensor\n",
        "4: a: listed twice for the same versions (first at line 3)",
    ),
}


@pytest.mark.parametrize(("entries", "expected"), BROKEN.values(), ids=BROKEN.keys())
def test_format_errors_name_line_and_op(tmp_path, entries, expected):
    """Each fault that breaks the torch_npu build is reported at its line, with the op's name."""
    (finding,) = findings(tmp_path, entries)
    assert finding.startswith(expected)


def test_the_same_op_in_overlapping_version_ranges_is_listed_twice(tmp_path):
    """Ranges that share one version ([v2.1, v2.6] and [v2.6, v2.7]) are a duplicate, not only identical ones."""
    entries = """\
        - func: a(Tensor x) -> Tensor
          op_api: [v2.1, v2.6]
        - func: a(Tensor x, int k) -> Tensor
          op_api: [v2.6, v2.7]
    """
    (finding,) = findings(tmp_path, entries)
    assert finding.startswith("5: a: listed twice for the same versions (first at line 3)")


def test_a_format_error_exits_1_without_strict(tmp_path, capsys):
    """A fault that breaks the torch_npu build fails the command as it is, --strict or not."""
    path = tmp_path / "f"
    path.write_text(HEADER + "- func: a(Tensr x) -> Tensor\n")
    assert opschema.main([str(path)]) == 1
    assert opschema.main(["--strict", str(path)]) == 1
    assert "func is not a valid schema" in capsys.readouterr().out


def test_a_clean_file_exits_0(tmp_path, capsys):
    """A file with no finding passes, and prints no finding."""
    path = tmp_path / "f"
    path.write_text(HEADER + "- func: a(Tensor x) -> Tensor\n  op_api: all_version\n")
    assert opschema.main([str(path)]) == 0
    assert capsys.readouterr().out == ""


def test_unknown_section_is_an_error(tmp_path):
    """A section op-plugin does not know is reported on its own line."""
    (finding,) = findings(tmp_path, "- func: a(Tensor x) -> Tensor\ncustoms:\n")
    assert finding.startswith("4: customs: unknown section; known: all_version, autograd, custom,")


GRAPH_MODE = {
    "mutated input returned": (
        "- func: a_(Tensor(a!) self, Tensor y) -> Tensor(a!)\n",
        "3: a_: warning: returns a mutated input (Tensor(a!))",
    ),
    "Tensor after a scalar": (
        "- func: a(Tensor x, int k, Tensor y) -> Tensor\n",
        "3: a: warning: Tensor input y comes after the scalar k",
    ),
    "in-place kernel with nothing marked": (
        "- func: a(Tensor x, Tensor y) -> Tensor\n  gen_opapi:\n    exec: aclnnA\n",
        "3: a: warning: gen_opapi allocates no output",
    ),
}


@pytest.mark.parametrize(("entries", "expected"), GRAPH_MODE.values(), ids=GRAPH_MODE.keys())
def test_graph_mode_rules_warn_and_fail_only_when_strict(tmp_path, entries, expected):
    """A graph-mode fault is a warning (exit 0), and an error under --strict (exit 1)."""
    (finding,) = findings(tmp_path, entries)
    assert finding.startswith(expected)
    path = tmp_path / "f"
    assert opschema.main([str(path)]) == 0
    assert opschema.main(["--strict", str(path)]) == 1
