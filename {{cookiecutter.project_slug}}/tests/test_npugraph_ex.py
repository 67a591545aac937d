{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set decode = cookiecutter.workload == "decode" -%}
"""On an Ascend NPU: real npugraph_ex capture and replay match eager, output and state. Skipped
elsewhere."""

import pytest
import torch

from {{ cookiecutter.package_name }}.model import build_model, example_inputs
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
{%- if cache %}
from {{ cookiecutter.package_name }}.toolkit.compile_cache import CachedModel
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same, clone, to_device
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.decode import first_step
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.state import restore, save, state_mismatches

pytestmark = pytest.mark.npu


def test_replays_match_eager_for_new_input_data({{ "tmp_path, monkeypatch" if cache else "" }}):
    """The first call captures, later ones replay: each equals eager on its own new inputs, and
    leaves the state eager leaves."""
{%- if cache %}
    monkeypatch.chdir(tmp_path)  # the cache_compile cache starts empty
{%- endif %}
    backend = select_backend()
    assert backend.is_npugraph_ex, backend.reason
    torch.manual_seed(0)
    model = build_model().to("npu").eval()
{%- if cache %}
    graph = CachedModel(model)
{%- else %}
    graph = torch.compile(
        model, backend="npugraph_ex", fullgraph=True, dynamic=False, options=backend.options
    )
{%- endif %}
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        with torch.no_grad():
{%- if decode %}
            # A new prompt, prefilled eagerly: the replay is the decode step after it.
            dummy_input = first_step(model, *to_device(example_inputs(), "npu"))
{%- else %}
            dummy_input = to_device(example_inputs(), "npu")
{%- endif %}
            start = save(model)
            output = clone(graph(*dummy_input))
            state = save(model)
            restore(model, start)
            assert_same(output, model(*dummy_input))
            assert state_mismatches(state, save(model)) == []
