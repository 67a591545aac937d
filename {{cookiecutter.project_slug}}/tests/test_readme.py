"""The README quotes the code's numbers."""

import re
from pathlib import Path

from {{ cookiecutter.package_name }}.toolkit.contract import DEFAULT_TOLERANCES

README = Path(__file__).parents[1] / "README.md"


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
