"""The README the tools point to: each section a message names is there, with the code's numbers."""

import re
from pathlib import Path

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }}.toolkit import project
from {{ cookiecutter.package_name }}.toolkit.contract import DEFAULT_TOLERANCES

README = Path(__file__).parents[1] / "README.md"
PACKAGE = Path({{ cookiecutter.package_name }}.__file__).parent
{%- if cookiecutter.workload == "decode" %}
OTHER_PROJECTS = set()
{%- else %}
OTHER_PROJECTS = {"Generation", "A transformers Llama with a StaticCache"}
{%- endif %}
"""Sections of another project's README: the toolkit is the same in every project, and names these
only where that project's answers bring them (the doctor's decode line, and the sliding-window
fix of a cache's refusal, in a decode project)."""
# check's hint for a custom operator's fake or Meta function names the section of the way the
# operator is registered: each is in the projects whose operator is registered so.
OTHER_PROJECTS |= {
    name
    for name, here in {
        "The custom operator": project.CUSTOM_OP != "none" and not project.OP_PLUGIN,
        "The op-plugin operator": project.OP_PLUGIN,
    }.items()
    if not here
}


def headings() -> set[str]:
    return {
        line.lstrip("#").strip() for line in README.read_text().splitlines() if line.startswith("#")
    }


def sections_named() -> dict[str, str]:
    """Each section named as "README, section '...'" in the package's files, with a file naming it."""
    named = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix in {".py", ".yaml"}:
            # A name may wrap across a line break inside a string: join the pieces.
            text = re.sub(r"\"\s*\n\s*[fr]?\"", "", path.read_text())
            for name in re.findall(r"README, section\s+'([^']+)'", text):
                named[" ".join(name.split())] = path.name
    return named


def test_every_readme_section_a_message_names_is_a_heading():
    """A hint that says "README, section 'X'" leads to a heading X of this project's README."""
    named = sections_named()
    assert "Your own model" in named  # the premise: the messages are found
    missing = {
        name: path
        for name, path in named.items()
        if name not in headings() and name not in OTHER_PROJECTS
    }
    assert not missing, f"sections named but not in README.md: {missing}"


def test_the_readme_tolerance_table_is_the_default():
    """The dtype table of 'Tolerances' gives the rtol and atol the comparisons use."""
    row = re.compile(r"^\| `(\w+)` \| ([\d.e-]+) \| ([\d.e-]+) \|$", re.MULTILINE)
    rows = row.findall(README.read_text())
    table = {dtype: (float(rtol), float(atol)) for dtype, rtol, atol in rows}
    defaults = {
        str(dtype).removeprefix("torch."): (tolerance["rtol"], tolerance["atol"])
        for dtype, tolerance in DEFAULT_TOLERANCES.items()
    }
    assert table == defaults
