"""Planted bugs, and the tests that must catch each: run with `nox -s mutations`.

A test proves only what it can fail on. Each mutation below is a bug in one template file (a short
pattern, which must occur once in the function or class it names, or in the file, and the text
that replaces it) with the tests that should catch it:
pytest arguments for the generated project's suite on a bake with the given answers, or, with
`bake=None`, for the template's own suite. The engine plants each one alone in a scratch copy of
the template (never this checkout), bakes it in-process, runs only those tests with `-x`, and
prints `planted → caught?`. It exits 1 if a mutation survives, if its pattern is not found
exactly once where it says (so the list cannot rot), or if the tests fail on the unmutated
template already. A pattern is located by its function, so that a reformat elsewhere in the file,
or a second line like it in another function, leaves it plantable.

    python tests/mutations.py [NAME_SUBSTRING ...]
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
PROJECT = "{{cookiecutter.project_slug}}"
PACKAGE = f"{PROJECT}/src/{{{{cookiecutter.package_name}}}}"
TOOLKIT = f"{PACKAGE}/toolkit"

DEFAULT: dict[str, str] = {}
CACHE_OP_PLUGIN_IN_PLACE = {"mode": "cache_compile", "custom_op": "in_place", "op_registration": "op_plugin"}
OUT_OF_PLACE = {"custom_op": "out_of_place"}
TENSOR_PARALLEL = {"parallel": "tensor_parallel"}
DECODE = {"workload": "decode"}
DECODE_TENSOR_PARALLEL = {**DECODE, **TENSOR_PARALLEL}
DECODE_TORCH_LIBRARY_IN_PLACE = {**DECODE, "custom_op": "in_place", "op_registration": "torch_library"}
DECODE_OP_PLUGIN_IN_PLACE = {**DECODE, "custom_op": "in_place", "op_registration": "op_plugin"}


COPIER_YML = (TEMPLATE / "copier.yml").read_text()


def copier_questions(first: str, following: str) -> str:
    """copier.yml's entries from question `first` up to question `following`."""
    start = COPIER_YML.index(f"\n{first}:\n") + 1
    return COPIER_YML[start : COPIER_YML.index(f"\n{following}:\n", start) + 1]


# copier.yml's question on parallelism, then those on the sample's class and shape (which it
# constrains).
PARALLEL_QUESTION = copier_questions("parallel", "model_class")
MODEL_CLASS_AND_INPUT_SHAPE = copier_questions("model_class", "mode")


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    """The mutated file, relative to the template's root."""
    old: str
    """A short pattern: the text the bug replaces, once in `within`'s body (or in the file)."""
    new: str
    tests: str
    """pytest arguments (files, -k) that must fail once the mutation is planted."""
    bake: dict[str, str] | None = None
    """Answers to bake, whose own suite runs `tests`; None: the template's suite runs them."""
    within: str | None = None
    """The function or class (its name, defined once in the file) whose body holds `old`; None:
    the whole file (a README, a TOML or YAML file)."""


MUTATIONS = (
    # npugraph_ex mode: the default bake.
    Mutation(
        "mre compiles with fullgraph=False",
        f"{PACKAGE}/mre.py",
        "fullgraph=True,",
        "fullgraph=False,",
        "tests/test_graph.py -k graph_break",
        DEFAULT,
        within="infer_one_step",
    ),
    Mutation(
        "first_call never raises NoGraphError",
        f"{TOOLKIT}/report.py",
        "if call.graphs == 0 and not loaded_from_cache:",
        "if False:",
        "tests/toolkit/test_report.py -k no_graph",
        None,
        within="first_call",
    ),
    Mutation(
        "to_device accepts inputs that are not a tuple",
        f"{TOOLKIT}/contract.py",
        "if not isinstance(inputs, tuple):",
        "if False:",
        "tests/toolkit/test_doctor_checks.py -k breaking_the_contract",
        None,
        within="to_device",
    ),
    Mutation(
        "check exits 0 on a graph break",
        f"{TOOLKIT}/check.py",
        "result.verdict = 1 if problems else 0",
        "result.verdict = 0",
        "tests/toolkit/test_check.py -k graph_break",
        None,
        within="check",
    ),
    Mutation(
        "doctor exits 1 although graph mode runs",
        f"{TOOLKIT}/doctor.py",
        'return 0, f"graph mode (npugraph_ex) can run here, and {ready}"',
        'return 1, f"graph mode (npugraph_ex) can run here, and {ready}"',
        "tests/toolkit/test_doctor_checks.py -k exit_0",
        None,
        within="verdict",
    ),
    Mutation(
        "every SoC captures aclgraphs",
        f"{TOOLKIT}/socs.py",
        "    if soc[:11] in A2 and not soc[11:12].isdigit():",
        "    return True\n    if soc[:11] in A2 and not soc[11:12].isdigit():",
        "tests/toolkit/test_backend.py -k soc",
        None,
        within="can_capture",
    ),
    Mutation(
        "bench misses a recompile while timing",
        f"{TOOLKIT}/bench.py",
        "run.counters_after = counter_snapshot()",
        "run.counters_after = dict(run.counters_before)",
        "tests/toolkit/test_bench.py -k real_recompile",
        None,
        within="measure",
    ),
    Mutation(
        "npu export moves the model to the CPU",
        f"{TOOLKIT}/literal_mre.py",
        'new = ".npu()" if self.npu else f\'.to("{self.device}")\'',
        "new = f'.to(\"{self.device}\")'",
        "tests/toolkit/test_export_targets.py -k moves_to_the_npu",
        None,
        within="literals",
    ),
    Mutation(
        "check says nothing of a non-tensor input",
        f"{TOOLKIT}/check.py",
        "    result.findings += constants_baked_in(inputs)\n",
        "",
        "tests/toolkit/test_check.py -k non_tensor",
        None,
        within="check",
    ),
    Mutation(
        "the MRE report says nothing of a non-tensor input",
        f"{TOOLKIT}/report.py",
        "        *constant_rows(dummy_input),\n",
        "",
        "tests/toolkit/test_report.py -k non_tensor",
        None,
        within="print_report",
    ),
    Mutation(
        "the doctor's model line says nothing of a non-tensor input",
        f"{TOOLKIT}/doctor.py",
        "notes = [constant_note(path, value) for path, value in constant_inputs(inputs)]",
        "notes = []",
        "tests/toolkit/test_doctor_checks.py -k constant_inputs_warn",
        None,
        within="check_model",
    ),
    Mutation(
        "a non-tensor input's note names a made-up recompile limit",
        f"{TOOLKIT}/contract.py",
        "limit = torch._dynamo.config.recompile_limit",
        "limit = 16",
        "tests/toolkit/test_contract.py -k recompile_limit",
        None,
        within="constant_note",
    ),
    Mutation(
        "every dtype is compared with float32's tolerance",
        f"{TOOLKIT}/contract.py",
        "{**tolerances(want.dtype), **override}",
        "{**tolerances(torch.float32), **override}",
        "tests/toolkit/test_contract.py -k split_in_two",
        None,
        within="leaf_mismatch",
    ),
    Mutation(
        "bfloat16 keeps assert_close's default atol",
        f"{TOOLKIT}/contract.py",
        'torch.bfloat16: {"rtol": 4e-2, "atol": 4e-2},',
        'torch.bfloat16: {"rtol": 1.6e-2, "atol": 1e-5},',
        "tests/toolkit/test_contract.py -k split_in_two",
        None,
    ),
    Mutation(
        "model.py's TOLERANCES is ignored",
        f"{TOOLKIT}/contract.py",
        "return {**default_tolerance(dtype), **own_tolerances().get(dtype, {})}",
        "return default_tolerance(dtype)",
        "tests/toolkit/test_contract.py -k model_py",
        None,
        within="tolerances",
    ),
    Mutation(
        "check compares with assert_close's float32 defaults",
        f"{TOOLKIT}/check.py",
        "differ = mismatches(output, expected.output) + state_mismatches(end, expected.end)",
        "differ = mismatches(output, expected.output, rtol=1.3e-6, atol=1e-5)",
        "tests/toolkit/test_check.py -k tolerance",
        None,
        within="run_rung",
    ),
    Mutation(
        "bench compares outputs exactly",
        f"{TOOLKIT}/bench.py",
        "found = mismatches(output, expected) + state_mismatches(graph_state, eager_state)",
        "found = mismatches(output, expected, rtol=0.0, atol=0.0)",
        "tests/toolkit/test_contract.py -k bench",
        None,
        within="compare_outputs",
    ),
    Mutation(
        "check's differing output names no leaf",
        f"{TOOLKIT}/check.py",
        "path=differ[0].path,",
        'path="",',
        "tests/toolkit/test_check.py -k differing_output",
        None,
        within="differs",
    ),
    Mutation(
        "a mismatch's relative difference is taken against graph mode's value",
        f"{TOOLKIT}/contract.py",
        "difference[beyond] / want[beyond].abs()",
        "difference[beyond] / got[beyond].abs()",
        "tests/toolkit/test_contract.py -k mismatch_counts",
        None,
        within="value_mismatch",
    ),
    Mutation(
        "check's table drops the differing leaf's path",
        f"{TOOLKIT}/contract.py",
        'return f"{self.path}: {self.text}"',
        "return self.text",
        "tests/toolkit/test_check.py -k table",
        None,
        within="__str__",
    ),
    Mutation(
        "a hint names a README section that is not there",
        f"{PROJECT}/README.md",
        "### Fault isolation",
        "### Fault isolation, step by step",
        "tests/test_project_readme.py -k 'section and npugraph_ex-none'",
        None,
    ),
    Mutation(
        "check's rungs start from the state the eager reference left",
        f"{TOOLKIT}/check.py",
        "            restore(model, expected.start)\n",
        "",
        "tests/toolkit/test_check.py -k starts_from_the_state",
        None,
        within="run_rung",
    ),
    # cache_compile mode, with an in-place op-plugin operator.
    Mutation(
        "cache_compile stand-in compiles with fullgraph=False",
        f"{TOOLKIT}/compile_cache.py",
        "backend=backend.name, fullgraph=True, dynamic=dynamic)",
        "backend=backend.name, fullgraph=False, dynamic=dynamic)",
        "tests/test_graph.py -k graph_break",
        CACHE_OP_PLUGIN_IN_PLACE,
        within="cache_compile",
    ),
    Mutation(
        "CachedModel compiles with dynamic=True",
        f"{TOOLKIT}/compile_cache.py",
        "self._forward, dynamic=False, cache_dir=keyed(cache_dir, model), **ranks",
        "self._forward, dynamic=True, cache_dir=keyed(cache_dir, model), **ranks",
        "tests/toolkit/test_compile_cache.py -k static",
        None,
        within="CachedModel",
    ),
    Mutation(
        "CachedModel no longer resets Dynamo for a second instance",
        f"{TOOLKIT}/compile_cache.py",
        "torch._dynamo.reset()",
        "pass",
        "tests/toolkit/test_compile_cache.py -k second_instance",
        None,
        within="CachedModel",
    ),
    Mutation(
        "op-plugin Meta function not registered",
        f"{PACKAGE}/meta_registrations.py",
        '@impl(m, "{{ cookiecutter.op_name }}")\n',
        "",
        "tests/test_custom_op.py -k meta",
        CACHE_OP_PLUGIN_IN_PLACE,
    ),
    Mutation(
        "op-plugin reference kernel subtracts (in place)",
        f"{PACKAGE}/op_reference.py",
        "x.add_(y)",
        "x.sub_(y)",
        "tests/test_custom_op.py -k known_values",
        CACHE_OP_PLUGIN_IN_PLACE,
    ),
    Mutation(
        "opschema errors exit 0 unless --strict",
        f"{TOOLKIT}/opschema.py",
        "if arguments.strict or not finding.graph_mode]",
        "if arguments.strict]",
        "tests/toolkit/test_opschema.py -k exit",
        None,
        within="main",
    ),
    Mutation(
        "opschema counts only identical version sets as duplicates",
        f"{TOOLKIT}/opschema.py",
        "if versions & first_versions:",
        "if versions == first_versions:",
        "tests/toolkit/test_opschema.py -k twice",
        None,
        within="check_entry",
    ),
    # A torch.library out-of-place operator, npugraph_ex mode.
    Mutation(
        "torch.library reference kernel subtracts",
        f"{PACKAGE}/custom_op.py",
        "return x + y",
        "return x - y",
        "tests/test_custom_op.py -k known_values",
        OUT_OF_PLACE,
    ),
    Mutation(
        "the project's export test fails beside the MRE's failure, which test_mre names once",
        f"{TOOLKIT}/testing.py",
        "export_refusal: str, mre_run: MreRun) -> Exported:",
        "export_refusal: str, mre_attempt: MreRun) -> Exported:\n    mre_run = mre_attempt",
        "tests/test_own_models.py -k graph_break_fails_once",
        within="exported",
    ),
    Mutation(
        "the project's export test compares the file's run with itself",
        f"{TOOLKIT}/testing.py",
        "export.judge(file, export.Run(export.leaves(mre_run.output)),",
        "export.judge(file, file,",
        "tests/test_own_models.py -k computes_otherwise",
        within="exported",
    ),
    Mutation(
        "export leaves out the module of yours that your model imports for what it registers",
        f"{TOOLKIT}/bundle.py",
        "                self.whole(origin)\n",
        "",
        "tests/test_export.py -k export_runs_your_mre",
        OUT_OF_PLACE,
        within="add_imported_modules",
    ),
    # Issue 20: what the mutation score found in export.
    Mutation(
        "export's rehearsal runs the file as a module that is gone once it ran",
        f"{TOOLKIT}/export.py",
        'module = sys.modules["__export__"] = importlib.util.module_from_spec(spec)',
        "module = importlib.util.module_from_spec(spec)",
        "tests/toolkit/test_export.py -k stays_importable",
        None,
    ),
    # Issue 18, item 6: export runs what it writes, and names the data files it cannot carry.
    Mutation(
        "export says wrote without running the file",
        f"{TOOLKIT}/export.py",
        "code, verdict = judge(*rehearse(runnable, output.name), what)",
        'code, verdict = 0, f"{what} was not run"',
        "tests/toolkit/test_export.py -k fails_when_run",
        None,
        within="main",
    ),
    Mutation(
        "export writes the file before it runs it",
        f"{TOOLKIT}/export.py",
        "    try:\n        code, verdict = judge(*rehearse(runnable, output.name), what)",
        "    write(output, text)\n    try:\n        code, verdict = judge(*rehearse(runnable, output.name), what)",
        "tests/toolkit/test_export.py -k fails_when_run",
        None,
        within="main",
    ),
    Mutation(
        "export runs the file but never compares its output with the MRE's",
        f"{TOOLKIT}/export.py",
        "differ = [str(mismatch) for mismatch in found if mismatch]",
        "differ = []",
        "tests/toolkit/test_export.py -k output_differs",
        None,
        within="judge",
    ),
    Mutation(
        "export's message puts the root cause after the context",
        f"{TOOLKIT}/export.py",
        'return 1, f"{short(file.error)}{file.where}\\n  {what} fails when run {ISOLATED}"',
        'return 1, f"{what} fails when run {ISOLATED}\\n  {short(file.error)}{file.where}"',
        "tests/toolkit/test_export.py -k fails_when_run",
        None,
        within="judge",
    ),
    Mutation(
        "export exits 0 on a file that fails as the MRE fails",
        f"{TOOLKIT}/export.py",
        'return 2, f"{what} fails when run',
        'return 0, f"{what} fails when run',
        "tests/toolkit/test_export.py -k fails_as_the_mre_fails",
        None,
        within="judge",
    ),
    Mutation(
        "export runs the npu literals off an NPU",
        f"{TOOLKIT}/export.py",
        "if not npu_ok:",
        "if False:",
        "tests/toolkit/test_export.py -k off_an_npu",
        None,
        within="rehearsal",
    ),
    Mutation(
        "export calls __file__ an undefined name",
        f"{TOOLKIT}/bundle.py",
        "return sorted(global_reads(text) - bound - set(dir(builtins)) - SCRIPT_NAMES)",
        "return sorted(global_reads(text) - bound - set(dir(builtins)))",
        "tests/toolkit/test_export_bundle.py -k defined_in_every_script",
        None,
        within="undefined_names",
    ),
    Mutation(
        "export ignores data files found through __file__",
        f"{TOOLKIT}/bundle.py",
        'LOCATING_NAMES = {"__file__", "__spec__", "__path__", "__loader__"}',
        'LOCATING_NAMES = {"__spec__", "__path__", "__loader__"}',
        "tests/toolkit/test_export.py -k 'data_file and __file__'",
        None,
    ),
    Mutation(
        "export ignores data files found through importlib.resources",
        f"{TOOLKIT}/bundle.py",
        'LOCATING_MODULES = {"importlib.resources", "importlib_resources", "pkgutil"}',
        'LOCATING_MODULES = {"importlib_resources", "pkgutil"}',
        "tests/toolkit/test_export.py -k 'data_file and importlib'",
        None,
    ),
    # Issue 20: export's own mutation survivors, caught on small stand-in projects.
    Mutation(
        "export lets the MRE use a module object",
        f"{TOOLKIT}/bundle.py",
        "        refuse_module_objects(module, sorted(set(whole) & global_reads(text)))\n",
        "",
        "tests/toolkit/test_export_bundle.py -k module_object",
        None,
        within="add_imported_modules",
    ),
    Mutation(
        "export writes a renamed import among the others, which ruff's isort splits",
        f"{TOOLKIT}/bundle.py",
        "return sorted([plain, *renamed] if plain else renamed, key=lambda names: isort_key(names[0]))",
        "return [ordered]",
        "tests/toolkit/test_export_bundle.py -k imports_merge",
        None,
        within="from_statements",
    ),
    Mutation(
        "export calls `import os` and `import os.path` two different imports",
        f"{TOOLKIT}/bundle.py",
        "return alias.name if alias.asname else name  # `import torch.nn` binds torch",
        "return alias.name",
        "tests/toolkit/test_export_bundle.py -k imports_merge",
        None,
        within="binding",
    ),
    Mutation(
        "export drops what a toolkit module imported whole registers",
        f"{TOOLKIT}/bundle.py",
        'if all(bound.startswith("_") for bound in statement.binds):',
        "if False:",
        "tests/toolkit/test_export_bundle.py -k registers",
        None,
        within="add_imported_modules",
    ),
    Mutation(
        "export's run of the file leaves a stderr file where you are",
        f"{TOOLKIT}/export.py",
        'self.stderr = Path(self.scratch.name, "stderr")',
        'self.stderr = Path("stderr")',
        "tests/toolkit/test_export.py -k runs_alone",
        None,
        within="FileRun",
    ),
    Mutation(
        "export imports torch to bundle an op-plugin project, before a project's tests start its run",
        f"{TOOLKIT}/bundle.py",
        "from .opschema import schema",
        "from .op_plugin import schema",
        "tests/toolkit/test_export.py -k bundling_imports_no_torch",
        None,
        within="add_statement",
    ),
    # The template's own suite: the hooks, the simulated NPU machines, your own models.
    Mutation(
        "a generated test imports a helper from conftest",
        f"{PROJECT}/tests/test_mre.py",
        "import pytest\n\n",
        "import pytest\n\nfrom conftest import pytest_plugins  # noqa: F401\n",
        "tests/test_bake.py -k 'sorting_first and sorts-first-npugraph_ex-none'",
    ),
    Mutation(
        "npu export half-writes a select_backend() called with arguments",
        f"{TOOLKIT}/literal_mre.py",
        "        and not (node.value.args or node.value.keywords)\n",
        "",
        "tests/toolkit/test_export_bundle.py -k no_target_can_write",
        None,
        within="choices",
    ),
    Mutation(
        "npu export writes config = None",
        f"{TOOLKIT}/literal_mre.py",
        "options = self.options() if self.npu else None",
        "options = None",
        "tests/toolkit/test_export_targets.py -k npugraph_ex_options_literally",
        None,
        within="literals",
    ),
    Mutation(
        "portable export keeps a config that nothing reads",
        f"{TOOLKIT}/literal_mre.py",
        "for step in (self.cut_branches, self.literals, self.pass_config, self.drop_unread_config):",
        "for step in (self.cut_branches, self.literals, self.pass_config):",
        "tests/toolkit/test_export_targets.py -k else_branch",
        None,
        within="written",
    ),
    Mutation(
        "export's run of a tensor-parallel file starts no process group",
        f"{TOOLKIT}/export.py",
        'command.append(group[1] if group else "")',
        'command.append("")',
        "tests/toolkit/test_export.py -k guard_starts_a_process_group",
        None,
        within="FileRun",
    ),
    Mutation(
        "the npu file without torch_npu exits 1, as any failure does",
        f"{TOOLKIT}/export.py",
        "sys.exit(2)",
        "sys.exit(1)",
        "tests/toolkit/test_export_targets.py -k without_torch_npu",
        None,
    ),
    Mutation(
        "a tensor-parallel export's guard never destroys its process group",
        f"{TOOLKIT}/export.py",
        '"    infer_one_step()", "    dist.destroy_process_group()"]',
        '"    infer_one_step()"]',
        "tests/toolkit/test_export_targets.py -k starts_and_destroys",
        None,
        within="guard",
    ),
    Mutation(
        "mre.py moves the model to the CPU by name, where the npu file cannot run it on the NPU",
        f"{PACKAGE}/mre.py",
        "model = build_model().to(backend.device).eval()",
        'model = build_model().to("cpu").eval()',
        "tests/test_export.py -k npu_target_is_written",
        DEFAULT,
        within="infer_one_step",
    ),
    Mutation(
        "export's header leaves out how the custom op is registered",
        f"{TOOLKIT}/export.py",
        'op = project.CUSTOM_OP + (f" ({project.OP_REGISTRATION})" if project.OP_REGISTRATION else "")',
        "op = project.CUSTOM_OP",
        "tests/toolkit/test_export_targets.py -k header",
        None,
        within="header",
    ),
    Mutation(
        "backend probe lets a half-sourced CANN's bare Exception through",
        f"{TOOLKIT}/backend.py",
        "except Exception as error:  # noqa: BLE001  (a half-sourced CANN raises a bare Exception)",
        "except (ImportError, OSError, RuntimeError) as error:",
        "tests/test_simulated_npu.py -k half_sourced_cann_mre",
        within="probe_npu",
    ),
    Mutation(
        "npugraph_ex's healthy warnings fail the project's tests",
        f"{PROJECT}/pyproject.toml",
        "  'default:::torch_npu(\\.|$)',\n",
        "",
        "tests/test_simulated_npu.py -k warning",
    ),
    Mutation(
        "a graph break errors every test instead of failing one",
        f"{TOOLKIT}/testing.py",
        "return MreFailure(error)",
        "raise",
        "tests/test_own_models.py -k fails_once",
        within="mre_attempt",
    ),
    Mutation(
        "pre-gen hook accepts a non-ASCII email domain",
        "hooks/answer_rules.py",
        "if not email.isascii():",
        "if False:",
        "tests/test_hooks.py -k 'bad_answer and ASCII'",
        within="check_email",
    ),
    Mutation(
        "the hook's quick path takes an address with a space, which the metadata parser refuses",
        "hooks/answer_rules.py",
        'ATEXT = r"[A-Za-z0-9!#$%&\'*+/=?^_`{|}~-]+"',
        'ATEXT = r"[A-Za-z0-9!#$%&\'*+/=?^_`{|}~ -]+"',
        "tests/test_hooks.py -k address_taken_without",
    ),
    # parallel=tensor_parallel.
    Mutation(
        "every rank prints the report",
        f"{TOOLKIT}/report.py",
        "        if not ranks.is_first:\n            return output\n",
        "",
        "tests/toolkit/test_parallel.py -k rank_zero_alone",
        None,
        within="report",
    ),
    Mutation(
        "Ranks.shard leaves the model whole",
        f"{TOOLKIT}/parallel.py",
        "return parallelize_module(model, self.mesh, plan)",
        "return model",
        "tests/toolkit/test_parallel.py -k shards_every_layer",
        None,
        within="shard",
    ),
    Mutation(
        "a layer the ranks cannot split is accepted",
        f"{TOOLKIT}/parallel.py",
        "if value % size == 0:",
        "if True:",
        "tests/toolkit/test_parallel.py -k cannot_split",
        None,
        within="check_plan",
    ),
    Mutation(
        "the plan is checked but the sharded model never run",
        f"{TOOLKIT}/parallel.py",
        "output = wait_collectives(exercise(parallelize_module(model, mesh, plan), inputs))",
        "output = exercise(build(), inputs)",
        "tests/toolkit/test_doctor.py -k plan_that_cannot_run",
        None,
        within="rehearse",
    ),
    Mutation(
        "the plan check wants every parameter split, a row-parallel bias too",
        "tests/toolkit/test_parallel.py",
        "if name in expected:\n                    assert weight.placements == (expected[name],)",
        "if True:\n                    assert isinstance(weight.placements[0], Shard)",
        "tests/toolkit/test_parallel.py -k biases",
        None,
        within="assert_sharded",
    ),
    Mutation(
        "the doctor is silent about HCCL_OP_EXPANSION_MODE",
        f"{TOOLKIT}/doctor.py",
        '"WARN",',
        '"OK",',
        "tests/toolkit/test_doctor.py -k hccl_expansion_mode_warn",
        None,
        within="hccl_mode",
    ),
    Mutation(
        "check compiles before it rehearses the plan",
        f"{TOOLKIT}/check.py",
        "problem = plan_problem(arguments.nproc_per_node)",
        "problem = None",
        "tests/toolkit/test_check.py -k cannot_run",
        None,
        within="main",
    ),
    Mutation(
        "bench times eager calls without their collectives",
        f"{TOOLKIT}/bench.py",
        "finished(fn(*dummy_input))",
        "fn(*dummy_input)",
        "tests/toolkit/test_bench.py -k waits_for_its_collectives",
        None,
        within="call_through",
    ),
    Mutation(
        "the process group outlives the MRE",
        f"{TOOLKIT}/parallel.py",
        "if not joined:\n            dist.destroy_process_group()",
        "pass",
        "tests/toolkit/test_parallel.py -k ends_with_its_block",
        None,
        within="tensor_parallel",
    ),
    Mutation(
        "ranks share one cache_compile cache",
        f"{PACKAGE}/mre.py",
        "                global_rank=dist.get_rank(),\n                tp_rank=dist.get_rank(),\n",
        "",
        "tests/toolkit/test_compile_cache.py -k own_cache",
        None,
        within="__init__",
    ),
    Mutation(
        "an exported MASTER_ADDR makes plain python wait for a rendezvous",
        f"{TOOLKIT}/parallel.py",
        'elif "WORLD_SIZE" in os.environ:',
        'elif "MASTER_ADDR" in os.environ:',
        "tests/toolkit/test_parallel.py -k plain_python",
        None,
        within="start",
    ),
    Mutation(
        "a failing rank's error is not recorded for torchrun",
        f"{TOOLKIT}/rank_failure.py",
        "sys.excepthook = excepthook",
        "pass",
        "tests/test_tensor_parallel.py -k stops_the_job",
        within="report_when_uncaught",
    ),
    Mutation(
        "the doctor test wants OK from a model whose float input is rightly a WARN",
        f"{PROJECT}/tests/test_doctor.py",
        'c["name"] in ON_YOUR_MODEL and c["status"] == "FAIL"]',
        'c["name"] in ON_YOUR_MODEL and c["status"] != "OK"]',
        "tests/test_own_models.py -k 'float and input and every_tool'",
        within="test_the_doctor_finds_nothing_wrong_with_your_model",
    ),
    Mutation(
        "the suite fails a model whose data files export rightly refuses",
        f"{TOOLKIT}/testing.py",
        'return f"export refuses this model, as it should: {error}"',
        'return ""',
        "tests/test_own_models.py -k data_file",
        within="export_refusal",
    ),
    Mutation(
        "a failing rank tells its failure only once its process ends, after its peers'",
        f"{TOOLKIT}/rank_failure.py",
        'print("\\n".join(lines), file=sys.stderr, flush=True)',
        "pass",
        "tests/toolkit/test_rank_failure.py -k 'leaving_the_block or claims_and_tells'",
        None,
        within="report_when_uncaught",
    ),
    Mutation(
        "every failing rank prints its root cause",
        f"{TOOLKIT}/rank_failure.py",
        "if first != rank:",
        "if False:",
        "tests/test_tensor_parallel.py -k root_cause_first_and_once",
        within="report",
    ),
    Mutation(
        "a failing rank shows torch.compile's wrapper, not the root cause",
        f"{TOOLKIT}/rank_failure.py",
        "root = root_cause(links)",
        "root = links[0]",
        "tests/test_tensor_parallel.py -k root_cause_first_and_once",
        within="report",
    ),
    Mutation(
        "torch logs each failed sharding rule before the rank's error",
        f"{TOOLKIT}/parallel.py",
        "with quiet_rule_failures():\n            yield ranks",
        "yield ranks",
        "tests/test_tensor_parallel.py -k root_cause_first_and_once",
        within="tensor_parallel",
    ),
    # Models with state: a graph must leave the state eager leaves, from the state eager started.
    Mutation(
        "check compares the output but not the state the call left",
        f"{TOOLKIT}/check.py",
        " + state_mismatches(end, expected.end)",
        "",
        "tests/toolkit/test_check.py -k drops_a_state_write",
        None,
        within="run_rung",
    ),
    Mutation(
        "bench compares the output but not the state the call left",
        f"{TOOLKIT}/bench.py",
        " + state_mismatches(graph_state, eager_state)",
        "",
        "tests/toolkit/test_state.py -k bench",
        None,
        within="compare_outputs",
    ),
    Mutation(
        "restore puts the state back at new addresses",
        f"{TOOLKIT}/state.py",
        "tensor.copy_(value)",
        "tensor.data = value.clone()",
        "tests/toolkit/test_state.py -k in_place",
        None,
        within="restore",
    ),
    Mutation(
        "tensors marked static are not state",
        f"{TOOLKIT}/state.py",
        'and hasattr(value, "_dynamo_static_input_type")',
        "and False",
        "tests/toolkit/test_state.py -k marked",
        None,
        within="is_marked",
    ),
    Mutation(
        "state compares the tensors a compile marked static, which eager's state lacks",
        f"{TOOLKIT}/state.py",
        "if missing := sorted(expected.keys() - actual.keys()):",
        "if missing := sorted(expected.keys() ^ actual.keys()):",
        "tests/toolkit/test_check.py -k constant_tensor",
        None,
        within="state_mismatches",
    ),
    Mutation(
        "a cache behind a private attribute is not state",
        f"{TOOLKIT}/state.py",
        "if attribute in MODULE_OWN:",
        'if attribute.startswith("_"):',
        "tests/toolkit/test_state.py -k private",
        None,
        within="held",
    ),
    Mutation(
        "restore puts a replaced buffer back on the wrong module",
        f"{TOOLKIT}/state.py",
        'module, _, attribute = path.rpartition(".")',
        'module, _, attribute = path.partition(".")',
        "tests/toolkit/test_state.py -k forward_replaced",
        None,
        within="restore",
    ),
    Mutation(
        "outputs are compared leaf by leaf without their structure",
        f"{TOOLKIT}/contract.py",
        "if actual_spec != expected_spec:",
        "if len(actual_leaves) != len(expected_leaves):",
        "tests/toolkit/test_contract.py -k only_in_structure",
        None,
        within="mismatches",
    ),
    # State the tools cannot save: every tool runs the model's eager calls first (rehearsal.py),
    # watched (state.watching), and refuses a model that fails there or keeps state out of sight.
    Mutation(
        "a number a call advances goes unseen",
        f"{TOOLKIT}/state.py",
        "if isinstance(old, NUMBER) and not flag and not same_number(old, value):",
        "if False:",
        "tests/toolkit/test_rehearsal.py -k number_a_call_advances",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a number a call sets for the first time goes unseen",
        f"{TOOLKIT}/state.py",
        "if owner(path) not in allocated:",
        "if False:",
        "tests/toolkit/test_state.py -k first_time",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a size set beside a tensor that appeared is named apart",
        f"{TOOLKIT}/state.py",
        "if owner(path) not in allocated:",
        "if True:",
        "tests/toolkit/test_state.py -k size_set_beside",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a tensor made at the first call goes unseen",
        f"{TOOLKIT}/state.py",
        "if appeared:",
        "if False:",
        "tests/toolkit/test_rehearsal.py -k tensor_made",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a buffer that forward replaced is taken for a new tensor",
        f"{TOOLKIT}/state.py",
        "        and not isinstance(before.get(path), torch.Tensor)\n",
        "",
        "tests/toolkit/test_state.py -k 'forward_replaced_is_no_state'",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a tensor held before under another path is taken for a new one",
        f"{TOOLKIT}/state.py",
        "        and id(value) not in known\n",
        "",
        "tests/toolkit/test_state.py -k another_path",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a flag set beside a tensor that appeared is named apart",
        f"{TOOLKIT}/state.py",
        "flag = isinstance(value, bool) and owner(path) in allocated",
        "flag = False",
        "tests/toolkit/test_check.py -k tensor_made_at_the_first_call",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "numbers that went alike are named one by one",
        f"{TOOLKIT}/state.py",
        "found.append(f\"{', '.join(paths)} went from {old} to {new} {when}\")",
        'found += [f"{path} went from {old} to {new} {when}" for path in paths]',
        "tests/toolkit/test_state.py -k went_alike",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "any changed number gets the sliding-window fix",
        f"{TOOLKIT}/state.py",
        'window = any(path.endswith(".cumulative_length_int") for path in changed)',
        "window = True",
        "tests/toolkit/test_state.py -k window_fix",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "any changed number gets the recurrent layer's fix",
        f"{TOOLKIT}/state.py",
        'recurrent = any(".has_previous_state[" in path for path in changed)',
        "recurrent = True",
        "tests/toolkit/test_state.py -k recurrent_fix",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a recurrent layer's flag gets no fix of its own",
        f"{TOOLKIT}/state.py",
        'recurrent = any(".has_previous_state[" in path for path in changed)',
        "recurrent = False",
        "tests/toolkit/test_state.py -k recurrent_fix",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a count a lazy cache layer marks as it allocates is named as changed in a plain attribute",
        f"{TOOLKIT}/state.py",
        "        and not (owner(path) in allocated and is_marked(after[path]))\n",
        "",
        "tests/toolkit/test_state.py -k count_marked",
        None,
        within="out_of_sight",
    ),
    Mutation(
        "a NaN that stays a NaN is taken for a change",
        f"{TOOLKIT}/state.py",
        "return before == after or (both_nan and math.isnan(after))",
        "return before == after",
        "tests/toolkit/test_state.py -k nan",
        None,
        within="same_number",
    ),
    Mutation(
        "a model that fails eagerly fails later, with a traceback",
        f"{TOOLKIT}/rehearsal.py",
        "raise eager_failure(error) from error",
        "raise",
        "tests/toolkit/test_rehearsal.py -k fails_eagerly",
        None,
        within="rehearse",
    ),
    Mutation(
        "the rehearsal leaves the state its calls wrote",
        f"{TOOLKIT}/rehearsal.py",
        "restore(model, start)",
        "pass",
        "tests/toolkit/test_rehearsal.py -k leaves_the_state",
        None,
        within="rehearse",
    ),
    Mutation(
        "the rehearsal leaves its call's collectives in flight",
        f"{TOOLKIT}/rehearsal.py",
        "finished(model(*inputs))",
        "model(*inputs)",
        "tests/toolkit/test_rehearsal.py -k 'collective_in_flight and forward'",
        None,
        within="rehearse",
    ),
    Mutation(
        "the rehearsal leaves its decode step's collectives in flight",
        f"{TOOLKIT}/rehearsal.py",
        "finished(model(*step))",
        "model(*step)",
        "tests/toolkit/test_rehearsal.py -k 'collective_in_flight and decode'",
        None,
        within="rehearse",
    ),
    Mutation(
        "nothing waits for the collectives of a call nobody reads",
        f"{TOOLKIT}/rehearsal.py",
        "return wait_collectives(output)",
        "return output",
        "tests/toolkit/test_rehearsal.py tests/toolkit/test_bench.py -k 'collective_in_flight or waits_for_its_collectives'",
        None,
        within="finished",
    ),
    Mutation(
        "the rehearsal moves the random generator",
        f"{TOOLKIT}/rehearsal.py",
        "with torch.no_grad(), torch.random.fork_rng(devices=[]):",
        "with torch.no_grad():",
        "tests/toolkit/test_rehearsal.py -k random_generator",
        None,
        within="rehearse",
    ),
    Mutation(
        "the rehearsal watches the prefill but not the decode step",
        f"{TOOLKIT}/rehearsal.py",
        "with watching(model, DECODE_STEP):\n                    finished(model(*step))",
        "finished(model(*step))",
        "tests/toolkit/test_rehearsal.py -k decode_step_advances",
        None,
        within="rehearse",
    ),
    Mutation(
        "bench compiles before it rehearses",
        f"{TOOLKIT}/bench.py",
        "    rehearse(model, dummy_input)\n",
        "",
        "tests/toolkit/test_rehearsal.py -k 'number_a_call and bench and forward'",
        None,
        within="seeded_model",
    ),
    Mutation(
        "bench and profile show a traceback where build_model() raises",
        f"{TOOLKIT}/bench.py",
        'model = built(project.from_model("build_model")).to(where.device).eval()',
        'model = project.from_model("build_model")().to(where.device).eval()',
        "tests/toolkit/test_rehearsal.py -k 'does_not_build and profile and forward'",
        None,
        within="seeded_model",
    ),
    Mutation(
        "generate shows a traceback where build_model() raises",
        f"{TOOLKIT}/generation.py",
        '        model = built(project.from_model("build_model")).to(device).eval()\n    else:',
        '        model = project.from_model("build_model")().to(device).eval()\n    else:',
        "tests/toolkit/test_rehearsal.py -k 'does_not_build and bench and decode'",
        None,
        within="build",
    ),
    Mutation(
        "generate compiles before it rehearses",
        f"{TOOLKIT}/generation.py",
        "rehearse(model, (prompt,))",
        "pass",
        "tests/toolkit/test_rehearsal.py -k 'number_a_call and generate'",
        None,
        within="build",
    ),
    Mutation(
        "generate rehearses a prompt the cache cannot hold",
        f"{TOOLKIT}/generation.py",
        "if prompt.shape[0] <= bounds.max_batch and prompt.shape[1] < bounds.max_seq_len:",
        "if True:",
        "tests/toolkit/test_bench.py -k cannot_follow",
        None,
        within="build",
    ),
    Mutation(
        "generate's prompt is drawn after the rehearsal's",
        f"{TOOLKIT}/generation.py",
        "with torch.random.fork_rng(devices=[]):",
        "if True:",
        "tests/toolkit/test_rehearsal.py -k prompt_is_the_mre",
        None,
        within="build",
    ),
    Mutation(
        "generate builds the model before it refuses a request",
        f"{TOOLKIT}/generation.py",
        "if refused := bounds.refusals(shape[1], new_tokens, requested, least=GRAPH_TOKENS_FROM):\n        raise Refused(refused)\n    size = bounds.capture_size(shape[0])\n    model, graphs = build(backend, ranks)",
        "model, graphs = build(backend, ranks)\n    if refused := bounds.refusals(shape[1], new_tokens, requested, least=GRAPH_TOKENS_FROM):\n        raise Refused(refused)\n    size = bounds.capture_size(shape[0])",
        "tests/toolkit/test_generation.py -k before_a_model_is_built",
        None,
        within="run",
    ),
    Mutation(
        "profile refuses a model with a traceback",
        f"{TOOLKIT}/profile.py",
        "except (ContractError, GraphFailure) as error:",
        "except (OSError, GraphFailure) as error:",
        "tests/toolkit/test_rehearsal.py -k 'fails_eagerly and profile'",
        None,
        within="main",
    ),
    Mutation(
        "check compares a model whose call advances a number",
        f"{TOOLKIT}/check.py",
        "with torch.no_grad(), watching(model, DECODE_STEP if project.DECODE else FIRST_CALL):",
        "with torch.no_grad():",
        "tests/toolkit/test_check.py -k number_a_call_advances",
        None,
        within="check",
    ),
    Mutation(
        "check names the model only once its eager run worked",
        f"{TOOLKIT}/check.py",
        "    result.model = type(model).__name__\n",
        "",
        "tests/toolkit/test_check.py -k fails_at_prefill",
        None,
        within="check",
    ),
    Mutation(
        "check calls a build that fails an eager run that fails",
        f"{TOOLKIT}/check.py",
        '"build fails", first_line(error), error_frame(error), hint, code=BUILD_FAILS',
        '"eager run fails", first_line(error), error_frame(error), hint, code=BUILD_FAILS',
        "tests/toolkit/test_check.py -k does_not_build",
        None,
        within="check",
    ),
    Mutation(
        "check gives a generic reason for a recompile, not Dynamo's guard",
        f"{TOOLKIT}/check.py",
        "guards, where = failed_guards()",
        'guards, where = [], ""',
        "tests/toolkit/test_check.py -k recompile_is_explained",
        None,
        within="guards_failed",
    ),
    Mutation(
        "the doctor says OK of a model that only builds",
        f"{TOOLKIT}/doctor.py",
        "rehearse(model.to(device).eval(), to_device(inputs, device))",
        "pass",
        "tests/toolkit/test_doctor_checks.py -k only_builds",
        None,
        within="check_model",
    ),
    Mutation(
        "the doctor runs the model on the CPU where the MRE runs on the NPU",
        f"{TOOLKIT}/doctor.py",
        'device = "npu" if npu_status()[0] else "cpu"',
        'device = "cpu"',
        "tests/test_simulated_npu.py -k capturing_soc_doctor",
        None,
        within="check_model",
    ),
    Mutation(
        "the doctor says OK of a model whose state the tools refuse",
        f"{TOOLKIT}/doctor.py",
        "notes.insert(0, refusal)",
        "pass",
        "tests/toolkit/test_doctor_checks.py -k state_out_of_sight",
        None,
        within="check_model",
    ),
    Mutation(
        "the suite's check test says `assert 2 == 0`, not check's report",
        f"{PROJECT}/tests/test_check.py",
        'if code:\n        pytest.fail(f"check exits {code} on your model:\\n{report}", pytrace=False)',
        "assert code == 0",
        "tests/test_own_models.py -k 'refuses_a_model and sliding'",
        within="test_the_model_is_ready",
    ),
    Mutation(
        "the suite's bench test shows bench's words after `assert 2 == 0`",
        f"{PROJECT}/tests/test_bench.py",
        'if code:\n        pytest.fail(f"bench exits {code} on your model:\\n{errors.getvalue()}", pytrace=False)',
        "assert code == 0, errors.getvalue()",
        "tests/test_own_models.py -k 'refuses_a_model and sliding'",
        within="benched",
    ),
    Mutation(
        "the suite's profile test shows profile's words after `assert 2 == 0`",
        f"{PROJECT}/tests/test_profile.py",
        'if code:\n        pytest.fail(f"profile exits {code} on your model:\\n{errors.getvalue()}", pytrace=False)',
        "assert code == 0, errors.getvalue()",
        "tests/test_own_models.py -k 'refuses_a_model and sliding'",
        within="profiled",
    ),
    Mutation(
        "the suite's generate test says `assert 2 == 0`, not generate's refusal",
        f"{PROJECT}/tests/test_generate.py",
        "    if generated.code:\n",
        "    assert generated.code == 0\n    if generated.code:\n",
        "tests/test_own_models.py -k 'refuses_a_model and sliding'",
        within="test_generate_on_your_model_exits_0_graph_mode_choosing_eagers_tokens",
    ),
    Mutation(
        "the suite's decode tests fail one by one where generate refuses the model",
        f"{PROJECT}/tests/test_generate.py",
        'pytest.skip("generate built no decode graphs',
        'pytest.fail("generate built no decode graphs',
        "tests/test_own_models.py -k 'refuses_a_model and sliding'",
        within="decoder",
    ),
    Mutation(
        "the suite's doctor test shows the report as a dict",
        f"{PROJECT}/tests/test_doctor.py",
        'pytest.fail("the doctor on your model:\\n" + "\\n".join(lines), pytrace=False)',
        "assert not failed, report",
        "tests/test_own_models.py -k 'refuses_a_model and eagerly'",
        within="test_the_doctor_finds_nothing_wrong_with_your_model",
    ),
    Mutation(
        "a rank's refusal is not kept for the two-rank tests",
        f"{TOOLKIT}/two_ranks.py",
        "        contextlib.redirect_stderr(told),\n",
        "",
        "tests/test_own_models.py -k words_of_the_tool",
        within="run_step",
    ),
    # The models it works with: the README's table is the last run's, and each model gives it.
    Mutation(
        "the StaticCache wrapper leaves its cache for the first call to allocate",
        "tests/own_models/static_cache_llama.py",
        "self.lm(input_ids=token, cache=self.cache, use_cache=True)",
        "pass",
        "tests/test_works_with.py -k 'recorded and Llama'",
        within="allocate_cache",
    ),
    Mutation(
        "the StaticCache wrapper leaves a recurrent layer's flag for the first call to set",
        "tests/own_models/static_cache_llama.py",
        "layer.has_previous_state = dict.fromkeys(layer.has_previous_state, True)",
        "pass",
        "tests/test_works_with.py -k 'recorded and Mamba2'",
        within="allocate_cache",
    ),
    Mutation(
        "the StaticCache wrapper's prefill reads the recurrent states the last request left",
        "tests/own_models/static_cache_llama.py",
        "state.masked_fill_(input_pos[0] == 0, 0)",
        "pass",
        "tests/test_own_models.py -k new_request",
        within="forward",
    ),
    Mutation(
        "export-hf reads the head width from config.json's hidden_size, which GPT-2's names n_embd",
        f"{TOOLKIT}/export_hf.py",
        "head_dim = head_dim_of(config if inner is None else inner.config)",
        "head_dim = head_dim_of(config)",
        "tests/toolkit/test_export_hf.py -k gpt2",
        within="export",
    ),
    Mutation(
        "the default tier runs no decode suite, so decode's own lines run in the full tier only",
        "tests/conftest.py",
        "    DECODE_VARIANTS[9],  # decode, cache_compile, in-place op-plugin op\n",
        "",
        "tests/test_generated_project.py -k representative_suites_hold",
    ),
    Mutation(
        "the harness runs any failed torchrun launch again, hiding a rank's own failure",
        "tests/conftest.py",
        "if result.returncode and RANK_KILLED_BY_TORCH.search(result.stdout + result.stderr):",
        "if result.returncode:",
        "tests/test_tensor_parallel.py -k torch_crashed",
        within="again_if_torch_crashed",
    ),
    Mutation(
        "every two-rank test fails with the same torchrun summary when a rank fails",
        f"{TOOLKIT}/testing.py",
        'pytest.skip("the two-rank run failed: see test_two_ranks_run_under_torchrun")',
        "pytest.fail(two_ranks_attempt.summary, pytrace=False)",
        "tests/test_tensor_parallel.py -k fails_the_projects_suite_once",
        within="two_ranks",
    ),
    Mutation(
        "a failed two-rank run shows torchrun's last lines, not the failing rank's own error",
        f"{TOOLKIT}/testing.py",
        "if start is None or box is None:",
        "if True:",
        "tests/test_tensor_parallel.py -k fails_the_projects_suite_once",
        within="rank_error",
    ),
    Mutation(
        "a failed two-rank run names torchrun's exit before the rank's own error",
        f"{TOOLKIT}/testing.py",
        'return "\\n".join([*error, f"{ended} ({skipped}):", *lines[box:]])',
        'return "\\n".join([f"{ended} ({skipped}):", *error, *lines[box:]])',
        "tests/test_tensor_parallel.py -k fails_the_projects_suite_once",
        within="rank_error",
    ),
    Mutation(
        "on CI, pytest's summary repeats a failure's whole message",
        f"{PROJECT}/pyproject.toml",
        '"--strict-markers", "--force-short-summary"]',
        '"--strict-markers"]',
        "tests/test_tensor_parallel.py -k fails_the_projects_suite_once",
    ),
    Mutation(
        "the works-with table is edited by hand: a model's row says what no run said",
        f"{PROJECT}/README.md",
        "| Phi-3 | decode | `Phi3Config`: `pad_token_id` and `eos_token_id` inside the vocabulary (32000 by default) | ok",
        "| Phi-3 | decode | `Phi3Config`: `pad_token_id` and `eos_token_id` inside the vocabulary (32000 by default) | —",
        "tests/test_works_with.py -k readme_table_is_the_last",
    ),
    Mutation(
        "a tool whose test passed in the suite runs again anyway",
        "tests/tool_runs.py",
        "tools([name for name in chosen if name not in passed])",
        "tools(chosen)",
        "tests/test_tool_runs.py -k own_words",
    ),
    Mutation(
        "tool_runs names a test the generated suite does not have: every run repeats that tool",
        "tests/tool_runs.py",
        '"check": ("tests/test_check.py::test_the_model_is_ready",),',
        '"check": ("tests/test_check.py::test_model_is_ready",),',
        "tests/test_tool_runs.py -k generated_suite",
    ),
    Mutation(
        "the works-with cell of a tool that ran again is its failing test's, not the tool's words",
        "tests/works_with.py",
        "return VERDICTS[tool](*run.results[tool])",
        "return suite_verdict(run)",
        "tests/test_works_with.py -k own_words",
        within="verdict",
    ),
    Mutation(
        "the last run's results lose a tool's verdict on a model",
        "tests/works_with.json",
        '"GPT-2": {\n      "mre": "ok",\n',
        '"GPT-2": {\n',
        "tests/test_works_with.py -k every_model_has_a_verdict",
    ),
    Mutation(
        "the project's export-hf test takes a MoE's checkpoint names for its own",
        f"{PROJECT}/tests/test_export_hf.py",
        "written = type(inner).from_pretrained(tmp_path).state_dict()",
        'written = load_file(tmp_path / "model.safetensors")',
        "tests/test_works_with.py -k 'recorded and MoE'",
        within="test_export_hf_writes_your_seeded_weights_under_an_architecture",
    ),
    Mutation(
        "export-hf writes an unseeded transformers model, which the project's test reads back",
        f"{TOOLKIT}/export_hf.py",
        "    torch.manual_seed(0)\n",
        "",
        "tests/test_works_with.py -k 'recorded and Llama'",
        within="export",
    ),
    # Decode: a static KV cache, one graph per capture size, a batch padded up to its size.
    Mutation(
        "the decode graph's cache write is lost",
        f"{TOOLKIT}/decode.py",
        "logits = logits_of(self.compiled[size](tokens, input_pos))[:batch]",
        "kept = save(self.model)\n        logits = logits_of(self.compiled[size](tokens, input_pos))[:batch]\n        restore(self.model, kept)",
        "tests/test_generate.py -k each_capture_size",
        DECODE,
        within="__call__",
    ),
    Mutation(
        "the sample's cache update keeps only the last position (prefill loses the rest)",
        f"{PACKAGE}/model.py",
        "self.v_cache[:batch, :, input_pos] = v",
        "self.v_cache[:batch, :, input_pos[-1]] = v[:, :, -1]",
        "tests/test_generate.py -k recomputing",
        DECODE,
        within="update",
    ),
    Mutation(
        "input_pos goes to the decode step as a Python int",
        f"{PACKAGE}/generate.py",
        "logits = step(token, input_pos)",
        "logits = step(token, int(input_pos))",
        "tests/test_generate.py -k no_recompile_across_positions",
        DECODE,
        within="generate",
    ),
    Mutation(
        "a padded batch hands back the padding rows",
        f"{TOOLKIT}/decode.py",
        "logits = logits_of(self.compiled[size](tokens, input_pos))[:batch]",
        "logits = logits_of(self.compiled[size](tokens, input_pos))[-batch:]",
        "tests/test_generate.py -k padded",
        DECODE,
        within="__call__",
    ),
    Mutation(
        "warm-up skips the largest capture size",
        f"{TOOLKIT}/decode.py",
        "for size in self.limits.capture_sizes:",
        "for size in self.limits.capture_sizes[:-1]:",
        "tests/test_generate.py -k exits_0",
        DECODE,
        within="warm_up",
    ),
    Mutation(
        "a sequence that produced EOS keeps generating",
        f"{PACKAGE}/generate.py",
        "done |= ended(token)",
        "done &= ended(token)",
        "tests/toolkit/test_generation.py -k produced_eos",
        None,
        within="generate",
    ),
    Mutation(
        "graph mode's tokens/s count the new tokens of one sequence only",
        f"{TOOLKIT}/generation.py",
        '"graph": decoded / graph_s}',
        '"graph": decoded / prompt.shape[0] / graph_s}',
        "tests/toolkit/test_generation.py -k tokens_per_second",
        None,
        within="run",
    ),
    Mutation(
        "the command line runs generate without the project's loop",
        f"{TOOLKIT}/commands.py",
        '"generate",',
        '"toolkit.generation",',
        "tests/test_generate.py -k exits_0",
        DECODE,
    ),
    Mutation(
        "generate compares what the user's sampler draws on each side",
        f"{TOOLKIT}/generation.py",
        "lambda: loop(clocked_eager, model, prompt, new_tokens, sample=greedy),",
        "lambda: loop(clocked_eager, model, prompt, new_tokens, sample=sample),",
        "tests/toolkit/test_generation.py -k random_sampler",
        None,
        within="run",
    ),
    Mutation(
        "generate quotes tokens/s however slow a few of its steps",
        f"{TOOLKIT}/generation.py",
        '"too_noisy": mean > NOISY_MEAN * p50,',
        '"too_noisy": False,',
        "tests/toolkit/test_generation.py -k few_very_slow_steps",
        None,
        within="step_figures",
    ),
    Mutation(
        "generate judges noise by p95, which misses a long run's few stalls",
        f"{TOOLKIT}/generation.py",
        '"too_noisy": mean > NOISY_MEAN * p50,',
        '"too_noisy": figures["p95_ms"] > 1.5 * p50,',
        "tests/toolkit/test_generation.py -k long_stalls",
        None,
        within="step_figures",
    ),
    Mutation(
        "generate clocks eager's steps as graph mode's",
        f"{TOOLKIT}/generation.py",
        'clocked_eager = clocked(eager_step(model), backend.device, steps["eager"])',
        'clocked_eager = clocked(eager_step(model), backend.device, steps["graph"])',
        "tests/toolkit/test_generation.py -k as_clocked",
        None,
        within="run",
    ),
    Mutation(
        "generate prints the greedy tokens, not the user's sampler's",
        f"{TOOLKIT}/generation.py",
        "loop(graphs, model, prompt, new_tokens, sample=checked(sample))",
        "loop(graphs, model, prompt, new_tokens, sample=checked(greedy))",
        "tests/toolkit/test_generation.py -k printed_tokens",
        None,
        within="run",
    ),
    Mutation(
        "generate's sampled run is not seeded",
        f"{TOOLKIT}/generation.py",
        "        torch.manual_seed(0)\n",
        "",
        "tests/toolkit/test_generation.py -k seed_0",
        None,
        within="run",
    ),
    Mutation(
        "bench prints a graph break's traceback",
        f"{TOOLKIT}/bench.py",
        "with graph_failures():",
        "if True:",
        "tests/toolkit/test_rehearsal.py -k 'graph_break and bench'",
        None,
        within="main",
    ),
    Mutation(
        "generate lets a sampler's wrong shape reach the model",
        f"{TOOLKIT}/generation.py",
        "            or token.shape != expected\n",
        "",
        "tests/toolkit/test_generation.py -k sampler_that_gives",
        None,
        within="sample_checked",
    ),
    Mutation(
        "generate compares graph mode's tokens with themselves",
        f"{TOOLKIT}/generation.py",
        '"matches_eager": torch.equal(graph, eager),',
        '"matches_eager": torch.equal(graph, graph),',
        "tests/toolkit/test_generation.py -k other_tokens_exits_1",
        None,
        within="run",
    ),
    Mutation(
        "the sample loop's prefill chooses greedily whatever the sampler",
        f"{PACKAGE}/generate.py",
        "token = sample(logits_of(model(prompt, input_pos)))",
        "token = logits_of(model(prompt, input_pos))[:, -1:].argmax(-1)",
        "tests/toolkit/test_generation.py -k sampler_it_is_given",
        None,
        within="generate",
    ),
    Mutation(
        "model.py may declare a cache of 0 rows",
        f"{TOOLKIT}/decode.py",
        "isinstance(value, bool) or value < 1:",
        "isinstance(value, bool) or value < 0:",
        "tests/toolkit/test_decode.py -k contract_error",
        None,
        within="limits",
    ),
    Mutation(
        "warm-up runs its graphs on the host",
        f"{TOOLKIT}/decode.py",
        "tokens = torch.zeros(size, 1, dtype=torch.long, device=self.device)",
        "tokens = torch.zeros(size, 1, dtype=torch.long)",
        "tests/toolkit/test_decode.py -k warm_up_captures",
        None,
        within="warm_up",
    ),
    # bench (decode): every capture size, prefill apart, every timed call from a state put back.
    Mutation(
        "bench (decode) skips the largest capture size",
        f"{TOOLKIT}/bench.py",
        "for size in graphs.limits.capture_sizes:",
        "for size in graphs.limits.capture_sizes[:-1]:",
        "tests/toolkit/test_bench.py -k timed_in_turn",
        None,
        within="measure_sizes",
    ),
    Mutation(
        "bench (decode) times prefill within each decode step",
        f"{TOOLKIT}/bench.py",
        '{"eager": model, "graph": graphs},',
        '{"eager": lambda *step: (prefill(model, batch), model(*step)), "graph": lambda *step: (prefill(model, batch), graphs(*step))},',
        "tests/toolkit/test_bench.py -k 'timed_in_turn or one_token_after'",
        None,
        within="measure_sizes",
    ),
    Mutation(
        "bench (decode) counts prefill in tokens/s",
        f"{TOOLKIT}/bench.py",
        'mode: run.size * 1e3 / step[mode]["mean_ms"] for mode',
        'mode: run.size * 1e3 / (step[mode]["mean_ms"] + statistics.fmean(prefill_ms)) for mode',
        "tests/toolkit/test_bench.py -k apart_from_the_per_token",
        None,
        within="per_size",
    ),
    Mutation(
        "bench (decode) counts one sequence a step, not the batch",
        f"{TOOLKIT}/bench.py",
        'mode: run.size * 1e3 / step[mode]["mean_ms"] for mode',
        'mode: 1e3 / step[mode]["mean_ms"] for mode',
        "tests/toolkit/test_bench.py -k apart_from_the_per_token",
        None,
        within="per_size",
    ),
    Mutation(
        "bench (decode) starts each step from the cache the last step wrote",
        f"{TOOLKIT}/bench.py",
        "before=put_back(model, save(model), device),",
        "before=lambda: None,",
        "tests/toolkit/test_bench.py -k put_back",
        None,
        within="measure_sizes",
    ),
    Mutation(
        "bench (decode) starts each prefill from the cache the last one wrote",
        f"{TOOLKIT}/bench.py",
        "before=put_back(model, start, device),",
        "before=lambda: None,",
        "tests/toolkit/test_bench.py -k put_back",
        None,
        within="measure_sizes",
    ),
    Mutation(
        "bench (decode) misses a compile after warm-up",
        f"{TOOLKIT}/bench.py",
        '"recompiles": recompiles,',
        '"recompiles": [],',
        "tests/toolkit/test_bench.py -k real_recompile_while_timing_a_decode_step",
        None,
        within="summarize_sizes",
    ),
    Mutation(
        "doctor (decode) leaves the decode contract unchecked",
        f"{TOOLKIT}/doctor.py",
        "    check_decode,\n",
        "",
        "tests/toolkit/test_doctor.py -k decode_contract",
        None,
    ),
    Mutation(
        "doctor (decode) lets a prompt the cache cannot follow pass as runnable",
        f"{TOOLKIT}/doctor.py",
        '        fix = f"raise MAX_SEQ_LEN above {length}, or shorten the prompt"\n        return Check("decode", "FAIL", detail, fix, blocking=True)',
        '        fix = f"raise MAX_SEQ_LEN above {length}, or shorten the prompt"\n        return Check("decode", "FAIL", detail, fix)',
        "tests/toolkit/test_doctor.py -k cache_cannot_follow",
        None,
        within="decode_contract",
    ),
    # profile: the ranges, the profiler's steps, where the trace goes, one model per mode.
    Mutation(
        "profile swaps the steps between the ranges",
        f"{TOOLKIT}/profile.py",
        'RANGES = {"eager": "eager step", "graph": "graph step"}',
        'RANGES = {"eager": "graph step", "graph": "eager step"}',
        "tests/toolkit/test_profile.py -k graph_steps_run_compiled_code",
        None,
    ),
    Mutation(
        "profile never calls prof.step() after a step",
        f"{TOOLKIT}/profile.py",
        "                prof.step()\n",
        "",
        "tests/toolkit/test_profile.py -k profiler_step_of_its_own",
        None,
        within="record",
    ),
    Mutation(
        "profile writes the CPU trace to the working directory",
        f"{TOOLKIT}/profile.py",
        "on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out), worker_name=worker),",
        'on_trace_ready=torch.profiler.tensorboard_trace_handler(".", worker_name=worker),',
        "tests/toolkit/test_profile.py -k output_folder",
        None,
        within="cpu_profiler",
    ),
    Mutation(
        "profile runs graph mode on eager's model",
        f"{TOOLKIT}/profile.py",
        "graph = graph_of(seeded_model(backend)[0], backend)",
        "graph = graph_of(eager, backend)",
        "tests/toolkit/test_profile.py -k model_of_its_own",
        None,
        within="workload",
    ),
    Mutation(
        "profile hands torch_npu's handler a Path, which it resets to the working directory",
        f"{TOOLKIT}/profile.py",
        "on_trace_ready=profiler.tensorboard_trace_handler(str(out), worker_name=worker),",
        "on_trace_ready=profiler.tensorboard_trace_handler(out, worker_name=worker),",
        "tests/test_simulated_npu.py -k npu_profile_writes_into",
        within="npu_profiler",
    ),
    Mutation(
        "profile's NPU schedule records no warm-up step",
        f"{TOOLKIT}/profile.py",
        "schedule=profiler.schedule(wait=0, warmup=1, active=active, repeat=1),",
        "schedule=profiler.schedule(wait=0, warmup=0, active=active, repeat=1),",
        "tests/test_simulated_npu.py -k npu_profile_schedule",
        within="npu_profiler",
    ),
    Mutation(
        "each rank of profile writes under the same worker name",
        f"{TOOLKIT}/profile.py",
        'worker=f"rank{ranks.rank}" if project.TENSOR_PARALLEL else None,',
        "worker=None,",
        "tests/test_profile.py -k torchrun_ranks_each_write",
        TENSOR_PARALLEL,
        within="run",
    ),
    Mutation(
        "profile's NPU profiler asks for AI Core metrics at Level0, which torch_npu resets",
        f"{TOOLKIT}/profile.py",
        "            aic_metrics=profiler.AiCMetrics.AiCoreNone,\n",
        "",
        "tests/toolkit/test_profile.py -k ascends_guide",
        None,
        within="npu_profiler",
    ),
    Mutation(
        "profile leaves out an operator that starts with its step",
        f"{TOOLKIT}/profile.py",
        "and outer.start <= inner.start",
        "and outer.start < inner.start",
        "tests/toolkit/test_profile.py -k start_or_end_with_their_step",
        None,
        within="within",
    ),
    Mutation(
        "profile's summary drops the device rows on an NPU",
        f"{TOOLKIT}/profile.py",
        'if not on_npu and key in {"device_ms", "kernels", *MARKERS}:',
        'if key in {"device_ms", "kernels", *MARKERS}:',
        "tests/toolkit/test_profile.py -k adds_device_time_kernels",
        None,
        within="render",
    ),
    # bench: how a call is timed.
    Mutation(
        "bench times the calls of every iteration in the same order",
        f"{TOOLKIT}/bench.py",
        "for name, fn in pair if step % 2 == 0 else reversed(pair):",
        "for name, fn in pair:",
        "tests/toolkit/test_bench.py -k each_call_in_turn",
        None,
        within="measure",
    ),
    Mutation(
        "bench leaves garbage collection off after timing",
        f"{TOOLKIT}/bench.py",
        "if gc_was_enabled:\n            gc.enable()",
        "pass",
        "tests/toolkit/test_bench.py -k garbage_collection",
        None,
        within="measure",
    ),
    Mutation(
        "bench never records an NPU call's start event",
        f"{TOOLKIT}/bench.py",
        "    if events:\n        events[0].record()\n",
        "",
        "tests/toolkit/test_bench.py -k timed_on_the_host_and_on_the_device",
        None,
        within="time_call",
    ),
    Mutation(
        "bench compiles graph mode with dynamic shapes",
        f"{TOOLKIT}/bench.py",
        "dynamic=False,",
        "dynamic=None,",
        "tests/toolkit/test_bench.py -k static_graph",
        None,
        within="graph_of",
    ),
    # Decode with tensor parallelism: each rank's cache holds only the heads the rank computes.
    Mutation(
        "the cache keeps every head on every rank",
        f"{TOOLKIT}/parallel.py",
        "tensor.data = self.local(tensor.data, rank, size)",
        "tensor.data = tensor.data",
        "tests/toolkit/test_parallel.py -k own_heads",
        None,
        within="_apply",
    ),
    Mutation(
        "the cache keeps another rank's heads",
        f"{TOOLKIT}/parallel.py",
        "return tensor.chunk(size, self.dim)[rank].clone()",
        "return tensor.chunk(size, self.dim)[size - 1 - rank].clone()",
        "tests/toolkit/test_parallel.py -k own_heads",
        None,
        within="local",
    ),
    Mutation(
        "a cache whose heads the ranks cannot split is accepted",
        f"{TOOLKIT}/parallel.py",
        "heads = style.heads(module)",
        "heads = {}",
        "tests/toolkit/test_parallel.py -k heads_the_ranks_cannot_split",
        None,
        within="sharded_sizes",
    ),
    Mutation(
        "the sample's plan leaves the KV cache whole",
        f"{PACKAGE}/model.py",
        '        "layers.*.kv_cache": KVCacheParallel(),\n',
        "",
        "tests/toolkit/test_parallel.py -k rehearsal",
        None,
    ),
    Mutation(
        "a rehearsal that fails on a whole cache does not name the entry to add",
        f"{TOOLKIT}/parallel.py",
        "if not torch.equal(tensor, start[path]) and not path.startswith(tuple(sharded))",
        "if False",
        "tests/toolkit/test_parallel.py -k leaves_the_cache_whole",
        None,
        within="unsharded_caches",
    ),
    Mutation(
        "generate under torchrun: every rank prints",
        f"{TOOLKIT}/generation.py",
        '        if not ranks.is_first:\n            return 0 if result["matches_eager"] else 1\n',
        "",
        "tests/test_tensor_parallel.py -k two_ranks_generate",
        DECODE_TENSOR_PARALLEL,
        within="main",
    ),
    Mutation(
        "the project's two-rank tests fail a decode plan that shards no KV cache",
        f"{PROJECT}/tests/test_tensor_parallel.py",
        "    if not sharded:\n",
        '    assert sharded, "parallel_plan() shards no cache"\n    if not sharded:\n',
        "tests/test_tensor_parallel.py -k shards_no_cache",
        within="test_each_ranks_cache_holds_only_its_share_of_the_heads",
    ),
    Mutation(
        "the README's StaticCache wrapper builds a model whose positions stop short of the cache",
        "tests/own_models/static_cache_llama.py",
        "if positions is not None and positions < MAX_SEQ_LEN:",
        "if positions is not None and positions < 0:",
        "tests/test_own_models.py -k fewer_positions",
        within="cache_config",
    ),
    Mutation(
        "check compares only each rung's first call, and passes a graph that goes wrong on replay",
        f"{TOOLKIT}/check.py",
        "elif differ := (",
        "elif False and (",
        "tests/toolkit/test_check.py -k second_call",
        within="run_rung",
    ),
    Mutation(
        "a difference where eager has 0 reads as no relative difference",
        f"{TOOLKIT}/contract.py",
        "relative = difference[beyond] / want[beyond].abs()",
        "relative = (difference[beyond] / want[beyond].abs()).nan_to_num(posinf=0.0)",
        "tests/toolkit/test_contract.py -k infinitely_far",
        within="value_mismatch",
    ),
    Mutation(
        "check offers TOLERANCES for a difference far beyond rounding",
        f"{TOOLKIT}/check.py",
        "return bool(mismatch.rtol) and mismatch.max_rel <= ROUNDING_REACH * mismatch.rtol",
        "return True",
        "tests/toolkit/test_check.py -k differing_output_is_one_finding",
        within="near_rounding",
    ),
    Mutation(
        "the rehearsal passes a plan that leaves the model's output split across ranks",
        f"{TOOLKIT}/parallel.py",
        "if differ := shape_differences(output, whole):",
        "if False:",
        "tests/toolkit/test_parallel.py -k last_layer_left_split",
        within="rehearse",
    ),
    Mutation(
        "a counter on the model's class or in its module's globals is out of every tool's sight",
        f"{TOOLKIT}/state.py",
        "        **dict(shared_numbers(model)),\n",
        "",
        "tests/toolkit/test_state.py -k 'counter_on_the_models_class or counter_in_the_globals'",
        within="sighting",
    ),
    Mutation(
        "a step that recompiles to Dynamo's limit ends generate in Dynamo's traceback",
        f"{TOOLKIT}/rehearsal.py",
        "except FailOnRecompileLimitHit as error:",
        "except ZeroDivisionError as error:",
        "tests/toolkit/test_rehearsal.py -k recompiles_to_dynamos_limit",
        within="graph_failures",
    ),
    Mutation(
        "export tells a user to rename the toolkit's name that clashes with theirs",
        f"{TOOLKIT}/bundle.py",
        "if len(yours) == 1:",
        "if False:",
        "tests/toolkit/test_export_bundle.py -k yours_to_rename",
        within="renaming",
    ),
    Mutation(
        "a tensor-parallel bake's next steps start the MRE as one process",
        "hooks/post_gen_project.py",
        '        mre = f"torchrun --nproc-per-node 2 -m {package}.mre"\n',
        "",
        "tests/test_hooks.py -k tensor_parallel_bake_says_so",
        within="next_steps",
    ),
    Mutation(
        "cache_compile's folder is keyed on str(model) alone, and loads a graph of the old code",
        f"{TOOLKIT}/compile_cache.py",
        'digest.update(Path(file).name.encode() + b"\\0" + Path(file).read_bytes())',
        "continue",
        "tests/toolkit/test_compile_cache.py -k follows_the_models_code",
        within="code_fingerprint",
    ),
    Mutation(
        "CachedModel writes every version of the code into one cache folder",
        f"{TOOLKIT}/compile_cache.py",
        'return None if cache_dir is None else os.path.join(cache_dir, f"code_{folder_key(model)}")',
        "return cache_dir",
        "tests/toolkit/test_compile_cache.py -k 'follows_the_models_code or method_shapes_folder'",
        within="keyed",
    ),
    Mutation(
        "cache_compile's folder ignores the torch_npu and CANN releases, and loads another release's graph",
        f"{TOOLKIT}/compile_cache.py",
        'key = f"{code_fingerprint(model)}\\n{npu_versions()}"',
        "key = code_fingerprint(model)",
        "tests/toolkit/test_compile_cache.py -k follows_torch_npu_and_cann",
        within="folder_key",
    ),
    Mutation(
        "a failed MRE ends in Dynamo's traceback with no pointer to check",
        f"{TOOLKIT}/report.py",
        "point_to_check(error)",
        "pass",
        "tests/toolkit/test_report.py -k pointer_to_check",
        within="first_call",
    ),
    Mutation(
        "generate under torchrun: ranks start from different seeds",
        f"{TOOLKIT}/generation.py",
        "torch.manual_seed(0)",
        "torch.manual_seed(0 if ranks is None else ranks.rank)",
        "tests/test_tensor_parallel.py -k 'two_ranks_generate or share_of'",
        DECODE_TENSOR_PARALLEL,
        within="build",
    ),
    # Decode with custom_op=in_place: the custom op is the KV-cache update, in both styles.
    Mutation(
        "the torch.library cache update writes one position later",
        f"{PACKAGE}/custom_op.py",
        "cache[: update.shape[0], :, input_pos] = update",
        "cache[: update.shape[0], :, input_pos + 1] = update",
        "tests/test_custom_op.py -k known_positions",
        DECODE_TORCH_LIBRARY_IN_PLACE,
    ),
    Mutation(
        "the torch.library cache update writes every row, not rows [:batch]",
        f"{PACKAGE}/custom_op.py",
        "cache[: update.shape[0], :, input_pos] = update",
        "cache[:, :, input_pos] = update[:1]",
        "tests/test_custom_op.py -k known_positions",
        DECODE_TORCH_LIBRARY_IN_PLACE,
    ),
    Mutation(
        "the torch.library cache update does not declare the cache mutated",
        f"{PACKAGE}/custom_op.py",
        'mutates_args=("cache",)',
        "mutates_args=()",
        "tests/test_custom_op.py -k opcheck",
        DECODE_TORCH_LIBRARY_IN_PLACE,
    ),
    Mutation(
        "the torch.library cache update returns the cache",
        f"{PACKAGE}/custom_op.py",
        ") -> None:\n    reference(cache, input_pos, update)",
        ") -> torch.Tensor:\n    reference(cache, input_pos, update)\n    return cache",
        "tests/test_custom_op.py -k returns_nothing",
        DECODE_TORCH_LIBRARY_IN_PLACE,
    ),
    Mutation(
        "the torch.library cache update keeps only the last position (prefill loses the rest)",
        f"{PACKAGE}/custom_op.py",
        "cache[: update.shape[0], :, input_pos] = update",
        "cache[: update.shape[0], :, input_pos[-1:]] = update[:, :, -1:]",
        "tests/test_generate.py -k recomputing",
        DECODE_TORCH_LIBRARY_IN_PLACE,
    ),
    Mutation(
        "the op-plugin cache update writes one position later",
        f"{PACKAGE}/op_reference.py",
        "cache[: update.shape[0], :, input_pos] = update",
        "cache[: update.shape[0], :, input_pos + 1] = update",
        "tests/test_custom_op.py -k known_positions",
        DECODE_OP_PLUGIN_IN_PLACE,
    ),
    Mutation(
        "the op-plugin cache update's Meta function is not registered",
        f"{PACKAGE}/meta_registrations.py",
        '@impl(m, "{{ cookiecutter.op_name }}")\n',
        "",
        "tests/test_custom_op.py -k meta",
        DECODE_OP_PLUGIN_IN_PLACE,
    ),
    Mutation(
        "the op-plugin cache update returns the cache, as scatter_update_ does",
        f"{PACKAGE}/op_plugin_functions.yaml",
        "(Tensor(a!) cache, Tensor input_pos, Tensor update) -> ()",
        "(Tensor(a!) cache, Tensor input_pos, Tensor update) -> Tensor(a!)",
        "tests/test_custom_op.py -k project_schema",
        DECODE_OP_PLUGIN_IN_PLACE,
    ),
    # Found by `nox -s mutation_score`: survivors that new tests kill.
    Mutation(
        "cache_compile on an NPU never gets the cache folder",
        f"{TOOLKIT}/compile_cache.py",
        "method, dynamic=dynamic, cache_dir=cache_dir, options=backend.options",
        "method, dynamic=dynamic, options=backend.options",
        "tests/toolkit/test_compile_cache.py -k on_an_npu",
        None,
        within="cache_compile",
    ),
    Mutation(
        "a SoC known not to capture is called unknown",
        f"{TOOLKIT}/backend.py",
        "if soc in NO_CAPTURE_SOCS or soc.startswith(NO_CAPTURE_PREFIXES):",
        "if soc in NO_CAPTURE_SOCS and soc.startswith(NO_CAPTURE_PREFIXES):",
        "tests/toolkit/test_backend.py -k refused_soc_falls",
        None,
        within="capture_refusal",
    ),
    Mutation(
        "a 310P is said to capture no aclgraphs, though torch_npu captures there",
        f"{TOOLKIT}/backend.py",
        "if soc.startswith(NO_NPUGRAPH_EX_PREFIX):",
        "if False:",
        "tests/toolkit/test_backend.py -k 310p",
        None,
        within="capture_refusal",
    ),
    Mutation(
        "the preflight reports aclop switches where npugraph_ex does not run",
        f"{TOOLKIT}/backend.py",
        "    if not npu_status()[0]:\n        return []\n",
        "",
        "tests/toolkit/test_backend.py -k off_the_npu_no_aclop",
        None,
        within="aclop_switches",
    ),
    Mutation(
        "an ALLOW_INTERNAL_FORMAT option never set is read as off",
        f"{TOOLKIT}/backend.py",
        'return (value.decode() if value is not None else "enable") != "disable"',
        'return (value.decode() if value is not None else "disable") != "disable"',
        "tests/toolkit/test_backend.py -k read_as_torch_npu_reads_it",
        None,
        within="internal_format_on",
    ),
    Mutation(
        "JIT compile set on is missed where CANN's default is off",
        f"{TOOLKIT}/backend.py",
        'for option in ("jitCompile", "jitCompileInit"):',
        'for option in ("jitCompileInit", "jitCompile"):',
        "tests/toolkit/test_backend.py -k jit_compile_set_on",
        None,
        within="jit_compile_on",
    ),
    Mutation(
        "the doctor passes an aclop switch that is on",
        f"{TOOLKIT}/doctor.py",
        'lines.append(Check(switch.code, "FAIL", switch.on, switch.fix))',
        'lines.append(Check(switch.code, "OK", switch.on, switch.fix))',
        "tests/toolkit/test_doctor_checks.py -k aclop_switch_on_fails",
        None,
        within="check_aclop_switches",
    ),
    Mutation(
        "the doctor advises HCCL's AIV mode without its caveat",
        f"{TOOLKIT}/doctor.py",
        'f"parallelism, On an NPU); {AIV_CAVEAT}",',
        '"parallelism, On an NPU)",',
        "tests/toolkit/test_doctor.py -k aiv_advised",
        None,
        within="hccl_mode",
    ),
    Mutation(
        "bench's p95 is the next quantile up",
        f"{TOOLKIT}/bench.py",
        "round(q * 100) - 1]",
        "round(q * 100)]",
        "tests/toolkit/test_bench.py -k latency",
        None,
        within="quantile",
    ),
    Mutation(
        "doctor counts an NPU that torch_npu's runtime cannot open",
        f"{TOOLKIT}/doctor.py",
        "count = torch.npu.device_count() if torch.npu.is_available() else 0",
        "count = torch.npu.device_count()",
        "tests/toolkit/test_doctor_checks.py -k runtime_cannot_open",
        None,
        within="check_torch_npu",
    ),
    Mutation(
        "doctor keeps the .* of torch_npu's torch requirement and fails a matching pair",
        f"{TOOLKIT}/doctor.py",
        "return base_version(match.group(1))",
        "return match.group(1)",
        "tests/toolkit/test_doctor_checks.py -k matching_pair",
        None,
        within="torch_npu_wants",
    ),
    Mutation(
        "doctor shows a fix under OK lines",
        f"{TOOLKIT}/doctor.py",
        'if check.fix and check.status != "OK":',
        "if check.fix:",
        "tests/toolkit/test_doctor_checks.py -k aligns_names",
        None,
        within="render",
    ),
    Mutation(
        "doctor's packages line names every CANN package, present or not",
        f"{TOOLKIT}/doctor.py",
        'packages = " and ".join(missing)',
        'packages = " and ".join(CANN_PARTS)',
        "tests/toolkit/test_doctor_checks.py -k runtime_names_that_package_alone",
        None,
        within="check_cann",
    ),
    Mutation(
        "doctor passes a CANN variable naming a missing folder when torch_npu is not installed",
        f"{TOOLKIT}/doctor.py",
        "if value and not Path(value).exists():",
        "if needed and value and not Path(value).exists():",
        "tests/toolkit/test_doctor_checks.py -k missing_folder_fails_without_torch_npu",
        None,
        within="check_cann",
    ),
    Mutation(
        "doctor crashes on a forced backend torch does not know",
        f"{TOOLKIT}/doctor.py",
        "except (RuntimeError, ValueError) as error:",
        "except RuntimeError as error:",
        "tests/toolkit/test_doctor_checks.py -k torch_does_not_know",
        None,
        within="check_choice",
    ),
    Mutation(
        "doctor leaves out the check of what the MRE imports",
        f"{TOOLKIT}/doctor.py",
        "    check_mre_imports,\n",
        "",
        "tests/toolkit/test_doctor_checks.py -k every_check_s_line",
        None,
    ),
    Mutation(
        "a missing libascendcl.so is not reported as CANN not sourced",
        f"{TOOLKIT}/backend.py",
        'if "libhccl" in first_line or "libascend" in first_line or "ASCEND" in first_line:',
        'if "libhccl" in first_line:',
        "tests/toolkit/test_backend.py -k import_failure_is_one_line",
        None,
        within="import_diagnosis",
    ),
    Mutation(
        "the command line's usage names the script, not python -m <package>",
        f"{PACKAGE}/__main__.py",
        '        prog=f"python -m {__package__}",\n',
        "",
        "tests/test_project_cli.py -k 'help_lists and forward'",
        None,
        within="main",
    ),
    Mutation(
        "pre-gen hook refuses a cache dir with a trailing slash",
        "hooks/answer_rules.py",
        'if PurePosixPath(path).as_posix() != path.rstrip("/"):',
        'if PurePosixPath(path).as_posix() != path.lstrip("/"):',
        "tests/test_hooks.py -k edge_of",
        within="check_cache_dir",
    ),
    Mutation(
        "the answers are checked only once the project is written, behind cookiecutter's traceback",
        "cookiecutter.json",
        '  "__refusal": "{{ cookiecutter | refuse_bad_answers }}",\n',
        "",
        "tests/test_hooks.py -k prints_a_refusal_alone",
    ),
    Mutation(
        "a refusal's command to bake again pins a namespace derived from the refused package name",
        "hooks/answer_rules.py",
        '        and ("{{" not in str(defaults[name]) or name in refused)\n',
        "",
        "tests/test_hooks.py -k repeats_the_answers_given",
        within="refusal_message",
    ),
    Mutation(
        "a replay file's bad answer is baked",
        "hooks/post_gen_project.py",
        ":{{ cookiecutter | refuse_bad_answers }}",
        ".",
        "tests/test_hooks.py -k replay_file",
    ),
    # copier: the same project, only the questions that matter, refused as typed, updates.
    Mutation(
        "copier asks cache_dir in npugraph_ex mode",
        "hooks/answer_rules.py",
        '"cache_dir": lambda answers: answers["mode"] == "cache_compile",',
        '"cache_dir": lambda answers: True,',
        "tests/test_copier.py -k asked_only_when",
    ),
    Mutation(
        "copier never asks an op's name",
        "hooks/answer_rules.py",
        '"op_name": lambda answers: answers["custom_op"] != "none",',
        '"op_name": lambda answers: answers["custom_op"] == "none",',
        "tests/test_copier.py -k asked_only_when",
    ),
    Mutation(
        "copier's validators refuse nothing",
        "copier_support/hook_rules.py",
        "return rules.refusal(variable, answers_in(context))",
        'return ""',
        "tests/test_copier.py -k refuses_as_typed",
        within="refusal",
    ),
    Mutation(
        "copier offers a default the hook refuses, and stops on it",
        "copier_support/hook_rules.py",
        "if rules.asked(variable, answers) and rules.refusal(variable, answers):",
        "if False:",
        "tests/test_copier.py -k default_the_hook",
        within="offered",
    ),
    Mutation(
        "copier asks parallel after the input shape it constrains",
        "copier.yml",
        PARALLEL_QUESTION + MODEL_CLASS_AND_INPUT_SHAPE,
        MODEL_CLASS_AND_INPUT_SHAPE + PARALLEL_QUESTION,
        "tests/test_copier.py -k refuses_as_typed",
    ),
    Mutation(
        "copier.yml edited by hand",
        "copier.yml",
        'help: "Author email"',
        'help: "Your email"',
        "tests/test_copier.py -k cookiecutter_json_written_out",
    ),
    Mutation(
        "copier writes what the post-generation hook prunes",
        "copier.yml",
        '_exclude:\n  - "{{ pruned_paths() }}"',
        "_exclude: []",
        "tests/test_copier.py -k bakes_the_tree",
    ),
    Mutation(
        "copier renders only .jinja files",
        "copier.yml",
        '_templates_suffix: ""\n',
        "",
        "tests/test_copier.py -k bakes_the_tree",
    ),
    Mutation(
        "copier's namespace gets cookiecutter's derived names wrong",
        "copier_support/cookiecutter_namespace.py",
        "values[name] = template.render(cookiecutter=values)",
        "values[name] = template.render(cookiecutter=values).strip('_')",
        "tests/test_copier.py -k bakes_the_tree",
        within="values",
    ),
    Mutation(
        "copier records no answers for copier update",
        f"{PROJECT}/{{{{cookiecutter.__answers}}}}",
        "{{ _copier_answers | to_nice_yaml -}}",
        "{}",
        "tests/test_updates.py -k copier_update_brings",
    ),
    # Issue 29, item 3: check runs the backend the MRE runs, whatever chose it.
    Mutation(
        "check never runs a backend forced for the MRE",
        f"{TOOLKIT}/check.py",
        "order = [*rungs, *([mine] if mine not in rungs else [])]",
        "order = list(rungs)",
        "tests/toolkit/test_check.py -k forced_for_the_mre",
        within="climb",
    ),
    Mutation(
        "check's rung of a forced backend does not say what forced it",
        f"{TOOLKIT}/check.py",
        'return f"{backend.name} ({backend.reason})", backend.name, backend.options',
        "return backend.name, backend.name, backend.options",
        "tests/toolkit/test_check.py -k backend_the_mre_reports",
        within="mre_rung",
    ),
    Mutation(
        "check runs a forced backend the ladder climbed again",
        f"{TOOLKIT}/check.py",
        "if rung[1:] == (backend.name, backend.options):",
        "if False:",
        "tests/toolkit/test_check.py -k not_run_again",
        within="mre_rung",
    ),
    Mutation(
        "check ignores a forced backend that cannot run",
        f"{TOOLKIT}/check.py",
        'return refused(result, found, f"the MRE cannot choose its backend',
        'return result or refused(result, found, f"the MRE cannot choose its backend',
        "tests/toolkit/test_check.py -k cannot_run_stops",
        within="check",
    ),
    # Issue 29, item 4: every list a tool prints is complete (planted: cut to its first entry).
    Mutation(
        "check lists the first graph break only",
        f"{TOOLKIT}/check.py",
        "for reason in explanation.break_reasons:",
        "for reason in explanation.break_reasons[:1]:",
        "tests/toolkit/test_check.py -k every_graph_break",
        within="graph_breaks",
    ),
    Mutation(
        "check keeps the first of its graph-break findings",
        f"{TOOLKIT}/check.py",
        "return findings",
        "return findings[:1]",
        "tests/toolkit/test_check.py -k 'every_graph_break or every_item'",
        within="graph_breaks",
    ),
    Mutation(
        "check warns of the first non-tensor input only",
        f"{TOOLKIT}/check.py",
        "for path, value in constant_inputs(inputs):",
        "for path, value in constant_inputs(inputs)[:1]:",
        "tests/toolkit/test_check.py -k every_non_tensor_input",
        within="constants_baked_in",
    ),
    Mutation(
        "check climbs the first rung only",
        f"{TOOLKIT}/check.py",
        "for rung in ladder:",
        "for rung in ladder[:1]:",
        "tests/toolkit/test_check.py -k every_rung_that_recompiles",
        within="mre_rung",
    ),
    Mutation(
        "check keeps the first leaf that differs",
        f"{TOOLKIT}/check.py",
        "mismatches=differ,",
        "mismatches=differ[:1],",
        "tests/toolkit/test_check.py -k every_differing_leaf",
        within="differs",
    ),
    Mutation(
        "check's report shows the first of the other leaves only",
        f"{TOOLKIT}/check.py",
        "finding.mismatches[1:]]",
        "finding.mismatches[1:2]]",
        "tests/toolkit/test_check.py -k report_lays_out",
        within="render",
    ),
    Mutation(
        "check names the first non-tensor output leaf only",
        f"{TOOLKIT}/check.py",
        "the output holds {', '.join(leaves)}",
        "the output holds {', '.join(leaves[:1])}",
        "tests/toolkit/test_check.py -k problems_and_warnings",
        within="check",
    ),
    Mutation(
        "the state comparison keeps the first state tensor that differs",
        f"{TOOLKIT}/state.py",
        "return found",
        "return found[:1]",
        "tests/toolkit/test_check.py -k forced_for_the_mre",
        within="state_mismatches",
    ),
    Mutation(
        "the output comparison keeps the first leaf that differs",
        f"{TOOLKIT}/contract.py",
        "return found",
        "return found[:1]",
        "tests/toolkit/test_check.py -k every_differing_leaf",
        within="mismatches",
    ),
    Mutation(
        "bench reports the first output that differs only",
        f"{TOOLKIT}/bench.py",
        'return "\\n".join(map(str, found)) or None',
        'return "\\n".join(map(str, found[:1])) or None',
        "tests/toolkit/test_bench.py -k every_difference_is_reported",
        within="compare_outputs",
    ),
    Mutation(
        "bench names the first other capture size that differs only",
        f"{TOOLKIT}/bench.py",
        "(batch {', '.join(map(str, others))} too)",
        "(batch {', '.join(map(str, others[:1]))} too)",
        "tests/toolkit/test_bench.py -k decode_step_that_differs",
        within="check_sizes",
    ),
    Mutation(
        "bench names the first counter that moved only",
        f"{TOOLKIT}/bench.py",
        "return [k for k in keys if run.counters_before.get(k) != run.counters_after.get(k)]",
        "return [k for k in keys if run.counters_before.get(k) != run.counters_after.get(k)][:1]",
        "tests/toolkit/test_bench.py -k recompile_while_timing",
        within="changed",
    ),
    Mutation(
        "bench's table names the first compile after warm-up only",
        f"{TOOLKIT}/bench.py",
        'warnings = list(result["recompiles"])',
        'warnings = list(result["recompiles"][:1])',
        "tests/toolkit/test_bench.py -k compile_after_warm_up_is_reported",
        within="recompiles_text",
    ),
    Mutation(
        "bench warns of the first compile after warm-up only",
        f"{TOOLKIT}/bench.py",
        'for reason in result["recompiles"]:',
        'for reason in result["recompiles"][:1]:',
        "tests/toolkit/test_bench.py -k every_compile_after_warm_up",
        within="main",
    ),
    Mutation(
        "bench's table shows the first capture size only",
        f"{TOOLKIT}/bench.py",
        'for size in result["sizes"]:',
        'for size in result["sizes"][:1]:',
        "tests/toolkit/test_bench.py -k capture_sizes_figures",
        within="size_rows",
    ),
    Mutation(
        "bench keeps the first capture size's figures only",
        f"{TOOLKIT}/bench.py",
        "sizes = [per_size(run) for run in runs]",
        "sizes = [per_size(run) for run in runs[:1]]",
        "tests/toolkit/test_bench.py -k capture_sizes_figures",
        within="summarize_sizes",
    ),
    Mutation(
        "bench merges the first rank's recompiles only",
        f"{TOOLKIT}/bench.py",
        '{name for result in results for name in result["recompiled"]}',
        '{name for result in results[:1] for name in result["recompiled"]}',
        "tests/toolkit/test_bench.py -k slowest_rank",
        within="slowest_rank",
    ),
    Mutation(
        "bench merges the first rank's compiles after warm-up only",
        f"{TOOLKIT}/bench.py",
        '[reason for result in results for reason in result["recompiles"]]',
        '[reason for result in results[:1] for reason in result["recompiles"]]',
        "tests/toolkit/test_bench.py -k slowest_rank",
        within="slowest_rank",
    ),
    Mutation(
        "bench names the first rank that differs only",
        f"{TOOLKIT}/bench.py",
        "{', '.join(map(str, failed))}\"",
        "{', '.join(map(str, failed[:1]))}\"",
        "tests/toolkit/test_bench.py -k every_rank_it_happened_on",
        within="report_mismatch",
    ),
    Mutation(
        "generate names the first rank that differs only",
        f"{TOOLKIT}/generation.py",
        "where = f\"rank{'s' * (len(ranks) > 1)} {', '.join(map(str, ranks))}\"",
        "where = f\"rank{'s' * (len(ranks) > 1)} {', '.join(map(str, ranks[:1]))}\"",
        "tests/toolkit/test_generation.py -k every_rank_that_chose",
        within="difference",
    ),
    Mutation(
        "generate's ranks that differ stop at the first two",
        f"{TOOLKIT}/generation.py",
        "for rank, result in enumerate(results)",
        "for rank, result in enumerate(results[:2])",
        "tests/toolkit/test_generation.py -k every_rank_that_chose",
        within="across_ranks",
    ),
    Mutation(
        "generate gives the first reason a request cannot run only",
        f"{TOOLKIT}/decode.py",
        "return found",
        "return found[:1]",
        "tests/toolkit/test_generation.py -k every_reason_a_request",
        within="refusals",
    ),
    Mutation(
        "generate prints the first line of its refusal only",
        f"{TOOLKIT}/generation.py",
        "self.reasons = reasons",
        "self.reasons = reasons[:1]",
        "tests/toolkit/test_generation.py -k every_reason_a_request",
        within="__init__",
    ),
    Mutation(
        "generate crashes on a batch below 1",
        f"{TOOLKIT}/generation.py",
        "if batch is None or batch < 1:",
        "if batch is None:",
        "tests/toolkit/test_generation.py -k batch_of_no_sequence",
        within="prompt_of",
    ),
    Mutation(
        "generate's report shows the first sequence only",
        f"{TOOLKIT}/generation.py",
        'for index, row in enumerate(result["tokens"])',
        'for index, row in enumerate(result["tokens"][:1])',
        "tests/toolkit/test_generation.py -k lays_out_each_line",
        within="render",
    ),
    Mutation(
        "generate's report shows the first recompile only",
        f"{TOOLKIT}/generation.py",
        '("recompiles", "; ".join(result["recompiles"]) or "none")',
        '("recompiles", "; ".join(result["recompiles"][:1]) or "none")',
        "tests/toolkit/test_generation.py -k lays_out_each_line",
        within="render",
    ),
    Mutation(
        "the doctor names one cache file and hides how many more",
        f"{TOOLKIT}/doctor.py",
        'more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""',
        'more = ""',
        "tests/toolkit/test_doctor.py -k counted",
        within="first_of",
    ),
    Mutation(
        "the doctor names the first name model.py lacks only",
        f"{TOOLKIT}/doctor.py",
        'if missing := [name for name in contract if not hasattr(loaded["model"], name)]:',
        'if missing := [name for name in contract if not hasattr(loaded["model"], name)][:1]:',
        "tests/toolkit/test_doctor_checks.py -k every_name_the_mre",
        within="check_mre_imports",
    ),
    Mutation(
        "the doctor's verdict names the first blocking check only",
        f"{TOOLKIT}/doctor.py",
        "fix {', '.join(failed)} first",
        "fix {', '.join(failed[:1])} first",
        "tests/toolkit/test_doctor_checks.py -k every_blocking_failure",
        within="verdict",
    ),
    Mutation(
        "the doctor warns of the first constant input only",
        f"{TOOLKIT}/doctor.py",
        "notes = [constant_note(path, value) for path, value in constant_inputs(inputs)]",
        "notes = [constant_note(path, value) for path, value in constant_inputs(inputs)[:1]]",
        "tests/toolkit/test_doctor_checks.py -k constant_inputs_warn",
        within="check_model",
    ),
    Mutation(
        "the doctor names the first missing CANN package only",
        f"{TOOLKIT}/doctor.py",
        "missing = [part for part in CANN_PARTS if not (Path(home) / part).exists()]",
        "missing = [part for part in CANN_PARTS if not (Path(home) / part).exists()][:1]",
        "tests/toolkit/test_doctor_checks.py -k half_sourced_cann_fails",
        within="check_cann",
    ),
    Mutation(
        "export names the first leaf that differs only",
        f"{TOOLKIT}/export.py",
        "shown = differ[:ERROR_LINES]",
        "shown = differ[:1]",
        "tests/toolkit/test_export.py -k every_leaf_that_differs",
        within="judge",
    ),
    Mutation(
        "export cuts the leaves that differ without saying how many more",
        f"{TOOLKIT}/export.py",
        'shown.append(f"and {len(differ) - ERROR_LINES} more leaves differ")',
        "pass",
        "tests/toolkit/test_export.py -k first_differences",
        within="judge",
    ),
    Mutation(
        "export names the MRE's first leaf only when the structure differs",
        f"{TOOLKIT}/export.py",
        "where the MRE has {', '.join(mre.output)}",
        "where the MRE has {', '.join(list(mre.output)[:1])}",
        "tests/toolkit/test_export.py -k other_leaves",
        within="judge",
    ),
    Mutation(
        "export names the first module that finds data files only",
        f"{TOOLKIT}/bundle.py",
        "found at {', '.join(locating)})",
        "found at {', '.join(locating[:1])})",
        "tests/toolkit/test_export_bundle.py -k every_module_that_finds",
        within="refuse_data_files",
    ),
    Mutation(
        "export names the first project import inside a function only",
        f"{TOOLKIT}/bundle.py",
        "sorted(set(nested))",
        "sorted(set(nested[:1]))",
        "tests/toolkit/test_export_bundle.py -k every_project_import_inside",
        within="load",
    ),
    Mutation(
        "export names the first module object only",
        f"{TOOLKIT}/bundle.py",
        "{', '.join(sorted(used))}",
        "{', '.join(sorted(used)[:1])}",
        "tests/toolkit/test_export_bundle.py -k module_object_of_yours",
        within="refuse_module_objects",
    ),
    Mutation(
        "opschema prints the first finding only",
        f"{TOOLKIT}/opschema.py",
        "for finding in findings:",
        "for finding in findings[:1]:",
        "tests/toolkit/test_opschema.py -k every_finding_of_every_file",
        within="main",
    ),
    Mutation(
        "opschema names the first Tensor input after a scalar only",
        f"{TOOLKIT}/opschema.py",
        "f\"inputs {', '.join(late)} come\"",
        "f\"inputs {', '.join(late[:1])} come\"",
        "tests/toolkit/test_opschema.py -k every_tensor_input_after",
        within="check_graph_mode",
    ),
    Mutation(
        "opschema names the first version outside all_version only",
        f"{TOOLKIT}/opschema.py",
        "for version in unknown:",
        "for version in unknown[:1]:",
        "tests/toolkit/test_opschema.py -k every_version_outside",
        within="versions",
    ),
    Mutation(
        "the plan rehearsal hides how many caches it does not name",
        f"{TOOLKIT}/parallel.py",
        'return ", ".join(paths[:2]) + more',
        'return ", ".join(paths[:2])',
        "tests/toolkit/test_parallel.py -k two_and_a_count",
        within="first_two",
    ),
    Mutation(
        "the plan rehearsal names the first cache left whole only",
        f"{TOOLKIT}/parallel.py",
        'return ", ".join(paths[:2]) + more',
        'return ", ".join(paths[:1]) + more',
        "tests/toolkit/test_parallel.py -k two_and_a_count",
        within="first_two",
    ),
    Mutation(
        "the MRE's ranks row gives the first rank's graphs only",
        f"{TOOLKIT}/report.py",
        '", ".join(str(each.graphs) for each in calls)',
        '", ".join(str(each.graphs) for each in calls[:1])',
        "tests/toolkit/test_parallel.py -k other_counts_of_graphs",
        within="ranks_row",
    ),
    Mutation(
        "the MRE's report has a row for the first constant input only",
        f"{TOOLKIT}/report.py",
        "for path, value in constant_inputs(dummy_input):",
        "for path, value in constant_inputs(dummy_input)[:1]:",
        "tests/toolkit/test_report.py -k every_non_tensor_input",
        within="constant_rows",
    ),
    Mutation(
        "profile opens the first rank's trace only",
        f"{TOOLKIT}/profile.py",
        "for rank, result in enumerate(results)",
        "for rank, result in enumerate(results[:1])",
        "tests/toolkit/test_profile.py -k slowest_rank_is_the_one",
        within="slowest_rank",
    ),
    Mutation(
        "profile's summary shows the first top operator only",
        f"{TOOLKIT}/profile.py",
        'for operator in result[mode]["top_operators"]:',
        'for operator in result[mode]["top_operators"][:1]:',
        "tests/toolkit/test_profile.py -k summary_off_npu",
        within="render",
    ),
    Mutation(
        "the mutations' baseline names the files in the order given",
        "tests/mutations.py",
        "[*sorted(files)",
        "[*(files)",
        "tests/test_mutations.py -k folders_files_together",
        within="union",
    ),
    # Issue 29, item 5: each answer's value reaches what it controls (planted: the default instead).
    Mutation(
        "the README's title is the default project name",
        f"{PROJECT}/README.md",
        "# {{ cookiecutter.project_name }}",
        "# NPU Graph Demo",
        "tests/test_answers.py -k project_name_is_the_readmes_title",
    ),
    Mutation(
        "the model calls the op in the package's namespace, not the one answered",
        f"{PACKAGE}/model.py",
        '{%- set op = "torch.ops." ~ cookiecutter.__op_ns ~ "." ~ cookiecutter.__op -%}',
        '{%- set op = "torch.ops." ~ cookiecutter.package_name ~ "." ~ cookiecutter.__op -%}',
        "tests/test_answers.py -k calls_the_op",
    ),
    Mutation(
        "the model calls the default op name",
        f"{PACKAGE}/model.py",
        '{%- set op = "torch.ops." ~ cookiecutter.__op_ns ~ "." ~ cookiecutter.__op -%}',
        '{%- set op = "torch.ops." ~ cookiecutter.__op_ns ~ ".my_op" -%}',
        "tests/test_answers.py -k calls_the_op",
    ),
    Mutation(
        "torch.library registers the op in the package's namespace",
        f"{PACKAGE}/custom_op.py",
        'OP_NAME = "{{ cookiecutter.__op_ns }}::{{ op }}"',
        'OP_NAME = "{{ cookiecutter.package_name }}::{{ op }}"',
        "tests/test_answers.py -k calls_the_op",
    ),
    Mutation(
        "torch.library registers the op under the default name",
        f"{PACKAGE}/custom_op.py",
        'OP_NAME = "{{ cookiecutter.__op_ns }}::{{ op }}"',
        'OP_NAME = "{{ cookiecutter.__op_ns }}::my_op"',
        "tests/test_answers.py -k calls_the_op",
    ),
    Mutation(
        "the op-plugin schema defines the default op name",
        f"{PACKAGE}/op_plugin_functions.yaml",
        "- func: {{ cookiecutter.op_name }}(Tensor(a!) cache, Tensor input_pos, Tensor update) -> ()",
        "- func: my_op(Tensor(a!) cache, Tensor input_pos, Tensor update) -> ()",
        "tests/test_answers.py -k calls_the_op",
    ),
    Mutation(
        "the op-plugin Meta function is registered under the default op name",
        f"{PACKAGE}/meta_registrations.py",
        '@impl(m, "{{ cookiecutter.op_name }}")',
        '@impl(m, "my_op")',
        "tests/test_answers.py -k meta_function",
    ),
    Mutation(
        "settings.py names the default op",
        f"{PACKAGE}/settings.py",
        "OP_NAME = {{ cookiecutter.__op | tojson }}",
        'OP_NAME = "my_op"',
        "tests/test_answers.py -k calls_the_op",
    ),
    Mutation(
        "settings.py names the package as the op's namespace",
        f"{PACKAGE}/settings.py",
        "OP_NAMESPACE = {{ cookiecutter.__op_ns | tojson }}",
        "OP_NAMESPACE = {{ cookiecutter.package_name | tojson }}",
        "tests/test_answers.py -k calls_the_op",
    ),
    Mutation(
        "the sample's input is the default shape",
        f"{PACKAGE}/model.py",
        'INPUT_SHAPE = ({{ cookiecutter.input_shape.replace(" ", "").split(",") | map("int") | join(", ") }})',
        "INPUT_SHAPE = (2, 8, 32)",
        "tests/test_answers.py -k input_has_the_shape",
    ),
    Mutation(
        "the decode prompt is the default shape's",
        f"{PACKAGE}/model.py",
        '{%- set dims = cookiecutter.input_shape.replace(" ", "").split(",") | map("int") | list -%}',
        '{%- set dims = "2, 8, 32".split(",") | map("int") | list -%}',
        "tests/test_answers.py -k decode_prompt",
    ),
    Mutation(
        "the decode model's width is the default shape's",
        f"{PACKAGE}/model.py",
        '{%- set hidden = cookiecutter.input_shape.split(",")[-1] | int -%}',
        '{%- set hidden = "2, 8, 32".split(",")[-1] | int -%}',
        "tests/test_answers.py -k decode_prompt",
    ),
    Mutation(
        "the README's sample report shows the default shape",
        f"{PROJECT}/README.md",
        '{%- set dims = cookiecutter.input_shape.replace(" ", "").split(",") | map("int") | list -%}',
        '{%- set dims = "2, 8, 32".split(",") | map("int") | list -%}',
        "tests/test_answers.py -k readme_shows_the_input",
    ),
    Mutation(
        "the cache goes to the default folder",
        f"{PACKAGE}/settings.py",
        "CACHE_DIR = {{ cookiecutter.cache_dir | tojson }}",
        'CACHE_DIR = ".torchair_cache"',
        "tests/test_answers.py -k cache_lands",
    ),
    Mutation(
        "git ignores only the default cache folder",
        f"{PROJECT}/.gitignore",
        '{{ cookiecutter.cache_dir.strip("/") }}/',
        ".torchair_cache/",
        "tests/test_answers.py -k git_ignores",
    ),
    Mutation(
        "the README names the default cache folder",
        f"{PROJECT}/README.md",
        "(`{{ cookiecutter.cache_dir }}/`)",
        "(`.torchair_cache/`)",
        "tests/test_answers.py -k readme_names_the_cache",
    ),
    Mutation(
        "the toolkit reads the default torch_npu release",
        f"{PACKAGE}/settings.py",
        "TORCH_NPU = {{ cookiecutter.torch_npu_version | tojson }}",
        'TORCH_NPU = "2.13.0"',
        "tests/test_answers.py -k reads_the_release",
    ),
    Mutation(
        "the npu extra pins the default torch_npu",
        f"{PROJECT}/pyproject.toml",
        'npu = ["torch-npu=={{ cookiecutter.torch_npu_version }}"]',
        'npu = ["torch-npu==2.13.0"]',
        "tests/test_bake.py -k pins_the_chosen",
    ),
    Mutation(
        "pyproject pins the default torch",
        f"{PROJECT}/pyproject.toml",
        '"torch=={{ cookiecutter.__torch_version }}",',
        '"torch==2.13.0",',
        "tests/test_bake.py -k pins_the_chosen",
    ),
    Mutation(
        "nox installs the default torch",
        f"{PROJECT}/noxfile.py",
        'TORCH = "torch=={{ cookiecutter.__torch_version }}"',
        'TORCH = "torch==2.13.0"',
        "tests/test_bake.py -k pins_the_chosen",
    ),
    Mutation(
        "CI's tests job installs the default torch",
        f"{PROJECT}/.github/workflows/ci.yml",
        '- run: pip install "torch=={{ cookiecutter.__torch_version }}"',
        '- run: pip install "torch==2.13.0"',
        "tests/test_bake.py -k pins_the_chosen",
    ),
    Mutation(
        "the README installs the default torch_npu",
        f"{PROJECT}/README.md",
        "# adds torch-npu=={{ cookiecutter.torch_npu_version }}",
        "# adds torch-npu==2.13.0",
        "tests/test_bake.py -k pins_the_chosen",
    ),
    Mutation(
        "generate's --json gives the sampled tokens as the compared greedy ones",
        f"{TOOLKIT}/generation.py",
        '"greedy_tokens": graph.tolist(),',
        '"greedy_tokens": tokens.tolist(),',
        "tests/toolkit/test_generation.py -k greedy_tokens",
        within="run",
    ),
    # Serving with vLLM (decode). The port's bugs load and run: only vLLM's tokens show them (the
    # full tier's nox -s vllm; $VLLM_ENVDIR keeps vLLM's environment between the runs).
    Mutation(
        "vllm port loads the exported k_proj into v's part of qkv_proj, and v_proj into k's",
        f"{PACKAGE}/vllm_model.py",
        '(".qkv_proj.", ".k_proj.", "k"),\n            (".qkv_proj.", ".v_proj.", "v"),',
        '(".qkv_proj.", ".k_proj.", "v"),\n            (".qkv_proj.", ".v_proj.", "k"),',
        "tests/test_vllm.py -k sample_through_its_port",
        within="load_weights",
    ),
    Mutation(
        "vllm port turns each decode step's positions from the batch's first, its rotary offset lost",
        f"{PACKAGE}/vllm_model.py",
        "q, k = self.rotary(positions, q, k)",
        "q, k = self.rotary(positions - positions.min(), q, k)",
        "tests/test_vllm.py -k sample_through_its_port",
        within="Block",
    ),
    Mutation(
        "export-hf writes an unseeded model's weights",
        f"{TOOLKIT}/export_hf.py",
        "    torch.manual_seed(0)\n",
        "",
        "tests/toolkit/test_export_hf.py -k mre_seeded",
        within="export",
    ),
    Mutation(
        "export-hf (generated test) writes an unseeded model's weights",
        f"{TOOLKIT}/export_hf.py",
        "    torch.manual_seed(0)\n",
        "",
        "tests/test_export_hf.py -k seeded_weights",
        DECODE,
        within="export",
    ),
    Mutation(
        "export-hf exports a model with neither hf_config() nor a transformers model",
        f"{TOOLKIT}/export_hf.py",
        "if inner is None and config is None:",
        "if inner is None and config is None and False:",
        "tests/toolkit/test_export_hf.py -k no_hf_config",
        within="export",
    ),
    Mutation(
        "the command line runs vllm-check for export-hf",
        f"{TOOLKIT}/commands.py",
        '"toolkit.export_hf",',
        '"toolkit.vllm_check",',
        "tests/test_export_hf.py -k seeded_weights",
        DECODE,
    ),
    Mutation(
        "the translation gives vLLM MAX_SEQ_LEN as its max_num_seqs",
        f"{TOOLKIT}/serving.py",
        'f"--max-num-seqs {limits.max_batch}"',
        'f"--max-num-seqs {limits.max_seq_len}"',
        "tests/toolkit/test_serving.py -k each_limit",
        within="translation",
    ),
    Mutation(
        "the translation captures every step, prefill too",
        f"{TOOLKIT}/serving.py",
        '"cudagraph_mode": "FULL_DECODE_ONLY"',
        '"cudagraph_mode": "FULL"',
        "tests/toolkit/test_serving.py -k decode_only",
        within="translation",
    ),
    Mutation(
        "the translation drops the capture sizes' last size",
        f"{TOOLKIT}/serving.py",
        "return list(limits.capture_sizes)",
        "return list(limits.capture_sizes[:-1])",
        "tests/toolkit/test_serving.py -k decode_only",
        within="graph_sizes",
    ),
    Mutation(
        "a tensor-parallel project's command serves on one rank",
        f"{TOOLKIT}/serving.py",
        "if tensor_parallel_size is not None:",
        "if tensor_parallel_size is None:",
        "tests/toolkit/test_export_hf.py -k as_many_ranks",
        within="translation",
    ),
    Mutation(
        "the translation drops the settings with no vLLM equivalent",
        f"{TOOLKIT}/serving.py",
        "return settings + no_equivalent()",
        "return settings",
        "tests/toolkit/test_serving.py -k not_dropped",
        within="translation",
    ),
    Mutation(
        "vllm-check compares the first sequence only",
        f"{TOOLKIT}/vllm_check.py",
        "enumerate(zip(got, want, strict=True))",
        "enumerate(zip(got[:1], want[:1], strict=True))",
        "tests/toolkit/test_vllm_check.py -k other_tokens",
        within="first_difference",
    ),
    Mutation(
        "vllm-check's reference is not seeded as the MRE",
        f"{TOOLKIT}/vllm_check.py",
        "    torch.manual_seed(0)\n",
        "",
        "tests/toolkit/test_vllm_check.py -k reference_is_the_projects",
        within="reference",
    ),
    Mutation(
        "vllm-check asks the server at temperature 1",
        f"{TOOLKIT}/vllm_check.py",
        '"temperature": 0.0,',
        '"temperature": 1.0,',
        "tests/toolkit/test_vllm_check.py -k answers_the_projects_tokens",
        within="completions",
    ),
    Mutation(
        "vllm-check lets vLLM's CPU attention meet a head size it refuses",
        f"{TOOLKIT}/vllm_check.py",
        "if sizes is None or exported.head_dim in sizes:",
        "if True:",
        "tests/toolkit/test_vllm_check.py -k head_size",
        within="check_head_size",
    ),
    Mutation(
        "vllm-check leaves the server running",
        f"{TOOLKIT}/vllm_check.py",
        "stop(server)",
        "pass",
        "tests/toolkit/test_vllm_check.py -k check_itself_fails",
        within="served",
    ),
    Mutation(
        "vllm-check binds every rank of a CPU run to every core",
        f"{TOOLKIT}/vllm_check.py",
        "ranks = [cores[rank * share : (rank + 1) * share] for rank in range(tensor_parallel_size)]",
        "ranks = [cores for rank in range(tensor_parallel_size)]",
        "tests/toolkit/test_vllm_check.py -k cores_of_its_own",
        within="cpu_environment",
    ),
    Mutation(
        "vllm-check tells vLLM's pointer to the root cause instead of the cause",
        f"{TOOLKIT}/vllm_check.py",
        'if "root cause" not in error[1]]',
        'if "root cause" not in error[0]]',
        "tests/toolkit/test_vllm_check.py -k 'cause and pointer'",
        within="cause",
    ),
    Mutation(
        "vllm-check reads no cause from a port's unfilled parameters",
        f"{TOOLKIT}/vllm_check.py",
        'r"Following weights were not initialized from checkpoint: (\\{.*?\\})",',
        'r"Following weights were not initialised from checkpoint: (\\{.*?\\})",',
        "tests/toolkit/test_vllm_check.py -k 'cause and parameter'",
    ),
    Mutation(
        "vllm-check starts a process of vLLM's own for one rank",
        f"{TOOLKIT}/vllm_check.py",
        '        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")\n',
        "",
        "tests/toolkit/test_vllm_check.py -k 'one_rank or offline_engine_gets'",
        within="cpu_environment",
    ),
    Mutation(
        "bench's JSON carries what the model prints",
        f"{TOOLKIT}/bench.py",
        "with contextlib.redirect_stdout(sys.stderr), torch.no_grad(), joined(backend) as ranks:",
        "with torch.no_grad(), joined(backend) as ranks:",
        "tests/toolkit/test_model_prints.py -k bench",
        within="main",
    ),
    Mutation(
        "generate takes one new token, which runs no decode step in graph mode",
        f"{TOOLKIT}/generation.py",
        "GRAPH_TOKENS_FROM = 2",
        "GRAPH_TOKENS_FROM = 1",
        "tests/toolkit/test_generation.py -k before_a_model_is_built",
    ),
    Mutation(
        "a prompt that fills the cache is told to ask for 0 new tokens",
        f"{TOOLKIT}/decode.py",
        "if room >= least",
        "if room >= 0",
        "tests/toolkit/test_decode.py -k too_little_room",
        within="check_length",
    ),
    Mutation(
        "the command line shows a traceback for a contract name model.py lacks",
        f"{PACKAGE}/__main__.py",
        "if missing and error.name ==",
        "if False and error.name ==",
        "tests/toolkit/test_your_code_failed.py -k contract_name",
        within="your_code_failed",
    ),
    Mutation(
        "the doctor's plan check fails on its own import when model.py lacks parallel_plan",
        f"{TOOLKIT}/doctor.py",
        "    from .parallel import PlanError, rehearse",
        "\n    if False:\n        from .parallel import PlanError\n    from .parallel import rehearse",
        "tests/toolkit/test_doctor.py -k without_parallel_plan",
        within="check_plan",
    ),
    Mutation(
        "a package named transformers is baked, and hides the library",
        "hooks/answer_rules.py",
        '| {"transformers", "safetensors", "vllm", "matplotlib", "torchgen"}',
        '| {"safetensors", "vllm", "matplotlib", "torchgen"}',
        "tests/test_hooks.py -k every_library",
    ),
    Mutation(
        "check leaves a fake function that disagrees with its kernel to the NPU",
        f"{TOOLKIT}/check.py",
        "    result.findings += fake_problems(calls)\n",
        "",
        "tests/toolkit/test_check.py -k fake_function",
        within="check",
    ),
    Mutation(
        "check watches every operator for the project's",
        f"{TOOLKIT}/check.py",
        "if schema is not None and schema.name == self.name and func not in self.calls:",
        "if func not in self.calls:",
        "tests/toolkit/test_check.py -k fake_function",
        within="__torch_dispatch__",
    ),
    Mutation(
        "generate lets a sampler's ids outside the vocabulary fail deep in the model",
        f"{TOOLKIT}/generation.py",
        "if bool((token < 0).any() | (token >= vocab).any()):",
        "if bool((token < 0).any()):",
        "tests/toolkit/test_generation.py -k outside_the_vocabulary",
        within="sample_checked",
    ),
    Mutation(
        "check lets a prompt that fills the cache fail as an eager IndexError",
        f"{TOOLKIT}/check.py",
        "decode.limits().check_prompt(inputs[0].shape[1])",
        "pass",
        "tests/toolkit/test_check.py -k fills_the_cache",
        within="check",
    ),
    Mutation(
        "the op-plugin stand-in kernel stands in for a missing Meta function too",
        f"{TOOLKIT}/op_plugin.py",
        'library.impl(name, kernel, "CPU")',
        'library.impl(name, kernel, "CompositeExplicitAutograd")',
        "tests/toolkit/test_opschema.py -k needs_the_projects_meta_function",
        within="define_if_missing",
    ),
    Mutation(
        "check lists a graph break again for each rung that fails on it",
        f"{TOOLKIT}/check.py",
        "    result.findings = one_per_line(result.findings)\n",
        "",
        "tests/toolkit/test_check.py -k 'graph_break or branch_on'",
        within="check",
    ),
    Mutation(
        "check lets an error explain() raises escape as a traceback",
        f"{TOOLKIT}/check.py",
        "except Exception:  # noqa: BLE001  (an error that is no graph break: each rung names it)",
        "except ZeroDivisionError:",
        "tests/toolkit/test_check.py -k without_a_fake",
        within="graph_breaks",
    ),
    Mutation(
        "check calls a missing fake function a wrong one",
        f"{TOOLKIT}/check.py",
        "if lacks_fake_function(error):",
        "if False:",
        "tests/toolkit/test_check.py -k without_a_fake",
        within="fake_problems",
    ),
    Mutation(
        "decode steps run a sampler's int32 ids as they come, compiling a graph for them",
        f"{TOOLKIT}/decode.py",
        "        tokens = tokens.long()\n",
        "",
        "tests/toolkit/test_decode.py -k int32",
        within="__call__",
    ),
    Mutation(
        "check calls a model with .item() in its graph ready, with a warning",
        f"{TOOLKIT}/capture.py",
        'found.append(Refusal("CAP003", "a value the host reads in the graph", reason, where, hint))',
        'found.append(Refusal("CAP003", "a value the host reads in the graph", reason, where, hint, WARNING))',
        "tests/toolkit/test_check.py -k item_in_the_graph",
        within="node_refusals",
    ),
    Mutation(
        "check names a break on a number read from a tensor in Dynamo's words",
        f"{TOOLKIT}/check.py",
        'Finding("graph break", plain_reason(text), where, hint_for(text), code=GRAPH_BREAK)',
        'Finding("graph break", text.splitlines()[0], where, hint_for(text), code=GRAPH_BREAK)',
        "tests/toolkit/test_check.py -k number_read",
        within="graph_breaks",
    ),
    Mutation(
        "check gives a range() over a number read from a tensor the fallback hint",
        f"{TOOLKIT}/check.py",
        'r"(guard on|extract specialized integer from) data-dependent expression",',
        'r"guard on data-dependent expression",',
        "tests/toolkit/test_check.py -k number_read",
    ),
    Mutation(
        "check blames the fake function for a kernel that writes an input the schema does not mark",
        f"{TOOLKIT}/check.py",
        'elif "test_schema failed" in reason:',
        "elif False:",
        "tests/toolkit/test_check.py -k does_not_declare",
        within="fake_problems",
    ),
    Mutation(
        "check puts a raising Meta function's error at the op's call",
        f"{TOOLKIT}/check.py",
        "                where = user_frame(traceback.extract_tb(first.__traceback__)) or where\n",
        "",
        "tests/toolkit/test_check.py -k raises_is_one",
        within="fake_problems",
    ),
    Mutation(
        "check lets fake tensors log a raising Meta function's traceback again and again",
        f"{TOOLKIT}/check.py",
        "@meta_errors_unlogged()\n",
        "",
        "tests/toolkit/test_check.py -k raises_is_one",
    ),
    Mutation(
        "opschema reads a path that is no file, with a traceback",
        f"{TOOLKIT}/opschema.py",
        "if not path.is_file():",
        "if False:",
        "tests/toolkit/test_opschema.py -k no_file",
        within="main",
    ),
    Mutation(
        "the project's op tests stop at collection when the Meta function is gone",
        f"{PROJECT}/tests/test_custom_op.py",
        "shape_function = getattr(meta_registrations, SHAPE_FUNCTION, None)",
        "shape_function = meta_registrations.{{ cookiecutter.op_name }}_meta",
        "tests/test_own_models.py -k 'shape_function and op_plugin'",
    ),
    Mutation(
        "check places a SyntaxError in the import's frames, not at the line it could not parse",
        f"{TOOLKIT}/frames.py",
        "if isinstance(error, SyntaxError) and error.filename:",
        "if False:",
        "tests/toolkit/test_check.py -k syntax_error",
        within="error_frame",
    ),
    # The aclop-only table: scripts/aclop_ops.py and the module it writes into the toolkit.
    Mutation(
        "the aclop table reads a version range without its last version",
        "scripts/aclop_ops.py",
        "all_version.index(last) + 1",
        "all_version.index(last)",
        "tests/test_aclop_ops.py -k every_version_form",
        within="versions_of",
    ),
    Mutation(
        "the aclop table reads [first, newest] as ending before the newest version",
        "scripts/aclop_ops.py",
        'stop = len(all_version) if last == "newest"',
        'stop = len(all_version) - 1 if last == "newest"',
        "tests/test_aclop_ops.py -k every_version_form",
        within="versions_of",
    ),
    Mutation(
        "the aclop table splits a version string at commas alone, as op-plugin does not",
        "scripts/aclop_ops.py",
        'return spec.split(", ") if ", " in spec else spec.split(",")',
        'return spec.split(",")',
        "tests/test_aclop_ops.py -k every_version_form",
        within="versions_of",
    ),
    Mutation(
        "the aclop table reads a version list as its items, not as the range op-plugin reads",
        "scripts/aclop_ops.py",
        "start = all_version.index(first)",
        "return [version for version in spec if version in all_version]",
        "tests/test_aclop_ops.py -k range_reads_only",
        within="versions_of",
    ),
    Mutation(
        "the aclop table lists an operator that also has an op_api kernel",
        "scripts/aclop_ops.py",
        "if label not in op_api:",
        "if label in acl_op:",
        "tests/test_aclop_ops.py -k every_version_form",
        within="aclop_only_ops",
    ),
    Mutation(
        "the aclop table takes ATen's official entries for torch_npu's own",
        "scripts/aclop_ops.py",
        'entries = functions.get("custom")',
        'entries = functions.get("custom") + functions.get("official", [])',
        "tests/test_aclop_ops.py -k only_custom",
        within="aclop_only_ops",
    ),
    Mutation(
        "the aclop table of a torch version op-plugin does not list is written, empty",
        "scripts/aclop_ops.py",
        "if label not in all_version:",
        "if False:",
        "tests/test_aclop_ops.py -k torch_version_op_plugin",
        within="aclop_only_ops",
    ),
    Mutation(
        "the aclop script's --check writes the module it checks",
        "scripts/aclop_ops.py",
        "    if args.check:\n",
        '    args.output.write_text(text, encoding="utf-8")\n    if args.check:\n',
        "tests/test_aclop_ops.py -k check_fails",
        within="main",
    ),
    Mutation(
        "aclop_only() takes npu_x.default for an overload of its own",
        "scripts/aclop_ops.py",
        '    if overload == "default":\n        return packet in names\n',
        "",
        "tests/test_aclop_ops.py -k aclop_only_answers",
        within="aclop_only",
    ),
    Mutation(
        "aclop_only() finds no operator through a bare name op-plugin lists only with overloads",
        "scripts/aclop_ops.py",
        ' or any(other.startswith(f"{packet}.") for other in names)',
        "",
        "tests/test_aclop_ops.py -k aclop_only_answers",
        within="aclop_only",
    ),
    Mutation(
        "the committed aclop module is edited by hand",
        f"{TOOLKIT}/aclop_ops.py",
        "return name in names",
        "return False",
        "tests/test_aclop_ops.py -k committed_module_is",
        within="aclop_only",
    ),
)


DEFINITION = r"^(?P<indent>[ \t]*)(?:async[ \t]+)?(?:def|class)[ \t]+{name}\b"
"""A `def` or `class` line of the given name (re.MULTILINE)."""


def body(text: str, name: str) -> tuple[int, int] | None:
    """Where the definition `name` lies in text, from its `def` or `class` line to the next line
    indented no deeper (a closing bracket or a Jinja tag at the margin does not end it); None
    unless the file defines `name` once."""
    found = list(re.finditer(DEFINITION.format(name=re.escape(name)), text, re.MULTILINE))
    if len(found) != 1:
        return None
    start, indent = found[0].start(), len(found[0]["indent"])
    offset = text.find("\n", start) + 1 or len(text)
    for line in text[offset:].splitlines(keepends=True):
        code = line.lstrip(" \t")
        if (
            code.strip()
            and len(line) - len(code) <= indent
            and not code.startswith((")", "]", "}", "{%", "{#"))
        ):
            break
        offset += len(line)
    return start, offset


def occurrences(text: str, mutation: Mutation) -> int:
    """How often the mutation's pattern occurs where it says (0 where its function is not once there)."""
    span = (0, len(text)) if mutation.within is None else body(text, mutation.within)
    return 0 if span is None else text[span[0] : span[1]].count(mutation.old)


def planted(text: str, mutation: Mutation) -> str:
    """text with the mutation's bug planted: its pattern replaced inside its function."""
    start, end = (0, len(text)) if mutation.within is None else body(text, mutation.within)
    return text[:start] + text[start:end].replace(mutation.old, mutation.new) + text[end:]


def problems_with(mutations: Iterable[Mutation], root: Path = TEMPLATE) -> list[str]:
    """Why mutations cannot be planted in the template at `root`: a pattern not there exactly once."""
    found = []
    for mutation in mutations:
        count = occurrences((root / mutation.path).read_text(), mutation)
        if count != 1:
            where = mutation.path if mutation.within is None else f"{mutation.within}() of {mutation.path}"
            found.append(f"{mutation.name}: pattern found {count} times in {where}")
        if mutation.old == mutation.new:
            found.append(f"{mutation.name}: old and new text are the same")
    return found


def copy_template(destination: Path) -> Path:
    ignore = shutil.ignore_patterns(
        ".git", ".nox", ".venv", "build", "__pycache__", ".*_cache", ".hypothesis"
    )
    return Path(shutil.copytree(TEMPLATE, destination, ignore=ignore))


def bake(template: Path, workdir: Path, answers: dict[str, str]) -> Path:
    """Bake `template` with `answers` into workdir, with a config file of its own (no user config)."""
    from cookiecutter.main import cookiecutter

    workdir.mkdir(parents=True)
    config = workdir / "config.yaml"
    config.write_text(
        json.dumps({"cookiecutters_dir": str(workdir / "cc"), "replay_dir": str(workdir / "replay")})
    )
    # The post-gen hook, a subprocess, prints its next steps and notes to file descriptors 1 and 2:
    # keep the table clean.
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {descriptor: os.dup(descriptor) for descriptor in (1, 2)}
    with Path(os.devnull).open("w") as devnull:
        for descriptor in saved:
            os.dup2(devnull.fileno(), descriptor)
        try:
            return Path(
                cookiecutter(
                    str(template),
                    no_input=True,
                    extra_context=answers,
                    output_dir=str(workdir),
                    config_file=str(config),
                )
            )
        finally:
            for descriptor, original in saved.items():
                os.dup2(original, descriptor)
                os.close(original)


def package_file(mutation: Mutation) -> bool:
    """Whether `mutation` changes a package file that tests/toolkit/projects/ holds as baked: its
    template-suite tests then run on projects written anew from the mutated template."""
    path = mutation.path
    return mutation.bake is None and path.startswith(f"{PACKAGE}/") and not path.startswith(f"{TOOLKIT}/")


def write_toolkit_projects(template: Path) -> None:
    """tests/toolkit/projects/ of the template copy, written anew from its own files."""
    script = template / "tests" / "toolkit" / "projects.py"
    subprocess.run([sys.executable, str(script)], cwd=template, capture_output=True, check=True)


def run_tests(where: Path, tests: str, generated: bool) -> subprocess.CompletedProcess[str]:
    """Run `tests` in a baked project (its own suite) or in the template copy (the template's)."""
    environment = {
        k: v for k, v in os.environ.items() if k not in {"NPUGRAPH_BACKEND", "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    }
    environment |= {"PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    options = ["-x", "-q", "-p", "no:cacheprovider"]
    if generated:
        environment |= {"PYTHONPATH": str(where / "src"), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    else:
        options += ["-n", "0", "--full"]  # a mutation's tests may be in the full tier
    command = [sys.executable, "-m", "pytest", *options, *shlex.split(tests)]
    return subprocess.run(command, cwd=where, env=environment, capture_output=True, text=True, check=False)


def union(tests: list[str]) -> str:
    """One pytest selection that runs every test of the given selections (and maybe a few more)."""
    files: dict[str, None] = {}
    keywords = []
    for selection in tests:
        arguments = shlex.split(selection)
        if "-k" in arguments:
            index = arguments.index("-k")
            keywords.append(f"({arguments[index + 1]})")
            del arguments[index : index + 2]
        else:
            keywords.append("(not nothing_is_named_this)")
        files.update(dict.fromkeys(arguments))
    # Sorted, so each folder's files come together: given tests/toolkit/a.py, tests/b.py and
    # tests/toolkit/c.py in that order, pytest sets up c.py's tests without tests/toolkit's
    # conftest fixtures ("fixture 'installed' not found").
    return shlex.join([*sorted(files), "-k", " or ".join(keywords)])


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = (result.stdout + result.stderr).strip().splitlines()
    return lines[-1] if lines else ""


def main(selected: list[str]) -> int:
    mutations = [m for m in MUTATIONS if not selected or any(s in m.name for s in selected)]
    rotten = problems_with(mutations)
    for problem in rotten:
        print(f"ROTTEN  {problem}")
    groups: dict[str, list[Mutation]] = {}
    for mutation in mutations:
        key = "template suite" if mutation.bake is None else json.dumps(mutation.bake)
        groups.setdefault(key, []).append(mutation)
    rows: list[tuple[str, str, str]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mutations-") as scratch_dir:
        scratch = Path(scratch_dir)
        template = copy_template(scratch / "template")
        counter = iter(range(10_000))

        def run(mutation_bake: dict[str, str] | None, tests: str) -> subprocess.CompletedProcess[str]:
            if mutation_bake is None:
                return run_tests(template, tests, generated=False)
            project = bake(template, scratch / f"bake{next(counter)}", mutation_bake)
            try:
                return run_tests(project, tests, generated=True)
            finally:
                shutil.rmtree(project.parent)

        for key, group in groups.items():
            group = [m for m in group if occurrences((template / m.path).read_text(), m) == 1]
            if not group:
                continue
            baseline = run(group[0].bake, union([m.tests for m in group]))
            print(f"baseline  {key}: {last_line(baseline)}", flush=True)
            for mutation in group:
                if baseline.returncode != 0:
                    rows.append((mutation.name, "NO: its tests fail unmutated", ""))
                    continue
                path = template / mutation.path
                original = path.read_text()
                path.write_text(planted(original, mutation))
                clock = time.perf_counter()
                try:
                    if package_file(mutation):
                        write_toolkit_projects(template)
                    result = run(mutation.bake, mutation.tests)
                finally:
                    path.write_text(original)
                    if package_file(mutation):
                        write_toolkit_projects(template)
                verdict = {0: "NO: survived", 1: "yes"}.get(
                    result.returncode, f"NO: pytest exit {result.returncode}"
                )
                rows.append((mutation.name, verdict, f"{time.perf_counter() - clock:.0f} s"))
                print(f"{verdict:<12} {mutation.name}  [{last_line(result)}]", flush=True)
    width = max(len(name) for name, _, _ in rows) if rows else 10
    print(f"\n{'planted':<{width}}  caught?  time  (variant, tests)")
    by_name = {m.name: m for m in mutations}
    for name, verdict, seconds in rows:
        mutation = by_name[name]
        where = (
            "template"
            if mutation.bake is None
            else " ".join(f"{k}={v}" for k, v in mutation.bake.items()) or "default"
        )
        print(f"{name:<{width}}  {verdict:<7}  {seconds:>4}  ({where}; {mutation.tests})")
    survivors = [name for name, verdict, _ in rows if verdict != "yes"]
    print(
        f"\n{len(rows) - len(survivors)} of {len(rows)} caught, {len(rotten)} rotten, "
        f"in {time.perf_counter() - started:.0f} s"
    )
    return 1 if survivors or rotten else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
