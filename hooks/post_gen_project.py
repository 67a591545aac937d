"""Prune what belongs to the options not chosen, then print the next steps.

Runs inside the new project with the interpreter that runs cookiecutter: standard library only.
Answers come in as JSON data (see pre_gen_project.py).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

RENDERED_ANSWERS = r"""{{ cookiecutter | tojson }}"""

# For each option, the paths that exist only for one of its answers. `{package}` is the import name.
ONLY_FOR: dict[str, dict[str, list[str]]] = {
    "mode": {
        "npugraph_ex": [],
        "cache_compile": ["src/{package}/compile_cache.py", "tests/test_compile_cache.py"],
    },
}


def paths_to_remove(answers: dict[str, str]) -> list[str]:
    """Every path that belongs to an answer the user did not give."""
    doomed = []
    for option, paths_by_answer in ONLY_FOR.items():
        for answer, paths in paths_by_answer.items():
            if answers[option] != answer:
                doomed += [path.format(package=answers["package_name"]) for path in paths]
    return doomed


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


def next_steps(answers: dict[str, str]) -> str:
    slug, package = answers["project_slug"], answers["package_name"]
    steps = {
        f"cd {slug}": "",
        'pip install -e ".[test]"': "on a machine without a GPU, install torch's CPU build first (README)",
        f"python -m {package}.mre": "one inference step; the report says which backend ran and why",
        "python -m pytest": "the tests; those that need an NPU skip off-NPU, with the reason",
    }
    width = max(map(len, steps))
    lines = [f"  {command:<{width}}  # {why}" if why else f"  {command}" for command, why in steps.items()]
    return "\n".join([f"Created {slug}/ ({answers['mode']} mode). Next:", *lines])


def main() -> int:
    answers = json.loads(RENDERED_ANSWERS)
    remove(Path.cwd(), paths_to_remove(answers))
    print(next_steps(answers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
