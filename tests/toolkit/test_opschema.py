"""The op-plugin schema: the op is defined from the yaml, the checker finds faults."""

import re
import textwrap
import uuid
from importlib.resources import files

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode, UnsupportedOperatorException
from torch.fx.experimental.proxy_tensor import make_fx
from torch.library import Library

from plugin_project import meta_registrations  # defines the op off an NPU, as model.py imports it
from plugin_project.op_reference import reference
from plugin_project.toolkit import op_plugin, opschema

HEADER = "all_version: [v2.1, v2.6, v2.7]\ncustom:\n"


def findings(tmp_path, entries: str, *, header: str = HEADER) -> list[str]:
    """The checker's findings for a file of the given custom entries, FILE replaced by `f`."""
    path = tmp_path / "f"
    path.write_text(header + textwrap.dedent(entries))
    return [str(finding).removeprefix(f"{path}:") for finding in opschema.check(path)]


def test_with_no_file_the_projects_yaml_is_checked(tmp_path, monkeypatch, capsys):
    """`opschema` alone checks the project's op_plugin_functions.yaml; the sample's is clean,
    warnings included."""
    assert opschema.main(["--strict"]) == 0
    assert capsys.readouterr().out == ""
    broken = tmp_path / "f"
    broken.write_text(HEADER + "- func: a(Tensr x) -> Tensor\n")
    monkeypatch.setattr(opschema, "DEFAULT_FILE", broken)
    assert opschema.main([]) == 1
    assert "func is not a valid schema" in capsys.readouterr().out


def test_op_is_defined_from_the_yaml():
    """The op of the yaml has exactly the schema its func declares."""
    declared = torch._C.parse_schema(f"npu::{op_plugin.schema()}")
    assert getattr(torch.ops.npu, op_plugin.OP_NAME).default._schema == declared


def test_op_missing_on_an_npu_is_an_error_with_the_steps():
    """Where an NPU runs but torch_npu lacks the op, the stand-in refuses with each step: where
    the entry goes, the kernel, the rebuild, and the README section that walks through them."""
    with pytest.raises(RuntimeError) as refused:
        op_plugin.define_if_missing("not_built", "not_built(Tensor x) -> Tensor", reference, npu_ok=True)
    assert str(refused.value) == (
        "torch_npu has no npu::not_built. Add the entry of op_plugin_functions.yaml under `custom:` "
        "in op-plugin's op_plugin_functions.yaml, deploy your Ascend C kernel and rebuild "
        "torch_npu: README, section 'The op-plugin operator'."
    )


def test_an_existing_op_with_another_schema_is_refused():
    """An op torch_npu already has under this name, with another schema, is a clash, not a match."""
    name = op_plugin.OP_NAME
    with pytest.raises(RuntimeError) as refused:
        op_plugin.define_if_missing(name, "x(Tensor a) -> Tensor", reference, npu_ok=False)
    existing = getattr(torch.ops.npu, name).default._schema
    assert str(refused.value) == (
        f"torch_npu already has an npu::{name} with another schema ({existing}); "
        "give this op another name in op_plugin_functions.yaml"
    )


def test_off_an_npu_a_missing_op_is_defined_as_one_op_for_the_cpu():
    """Where no NPU runs and torch_npu lacks the op, npu::<name> is defined from the func with the
    kernel for the CPU, and traces as itself, not as the kernel's ops; the Library returned keeps
    the definition alive."""
    name = f"stand_in_{uuid.uuid4().hex[:8]}"  # a fresh op each run: definitions last the process
    func = f"{name}(Tensor x) -> Tensor"
    library = op_plugin.define_if_missing(name, func, torch.sin, npu_ok=False)
    assert isinstance(library, Library)
    op = getattr(torch.ops.npu, name)
    assert op.default._schema == torch._C.parse_schema(f"npu::{func}")
    x = torch.randn(3)
    assert torch.equal(op(x), torch.sin(x))
    traced = make_fx(op)(x)
    assert [node.target for node in traced.graph.nodes if node.op == "call_function"] == [op.default]


def test_off_an_npu_graph_mode_needs_the_projects_meta_function_as_on_one():
    """The stand-in kernel does not stand in for the Meta function: without one, fake tensors
    (graph mode's tracing, check's rungs) refuse the op, as they do on an NPU, where torch_npu's
    kernel is the NPU's alone; with one, they give its shape."""
    name = f"stand_in_{uuid.uuid4().hex[:8]}"
    library = op_plugin.define_if_missing(name, f"{name}(Tensor x) -> Tensor", torch.sin, npu_ok=False)
    op = getattr(torch.ops.npu, name)
    with pytest.raises(UnsupportedOperatorException), FakeTensorMode():
        op(torch.randn(3))
    library.impl(name, lambda x: x.new_empty(x.shape[0] + 1), "Meta")
    with FakeTensorMode() as fake:
        assert op(fake.from_tensor(torch.randn(3))).shape == (4,)


def test_existing_op_is_left_alone():
    """An op torch_npu already has (here: the one defined at import) is not defined again."""
    name, func = op_plugin.OP_NAME, op_plugin.schema()
    assert op_plugin.define_if_missing(name, func, reference, npu_ok=False) is None


@pytest.mark.npu
def test_on_an_npu_the_op_comes_from_torch_npu():
    """On an NPU torch_npu (rebuilt with the op) defines it: the development stand-in stays out."""
    assert meta_registrations.defined is None


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


KNOWN_SECTIONS = "all_version, autograd, custom, custom_autograd, official, quant, symint, tocpu, unsupported"
BROKEN = {
    "yaml that does not parse, at the construct it opens": (
        "- func: a(Tensor x) -> Tensor\n  op_api: [v2.1\n",
        "4: <yaml>: does not parse: while parsing a flow sequence",
    ),
    "yaml that does not parse, where it gave up": (
        "- func: a(Tensor x) -> Tensor\n  op_api: *v\n",
        "4: <yaml>: does not parse: found undefined alias 'v'",
    ),
    "a character yaml refuses": (
        "- func: a(Tensor x) -> Tensor\n  op_api: \x07\n",
        "4: <yaml>: does not parse: unacceptable character #x0007: special characters are not allowed",
    ),
    "a key given twice": (
        "- func: a(Tensor x) -> Tensor\n  op_api: all_version\n  op_api: v2.1\n",
        "5: <yaml>: key 'op_api' given twice: YAML keeps only the last",
    ),
    "unknown section": (
        "- func: a(Tensor x) -> Tensor\ncustoms:\n",
        f"4: customs: unknown section; known: {KNOWN_SECTIONS}",
    ),
    "entry without func": (
        "- op_api: all_version\n",
        "2: custom: has an entry without a `func:` string",
    ),
    "unknown entry key": (
        "- func: a(Tensor x) -> Tensor\n  op_apii: all_version\n",
        "4: a: unknown key 'op_apii'",
    ),
    "invalid func": (
        "- func: a(Tensr x) -> Tensor\n",
        "3: a: func is not a valid schema: unrecognized type Tensr",
    ),
    "version outside all_version": (
        "- func: a(Tensor x) -> Tensor\n  op_api: [v2.1, v2.9]\n",
        "4: a: op_api: v2.9 is not in all_version",
    ),
    "version range with one bound": (
        "- func: a(Tensor x) -> Tensor\n  op_api: [v2.1]\n",
        "4: a: op_api: a version range is [first, last], got ['v2.1']",
    ),
    "out size naming no argument": (
        "- func: a(Tensor x) -> Tensor\n  gen_opapi:\n    out:\n      size: self\n      dtype: x\n",
        "6: a: gen_opapi.out.size: self is not an argument of the op",
    ),
    "out dtype naming no argument, after exec": (
        "- func: a(Tensor x) -> Tensor\n  gen_opapi:\n    exec: aclnnA\n    out:\n      size: x\n      dtype: dst\n",
        "8: a: gen_opapi.out.dtype: dst is not an argument of the op",
    ),
    "misspelt gen_opapi key": (
        "- func: a(Tensor x) -> Tensor\n  gen_opapi:\n    exe: aclnnA\n    out:\n      size: x\n      dtype: x\n",
        (
            "5: a: gen_opapi.exe: unknown key; an output maps size: and dtype:, others are "
            "cpu_scalar_h2d, cpu_scalar_op, exec, integral_identity_tensor, new_params, "
            "structured_inherit"
        ),
    ),
    "duplicate op name": (
        "- func: a(Tensor x) -> Tensor\n- func: a(Tensor y) -> Tensor\n",
        "4: a: listed twice for the same versions (first at line 3)",
    ),
    "duplicate op name through another version field": (
        "- func: a(Tensor x) -> Tensor\n  acl_op: v2.7\n  op_api: v2.1\n- func: a(Tensor x, int k) -> Tensor\n  op_api: v2.7\n",
        "6: a: listed twice for the same versions (first at line 3)",
    ),
}


@pytest.mark.parametrize(("entries", "expected"), BROKEN.values(), ids=BROKEN.keys())
def test_format_errors_name_line_and_op(tmp_path, entries, expected):
    """Each fault that breaks the torch_npu build is reported at its line, with the op's name."""
    assert findings(tmp_path, entries) == [expected]


def test_a_document_that_is_not_a_mapping_is_an_error_at_line_1(tmp_path):
    """A file that is a list (sections left out) says what it should be."""
    assert findings(tmp_path, "- func: a(Tensor x) -> Tensor\n", header="") == [
        "1: <yaml>: is not a mapping of sections (all_version:, custom:, ...)"
    ]


def test_a_parse_error_without_a_message_is_named_by_its_type(monkeypatch):
    """Should torchgen refuse a func with a bare error, the finding names the error's type."""

    def refuse(func):
        raise AssertionError

    monkeypatch.setattr(opschema.FunctionSchema, "parse", refuse)
    assert opschema.parse_schema("a(Tensor x) -> Tensor") == "AssertionError"


def test_a_refused_character_is_placed_by_every_line_before_it(tmp_path):
    """A character YAML refuses is reported at its line, counting blank lines at the top too."""
    entries = "- func: a(Tensor x) -> Tensor\n  op_api: \x07\n"
    assert findings(tmp_path, entries, header="\n" + HEADER) == [
        "5: <yaml>: does not parse: unacceptable character #x0007: special characters are not allowed"
    ]


def test_the_outputs_after_a_misspelt_gen_opapi_key_are_checked(tmp_path):
    """A misspelt gen_opapi key is reported, and the outputs listed after it are still checked."""
    entries = "- func: a(Tensor x) -> Tensor\n  gen_opapi:\n    exe: aclnnA\n    out:\n      size: y\n"
    (misspelt, output) = findings(tmp_path, entries)
    assert misspelt.startswith("5: a: gen_opapi.exe: unknown key")
    assert output == "7: a: gen_opapi.out.size: y is not an argument of the op"


def test_findings_are_in_line_order(tmp_path):
    """Findings read top to bottom, whichever check found them first."""
    entries = "- func: a(Tensr x) -> Tensor\nextra:\n"
    assert findings(tmp_path, entries) == [
        "3: a: func is not a valid schema: unrecognized type Tensr",
        f"4: extra: unknown section; known: {KNOWN_SECTIONS}",
    ]


def test_a_relisted_op_is_still_checked(tmp_path):
    """An op listed twice is checked in full the second time too."""
    entries = "- func: a(Tensor x) -> Tensor\n- func: a(Tensr x) -> Tensor\n"
    assert findings(tmp_path, entries) == [
        "4: a: listed twice for the same versions (first at line 3)",
        "4: a: func is not a valid schema: unrecognized type Tensr",
    ]


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


@pytest.mark.parametrize("given", ["missing.yaml", "."])
def test_a_path_that_is_no_file_is_a_usage_error_naming_it(tmp_path, capsys, given):
    """A path that is missing, or a folder, exits 2 with one line naming it, not a traceback."""
    path = tmp_path / given
    with pytest.raises(SystemExit) as exited:
        opschema.main([str(path)])
    assert exited.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(f"error: {path}: no such file; give the path of an op_plugin_functions.yaml")
    )


def test_a_clean_file_exits_0(tmp_path, capsys):
    """A file with no finding passes, and prints no finding."""
    path = tmp_path / "f"
    path.write_text(HEADER + "- func: a(Tensor x) -> Tensor\n  op_api: all_version\n")
    assert opschema.main([str(path)]) == 0
    assert capsys.readouterr().out == ""


NOTHING_MARKED = (
    "3: a: warning: gen_opapi allocates no output, so the kernel writes into an input, but none is "
    "marked (a!)"
)
GRAPH_MODE = {
    "mutated input returned": (
        "- func: a_(Tensor(a!) self, Tensor y) -> Tensor(a!)\n",
        (
            "3: a_: warning: returns a mutated input (Tensor(a!)): automatic functionalization in "
            "graph mode needs in-place custom ops to return none"
        ),
    ),
    "Tensor after a scalar": (
        "- func: a(Tensor x, int k, Tensor y) -> Tensor\n",
        "3: a: warning: Tensor input y comes after the scalar k: put Tensors first",
    ),
    "in-place kernel with nothing marked": (
        "- func: a(Tensor x, Tensor y) -> Tensor\n  gen_opapi:\n    exec: aclnnA\n",
        NOTHING_MARKED,
    ),
    "in-place kernel with nothing marked, new_params being no output": (
        (
            "- func: a(Tensor x, Tensor y) -> Tensor\n  gen_opapi:\n    new_params:\n      k: '1'\n"
            "    exec: aclnnA\n"
        ),
        NOTHING_MARKED,
    ),
}


@pytest.mark.parametrize(("entries", "expected"), GRAPH_MODE.values(), ids=GRAPH_MODE.keys())
def test_graph_mode_rules_warn_and_fail_only_when_strict(tmp_path, entries, expected, capsys):
    """A graph-mode fault is a warning (exit 0), and an error under --strict (exit 1)."""
    assert findings(tmp_path, entries) == [expected]
    path = tmp_path / "f"
    assert opschema.main([str(path)]) == 0
    assert opschema.main(["--strict", str(path)]) == 1
    assert capsys.readouterr().err == "0 error(s), 1 warning(s)\n1 error(s), 0 warning(s)\n"


def test_every_tensor_input_after_a_scalar_is_named(tmp_path):
    """Two Tensor inputs after a scalar: one warning naming both, and the first scalar."""
    entries = "- func: a(Tensor x, int k, Tensor y, float s, Tensor z) -> Tensor\n"
    assert findings(tmp_path, entries) == [
        "3: a: warning: Tensor inputs y, z come after the scalar k: put Tensors first"
    ]


def test_every_version_outside_all_version_is_named(tmp_path):
    """A version field naming two versions that all_version lacks: a finding for each."""
    entries = "- func: a(Tensor x) -> Tensor\n  op_api: v2.8, v2.9\n"
    assert findings(tmp_path, entries) == [
        "4: a: op_api: v2.8 is not in all_version",
        "4: a: op_api: v2.9 is not in all_version",
    ]


def test_every_finding_of_every_file_is_printed(tmp_path, capsys):
    """The command prints each finding of each file given, a line each, in order."""
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text(
        HEADER + "- func: a(Tensr x) -> Tensor\n- func: b(Tensor x, int k, Tensor y) -> Tensor\n"
    )
    second.write_text(HEADER + "- func: c(Tensor x) -> Tensor\n  op_apii: all_version\n")
    assert opschema.main([str(first), str(second)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{first}:3: a: func is not a valid schema: unrecognized type Tensr",
        f"{first}:4: b: warning: Tensor input y comes after the scalar k: put Tensors first",
        f"{second}:4: c: unknown key 'op_apii'",
    ]


def test_an_in_place_kernel_writing_a_marked_input_passes(tmp_path):
    """A gen_opapi with no output is right when the input it writes is marked (a!)."""
    entries = "- func: a(Tensor(a!) x, Tensor y) -> Tensor\n  gen_opapi:\n    exec: aclnnA\n"
    assert findings(tmp_path, entries) == []


def test_the_summary_counts_errors_and_warnings_apart(tmp_path, capsys):
    """The last line counts the errors and the warnings of every file given."""
    path = tmp_path / "f"
    path.write_text(HEADER + "- func: a(Tensr x) -> Tensor\n- func: b(Tensor x, int k, Tensor y) -> Tensor\n")
    assert opschema.main([str(path), str(path)]) == 1
    assert capsys.readouterr().err == "2 error(s), 2 warning(s)\n"


def test_help_says_what_it_checks_under_the_command_name(help_of):
    """`opschema --help` gives the usage under the command's name, what it checks, and each
    argument with what it takes."""
    printed = help_of(opschema.main, "plugin_project opschema")
    assert printed.startswith(
        "usage: plugin_project opschema [-h] [--strict] [files ...] Check op-plugin "
        "schema files (op_plugin_functions.yaml) before a torch_npu build or graph mode does. "
    )
    assert " files yaml files (default: this project's) " in printed
    assert " --strict treat graph-mode warnings as errors" in printed
