"""The READMEs' statements of facts the code holds, written out by cog: each fact has one source.

    nox -s readme

rewrites the blocks between the cog marks of README.md and {{cookiecutter.project_slug}}/README.md
(inside Jinja comments there, which a bake drops, so a project's README holds the text alone);
tests/test_readme_tables.py fails while a block differs from what the code says.
"""

from __future__ import annotations

import re
import runpy
import textwrap
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1]
HOOK = TEMPLATE / "hooks" / "post_gen_project.py"
TOOLKIT = TEMPLATE / "{{cookiecutter.project_slug}}" / "src" / "{{cookiecutter.package_name}}" / "toolkit"


def socs() -> str:
    """The SoCs npugraph_ex runs on and those it falls back on, from toolkit/socs.py."""
    table = runpy.run_path(str(TOOLKIT / "socs.py"))  # plain data: no import of the toolkit's package
    families = [f"{family} ({names})" for family, names in table["FAMILIES"]]
    first_generation = "/".join(f"`{name}`" for name in table["NO_CAPTURE_SOCS"])
    prefixes = [f"`{prefix}*`" for prefix in table["NO_CAPTURE_PREFIXES"]]
    return textwrap.fill(
        f"npugraph_ex runs on {', '.join(families[:-1])} and {families[-1]}. Every other SoC falls "
        "back to the stand-in, named in the reason with why: the first generation of 910 "
        f"({first_generation}) and {' and '.join(prefixes)} capture no aclgraphs; on "
        f"`{table['NO_NPUGRAPH_EX_PREFIX']}*` npugraph_ex is not supported "
        f"({table['WHY_NOT_ON_310P']}); and names this project does not know.",
        width=100,
        break_on_hyphens=False,
    )


def pruned() -> str:
    """A table of the files each answer leaves out of a project, from the post-gen hook's table."""
    table = runpy.run_path(str(HOOK))["REMOVE_WHEN"]  # not run as __main__: the table alone
    rows = ["| answer | leaves out |", "|---|---|"]
    for (question, answer), paths in table.items():
        files = ", ".join(f"`{path.replace('src/{package}/', '')}`" for path in paths)
        rows.append(f"| `{question}={answer}` | {files} |")
    return "\n".join(rows)


def anchor(title: str) -> str:
    """The link GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def tools() -> str:
    """The project README's tools table, from toolkit/commands.py: each command's row in Jinja
    conditions on the answers that leave its module out (the post-gen hook's table)."""
    commands = runpy.run_path(str(TOOLKIT / "commands.py"))["COMMANDS"]
    pruned = runpy.run_path(str(HOOK))["REMOVE_WHEN"]
    rows = ["| command | what it answers |", "|---|---|"]
    for name, command in commands.items():
        path = f"src/{{package}}/{command.module.replace('.', '/')}.py"
        kept_unless = [
            f'cookiecutter.{question} != "{answer}"'
            for (question, answer), paths in pruned.items()
            if path in paths
        ]
        ranks = '{{ " [--nproc-per-node N]" if cookiecutter.parallel == "tensor_parallel" else "" }}'
        usage = " ".join(filter(None, [name, command.options.replace("|", "\\|")]))
        more = f" ([{command.section}](#{anchor(command.section)}))" if command.section else ""
        row = f"| `{usage}{ranks if command.ranks else ''}` | {command.answers}{more} |"
        rows += [f"{{%- if {' and '.join(kept_unless)} %}}", row, "{%- endif %}"] if kept_unless else [row]
    return "\n".join(rows)
