{%- set in_place = cookiecutter.custom_op == "in_place" -%}
{%- set op_plugin = cookiecutter.op_registration == "op_plugin" -%}
{%- set cache_update = in_place and cookiecutter.workload == "decode" -%}
"""The custom operator {{ cookiecutter.__op_ns }}::{{ cookiecutter.__op }}: {{ "Meta" if op_plugin else "fake" }} function, kernel and graph mode agree."""

import inspect

import pytest
import torch
{%- if cache_update %}
from torch import nn
{%- endif %}
from torch._subclasses.fake_tensor import FakeTensorMode

from {{ cookiecutter.package_name }} import {{ "meta_registrations" if op_plugin else "custom_op" }}
{%- if op_plugin %}
from {{ cookiecutter.package_name }}.op_reference import reference
from {{ cookiecutter.package_name }}.toolkit import opschema
{%- else %}
from {{ cookiecutter.package_name }}.custom_op import reference
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.backend import STAND_IN, select_backend

OP = torch.ops.{{ cookiecutter.__op_ns }}.{{ cookiecutter.__op }}
# Read by name at run time, so that a project without it still runs every other test.
{%- if op_plugin %}
SHAPE_FUNCTION = "{{ cookiecutter.op_name }}_meta"
shape_function = getattr(meta_registrations, SHAPE_FUNCTION, None)
{%- else %}
SHAPE_FUNCTION = "{{ cookiecutter.__op.rstrip("_") }}_fake"
shape_function = getattr(custom_op, SHAPE_FUNCTION, None)
{%- endif %}
{%- if not cache_update %}
SHAPES = [(7,), (2, 8, 32), (3, 1, 5, 4)]
{%- endif %}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Where the model runs: the NPU where npugraph_ex runs, the CPU elsewhere.
DEVICE = select_backend().device
{%- if cache_update %}
# Known values, fixed independently of any kernel: a cache of 3 rows, 1 head, 5 positions and
# head_dim 2, all -1, gets a batch of 2 rows at positions 1 and 3.
CACHE_SHAPE = (3, 1, 5, 2)
INPUT_POS = [1, 3]
UPDATE = [[[[1.0, 2.0], [3.0, 4.0]]], [[[5.0, 6.0], [7.0, 8.0]]]]
# Rows [:2] hold the update at positions 1 and 3 only; row 2, beyond the batch, is left alone.
CACHE_AFTER = [
    [[[-1.0, -1.0], [1.0, 2.0], [-1.0, -1.0], [3.0, 4.0], [-1.0, -1.0]]],
    [[[-1.0, -1.0], [5.0, 6.0], [-1.0, -1.0], [7.0, 8.0], [-1.0, -1.0]]],
    [[[-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0]]],
]


def known_arguments() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(cache, input_pos, update) of the known values."""
    return (
        torch.full(CACHE_SHAPE, -1.0, device=DEVICE),
        torch.tensor(INPUT_POS, device=DEVICE),
        torch.tensor(UPDATE, device=DEVICE),
    )


def expected_cache() -> torch.Tensor:
    return torch.tensor(CACHE_AFTER, device=DEVICE)


def random_arguments(dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A cache of 4 rows, 2 heads, 8 positions and head_dim 3; a batch of 2 rows at positions 2, 5."""
    return (
        torch.randn(4, 2, 8, 3, dtype=dtype, device=DEVICE),
        torch.tensor([2, 5], device=DEVICE),
        torch.randn(2, 2, 2, 3, dtype=dtype, device=DEVICE),
    )


def test_opcheck_passes():
    """torch.library.opcheck: schema (the mutated cache declared), fake tensor, autograd registration and AOT dispatch agree."""
    torch.library.opcheck(OP.default, random_arguments())
{%- else %}
# Known values, fixed independently of any kernel: the op adds y to x.
X = [1.0, 2.0, -3.0]
Y = [10.0, 0.5, 3.0]
X_PLUS_Y = [11.0, 2.5, 0.0]


def pair(shape=(2, 8, 32), dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.randn(shape, dtype=dtype, device=DEVICE),
        torch.randn(shape, dtype=dtype, device=DEVICE),
    )


def known_pair() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(X, device=DEVICE), torch.tensor(Y, device=DEVICE)


def expected_sum() -> torch.Tensor:
    return torch.tensor(X_PLUS_Y, device=DEVICE)


def test_opcheck_passes():
    """torch.library.opcheck: schema, fake tensor, autograd registration and AOT dispatch agree."""
    torch.library.opcheck(OP.default, pair())
{%- endif %}


{%- if op_plugin %}


def test_the_op_has_a_meta_kernel_and_it_is_the_one_defined_here():
    """npu::{{ cookiecutter.op_name }} has a Meta kernel, which graph mode traces with (the development
    stand-in's kernel is the CPU's alone): meta_registrations.py's while it defines one, op-plugin's
    once step 5 of the README's op-plugin steps moved it there."""
    meta_lines = [
        line
        for line in torch._C._dispatch_dump(OP.default.name()).splitlines()
        if line.startswith("Meta:")
    ]
    assert meta_lines, (
        "npu::{{ cookiecutter.op_name }} has no Meta function: define and register "
        f"{SHAPE_FUNCTION} in meta_registrations.py; README, section 'The op-plugin operator'"
    )
    if shape_function is not None:
        assert meta_registrations.__file__ in meta_lines[0]


def test_project_schema_passes_strict(capsys):
    """This project's op_plugin_functions.yaml has no finding, graph-mode warnings included."""
    assert opschema.main(["--strict"]) == 0
    assert capsys.readouterr().out == ""
{%- endif %}


{% if op_plugin -%}
@pytest.mark.skipif(
    shape_function is None,
    reason=f"meta_registrations.py has no {SHAPE_FUNCTION}: op-plugin holds it (README, op-plugin step 5)",
)
{% endif -%}
def test_{{ "meta" if op_plugin else "fake" }}_function_parameters_match_the_schema():
    """The {{ "Meta" if op_plugin else "fake" }} function takes the schema's arguments, by name and in order."""
{%- if not op_plugin %}
    assert shape_function is not None, (
        f"custom_op.py has no {SHAPE_FUNCTION}: graph mode traces the op with it; "
        "README, section 'The custom operator'"
    )
{%- endif %}
    schema_names = [argument.name for argument in OP.default._schema.arguments]
    assert list(inspect.signature(shape_function).parameters) == schema_names
{%- if cache_update %}


@pytest.mark.parametrize("dtype", DTYPES)
def test_fake_run_returns_nothing_and_keeps_the_cache(dtype):
    """Traced with fake tensors, the op returns None and the cache keeps its shape and dtype."""
    cache, input_pos, update = random_arguments(dtype)
    with FakeTensorMode() as mode:
        fake_cache = mode.from_tensor(cache)
        assert OP(fake_cache, mode.from_tensor(input_pos), mode.from_tensor(update)) is None
        assert (fake_cache.shape, fake_cache.dtype) == (cache.shape, cache.dtype)


def test_eager_call_writes_the_known_positions_and_returns_nothing():
    """In eager mode the op writes the update at input_pos of rows [:batch], nothing else, and returns None."""
    cache, input_pos, update = known_arguments()
    assert OP(cache, input_pos, update) is None
    torch.testing.assert_close(cache, expected_cache())


def test_reference_writes_the_known_positions():
    """The plain-torch reference writes the update at input_pos of rows [:batch], nothing else."""
    cache, input_pos, update = known_arguments()
    reference(cache, input_pos, update)
    torch.testing.assert_close(cache, expected_cache())


class CacheHolder(nn.Module):
    """A cache kept as a buffer, as the model keeps its KV cache, written by the op."""

    def __init__(self, cache: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("cache", cache)

    def forward(self, input_pos: torch.Tensor, update: torch.Tensor) -> None:
        OP(self.cache, input_pos, update)


def test_compiled_call_writes_the_known_positions_into_a_buffer():
    """Compiled as one graph, the op still writes the known positions of the module's buffer, and returns None."""
    cache, input_pos, update = known_arguments()
    holder = CacheHolder(cache)
    compiled = torch.compile(holder, backend=STAND_IN, fullgraph=True, dynamic=False)
    assert compiled(input_pos, update) is None
    torch.testing.assert_close(holder.cache, expected_cache())


def test_compiled_call_writes_like_eager_before_reading():
    """Compiled as one graph, a read of the cache after the op sees the write, as in eager mode."""

    def step(cache: torch.Tensor, input_pos: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        OP(cache, input_pos, update)
        return cache * 2

    cache, input_pos, update = random_arguments()
    eager_cache = cache.clone()
    eager_out = step(eager_cache, input_pos, update)
    compiled_out = torch.compile(step, backend=STAND_IN, fullgraph=True, dynamic=False)(
        cache, input_pos, update
    )
    torch.testing.assert_close(cache, eager_cache)
    torch.testing.assert_close(compiled_out, eager_out)
{%- elif in_place %}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_fake_run_returns_nothing_and_keeps_x(shape, dtype):
    """Traced with fake tensors, the op returns None and x keeps its shape and dtype."""
    x, y = pair(shape, dtype)
    with FakeTensorMode() as mode:
        fake_x = mode.from_tensor(x)
        assert OP(fake_x, mode.from_tensor(y)) is None
        assert (fake_x.shape, fake_x.dtype) == (x.shape, x.dtype)


def test_reference_adds_y_into_x_known_values():
    """The plain-torch reference computes x += y: fixed inputs, fixed expected values."""
    x, y = known_pair()
    reference(x, y)
    torch.testing.assert_close(x, expected_sum())


def test_eager_call_mutates_x_like_the_reference():
    """In eager mode the op writes the reference result into x."""
    x, y = pair()
    expected = x.clone()
    reference(expected, y)
    assert OP(x, y) is None
    torch.testing.assert_close(x, expected)


def test_compiled_call_mutates_its_input_like_eager():
    """Compiled as one graph, the op still writes into the caller's tensor (functionalized, then copied back)."""

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        OP(x, y)
        return x * 2

    x, y = pair()
    eager_x = x.clone()
    eager_out = step(eager_x, y)
    compiled_out = torch.compile(step, backend=STAND_IN, fullgraph=True, dynamic=False)(x, y)
    torch.testing.assert_close(x, eager_x)
    torch.testing.assert_close(compiled_out, eager_out)
{%- else %}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_fake_output_matches_the_kernel(shape, dtype):
    """Traced with fake tensors, the op reports the shape and dtype the real kernel produces."""
    x, y = pair(shape, dtype)
    real = OP(x, y)
    with FakeTensorMode() as mode:
        fake = OP(mode.from_tensor(x), mode.from_tensor(y))
    assert (fake.shape, fake.dtype) == (real.shape, real.dtype)


def test_reference_adds_known_values():
    """The plain-torch reference returns x + y: fixed inputs, fixed expected values."""
    torch.testing.assert_close(reference(*known_pair()), expected_sum())


def test_eager_call_equals_the_reference():
    """In eager mode the op computes the reference result."""
    x, y = pair()
    torch.testing.assert_close(OP(x, y), reference(x, y))


def test_compiled_call_equals_eager():
    """Compiled as one graph with the stand-in, the op gives the eager result."""

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return OP(x * 2, y)

    x, y = pair()
    compiled = torch.compile(step, backend=STAND_IN, fullgraph=True, dynamic=False)
    torch.testing.assert_close(compiled(x, y), step(x, y))
{%- endif %}
{%- if not op_plugin %}


@pytest.mark.npu
def test_on_an_npu_the_npu_kernel_is_registered():
    """On an NPU the op has a kernel of its own for NPU tensors (PrivateUse1), not only the reference."""
    assert torch._C._dispatch_has_kernel_for_dispatch_key(OP.default.name(), "PrivateUse1")
{%- endif %}
