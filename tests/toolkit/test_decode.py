"""The decode contract and the machinery around a captured step, on tiny inputs: what model.py may
declare, the capture size a batch runs at, Dynamo's recompile limit, what warm-up captures and
reports, and the inputs of each step."""

import re
import types

import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters

from decode_project import model
from decode_project.toolkit import decode
from decode_project.toolkit.contract import ContractError
from decode_project.toolkit.decode import (
    DecodeGraphs,
    Limits,
    Warmup,
    ensure_recompile_limit,
    first_step,
    limits,
    next_step,
    prefill,
)

CACHE = Limits(max_batch=8, max_seq_len=10, capture_sizes=(1, 2, 4))
EXAMPLE = "e.g. CAPTURE_SIZES = (1, 2, 4)"
LIMIT = "torch._dynamo.config.recompile_limit"
MISSING = object()
"""model.py without the name at all."""


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


def test_a_batch_of_no_sequence_is_refused():
    """A batch of 0 sequences has no capture size: refused, saying the least it takes."""
    with pytest.raises(ValueError, match=exactly("a batch of 0 sequences: generate at least 1")):
        CACHE.capture_size(0)


def test_a_batch_above_the_largest_capture_size_is_refused_with_both_fixes():
    """More sequences than the largest capture size: refused, naming that size, the cache's rows
    and both ways out."""
    message = (
        "a batch of 5 sequences is more than the largest capture size, 4: run at most 4 at once, "
        "or add a size to CAPTURE_SIZES in model.py (at most MAX_BATCH = 8)"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        CACHE.capture_size(5)


def test_the_cache_takes_exactly_max_seq_len_positions_and_at_least_one_new_token():
    """A prompt plus new tokens up to MAX_SEQ_LEN fits; one more, or no new token, is refused
    with the numbers and the fix."""
    cache = Limits(max_batch=1, max_seq_len=10, capture_sizes=(1,))
    cache.check_length(4, 6)
    cache.check_length(9, 1)
    too_long = (
        "a prompt of 4 tokens plus 7 new ones is 11 positions, more than MAX_SEQ_LEN = 10: "
        "ask for at most 6 new tokens, or raise MAX_SEQ_LEN in model.py"
    )
    with pytest.raises(ValueError, match=exactly(too_long)):
        cache.check_length(4, 7)
    with pytest.raises(ValueError, match=exactly("--new-tokens 0: generate at least 1 token")):
        cache.check_length(4, 0)


def test_a_least_number_of_new_tokens_is_refused_below_it_with_the_reason():
    """generate's least, 2 new tokens: 1 is refused, saying the first token is the prefill's."""
    cache = Limits(max_batch=1, max_seq_len=10, capture_sizes=(1,))
    cache.check_length(4, 2, least=2)
    below = (
        "--new-tokens 1: generate at least 2 tokens (the first new token is the eager prefill's; "
        "decode steps make the rest)"
    )
    with pytest.raises(ValueError, match=exactly(below)):
        cache.check_length(4, 1, least=2)


@pytest.mark.parametrize(("prompt", "least"), [(10, 1), (9, 2)])
def test_a_prompt_leaving_too_little_room_asks_for_a_longer_cache_not_fewer_tokens(prompt, least):
    """A prompt that leaves the cache fewer positions than the least new tokens: the fix is a
    larger MAX_SEQ_LEN (by how much) or a shorter prompt, never fewer tokens than the least."""
    cache = Limits(max_batch=1, max_seq_len=10, capture_sizes=(1,))
    message = (
        f"a prompt of {prompt} tokens plus {least} new ones is {prompt + least} positions, more "
        f"than MAX_SEQ_LEN = 10: raise MAX_SEQ_LEN in model.py to at least {prompt + least}, or "
        "make example_inputs()'s prompt shorter"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        cache.check_length(prompt, least, least=least)


@pytest.fixture
def declare(monkeypatch):
    """Set model.py's decode names: a valid cache, with the given names overridden (MISSING:
    deleted)."""

    def declare(**names: object) -> None:
        valid = {"MAX_BATCH": 4, "MAX_SEQ_LEN": 40, "CAPTURE_SIZES": (1, 2, 4)}
        for name, value in {**valid, **names}.items():
            if value is MISSING:
                monkeypatch.delattr(model, name, raising=False)
            else:
                monkeypatch.setattr(model, name, value, raising=False)

    return declare


@pytest.mark.parametrize(
    ("names", "message"),
    [
        pytest.param(
            {"MAX_BATCH": 0},
            "model.py must set MAX_BATCH to a positive int, got 0",
            id="a MAX_BATCH of 0",
        ),
        pytest.param(
            {"MAX_BATCH": True},
            "model.py must set MAX_BATCH to a positive int, got True",
            id="a bool MAX_BATCH",
        ),
        pytest.param(
            {"MAX_SEQ_LEN": "40"},
            "model.py must set MAX_SEQ_LEN to a positive int, got '40'",
            id="a str MAX_SEQ_LEN",
        ),
        pytest.param(
            {"MAX_SEQ_LEN": MISSING},
            "model.py sets no MAX_SEQ_LEN: set MAX_SEQ_LEN to a positive int, the cache's "
            "positions (a prompt and its new tokens)",
            id="no MAX_SEQ_LEN",
        ),
        pytest.param(
            {"MAX_SEQ_LEN": None},
            "model.py must set MAX_SEQ_LEN to a positive int, got None",
            id="a MAX_SEQ_LEN of None",
        ),
        pytest.param(
            {"MAX_BATCH": MISSING, "CAPTURE_SIZES": MISSING},
            "model.py sets no MAX_BATCH, CAPTURE_SIZES: set MAX_BATCH to a positive int, the "
            "cache's rows (the most sequences at once); set CAPTURE_SIZES to the batch sizes to "
            "capture a decode step for, e.g. (1, 2, 4)",
            id="neither MAX_BATCH nor CAPTURE_SIZES",
        ),
        pytest.param(
            {"CAPTURE_SIZES": None},
            f"CAPTURE_SIZES must be a tuple of ints, got None; {EXAMPLE}",
            id="CAPTURE_SIZES of None",
        ),
        pytest.param(
            {"CAPTURE_SIZES": [1, 2]},
            f"CAPTURE_SIZES must be a tuple of ints, got [1, 2]; {EXAMPLE}",
            id="a list of sizes",
        ),
        pytest.param(
            {"CAPTURE_SIZES": ()},
            f"CAPTURE_SIZES must be a tuple of ints, got (); {EXAMPLE}",
            id="no size",
        ),
        pytest.param(
            {"CAPTURE_SIZES": (1, 2.0)},
            f"CAPTURE_SIZES must be a tuple of ints, got (1, 2.0); {EXAMPLE}",
            id="a float size",
        ),
        pytest.param(
            {"CAPTURE_SIZES": (2, 1)},
            f"CAPTURE_SIZES = (2, 1) must be positive and strictly increasing; {EXAMPLE}",
            id="sizes out of order",
        ),
        pytest.param(
            {"CAPTURE_SIZES": (1, 2, 8)},
            "the largest capture size, 8, is more than MAX_BATCH = 4: the cache has no rows for "
            "it; lower it or raise MAX_BATCH",
            id="a size above MAX_BATCH",
        ),
    ],
)
def test_a_cache_model_py_declares_wrongly_is_a_contract_error_naming_the_fix(declare, names, message):
    """Each decode name of model.py that is missing, of the wrong type or out of range: a
    ContractError that quotes the value and says what to write."""
    declare(**names)
    with pytest.raises(ContractError, match=exactly(message)):
        limits()


def test_the_smallest_cache_is_one_row_of_one_position(declare):
    """MAX_BATCH = MAX_SEQ_LEN = 1 with CAPTURE_SIZES = (1,) is a valid cache."""
    declare(MAX_BATCH=1, MAX_SEQ_LEN=1, CAPTURE_SIZES=(1,))
    assert limits() == Limits(max_batch=1, max_seq_len=1, capture_sizes=(1,))


def test_capture_sizes_within_the_recompile_limit_leave_it_alone():
    """As many capture sizes as Dynamo's recompile limit: nothing to raise, nothing to say."""
    with torch._dynamo.config.patch(recompile_limit=3):
        assert ensure_recompile_limit((1, 2, 4)) is None
        assert torch._dynamo.config.recompile_limit == 3


def test_more_sizes_than_the_recompile_limit_raise_it_up_to_torchs_limit_for_all_graphs():
    """More capture sizes than the recompile limit, as many as torch's accumulated limit: the
    recompile limit is raised to their number, and the note says from what."""
    with (
        torch._dynamo.config.patch(recompile_limit=2),
        torch.compiler.config.patch(accumulated_recompile_limit=3),
    ):
        note = ensure_recompile_limit((1, 2, 4))
        assert torch._dynamo.config.recompile_limit == 3
    assert note == f"3 capture sizes, one graph each: {LIMIT} raised from 2 to 3"


def test_more_sizes_than_torch_compiles_for_one_function_are_refused():
    """More capture sizes than torch's accumulated recompile limit: a ContractError naming it."""
    message = (
        "3 capture sizes are more graphs than torch compiles for one function "
        "(torch.compiler.config.accumulated_recompile_limit = 2): use fewer sizes"
    )
    with (
        torch._dynamo.config.patch(recompile_limit=1),
        torch.compiler.config.patch(accumulated_recompile_limit=2),
        pytest.raises(ContractError, match=exactly(message)),
    ):
        ensure_recompile_limit((1, 2, 4))


def test_warm_up_reads_graphs_sizes_seconds_and_any_note():
    """Warm-up's line: one graph or several, each capture size, the seconds, then its note."""
    assert str(Warmup((1,), 1, 0.5)) == "captured 1 graph (batch 1) in 0.5 s"
    assert str(Warmup((1, 2, 4), 3, 12.34)) == "captured 3 graphs (batch 1, 2, 4) in 12.3 s"
    noted = Warmup((1, 2), 2, 0.5, note="a note")
    assert str(noted) == "captured 2 graphs (batch 1, 2) in 0.5 s; a note"


class Recorder:
    """A compiled step's stand-in: logits that one-hot each row's token, every call kept; with
    `compiles`, each call counts a new graph as Dynamo would."""

    def __init__(self, compiles: bool = False) -> None:
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.compiles = compiles

    def __call__(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        self.calls.append((tokens, input_pos))
        if self.compiles:
            counters["stats"]["unique_graphs"] += 1
        return torch.zeros(*tokens.shape, 8, device=tokens.device).scatter(-1, tokens[..., None], 1)


def test_a_graph_compiled_after_warm_up_is_recorded_with_its_batch_and_position():
    """A step that compiles a new graph is a recompile: recorded with the batch, its capture size
    and the positions, and the real rows' logits still come back."""
    step = Recorder(compiles=True)
    graphs = DecodeGraphs(nn.Module(), {4: step}, CACHE, "cpu")
    logits = graphs(torch.tensor([[1], [2], [3]]), torch.tensor([5]))
    assert logits.argmax(-1).tolist() == [[1], [2], [3]]
    assert graphs.recompiles == ["batch 3 (capture size 4) at positions [5] compiled a new graph"]


def test_a_batch_runs_padded_to_its_capture_size_with_rows_of_token_0():
    """A batch of 3 runs the graph captured for 4: its rows and one padding row of token 0, the
    shape it was captured at; only the batch's own rows' logits come back."""
    step = Recorder()
    graphs = DecodeGraphs(nn.Module(), {4: step}, CACHE, "cpu")
    logits = graphs(torch.tensor([[1], [2], [3]]), torch.tensor([5]))
    ((tokens, _),) = step.calls
    assert tokens.tolist() == [[1], [2], [3], [0]]
    assert logits.argmax(-1).tolist() == [[1], [2], [3]]


def test_int32_ids_run_the_graph_captured_for_int64_ones():
    """A sampler may give int32 ids (the contract allows both): the step still gets them as int64,
    the dtype warm-up captured, so they compile no graph of their own."""
    step = Recorder()
    graphs = DecodeGraphs(nn.Module(), {2: step}, CACHE, "cpu")
    logits = graphs(torch.tensor([[1], [2]], dtype=torch.int32), torch.tensor([5]))
    ((tokens, _),) = step.calls
    assert (tokens.dtype, tokens.tolist()) == (torch.long, [[1], [2]])
    assert logits.argmax(-1).tolist() == [[1], [2]]


def described(*tensors: torch.Tensor) -> list[tuple[tuple[int, ...], torch.dtype, str]]:
    return [(tuple(tensor.shape), tensor.dtype, tensor.device.type) for tensor in tensors]


def test_warm_up_captures_each_size_on_the_device_and_reports_its_seconds_and_note(monkeypatch, caplog):
    """Warm-up runs each capture size's step once, on a token per row and one position, long, on
    the graphs' device (the meta device stands in for the NPU); it times the steps with the clock,
    and logs and keeps the note of a raised recompile limit."""
    clock = iter([10.0, 10.5])
    monkeypatch.setattr(decode, "time", types.SimpleNamespace(perf_counter=clock.__next__))
    steps = {1: Recorder(), 2: Recorder()}
    cache = Limits(max_batch=2, max_seq_len=10, capture_sizes=(1, 2))
    graphs = DecodeGraphs(nn.Module(), steps, cache, "meta")
    with torch._dynamo.config.patch(recompile_limit=1):
        warmup = graphs.warm_up()
    note = f"2 capture sizes, one graph each: {LIMIT} raised from 1 to 2"
    assert warmup == Warmup((1, 2), 0, 0.5, note)
    assert caplog.messages == [f"decode: {note}"]
    seen = [described(*inputs) for step in steps.values() for inputs in step.calls]
    assert seen == [
        [((1, 1), torch.long, "meta"), ((1,), torch.long, "meta")],
        [((2, 1), torch.long, "meta"), ((1,), torch.long, "meta")],
    ]


def test_prefill_and_the_first_step_put_positions_on_the_prompts_device():
    """Prefill's positions and the first step's position go where the prompt is: on an NPU a
    position on the host would be a host input to the graph (the meta device stands in here)."""
    positions = []

    def forward(tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        positions.append(input_pos)
        return torch.zeros(*tokens.shape, 8, device=tokens.device)

    prompt = torch.zeros(2, 3, dtype=torch.long, device="meta")
    assert prefill(forward, prompt).device.type == "meta"
    tokens, input_pos = first_step(forward, prompt)
    assert (tokens.device.type, input_pos.device.type) == ("meta", "meta")
    assert [position.device.type for position in positions] == ["meta", "meta"]


def test_the_step_after_one_takes_other_tokens_at_the_next_position():
    """next_step(): zero tokens of the same shape, at the position after the given one."""
    tokens, input_pos = next_step(torch.tensor([[5], [6]]), torch.tensor([7]))
    assert tokens.tolist() == [[0], [0]]
    assert input_pos.tolist() == [8]
