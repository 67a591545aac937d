"""Prune what belongs to the options not chosen, then print the next steps.

Runs inside the new project with the interpreter that runs cookiecutter: standard library only.
Cookiecutter renders the answers into this file as JSON data, which main() parses: quotes or code
in an answer can neither break this file nor run.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

RENDERED_ANSWERS = r"""{{ cookiecutter | tojson }}"""
# Rendering this file checks the answers again, for a replay file, which skips the first check
# (answer_check.py); a passing check adds nothing here:{{ cookiecutter | refuse_bad_answers }}

OP_PLUGIN_FILES = [
    "src/{package}/meta_registrations.py",
    "src/{package}/op_plugin_functions.yaml",
    "src/{package}/op_reference.py",
    "src/{package}/toolkit/op_plugin.py",
    "src/{package}/toolkit/opschema.py",
]
TORCH_LIBRARY_FILES = ["src/{package}/custom_op.py"]

# (option, answer): the paths that answer leaves out. `{package}` is the import name.
REMOVE_WHEN = {
    ("mode", "npugraph_ex"): ["src/{package}/toolkit/compile_cache.py"],
    ("custom_op", "none"): [*TORCH_LIBRARY_FILES, *OP_PLUGIN_FILES, "tests/test_custom_op.py"],
    ("op_registration", "torch_library"): OP_PLUGIN_FILES,
    ("op_registration", "op_plugin"): TORCH_LIBRARY_FILES,
    ("workload", "forward"): [
        "src/{package}/generate.py",
        "src/{package}/vllm_model.py",
        "src/{package}/toolkit/decode.py",
        "src/{package}/toolkit/export_hf.py",
        "src/{package}/toolkit/generation.py",
        "src/{package}/toolkit/serving.py",
        "src/{package}/toolkit/vllm_check.py",
        "tests/test_export_hf.py",
        "tests/test_generate.py",
    ],
    ("parallel", "none"): [
        "src/{package}/toolkit/parallel.py",
        "src/{package}/toolkit/rank_failure.py",
        "src/{package}/toolkit/two_ranks.py",
        "tests/test_tensor_parallel.py",
    ],
}


def paths_to_remove(answers: dict[str, str]) -> list[str]:
    """Every path that one of the given answers leaves out, once each, in table order."""
    doomed = []
    for (option, answer), paths in REMOVE_WHEN.items():
        if answers[option] == answer:
            doomed += [path.format(package=answers["package_name"]) for path in paths]
    return list(dict.fromkeys(doomed))


def remove(root: Path, relative_paths: list[str]) -> None:
    """Delete the given files and folders, then every folder that this left empty."""
    for relative in relative_paths:
        path = root / relative
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    for folder in sorted((p for p in root.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()


def notes(answers: dict[str, str]) -> list[str]:
    """What the bake did with answers that it had to adapt or could not use."""
    found = []
    if answers["custom_op"] == "none" and answers["op_registration"] != "torch_library":
        found.append(f"Note: op_registration={answers['op_registration']} is unused: custom_op is none.")
    if answers["mode"] != "cache_compile" and answers["cache_dir"] != ".torchair_cache":
        found.append(f"Note: cache_dir={answers['cache_dir']} is unused: only cache_compile mode caches.")
    if answers["op_registration"] == "op_plugin" and answers["op_namespace"] != answers["package_name"]:
        found.append("Note: op_namespace is unused: op-plugin ops always live in torch.ops.npu.")
    if answers["custom_op"] != "none" and answers["__op"] != answers["op_name"]:
        found.append(
            f"Note: the in-place op is named {answers['__op']}, not {answers['op_name']}: "
            "torch.library in-place ops end with _."
        )
    if answers["custom_op"] == "in_place" and answers["op_registration"] == "op_plugin":
        found.append(
            f"Note: the in-place op keeps the name {answers['op_name']}, without a trailing _: "
            "op-plugin's code generator reads name_ as an ATen in-place variant, which must return self."
        )
    return found


def next_steps(answers: dict[str, str]) -> str:
    slug, package = answers["project_slug"], answers["package_name"]
    mre = f"python -m {package}.mre"
    kind = [f"{answers['mode']} mode"]
    if answers["workload"] == "decode":
        kind.append("decode")
    if answers["parallel"] == "tensor_parallel":
        # The MRE of a tensor-parallel project runs one process per rank.
        mre = f"torchrun --nproc-per-node 2 -m {package}.mre"
        kind.append("tensor parallel")
    steps = {
        f"cd {slug}": "",
        "python -m pip install --upgrade pip": "--group needs pip 25.1 or later",
        "pip install -e . --group test": "without a GPU, install torch's CPU build first (README)",
        mre: "one inference step; the report says which backend ran and why",
        f"python -m {package} check": "is your model (model.py) ready for graph mode? --help: all tools",
        "python -m pytest": "the tests; those that need an NPU skip off-NPU, with the reason",
    }
    width = max(map(len, steps))
    lines = [f"  {command:<{width}}  # {why}" if why else f"  {command}" for command, why in steps.items()]
    return "\n".join([*notes(answers), f"Created {slug}/ ({', '.join(kind)}). Next:", *lines])


def main() -> int:
    answers = json.loads(RENDERED_ANSWERS)
    remove(Path.cwd(), paths_to_remove(answers))
    print(next_steps(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
