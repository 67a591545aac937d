"""check on your model: no graph break, and every rung here matches eager."""

import pytest

from {{ cookiecutter.package_name }}.toolkit import check


def test_the_model_is_ready(capsys, mre_run):
    """The project's model has no graph break, and every rung here matches eager: exit 0.

    (If the MRE fails, this skips: test_mre.py reports the failure once.)
    """
    code = check.main([])
    report = capsys.readouterr().out
    if code:
        pytest.fail(f"check exits {code} on your model:\n{report}", pytrace=False)
    # The rung line is printed whatever its outcome: its status is what must say ok.
    (rung,) = [
        line.split() for line in report.splitlines() if line.startswith("rung        aot_eager ")
    ]
    assert rung[2] == "ok"
    assert report.splitlines()[-1].startswith("ready for graph mode")
