"""The doctor on your model: nothing it checks of model.py fails, and its verdict is this machine's."""

import json

import pytest

from {{ cookiecutter.package_name }}.toolkit import doctor, project
from {{ cookiecutter.package_name }}.toolkit.backend import BACKEND_ENV, npu_status

ON_YOUR_MODEL = {"model", "decode", "mre-import", "plan"}
"""The doctor's lines on model.py; the others are on this machine."""
RUNS_EAGERLY = (
    f"your model runs eagerly: `python -m {project.PACKAGE} check` says if graph mode runs it"
)
"""How every verdict but exit 2 ends: the doctor runs your model eagerly, never compiled."""


def test_the_doctor_finds_nothing_wrong_with_your_model(capsys, monkeypatch):
    """No line on model.py FAILs, and the verdict is 0 where an NPU runs npugraph_ex, else 1: the
    MRE falls back to the stand-in."""
    monkeypatch.delenv(BACKEND_ENV, raising=False)
{%- if cookiecutter.parallel == "tensor_parallel" %}
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)  # torchrun's, the doctor's rank count
{%- endif %}
    code = doctor.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    on_your_model = {c["name"]: c["status"] for c in report["checks"] if c["name"] in ON_YOUR_MODEL}
    assert {"model", "mre-import"} <= on_your_model.keys()
    failed = [c for c in report["checks"] if c["name"] in ON_YOUR_MODEL and c["status"] == "FAIL"]
    if failed:
        lines = [f"FAIL {c['name']}: {c['detail']}\n  fix: {c['fix']}" for c in failed]
        pytest.fail("the doctor on your model:\n" + "\n".join(lines), pytrace=False)
    if npu_status()[0]:
        assert code == 0, report
        assert report["summary"] == f"graph mode (npugraph_ex) can run here, and {RUNS_EAGERLY}"
    else:
        assert code == 1, report
        assert report["summary"].startswith("graph mode falls back to a stand-in here")
        assert report["summary"].endswith(RUNS_EAGERLY)
