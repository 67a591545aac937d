{%- set cache = cookiecutter.mode == "cache_compile" -%}
"""On an Ascend NPU: real npugraph_ex capture and replay match eager. Skipped elsewhere."""

import pytest
import torch

from {{ cookiecutter.package_name }}.backend import select_backend
from {{ cookiecutter.package_name }}.model import INPUT_SHAPE, {{ cookiecutter.model_class }}

pytestmark = pytest.mark.npu


def test_replays_match_eager_for_new_input_data():
    """The first call captures, later ones replay: every call equals eager on its own input."""
    backend = select_backend()
    assert backend.is_npugraph_ex, backend.reason
    model = {{ cookiecutter.model_class }}().to("npu").eval()
{%- if cache %}
    graph = model
    eager = model._forward
{%- else %}
    graph = torch.compile(
        model, backend="npugraph_ex", fullgraph=True, dynamic=False, options=backend.options
    )
    eager = model
{%- endif %}
    with torch.no_grad():
        for _ in range(3):
            dummy_input = torch.randn(INPUT_SHAPE, device="npu")
            torch.testing.assert_close(graph(dummy_input), eager(dummy_input))
