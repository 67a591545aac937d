{%- set op_plugin = cookiecutter.custom_op != "none" and cookiecutter.op_registration == "op_plugin" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""The project's command line: `python -m {{ cookiecutter.package_name }} <command> [--help]`."""

import argparse
import importlib
import sys

# Command → (module of this package, what it answers); each module has main(arguments, prog). Modules load only when their command runs:
# `--help` stays instant, and a broken torch cannot stop the doctor from starting.
COMMANDS = {
    "check": (
        "toolkit.check",
        "is my model ready for graph mode? every graph break, then each rung",
    ),
    "doctor": (
        "toolkit.doctor",
        "why won't graph mode run on this machine? OK / WARN / FAIL with fixes",
    ),
    "bench": ("toolkit.bench", "eager against graph mode on the same model and inputs"),
    "profile": (
        "toolkit.profile",
        "where a step's time goes, eager against graph, in a profiler trace",
    ),
    "export": (
        "toolkit.export",
        "the MRE and your model in one self-contained file for a bug report",
    ),
{%- if decode %}
    "generate": (
        "generate",
        "your loop (generate.py): eager prefill, then the decode step in graph mode",
    ),
    "export-hf": (
        "toolkit.export_hf",
        "your model as a Hugging Face folder for vLLM, and the vllm serve command for an NPU",
    ),
    "vllm-check": (
        "toolkit.vllm_check",
        "does vLLM, given your weights, generate your greedy tokens?",
    ),
{%- endif %}
{%- if op_plugin %}
    "opschema": (
        "toolkit.opschema",
        "check op_plugin_functions.yaml files before a torch_npu build",
    ),
{%- endif %}
}


def main(argv: list[str] | None = None) -> int:
    width = max(map(len, COMMANDS))
    listing = "\n".join(f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog=f"python -m {__package__}",
        description=f"commands:\n{listing}\n\nThe MRE itself: python -m {__package__}.mre",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=COMMANDS, metavar="command", help="one of the above")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the command's own (--help)")
    parsed = parser.parse_args(argv)
    module_name, _ = COMMANDS[parsed.command]
    module = importlib.import_module(f".{module_name}", __package__)
    prog = f"python -m {__package__} {parsed.command}"
    return module.main(parsed.arguments, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
