{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""The model compiles as one graph through the MRE's own path, and a graph break fails it loudly."""

import pytest
import torch
from torch import nn

from {{ cookiecutter.package_name }} import mre
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.parallel import tensor_parallel
{%- endif %}


def test_mre_compiles_the_model_as_one_graph(mre_run):
    """The MRE compiled the model once, as one graph (its cache, if any, starts empty)."""
    assert mre_run.graphs == 1


class BreaksTheGraph(nn.Module):
    """Your model behind the classic graph break: a Python `if` on a tensor value."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs):
        first = next(value for value in inputs if isinstance(value, torch.Tensor))
        if first.float().sum() > 0:
            return self.model(*inputs)
        return self.model(*inputs)


def test_a_graph_break_stops_the_mre_and_names_the_cause(monkeypatch, tmp_path):
    """The MRE compiles with fullgraph=True: a break is an Unsupported error saying what broke."""
    build = mre.build_model
    monkeypatch.setattr(mre, "build_model", lambda: BreaksTheGraph(build()))
{%- if tp %}
    plan = mre.parallel_plan
    # The wrapper holds your model as .model: the plan's keys move one level down.
    monkeypatch.setattr(
        mre, "parallel_plan", lambda size: {f"model.{k}": v for k, v in plan(size).items()}
    )
{%- endif %}
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
{%- if tp %}
    with (
        pytest.raises(torch._dynamo.exc.Unsupported, match="Data-dependent branching"),
        tensor_parallel(select_backend().device),
    ):
        mre.infer_one_step()
{%- else %}
    with pytest.raises(torch._dynamo.exc.Unsupported, match="Data-dependent branching"):
        mre.infer_one_step()
{%- endif %}
