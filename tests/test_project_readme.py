"""Each baked README holds what the project's messages point to: every section a hint names, and
the tolerance table the comparisons use."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import CODE_VARIANTS, package_of, run_in, variant_id

# Sections of another project's README: the toolkit is the same in every project, and names these
# only where that project's answers bring them.
DECODE_ONLY = {"Generation", "A transformers Llama with a StaticCache"}
TORCH_LIBRARY_OP_ONLY = {"The custom operator"}
OP_PLUGIN_ONLY = {"The op-plugin operator"}


def elsewhere(answers: dict[str, str]) -> set[str]:
    """The sections this variant's README leaves to other projects."""
    sections = set()
    if answers.get("workload", "forward") != "decode":
        sections |= DECODE_ONLY
    op = answers.get("custom_op", "none") != "none"
    plugin = op and answers.get("op_registration") == "op_plugin"
    if not op or plugin:
        sections |= TORCH_LIBRARY_OP_ONLY
    if not plugin:
        sections |= OP_PLUGIN_ONLY
    return sections


def headings(readme: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in readme.read_text().splitlines() if line.startswith("#")}


def sections_named(package: Path) -> dict[str, str]:
    """Each section named as "README, section '...'" in the package's files, with a file naming it."""
    named = {}
    for path in sorted(package.rglob("*")):
        if path.suffix in {".py", ".yaml"}:
            # A name may wrap across a line break inside a string: join the pieces.
            text = re.sub(r"\"\s*\n\s*[fr]?\"", "", path.read_text())
            for name in re.findall(r"README, section\s+'([^']+)'", text):
                named[" ".join(name.split())] = path.name
    return named


@pytest.mark.parametrize("answers", CODE_VARIANTS, ids=variant_id)
def test_every_section_a_message_names_is_a_heading_of_the_readme(baked, answers):
    """A hint that says "README, section 'X'" leads to a heading X of the project's README."""
    project = baked(**answers)
    named = sections_named(project / "src" / package_of(project))
    assert "Your own model" in named  # the premise: the messages are found
    missing = {
        name: path
        for name, path in named.items()
        if name not in headings(project / "README.md") and name not in elsewhere(answers)
    }
    assert not missing, f"sections named but not in README.md: {missing}"


def test_the_readme_tolerance_table_is_the_default(baked):
    """The dtype table of 'Tolerances' gives the rtol and atol the comparisons use."""
    project = baked()
    row = re.compile(r"^\| `(\w+)` \| ([\d.e-]+) \| ([\d.e-]+) \|$", re.MULTILINE)
    table = {
        dtype: [float(rtol), float(atol)]
        for dtype, rtol, atol in row.findall((project / "README.md").read_text())
    }
    script = (
        "import json\n"
        f"from {package_of(project)}.toolkit.contract import DEFAULT_TOLERANCES\n"
        "print(json.dumps({str(d).removeprefix('torch.'): [t['rtol'], t['atol']]"
        " for d, t in DEFAULT_TOLERANCES.items()}))"
    )
    result = run_in(project, "-c", script)
    assert table == json.loads(result.stdout), result.stderr
