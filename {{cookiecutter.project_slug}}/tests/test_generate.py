{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""generate on your model: the decode step in graph mode, captured once per capture size and
replayed for every position, chooses the tokens a model without a cache would choose, pads a batch
up to its capture size without the padding reaching real rows, and refuses what the cache cannot
hold."""

import contextlib
import io
import json
{%- if tp %}
from collections.abc import Iterator
{%- endif %}
from typing import NamedTuple

import pytest
import torch
from torch._dynamo.utils import counters

from {{ cookiecutter.package_name }} import generate, model
from {{ cookiecutter.package_name }}.__main__ import main
from {{ cookiecutter.package_name }}.toolkit import generation
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.decode import DecodeGraphs, limits, logits_of
from {{ cookiecutter.package_name }}.toolkit.generation import build, eager_step, greedy, prompt_of
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.parallel import Ranks, tensor_parallel
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.state import State, restore, save, state_mismatches

NEW_TOKENS = 16


class Decoder(NamedTuple):
    model: torch.nn.Module
    graphs: DecodeGraphs
    start: State
    """The state before any generation: each test starts from it."""


class Generated(NamedTuple):
    code: int
    printed: str
    told: str
    """What generate printed on stderr: why it failed, if it did."""
    decoders: list[Decoder]
    """The model and decode graphs generate built and warmed up, as it built them."""


{% if tp -%}
@pytest.fixture(scope="module")
def ranks() -> Iterator[Ranks]:
    """One rank, for this module's tests: generate's own runs join it."""
    with tensor_parallel(select_backend().device) as ranks:
        yield ranks


@pytest.fixture(scope="module")
def generated(ranks: Ranks) -> Generated:
    """`generate --json --new-tokens 4` on your model, on this rank, once. The sharded model and
    the decode graphs it builds and warms up are kept for the tests below, which replay them
    instead of capturing every size again."""
{%- else -%}
@pytest.fixture(scope="module")
def generated() -> Generated:
    """`generate --json --new-tokens 4` on your model, once. The model and the decode graphs it
    builds and warms up are kept for the tests below, which replay them instead of capturing
    every size again."""
{%- endif %}
    decoders: list[Decoder] = []

    def kept(*arguments) -> tuple[torch.nn.Module, DecodeGraphs]:
        built, graphs = build(*arguments)
        decoders.append(Decoder(built, graphs, save(built)))
        return built, graphs

    torch._dynamo.reset()
    printed, told = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(told),
    ):
        patch.setattr(generation, "build", kept)
        code = main(["generate", "--json", "--new-tokens", "4"])
    return Generated(code, printed.getvalue(), told.getvalue(), decoders)


@pytest.fixture(scope="module")
def decoder(generated: Generated) -> Decoder:
    """Your decode step in graph mode at every capture size, as generate built and warmed it up;
    skips if generate built none (its test names why, once)."""
    if not generated.decoders:
        pytest.skip("generate built no decode graphs: see test_generate_on_your_model_exits_0")
    return generated.decoders[0]


def in_graph_mode(decoder: Decoder, prompt: torch.Tensor) -> tuple[torch.Tensor, State]:
    """The tokens your loop chooses greedily in graph mode from `prompt`, and the state it leaves."""
    restore(decoder.model, decoder.start)
    with torch.no_grad():
        tokens = generate.generate(decoder.graphs, decoder.model, prompt, NEW_TOKENS, sample=greedy)
    return tokens, save(decoder.model)


def eagerly(prompt: torch.Tensor) -> tuple[torch.Tensor, State]:
    """The same loop, run eagerly on a fresh model, and the state it leaves."""
    torch.manual_seed(0)
    fresh = model.build_model().to(prompt.device).eval()
    with torch.no_grad():
        tokens = generate.generate(eager_step(fresh), fresh, prompt, NEW_TOKENS, sample=greedy)
    return tokens, save(fresh)


def without_a_cache(prompt: torch.Tensor) -> torch.Tensor:
    """Greedy tokens with no cache to trust: every token from the whole sequence so far, run from
    position 0 on the state a fresh model starts with."""
    torch.manual_seed(0)
    fresh = model.build_model().to(prompt.device).eval()
    start = save(fresh)
    tokens = prompt
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            restore(fresh, start)
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            logits = logits_of(fresh(tokens, positions))
            tokens = torch.cat([tokens, greedy(logits)], dim=1)
    return tokens


def rows(batch: int | None) -> torch.Tensor:
    """Your prompt's rows in turn, as `generate --batch` takes them (None: as they are)."""
    return prompt_of(batch, select_backend().device)


@pytest.mark.parametrize("size", limits().capture_sizes)
def test_each_capture_size_generates_what_eager_generates(decoder, size):
    """At every capture size, graph mode chooses eager's tokens and leaves eager's cache."""
    prompt = rows(size)
    tokens, state = in_graph_mode(decoder, prompt)
    eager_tokens, eager_state = eagerly(prompt)
    assert torch.equal(tokens, eager_tokens)
    assert state_mismatches(state, eager_state) == []


def test_the_cache_gives_what_recomputing_every_token_gives(decoder):
    """A cache write that is dropped or lands at another position changes the next tokens: graph
    mode, reading its cache, chooses what the whole sequence recomputed at each step chooses."""
    prompt = rows(limits().capture_sizes[-1])
    tokens, _ = in_graph_mode(decoder, prompt)
    assert torch.equal(tokens, without_a_cache(prompt))


def test_no_recompile_across_positions(decoder):
    """Once warm-up has captured each size (generate's test counts the graphs), 16 positions at
    each size compile nothing more."""
    sizes = limits().capture_sizes
    graphs = counters["stats"]["unique_graphs"]
    for size in sizes:
        in_graph_mode(decoder, rows(size))
    assert counters["stats"]["unique_graphs"] == graphs
    assert decoder.graphs.recompiles == []


def test_a_batch_between_sizes_is_padded_and_its_rows_are_its_own(decoder):
    """A batch that is no capture size runs at the next size up, and its real rows get the tokens
    the unpadded batch gets eagerly: padding never reaches them."""
    sizes = limits().capture_sizes
    batch = next((b for b in range(1, sizes[-1]) if b not in sizes), None)
    if batch is None:
        pytest.skip(f"CAPTURE_SIZES {sizes} leave no batch between two sizes")
    assert limits().capture_size(batch) > batch
    prompt = rows(batch)
    tokens, _ = in_graph_mode(decoder, prompt)
    assert torch.equal(tokens, eagerly(prompt)[0])


def test_generate_on_your_model_exits_0_graph_mode_choosing_eagers_tokens(generated):
    """`generate --json --new-tokens 4` exits 0: one graph per capture size, no recompile, graph
    mode's greedy tokens equal to eager's, and your prompt followed by 4 tokens per sequence."""
    if generated.code:
        failure = f"generate exits {generated.code} on your model:\n{generated.told}"
        pytest.fail(failure, pytrace=False)
    result = json.loads(generated.printed)
    assert (result["matches_eager"], result["first_difference"]) == (True, None)
    assert (result["graphs"], result["recompiles"]) == (len(limits().capture_sizes), [])
    batch, length = rows(None).shape
    assert [len(row) for row in result["tokens"]] == [length + 4] * batch


def refusal(capsys, *arguments: str) -> str:
    """What `generate` prints when it refuses the request: exit 2, one line."""
    assert main(["generate", *arguments]) == 2
    message = capsys.readouterr().err
    assert len(message.strip().splitlines()) == 1
    return message


def test_a_batch_above_the_largest_size_is_refused(capsys):
    """More sequences than the largest capture size: refused, naming both and the fix."""
    largest = limits().capture_sizes[-1]
    message = refusal(capsys, "--batch", str(largest + 1))
    assert f"a batch of {largest + 1} sequences is more than the largest capture size" in message
    assert "CAPTURE_SIZES" in message


def test_a_prompt_plus_new_tokens_beyond_the_cache_is_refused(capsys):
    """A prompt plus new tokens longer than MAX_SEQ_LEN: refused, with the most it can take."""
    prompt_length = rows(1).shape[1]
    most = limits().max_seq_len - prompt_length
    message = refusal(capsys, "--new-tokens", str(most + 1))
    assert f"more than MAX_SEQ_LEN = {limits().max_seq_len}" in message
    assert f"ask for at most {most} new tokens" in message
