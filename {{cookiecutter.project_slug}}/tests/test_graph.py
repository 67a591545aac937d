{%- set forward = "_forward" if cookiecutter.mode == "cache_compile" else "forward" -%}
"""The model compiles as one graph, and a graph break is an error that names its cause."""

import pytest
import torch

from {{ cookiecutter.package_name }}.backend import STAND_IN
from {{ cookiecutter.package_name }}.model import INPUT_SHAPE, {{ cookiecutter.model_class }}


class BranchesOnData({{ cookiecutter.model_class }}):
    """The model plus the classic graph break: a Python `if` on a tensor value."""

    def {{ forward }}(self, x):
        if x.sum() > 0:
            x = x * 2
        return super().{{ forward }}(x)


def compile_whole(model: torch.nn.Module):
    return torch.compile(
        model.{{ forward }},
        backend=STAND_IN,
        fullgraph=True,
        dynamic=False,
    )


def test_mre_compiles_the_model_as_one_graph(mre_run):
    """The MRE compiled the model once, as one graph (its cache, if any, starts empty)."""
    assert mre_run.graphs == 1


def test_graph_break_fails_and_names_the_cause():
    """Under fullgraph=True a break is an Unsupported error that says what broke the graph."""
    compiled = compile_whole(BranchesOnData().eval())
    with (
        torch.no_grad(),
        pytest.raises(torch._dynamo.exc.Unsupported, match="Data-dependent branching"),
    ):
        compiled(torch.randn(INPUT_SHAPE))
