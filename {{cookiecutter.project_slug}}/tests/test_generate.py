{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""Generation: the decode step in graph mode, captured once per capture size and replayed for every
position, chooses the tokens a model without a cache would choose, pads a batch up to its capture
size without the padding reaching real rows, and refuses what the cache cannot hold."""

import contextlib
import dataclasses
import io
import json
import re
import types
{%- if tp %}
from collections.abc import Iterator
{%- endif %}
from typing import NamedTuple

import pytest
import torch
from torch._dynamo.utils import counters

from {{ cookiecutter.package_name }} import generate, model
{%- if cache and not tp %}
from {{ cookiecutter.package_name }}.toolkit import compile_cache, project
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
from {{ cookiecutter.package_name }}.toolkit.decode import DecodeGraphs, Warmup, limits, logits_of
{%- if tp %}
from {{ cookiecutter.package_name }}.toolkit.parallel import Ranks, tensor_parallel
{%- endif %}
from {{ cookiecutter.package_name }}.toolkit.state import State, restore, save, state_mismatches

NEW_TOKENS = 16


class Decoder(NamedTuple):
    model: torch.nn.Module
    graphs: DecodeGraphs
    warmup: Warmup
    start: State
    """The state before any generation: each test starts from it."""


{% if tp -%}
@pytest.fixture(scope="module")
def ranks() -> Iterator[Ranks]:
    """One rank, for this module's tests: generate's own runs join it."""
    with tensor_parallel(select_backend().device) as ranks:
        yield ranks


@pytest.fixture(scope="module")
def decoder(ranks: Ranks) -> Decoder:
    """The sample's decode step in graph mode, sharded, built and warmed up as generate does, once."""
    torch._dynamo.reset()
    built, graphs = generate.build(select_backend(), ranks)
{%- else -%}
@pytest.fixture(scope="module")
def decoder() -> Decoder:
    """The sample's decode step in graph mode, built and warmed up as generate does, once."""
    torch._dynamo.reset()
    built, graphs = generate.build(select_backend())
{%- endif %}
    start = save(built)
    with torch.no_grad():
        warmup = graphs.warm_up()
    return Decoder(built, graphs, warmup, start)


def in_graph_mode(decoder: Decoder, prompt: torch.Tensor) -> tuple[torch.Tensor, State]:
    """The tokens graph-mode generation gives from `prompt`, and the state it leaves."""
    restore(decoder.model, decoder.start)
    with torch.no_grad():
        tokens = generate.generate(decoder.graphs, decoder.model, prompt, NEW_TOKENS)
    return tokens, save(decoder.model)


def eagerly(prompt: torch.Tensor) -> tuple[torch.Tensor, State]:
    """The same generation by an eager loop on a fresh model, and the state it leaves."""
    torch.manual_seed(0)
    fresh = model.build_model().to(prompt.device).eval()
    with torch.no_grad():
        tokens = generate.generate(fresh, fresh, prompt, NEW_TOKENS)
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
            tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)
    return tokens


def prompt_of(batch: int | None) -> torch.Tensor:
    """The sample prompt's rows in turn, as `generate --batch` takes them (None: as they are)."""
    return generate.prompt_of(batch, select_backend().device)


@pytest.mark.parametrize("size", limits().capture_sizes)
def test_each_capture_size_generates_what_eager_generates(decoder, size):
    """At every capture size, graph mode chooses eager's tokens and leaves eager's cache."""
    prompt = prompt_of(size)
    tokens, state = in_graph_mode(decoder, prompt)
    eager_tokens, eager_state = eagerly(prompt)
    assert torch.equal(tokens, eager_tokens)
    assert state_mismatches(state, eager_state) == []


def test_the_cache_gives_what_recomputing_every_token_gives(decoder):
    """A cache write that is dropped or lands at another position changes the next tokens: graph
    mode, reading its cache, chooses what the whole sequence recomputed at each step chooses."""
    prompt = prompt_of(limits().capture_sizes[-1])
    tokens, _ = in_graph_mode(decoder, prompt)
    assert torch.equal(tokens, without_a_cache(prompt))


def test_one_graph_per_capture_size_and_no_recompile_across_positions(decoder):
    """Warm-up captures each size once; then 16 positions at each size compile nothing more."""
    sizes = limits().capture_sizes
    assert (decoder.warmup.graphs, decoder.warmup.sizes) == (len(sizes), sizes)
    graphs = counters["stats"]["unique_graphs"]
    for size in sizes:
        in_graph_mode(decoder, prompt_of(size))
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
    prompt = prompt_of(batch)
    tokens, _ = in_graph_mode(decoder, prompt)
    assert torch.equal(tokens, eagerly(prompt)[0])


def refusal(capsys, *arguments: str) -> str:
    """What `generate` prints when it refuses the request: exit 2, one line."""
    assert generate.main(list(arguments)) == 2
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
    prompt_length = prompt_of(1).shape[1]
    most = limits().max_seq_len - prompt_length
    message = refusal(capsys, "--new-tokens", str(most + 1))
    assert f"more than MAX_SEQ_LEN = {limits().max_seq_len}" in message
    assert f"ask for at most {most} new tokens" in message


def test_the_cache_takes_exactly_max_seq_len_positions_and_at_least_one_new_token():
    """A prompt plus new tokens up to MAX_SEQ_LEN fits; one more, or no new token, is refused
    with the numbers and the fix."""
    cache = dataclasses.replace(limits(), max_batch=1, max_seq_len=10, capture_sizes=(1,))
    cache.check_length(4, 6)
    cache.check_length(9, 1)
    too_long = (
        "a prompt of 4 tokens plus 7 new ones is 11 positions, more than MAX_SEQ_LEN = 10: "
        "ask for at most 6 new tokens, or raise MAX_SEQ_LEN in model.py"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(too_long)}$"):
        cache.check_length(4, 7)
    with pytest.raises(ValueError, match=r"^--new-tokens 0: generate at least 1 token$"):
        cache.check_length(4, 0)


def test_the_first_difference_is_the_earliest_position_of_any_sequence():
    """Where graph mode's tokens part from eager's: the earliest position, and its sequence."""
    eager = torch.zeros(3, 6, dtype=torch.long)
    tokens = eager.clone()
    tokens[0, 5], tokens[2, 3] = 7, 7
    assert generate.first_difference(tokens, eager) == "sequence 2, position 3"
    assert generate.first_difference(eager.clone(), eager) is None


def test_the_report_lays_out_each_line_of_the_result():
    """render(): backend, warm-up, each sequence (prompt | new tokens), speed, recompiles and a
    note, one aligned line each."""
    result = {
        "backend": "aot_eager",
        "reason": "no NPU",
        "warmup": "captured 1 graph (batch 1) in 0.5 s",
        "tokens": [[5, 6, 7, 8]],
        "prompt_length": 2,
        "tokens_per_s": {"eager": 12.34, "graph": 56.78},
        "batch": 1,
        "capture_size": 1,
        "recompiles": ["batch 1, position 3", "batch 1, position 4"],
        "note": "a note",
    }
    assert generate.render(result).splitlines() == [
        "backend     aot_eager (no NPU)",
        "warm-up     captured 1 graph (batch 1) in 0.5 s",
        "sequence 0  5 6 | 7 8",
        "tokens/s    eager 12.3, graph 56.8 (batch 1, capture size 1)",
        "recompiles  batch 1, position 3; batch 1, position 4",
        "note        a note",
    ]
    quiet = {**result, "recompiles": [], "note": None}
    assert generate.render(quiet).splitlines()[-1] == "recompiles  none"


class Counting:
    """A model whose next token is the last one plus 1 (modulo 10), as one-hot logits."""

    def __call__(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot((tokens + 1) % 10, 10).float()


def test_a_sequence_that_produced_eos_repeats_it_while_the_others_go_on(monkeypatch):
    """With EOS_ID set, a sequence that produced it repeats it; the others keep generating."""
    monkeypatch.setattr(generate, "EOS_ID", 7)
    counting = Counting()
    tokens = generate.generate(counting, counting, torch.tensor([[1, 2], [4, 5]]), 4)
    assert tokens.tolist() == [[1, 2, 3, 4, 5, 6], [4, 5, 6, 7, 7, 7]]


def test_generation_stops_once_every_sequence_produced_eos(monkeypatch):
    """Once every sequence has produced EOS_ID, no more steps run: the result is shorter than
    asked."""
    monkeypatch.setattr(generate, "EOS_ID", 7)
    counting = Counting()
    tokens = generate.generate(counting, counting, torch.tensor([[1, 2], [4, 5]]), 9)
    assert tokens.tolist() == [[1, 2, 3, 4, 5, 6, 7], [4, 5, 6, 7, 7, 7, 7]]


def test_which_new_tokens_end_their_sequence(monkeypatch):
    """ended(): one flag per sequence, on the tokens' device; without EOS_ID none is set, with it
    those that produced it."""
    tokens = torch.tensor([[3], [7], [7]])
    assert generate.ended(tokens).tolist() == [False, False, False]
    assert generate.ended(tokens.to("meta")).device.type == "meta"
    monkeypatch.setattr(generate, "EOS_ID", 7)
    assert generate.ended(tokens).tolist() == [False, True, True]


def test_the_prompt_goes_to_the_device_asked(monkeypatch):
    """prompt_of() puts example_inputs()'s prompt, its rows in turn, on the given device (the meta
    device stands in for the NPU)."""
    monkeypatch.setattr(generate, "example_inputs", lambda: (torch.tensor([[1, 2], [3, 4]]),))
    assert generate.prompt_of(3, "cpu").tolist() == [[1, 2], [3, 4], [1, 2]]
    assert generate.prompt_of(3, "meta").device.type == "meta"


def test_timed_gives_the_result_and_the_seconds_until_the_device_is_done(monkeypatch):
    """timed(): what the call returned, and the clock's time from before the call until after the
    device synchronized."""
    events, clock = [], iter([100.0, 102.5])

    def perf_counter() -> float:
        events.append("clock")
        return next(clock)

    monkeypatch.setattr(generate, "time", types.SimpleNamespace(perf_counter=perf_counter))
    monkeypatch.setattr(generate, "synchronize", lambda device: events.append(f"wait {device}"))
    assert generate.timed(lambda: events.append("call") or "result", "npu") == ("result", 2.5)
    assert events == ["clock", "call", "wait npu", "clock"]
{%- if not tp %}


def test_graph_mode_runs_on_the_backends_device():
    """build(): the decode graphs run where the backend runs."""
    _, graphs = generate.build(select_backend())
    assert graphs.device == select_backend().device
{%- endif %}
{%- if cache and not tp %}


def test_graph_mode_keeps_its_graphs_in_the_projects_cache_dir(monkeypatch):
    """build() asks cache_compile for one cached step per capture size, in CACHE_DIR."""
    asked = []

    def cached_steps(
        model: torch.nn.Module, sizes: tuple[int, ...], cache_dir: str = project.CACHE_DIR
    ):
        asked.append((sizes, cache_dir))
        return {}

    monkeypatch.setattr(compile_cache, "cached_steps", cached_steps)
    generate.build(select_backend())
    assert asked == [(limits().capture_sizes, project.CACHE_DIR)]
{%- endif %}


RESULT = {
    "backend": "aot_eager",
    "reason": "no NPU",
    "batch": 1,
    "prompt_length": 2,
    "capture_size": 1,
    "tokens": [[5, 6, 7, 8]],
    "graphs": 1,
    "warmup": "captured 1 graph (batch 1) in 0.5 s",
    "recompiles": [],
    "tokens_per_s": {"eager": 12.34, "graph": 56.78},
    "matches_eager": True,
    "first_difference": None,
    "note": None,
}
"""What run() returns, for the tests of what generate prints."""


def test_generate_prints_the_report_or_with_json_the_result_and_exits_0(monkeypatch, capsys):
    """`generate` prints the report of run()'s result, `generate --json` the result itself; 16
    new tokens and the prompt's batch unless asked otherwise; exit 0 when graph mode matched."""
    asked = []
    monkeypatch.setattr(generate, "run", lambda *arguments: asked.append(arguments[:2]) or RESULT)
    assert generate.main(["--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {key: result[key] for key in RESULT} == RESULT
    assert generate.main([]) == 0
    assert capsys.readouterr() == (generate.render(result) + "\n", "")
    assert asked == [(16, None)] * 2


def test_tokens_that_differ_from_eager_exit_1_naming_where_and_the_check(monkeypatch, capsys):
    """Graph mode's tokens differ from eager's: exit 1, and one line on stderr says from where
    and which command compares one step."""
    differing = {**RESULT, "matches_eager": False, "first_difference": "sequence 1, position 5"}
    monkeypatch.setattr(generate, "run", lambda *arguments: differing)
    assert generate.main([]) == 1
    printed, error = capsys.readouterr()
    assert "other tokens" not in printed
    assert error == (
{%- if tp %}
        "generate: graph mode chose other tokens than eager, or than rank 0, from sequence 1, "
        "position 5 on rank 0: run `python -m {{ cookiecutter.package_name }} check` to compare "
        "one step leaf by leaf\n"
{%- else %}
        "generate: graph mode chose other tokens than eager from sequence 1, position 5: run "
        "`python -m {{ cookiecutter.package_name }} check` to compare one step leaf by leaf\n"
{%- endif %}
    )


def test_help_names_every_option_with_its_default(help_of):
    """`generate --help` gives the usage under the command's name, what generate does, and each
    option with what it does and its default."""
    printed = help_of(generate.main, "{{ cookiecutter.package_name }} generate")
    usage = "[-h] [--new-tokens NEW_TOKENS] [--batch BATCH] [--json]"
    assert printed.startswith(f"usage: {{ cookiecutter.package_name }} generate {usage} ")
    summary = (
        " Greedy generation: an eager prefill of the prompt, then one graph-mode decode step per "
        "new token. options: "
    )
    assert summary in printed
    for option in [
        "--new-tokens NEW_TOKENS tokens to generate (default: 16)",
        "--batch BATCH sequences, the prompt's rows in turn (default: the prompt's)",
        "--json print one JSON object instead",
    ]:
        assert option in printed


def test_capture_sizes_beyond_the_cache_are_a_contract_error(monkeypatch, capsys):
    """A capture size above MAX_BATCH has no cache rows: refused before anything compiles."""
    monkeypatch.setattr(model, "CAPTURE_SIZES", (*limits().capture_sizes, model.MAX_BATCH + 1))
    message = refusal(capsys)
    assert f"more than MAX_BATCH = {model.MAX_BATCH}" in message


class JsonRun(NamedTuple):
    result: dict
    synchronized: list[str]
    """The device each timing waited for."""


CLOCK = [1.0, 3.0, 10.0, 14.0]
"""generate's clock in `json_run`: eager generation takes 2 s, graph mode 4 s."""


@pytest.fixture(scope="module")
def json_run() -> JsonRun:
    """`generate --json --new-tokens 4`, run once on a clock that reads CLOCK (after the tests
    that share `decoder`: it compiles its own graphs)."""
    torch._dynamo.reset()
    printed = io.StringIO()
    clock, synchronized = iter(CLOCK), []
    with pytest.MonkeyPatch.context() as monkeypatch, contextlib.redirect_stdout(printed):
        monkeypatch.setattr(generate, "time", types.SimpleNamespace(perf_counter=clock.__next__))
        monkeypatch.setattr(generate, "synchronize", synchronized.append)
        assert generate.main(["--json", "--new-tokens", "4"]) == 0
    return JsonRun(json.loads(printed.getvalue()), synchronized)


@pytest.fixture(scope="module")
def json_result(json_run: JsonRun) -> dict:
    return json_run.result


def test_generate_json_reports_tokens_graphs_and_speed(json_result):
    """--json: each sequence's prompt and new ids, one graph per size, no recompile, tokens/s of
    both, and graph mode's tokens equal to eager's."""
    batch, length = prompt_of(None).shape
    assert len(json_result["tokens"]) == batch
    assert {len(row) for row in json_result["tokens"]} == {length + 4}
    assert json_result["graphs"] == len(limits().capture_sizes)
    assert json_result["recompiles"] == []
    assert json_result["matches_eager"] is True
    assert json_result["first_difference"] is None


def test_generate_json_describes_the_batch_it_ran(json_result):
    """--json: the batch, the prompt's length and the capture size the batch ran at."""
    batch, length = prompt_of(None).shape
    described = [json_result[key] for key in ("batch", "prompt_length", "capture_size")]
    assert described == [batch, length, limits().capture_size(batch)]


def test_tokens_per_second_count_every_sequences_new_tokens_over_each_runs_seconds(json_run):
    """tokens/s: the new tokens of all sequences, divided by the seconds of each run (2 s eager,
    4 s graph mode on CLOCK); each timing waits for the backend's device."""
    batch = prompt_of(None).shape[0]
    assert json_run.result["tokens_per_s"] == {"eager": 4 * batch / 2, "graph": 4 * batch / 4}
    assert json_run.synchronized == [select_backend().device] * 2


def test_generate_json_notes_a_stand_in_backend(json_result):
    """Off an NPU the result carries one note: the stand-in's tokens/s do not predict NPU speed;
    on an NPU none."""
    backend = select_backend()
    stand_in = f"{backend.name} stands in for npugraph_ex: its tokens/s do not predict NPU speed"
    assert json_result["note"] == (None if backend.is_npugraph_ex else stand_in)


def test_the_report_says_what_warm_up_captured(json_result):
    """The text report names each capture size warm-up captured, and each sequence's prompt and
    new tokens apart."""
    report = generate.render(json_result)
    count = len(limits().capture_sizes)
    sizes = ", ".join(map(str, limits().capture_sizes))
    assert f"captured {count} graph{'s' * (count != 1)} (batch {sizes})" in report
    first, *_ = json_result["tokens"]
    length = prompt_of(None).shape[1]
    prompt, new = " ".join(map(str, first[:length])), " ".join(map(str, first[length:]))
    assert f"sequence 0  {prompt} | {new}" in report


def test_more_sizes_than_the_recompile_limit_raise_it_with_a_note(monkeypatch{{ ", ranks" if tp else "" }}):
    """Each capture size is one graph of one compiled model: more sizes than Dynamo's recompile
    limit raise the limit, and warm-up says so."""
    monkeypatch.setattr(model, "CAPTURE_SIZES", (1, 2))
    torch._dynamo.reset()
    _, graphs = generate.build(select_backend(){{ ", ranks" if tp else "" }})
    # Dynamo's own patch: it puts back whatever the warm-up raised the limit to.
    with torch._dynamo.config.patch(recompile_limit=1), torch.no_grad():
        warmup = graphs.warm_up()
    assert warmup.graphs == 2
    assert "recompile_limit raised from 1 to 2" in str(warmup)
