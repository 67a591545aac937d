{%- set decode = cookiecutter.workload == "decode" -%}
"""Tensor parallelism: two ranks under torchrun compute what one device computes, one graph each.
{%- if decode %}
Generation on two ranks chooses one device's tokens, and each rank's KV cache holds only its own
heads of one device's cache.
{%- endif %}"""

{% if decode -%}
import json

{% endif -%}
import pytest
{%- if decode %}
import torch
{%- endif %}

{% if decode -%}
from {{ cookiecutter.package_name }} import generate
from {{ cookiecutter.package_name }}.model import build_model, parallel_plan
{% endif -%}
from {{ cookiecutter.package_name }}.toolkit.contract import assert_same
{%- if decode %}
from {{ cookiecutter.package_name }}.toolkit.generation import greedy, prompt_of
from {{ cookiecutter.package_name }}.toolkit.parallel import KVCacheParallel, plan_targets
from {{ cookiecutter.package_name }}.toolkit.state import (
    State,
    save,
    state_mismatches,
    state_tensors,
)
{%- endif %}


def test_two_ranks_run_under_torchrun(two_ranks_failure):
    """toolkit/two_ranks.py runs every step on two ranks under torchrun and exits 0; if it cannot, this
    one test says why."""
    if two_ranks_failure:
        pytest.fail(two_ranks_failure, pytrace=False)


# two_ranks (toolkit/testing.py): the MRE, among other steps, on two ranks under torchrun.
def test_every_rank_matches_the_single_device_model(two_ranks, eager_output):
    """Each rank's output equals the unsharded model run eagerly in one process."""
    assert sorted(two_ranks.results) == list(range(two_ranks.size))
    for result in two_ranks.results.values():
        assert_same(result["mre"]["value"], eager_output)  # each dtype's tolerance


def test_every_rank_compiles_one_graph(two_ranks):
    """The step, collectives included, is one graph on each rank: fullgraph=True held."""
    graphs = [result["mre"]["graphs"] for result in two_ranks.results.values()]
    assert graphs == [1] * two_ranks.size
{%- if decode %}


@pytest.fixture(scope="module")
def one_device() -> tuple[torch.Tensor, State]:
    """What generate --new-tokens 4 chooses greedily on one device, unsharded and eager, and the
    state the model ends with."""
    torch.manual_seed(0)
    model = build_model().eval()
    prompt = prompt_of(None, "cpu")
    with torch.no_grad():
        tokens = generate.generate(model, model, prompt, 4, sample=greedy)
    return tokens, save(model)


def test_two_ranks_generate_one_devices_tokens(two_ranks, one_device):
    """`generate --json` under torchrun: every rank exits 0, rank 0 alone prints, and its greedy
    tokens are those one device chooses (the printed ones are your sampler's)."""
    steps = [two_ranks.results[rank]["generate"] for rank in range(two_ranks.size)]
    failed = [
        f"rank {rank} exits {step['value']['code']}: {step['told']}"
        for rank, step in enumerate(steps)
        if step["value"]["code"]
    ]
    if failed:
        pytest.fail("generate under torchrun:\n" + "\n".join(failed), pytrace=False)
    assert [step["printed"] for step in steps[1:]] == [""] * (two_ranks.size - 1)
    result = json.loads(steps[0]["printed"])
    assert (result["ranks"]["size"], result["ranks"]["differ"]) == (two_ranks.size, [])
    assert torch.equal(torch.tensor(result["greedy_tokens"]), one_device[0])


def caches(size: int) -> dict[str, KVCacheParallel]:
    """Each state tensor of the model that a KVCacheParallel entry of parallel_plan(size) shards,
    with that entry's style."""
    model = build_model()
    return {
        f"{path}.{name}": style
        for key, style in parallel_plan(size).items()
        if isinstance(style, KVCacheParallel)
        for path, module in plan_targets(model, key)
        for name in state_tensors(module)
    }


def rank_states(two_ranks) -> list[dict[str, torch.Tensor]]:
    """Each rank's model state after generating, or a skip when generate refused the model."""
    states = [
        two_ranks.results[rank]["generate"]["value"]["state"] for rank in range(two_ranks.size)
    ]
    if None in states:
        pytest.skip("generate refused your model: see test_two_ranks_generate_one_devices_tokens")
    return states


def test_each_ranks_state_after_generating_is_its_share_of_one_devices(two_ranks, one_device):
    """After generating, each rank's state equals one device's: a cache the plan shards, that
    rank's slice of it; every other state tensor, whole."""
    sharded = caches(two_ranks.size)
    whole = one_device[1]
    for rank, state in enumerate(rank_states(two_ranks)):
        expected = {
            path: sharded[path].local(tensor, rank, two_ranks.size) if path in sharded else tensor
            for path, tensor in whole.items()
        }
        assert state_mismatches(state, expected) == [], f"rank {rank}"


def test_each_ranks_cache_holds_only_its_share_of_the_heads(two_ranks, one_device):
    """A cache that parallel_plan() shards holds 1/2 of the heads on each rank."""
    sharded = caches(two_ranks.size)
    if not sharded:
        pytest.skip(
            "parallel_plan() shards no KV cache, so each rank holds every head: README, section "
            "'The KV cache, per rank'"
        )
    whole = one_device[1]
    for rank, state in enumerate(rank_states(two_ranks)):
        for path, style in sharded.items():
            heads = whole[path].shape[style.dim] // two_ranks.size
            assert state[path].shape[style.dim] == heads, f"rank {rank}: {path}"
{%- endif %}
