"""generate: the project's loop run greedily, eagerly and in graph mode, and compared; again with
the project's sampler for the tokens it prints; its timing, report, JSON, exit statuses and
refusals; and the sample loop's end of sequence."""

import contextlib
import functools
import importlib
import io
import json
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
import torch

from decode_project import generate, model
from decode_project.toolkit import generation
from decode_project.toolkit.backend import Backend, select_backend
from decode_project.toolkit.decode import DecodeGraphs, limits
from decode_project.toolkit.state import State, restore, save

PROJECTS = ["decode_project", "decode_parallel_project"]
"""Where generate runs: on one device, and with tensor parallelism (one rank here)."""
FEW = ("--new-tokens", "4")
"""Enough new tokens to tell samplers apart, few enough to run quickly on the host."""


def tool(name: str, module: str) -> Any:
    """A module of project `name`'s package: its toolkit's (`toolkit.generation`) or its own."""
    return importlib.import_module(f"{name}.{module}")


def least_likely(logits: torch.Tensor) -> torch.Tensor:
    """A sampler no greedy run matches: each sequence's least likely next token."""
    return logits[:, -1:].argmin(-1)


def at_temperature(logits: torch.Tensor) -> torch.Tensor:
    """The sampler the project's README and generate.py suggest: temperature 0.8, drawn at random."""
    return torch.multinomial(torch.softmax(logits[:, -1] / 0.8, -1), 1)


def generate_command(name: str, *arguments: str) -> tuple[int, str, str]:
    """`python -m <name> generate ARGUMENTS` through the project's command line: the exit status,
    what it printed and what it told on stderr."""
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = tool(name, "__main__").main(["generate", *arguments])
    return code, printed.getvalue(), told.getvalue()


# Building and capturing the sample's graphs takes seconds: the tests of what generate does with
# them share one build per project.
class Built(NamedTuple):
    model: torch.nn.Module
    graphs: DecodeGraphs
    start: State
    """The state the model was built with."""
    random: torch.Tensor
    """The random state the build left, from which example_inputs() draws the prompt."""


def keep(monkeypatch: pytest.MonkeyPatch, name: str, kept: list[Built]) -> None:
    """Project `name`'s generation.build() keeps what it builds in `kept`."""
    own = tool(name, "toolkit.generation")
    build = own.build

    def keeping(*arguments: Any) -> tuple[torch.nn.Module, DecodeGraphs]:
        built, graphs = build(*arguments)
        kept.append(Built(built, graphs, save(built), torch.get_rng_state()))
        return built, graphs

    monkeypatch.setattr(own, "build", keeping)


class JsonRun(NamedTuple):
    result: dict
    synchronized: list[str]
    """The device each timing waited for."""


CLOCK = [1.0, 1.0, 1.5, 1.5, 2.0, 2.0, 2.5, 3.0, 10.0, 10.0, 11.0, 11.0, 12.0, 12.0, 13.0, 14.0]
"""generate's clock in the first run, read before and after each greedy run and each of its 3
decode steps: eager generation takes 2 s, each step 0.5 s; graph mode 4 s, each step 1 s."""


@pytest.fixture(scope="module")
def first_run() -> tuple[JsonRun, Built]:
    """`generate --json --new-tokens 4` on decode_project, built afresh, run once on a clock that
    reads CLOCK; and what it built."""
    torch._dynamo.reset()
    clock, synchronized, kept = iter(CLOCK), [], []
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(generation, "time", types.SimpleNamespace(perf_counter=clock.__next__))
        monkeypatch.setattr(generation, "synchronize", synchronized.append)
        keep(monkeypatch, "decode_project", kept)
        code, printed, _ = generate_command("decode_project", "--json", "--new-tokens", "4")
    assert code == 0
    return JsonRun(json.loads(printed), synchronized), kept[0]


@pytest.fixture(scope="module")
def json_run(first_run) -> JsonRun:
    return first_run[0]


@pytest.fixture(scope="module")
def json_result(json_run: JsonRun) -> dict:
    return json_run.result


@pytest.fixture(scope="module")
def decode_project_built(first_run) -> Built:
    return first_run[1]


@pytest.fixture(scope="module")
def one_rank() -> Iterator[Any]:
    """One rank of decode_parallel_project for this module: its model stays sharded over it, and
    its generate runs join it."""
    parallel = tool("decode_parallel_project", "toolkit.parallel")
    with parallel.tensor_parallel(select_backend().device) as ranks:
        yield ranks


@pytest.fixture(scope="module")
def decode_parallel_project_built(one_rank, decode_project_built) -> Built:
    """decode_parallel_project's model and graphs, built as generate builds them and captured once
    at the sample prompt's batch alone (fewer graphs to compile); after decode_project's, whose
    graphs stay compiled."""
    name, kept = "decode_parallel_project", []
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(tool(name, "model"), "CAPTURE_SIZES", (model.PROMPT_SHAPE[0],))
        keep(monkeypatch, name, kept)
        _, graphs = tool(name, "toolkit.generation").build(select_backend(), one_rank)
        with torch.no_grad():
            graphs.warm_up()
    return kept[0]


@pytest.fixture(params=PROJECTS)
def built(request, monkeypatch) -> str:
    """Each project, whose generate runs the graphs built once for this module, from the state
    they started in, instead of building its own; its name."""
    name = request.param
    shared = request.getfixturevalue(f"{name}_built")

    def build(backend: Any, ranks: Any = None) -> tuple[torch.nn.Module, DecodeGraphs]:
        restore(shared.model, shared.start)
        torch.set_rng_state(shared.random)
        return shared.model, shared.graphs

    monkeypatch.setattr(tool(name, "toolkit.generation"), "build", build)
    return name


def test_a_random_sampler_in_generate_py_exits_0(built, monkeypatch):
    """With generate.py's sample() replaced by a sampler that draws at random, graph mode that is
    right still exits 0: the comparison is greedy, on both sides, and only the printed run samples."""
    monkeypatch.setattr(tool(built, "generate"), "sample", at_temperature)
    code, printed, told = generate_command(built, "--json", *FEW)
    assert (code, told) == (0, "")
    assert json.loads(printed)["matches_eager"] is True


def test_a_graph_that_chooses_other_tokens_exits_1_naming_where(built, monkeypatch):
    """A decode graph whose logits are wrong (negated: it chooses the least likely token) makes
    greedy graph mode part from eager at the first decode step: exit 1, naming that position."""
    graphs = tool(built, "toolkit.decode").DecodeGraphs
    step = graphs.__call__
    monkeypatch.setattr(graphs, "__call__", lambda self, *inputs: -step(self, *inputs))
    code, _, told = generate_command(built, *FEW)
    assert code == 1
    where = f"sequence 0, position {tool(built, 'model').PROMPT_SHAPE[1] + 1}"
    if built == "decode_parallel_project":
        where = f"eager, or than rank 0, from {where} on rank 0"
    else:
        where = f"eager from {where}"
    assert told.startswith(f"generate: graph mode chose other tokens than {where}: run ")


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_the_compared_runs_are_greedy_whatever_the_loops_own_sampler(built):
    """run() hands the loop the sampler asked for in the printed run only, and greedy in the two
    compared runs, even to a loop whose own default sampler chooses otherwise."""
    samplers = []

    def loop(step: Any, model: Any, prompt: Any, new_tokens: int, sample=least_likely) -> Any:
        samplers.append(sample)
        return generate.generate(step, model, prompt, new_tokens, sample=sample)

    result = generation.run(2, None, loop=loop, sample=least_likely)
    # Told apart by what they choose, not by identity: the loop gets the user's sampler wrapped
    # (generation.checked), and a mutation tester wraps the toolkit's greedy too.
    logits = torch.tensor([[[0.0, 3.0, 1.0]]])  # most likely token 1, least likely 0
    assert [sampler(logits).tolist() for sampler in samplers] == [[[0]], [[1]], [[1]]]
    assert result["matches_eager"] is True


BATCH = model.PROMPT_SHAPE[0]


@pytest.mark.parametrize(
    ("sample", "gave"),
    [
        (lambda logits: logits[:, -1].argmax(-1), f"({BATCH},) int64 on cpu"),
        (lambda logits: logits[:, -1:].argmax(-1).float(), f"({BATCH}, 1) float32 on cpu"),
        (lambda logits: logits[:, -2:].argmax(-1), f"({BATCH}, 2) int64 on cpu"),
        (lambda logits: [[0]] * len(logits), f"list {[[0]] * BATCH}"),
    ],
    ids=["no token dimension", "floats", "two tokens", "a list"],
)
@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_a_sampler_that_gives_no_token_per_sequence_is_refused_naming_what_it_gave(
    built, monkeypatch, sample, gave
):
    """A sample() in generate.py that gives anything but one integer id per sequence: exit 2, one
    line naming what it gave and the shape it must give, before the model runs on it."""
    monkeypatch.setattr(generate, "sample", sample)
    code, printed, told = generate_command(built, *FEW)
    assert (code, printed) == (2, "")
    assert told == (
        "generate: sample() must return the next token of each sequence, an integer tensor "
        f"({BATCH}, 1) (batch, 1), got {gave}; e.g. `logits[:, -1:].argmax(-1)` or "
        "`torch.multinomial(probabilities, 1)`\n"
    )


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_a_sampler_that_chooses_ids_outside_the_vocabulary_is_refused_in_a_line(built, monkeypatch):
    """A sample() whose ids are past the logits' last dimension: exit 2, one line naming the
    vocabulary's range and the ids, not an embedding's IndexError from inside the model."""
    monkeypatch.setattr(generate, "sample", lambda logits: logits[:, -1:].argmax(-1) + 1000)
    code, printed, told = generate_command(built, *FEW)
    assert (code, printed) == (2, "")
    (line,) = told.splitlines()
    vocab = tool(built, "model").VOCAB
    assert line.startswith(f"generate: sample() must choose token ids of the vocabulary, 0 to {vocab - 1}")


@pytest.mark.parametrize(
    ("returned", "gave"),
    [
        (lambda tokens: tokens.flip(1), f"({BATCH}, {{length}}) int64 on cpu"),
        (lambda tokens: tokens[:, 1:], f"({BATCH}, {{shorter}}) int64 on cpu"),
        (lambda tokens: tokens[0], "({length},) int64 on cpu"),
        (lambda tokens: tokens.tolist(), "list [["),
    ],
    ids=["not the prompt first", "without the whole prompt", "one sequence", "a list"],
)
@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_a_loop_that_returns_no_prompt_and_its_tokens_is_refused_naming_what_it_gave(
    built, monkeypatch, returned, gave
):
    """A generate() in generate.py whose result is not the prompt's rows followed by their new
    tokens: exit 2, one line naming what it gave and what it must give."""
    loop = generate.generate
    monkeypatch.setattr(
        generate, "generate", lambda *arguments, **keywords: returned(loop(*arguments, **keywords))
    )
    code, printed, told = generate_command(built, *FEW)
    prompt = model.PROMPT_SHAPE[1]
    length = prompt + int(FEW[1])
    assert (code, printed) == (2, "")
    assert told.startswith(
        f"generate: generate() must return the prompt followed by its new tokens: (batch, length) "
        f"= ({BATCH}, {prompt} or more), its first {prompt} tokens the prompt's; got "
        + gave.format(length=length, shorter=length - 1)
    )


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_a_batch_asked_for_runs_its_sequences_at_the_capture_size_that_holds_them(built):
    """run() with a batch other than the prompt's: that many sequences, at the smallest capture
    size that holds them, not the prompt's."""
    batch = model.PROMPT_SHAPE[0] + 1
    result = generation.run(2, batch, loop=generate.generate, sample=generate.sample)
    assert len(result["tokens"]) == result["batch"] == batch
    assert result["capture_size"] == limits().capture_size(batch)
    assert limits().capture_size(batch) != limits().capture_size(model.PROMPT_SHAPE[0])


@pytest.mark.parametrize("built", ["decode_parallel_project"], indirect=True)
def test_with_tensor_parallelism_run_builds_this_ranks_share(built, one_rank, monkeypatch):
    """run() on a rank builds the model for that rank (its share of the heads)."""
    own, asked = tool(built, "toolkit.generation"), []
    shared = own.build
    monkeypatch.setattr(own, "build", lambda backend, ranks=None: asked.append(ranks) or shared(backend))
    generate_py = tool(built, "generate")
    own.run(2, None, one_rank, loop=generate_py.generate, sample=generate_py.sample)
    assert asked == [one_rank]


class Sampled(NamedTuple):
    result: dict[str, Any]
    """What `generate --json` printed."""
    draws: list[float]
    """One random number per call of the sampler, drawn by the sampler itself."""


@pytest.fixture
def sampled(built, monkeypatch) -> Sampled:
    """`generate --json` on decode_project with a sampler that draws one random number each call
    and chooses the least likely token."""
    draws = []

    def noting(logits: torch.Tensor) -> torch.Tensor:
        draws.append(torch.rand(()).item())
        return least_likely(logits)

    monkeypatch.setattr(generate, "sample", noting)
    code, printed, _ = generate_command(built, "--json", *FEW)
    assert code == 0
    return Sampled(json.loads(printed), draws)


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_the_printed_tokens_are_the_samplers(sampled):
    """The tokens generate prints are those generate.py's sample() chooses, not argmax's."""
    device = select_backend().device
    torch.manual_seed(0)  # then build_model(), then example_inputs(), as generate does
    fresh = model.build_model().to(device).eval()
    prompt = generation.prompt_of(None, device)
    with torch.no_grad():
        expected = generate.generate(
            generation.eager_step(fresh), fresh, prompt, int(FEW[1]), sample=least_likely
        )
    assert sampled.result["tokens"] == expected.tolist()


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_json_gives_the_compared_tokens_as_greedy_tokens(sampled):
    """--json's greedy_tokens are argmax's, the tokens compared with eager, whatever sample() is."""
    device = select_backend().device
    torch.manual_seed(0)
    fresh = model.build_model().to(device).eval()
    prompt = generation.prompt_of(None, device)
    with torch.no_grad():
        expected = generate.generate(
            generation.eager_step(fresh), fresh, prompt, int(FEW[1]), sample=generation.greedy
        )
    assert sampled.result["greedy_tokens"] == expected.tolist() != sampled.result["tokens"]


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_the_sampled_run_starts_from_seed_0(sampled):
    """The sampler's run is seeded as the MRE is, torch.manual_seed(0), whatever ran before: so
    every rank draws the same numbers."""
    torch.manual_seed(0)
    assert sampled.draws == [torch.rand(()).item() for _ in sampled.draws]
    assert len(sampled.draws) == int(FEW[1])


RESULT = {
    "backend": "aot_eager",
    "reason": "no NPU",
    "batch": 1,
    "prompt_length": 2,
    "capture_size": 1,
    "tokens": [[5, 6, 7, 8]],
    "greedy_tokens": [[5, 6, 7, 8]],
    "graphs": 1,
    "warmup": "captured 1 graph (batch 1) in 0.5 s",
    "recompiles": [],
    "tokens_per_s": {"eager": 12.34, "graph": 56.78},
    "steps": {
        mode: {
            "count": 3,
            "p50_ms": 2.0,
            "p95_ms": 2.5,
            "mean_ms": 2.1,
            "spread": 1.25,
            "too_noisy": False,
        }
        for mode in ("eager", "graph")
    },
    "matches_eager": True,
    "first_difference": None,
    "note": None,
}
"""What run() returns, for the tests of what generate prints."""


@pytest.fixture(params=PROJECTS)
def faked(request, monkeypatch) -> tuple[str, list[dict[str, Any]], list[Any]]:
    """Each project, whose run() returns RESULT without generating (or the result put first in the
    list), noting what it was asked; its name and that list."""
    name, results, asked = request.param, [RESULT], []

    def run(*arguments: Any, **keywords: Any) -> dict[str, Any]:
        asked.append((arguments[:2], keywords))
        return results[0]

    monkeypatch.setattr(tool(name, "toolkit.generation"), "run", run)
    return name, results, asked


def test_generate_prints_the_report_or_with_json_the_result_and_exits_0(faked):
    """`generate` prints the report of run()'s result, `generate --json` the result itself; 16
    new tokens and the prompt's batch unless asked otherwise, with generate.py's loop and sampler;
    exit 0 when graph mode matched."""
    name, _, asked = faked
    code, printed, told = generate_command(name, "--json")
    assert (code, told) == (0, "")
    result = json.loads(printed)
    assert {key: result[key] for key in RESULT} == RESULT
    assert generate_command(name) == (0, tool(name, "toolkit.generation").render(result) + "\n", "")
    own = tool(name, "generate")
    assert asked == [((16, None), {"loop": own.generate, "sample": own.sample})] * 2


def test_new_tokens_and_batch_go_to_the_run(faked):
    """--new-tokens and --batch are what run() is asked for."""
    name, _, asked = faked
    generate_command(name, "--new-tokens", "3", "--batch", "5")
    assert asked[0][0] == (3, 5)


def test_tokens_that_differ_from_eager_exit_1_naming_where_and_the_check(faked):
    """Graph mode's tokens differ from eager's: exit 1, and one line on stderr says from where
    and which command compares one step."""
    name, results, _ = faked
    results[0] = {**RESULT, "matches_eager": False, "first_difference": "sequence 1, position 5"}
    code, printed, told = generate_command(name)
    assert code == 1
    assert "other tokens" not in printed
    if name == "decode_parallel_project":
        where = "eager, or than rank 0, from sequence 1, position 5 on rank 0"
        # The check of as many ranks as generate ran: this process's one.
        check = f"torchrun --nproc-per-node 1 -m {name} check"
    else:
        where = "eager from sequence 1, position 5"
        check = f"python -m {name} check"
    assert told == (
        f"generate: graph mode chose other tokens than {where}: run `{check}` to compare one step "
        "leaf by leaf\n"
    )


@pytest.mark.parametrize("matches", [True, False])
def test_a_rank_after_the_first_prints_nothing_and_exits_by_the_jobs_verdict(monkeypatch, matches):
    """With tensor parallelism, main() joins the ranks on the backend's device and runs this
    rank's share; a rank other than the first prints nothing, and exits 0 when every rank matched
    eager, 1 when one did not."""
    name, joined, ran = "decode_parallel_project", [], []
    second = types.SimpleNamespace(
        is_first=False, size=2, backend="gloo", gather=lambda result: [RESULT, result]
    )

    @contextlib.contextmanager
    def tensor_parallel(device: str) -> Iterator[Any]:
        joined.append(device)
        yield second

    def run(new_tokens: int, batch: int | None, ranks: Any, **keywords: Any) -> dict[str, Any]:
        ran.append(ranks)
        return {**RESULT, "matches_eager": matches}

    monkeypatch.setattr(tool(name, "toolkit.parallel"), "tensor_parallel", tensor_parallel)
    monkeypatch.setattr(tool(name, "toolkit.generation"), "run", run)
    assert generate_command(name) == (0 if matches else 1, "", "")
    assert (joined, ran) == ([select_backend().device], [second])


@pytest.mark.parametrize("tokens", ["tokens", "greedy_tokens"])
def test_a_rank_that_chose_other_tokens_is_named(tokens):
    """With tensor parallelism, a rank whose tokens, sampled or greedy, are not rank 0's fails the
    job though each matched its own eager run: the line names that rank."""
    parallel_generation = tool("decode_parallel_project", "toolkit.generation")
    ranks = types.SimpleNamespace(size=3, backend="gloo")
    other = {**RESULT, tokens: [[5, 6, 7, 9]]}
    result = parallel_generation.across_ranks([RESULT, RESULT, other], ranks)
    assert result["ranks"] == {"size": 3, "backend": "gloo", "differ": [2]}
    assert result["matches_eager"] is False
    assert parallel_generation.difference(result).startswith(
        "generate: graph mode chose other tokens than eager, or than rank 0, from rank 2: run "
    )


def test_every_rank_that_chose_other_tokens_is_named():
    """Two ranks whose tokens are not rank 0's: the line names both."""
    parallel_generation = tool("decode_parallel_project", "toolkit.generation")
    ranks = types.SimpleNamespace(size=3, backend="gloo")
    other = {**RESULT, "tokens": [[5, 6, 7, 9]]}
    result = parallel_generation.across_ranks([RESULT, other, other], ranks)
    assert result["ranks"]["differ"] == [1, 2]
    assert parallel_generation.difference(result).startswith(
        "generate: graph mode chose other tokens than eager, or than rank 0, from ranks 1, 2: run "
    )


def test_where_rank_0_parts_from_eager_every_rank_that_differs_is_named_too():
    """Rank 0's tokens part from its eager run's, and rank 1 chose others: the line says where
    rank 0's part, and names both ranks."""
    parallel_generation = tool("decode_parallel_project", "toolkit.generation")
    ranks = types.SimpleNamespace(size=2, backend="gloo")
    first = {**RESULT, "matches_eager": False, "first_difference": "sequence 0, position 3"}
    result = parallel_generation.across_ranks([first, {**RESULT, "tokens": [[1]]}], ranks)
    assert parallel_generation.difference(result).startswith(
        "generate: graph mode chose other tokens than eager, or than rank 0, from sequence 0, "
        "position 3 on rank 0 (ranks 0, 1 differ): run "
    )


def test_a_rank_whose_graphs_differ_from_its_eager_run_fails_the_job():
    """A rank whose graph mode parted from its own eager run fails the job too, with its tokens
    equal to rank 0's."""
    parallel_generation = tool("decode_parallel_project", "toolkit.generation")
    ranks = types.SimpleNamespace(size=2, backend="gloo")
    result = parallel_generation.across_ranks([RESULT, {**RESULT, "matches_eager": False}], ranks)
    assert (result["matches_eager"], result["ranks"]["differ"]) == (False, [1])


@pytest.mark.parametrize("name", PROJECTS)
def test_capture_sizes_beyond_the_cache_are_refused_with_exit_2(name, monkeypatch):
    """A capture size above MAX_BATCH has no cache rows: refused before anything compiles, exit 2
    and one line."""
    own = tool(name, "model")
    monkeypatch.setattr(own, "CAPTURE_SIZES", (*own.CAPTURE_SIZES, own.MAX_BATCH + 1))
    code, printed, told = generate_command(name)
    assert (code, printed) == (2, "")
    assert len(told.strip().splitlines()) == 1
    assert f"more than MAX_BATCH = {own.MAX_BATCH}" in told


@pytest.mark.parametrize("name", PROJECTS)
def test_every_reason_a_request_cannot_run_is_given(name):
    """A batch above the largest capture size and more new tokens than the cache holds: refused
    before anything compiles, exit 2, a line for each reason."""
    own = tool(name, "model")
    batch = tool(name, "toolkit.decode").limits().capture_sizes[-1] + 1
    code, printed, told = generate_command(name, "--batch", str(batch), "--new-tokens", "1000")
    lines = told.splitlines()
    assert (code, printed, len(lines)) == (2, "", 2)
    assert lines[0].startswith("generate: a prompt of ")
    assert f"more than MAX_SEQ_LEN = {own.MAX_SEQ_LEN}" in lines[0]
    assert lines[1].startswith(f"generate: a batch of {batch} sequences is more than the largest")


@pytest.mark.parametrize("batch", ["0", "-1"])
def test_a_batch_of_no_sequence_is_refused_in_a_line(batch):
    """--batch 0 or below is refused in one line naming it, exit 2, not a traceback."""
    code, printed, told = generate_command("decode_project", "--batch", batch)
    assert (code, printed) == (2, "")
    assert told == f"generate: a batch of {batch} sequences: generate at least 1\n"


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (("--new-tokens", "1"), "generate at least 2 tokens"),
        (("--new-tokens", "1000"), "more than MAX_SEQ_LEN"),
        (("--batch", "1000"), "more than the largest capture size"),
    ],
)
def test_a_request_the_cache_cannot_hold_is_refused_before_a_model_is_built(monkeypatch, arguments, words):
    """A request beyond the cache is refused in its own words, whatever the model: no model is
    built (nor rehearsed) for it."""
    monkeypatch.setattr(generation, "build", lambda *built: pytest.fail("built a model for it"))
    code, printed, told = generate_command("decode_project", *arguments)
    assert (code, printed) == (2, "")
    (line,) = told.splitlines()
    assert words in line


def test_help_names_every_option_with_its_default(help_of):
    """`generate --help` gives the usage under the command's name, what generate does, and each
    option with what it does and its default."""
    main = functools.partial(generation.main, loop=generate.generate, sample=generate.sample)
    printed = help_of(main, "decode_project generate")
    usage = "[-h] [--new-tokens NEW_TOKENS] [--batch BATCH] [--json]"
    assert printed.startswith(f"usage: decode_project generate {usage} ")
    summary = (
        " Generation with your loop (generate.py): an eager prefill of the prompt, then one "
        "graph-mode decode step per new token, checked greedily against eager. options: "
    )
    assert summary in printed
    for option in [
        "--new-tokens NEW_TOKENS tokens to generate (default: 16)",
        "--batch BATCH sequences, the prompt's rows in turn (default: the prompt's)",
        "--json print one JSON object instead",
    ]:
        assert option in printed


def test_the_first_difference_is_the_earliest_position_of_any_sequence():
    """Where graph mode's tokens part from eager's: the earliest position, and its sequence."""
    eager = torch.zeros(3, 6, dtype=torch.long)
    tokens = eager.clone()
    tokens[0, 5], tokens[2, 3] = 7, 7
    assert generation.first_difference(tokens, eager) == "sequence 2, position 3"
    assert generation.first_difference(eager.clone(), eager) is None


REPORTED = {
    "backend": "aot_eager",
    "reason": "no NPU",
    "warmup": "captured 1 graph (batch 1) in 0.5 s",
    "tokens": [[5, 6, 7, 8], [1, 2, 3, 4]],
    "prompt_length": 2,
    "tokens_per_s": {"eager": 12.34, "graph": 56.78},
    "steps": {
        "eager": {
            "count": 3,
            "p50_ms": 80.0,
            "p95_ms": 90.0,
            "mean_ms": 83.0,
            "spread": 1.125,
            "too_noisy": False,
        },
        "graph": {
            "count": 3,
            "p50_ms": 2.0,
            "p95_ms": 50.5,
            "mean_ms": 18.0,
            "spread": 25.25,
            "too_noisy": True,
        },
    },
    "batch": 2,
    "capture_size": 2,
    "recompiles": ["batch 1, position 3", "batch 1, position 4"],
    "note": "a note",
}


def test_the_report_lays_out_each_line_of_the_result():
    """render(): backend, warm-up, each sequence (prompt | new tokens), speed, the steps' spread
    and whose tokens/s is too noisy to quote, each recompile and a note, one aligned line each."""
    assert generation.render(REPORTED).splitlines() == [
        "backend     aot_eager (no NPU)",
        "warm-up     captured 1 graph (batch 1) in 0.5 s",
        "sequence 0  5 6 | 7 8",
        "sequence 1  1 2 | 3 4",
        "tokens/s    eager 12.3, graph 56.8 (batch 2, capture size 2)",
        (
            "steps       eager p50 80.000 ms, p95 90.000 ms (1.12x), mean 83.000 ms; graph p50 2.000 ms, "
            "p95 50.500 ms (25.25x), mean 18.000 ms: graph tokens/s too noisy to quote (mean over 1.1x p50)"
        ),
        "recompiles  batch 1, position 3; batch 1, position 4",
        "note        a note",
    ]
    quiet = {**REPORTED, "steps": RESULT["steps"], "recompiles": [], "note": None}
    assert generation.render(quiet).splitlines()[-2:] == [
        (
            "steps       eager p50 2.000 ms, p95 2.500 ms (1.25x), mean 2.100 ms; graph p50 2.000 ms, "
            "p95 2.500 ms (1.25x), mean 2.100 ms: steady enough to quote (mean within 1.1x p50)"
        ),
        "recompiles  none",
    ]


def test_with_tensor_parallelism_the_report_names_the_ranks_after_the_backend():
    """render() of a job's result: the ranks, their process-group backend and whose tokens these
    are, right after the backend."""
    ranks = {"size": 2, "backend": "gloo", "differ": []}
    lines = generation.render({**REPORTED, "ranks": ranks}).splitlines()
    assert lines[:2] == ["backend     aot_eager (no NPU)", "ranks       2 (gloo), tokens from rank 0"]


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


def test_the_loop_chooses_each_token_with_the_sampler_it_is_given():
    """generate.generate() asks `sample` for the first token after prefill and every one after."""
    counting = Counting()
    tokens = generate.generate(counting, counting, torch.tensor([[1, 9]]), 3, sample=least_likely)
    # The least likely of Counting's one-hot logits: token 0, or 1 where 0 is the next one.
    assert tokens.tolist() == [[1, 9, 1, 0, 0]]


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
    monkeypatch.setattr(model, "example_inputs", lambda: (torch.tensor([[1, 2], [3, 4]]),))
    assert generation.prompt_of(3, "cpu").tolist() == [[1, 2], [3, 4], [1, 2]]
    assert generation.prompt_of(3, "meta").device.type == "meta"
    assert generation.prompt_of(None, "cpu").tolist() == [[1, 2], [3, 4]]
    assert generation.prompt_of(1, "cpu").tolist() == [[1, 2]]


def test_timed_gives_the_result_and_the_seconds_until_the_device_is_done(monkeypatch):
    """timed(): what the call returned, and the clock's time from before the call until after the
    device synchronized."""
    events, clock = [], iter([100.0, 102.5])

    def perf_counter() -> float:
        events.append("clock")
        return next(clock)

    monkeypatch.setattr(generation, "time", types.SimpleNamespace(perf_counter=perf_counter))
    monkeypatch.setattr(generation, "synchronize", lambda device: events.append(f"wait {device}"))
    assert generation.timed(lambda: events.append("call") or "result", "npu") == ("result", 2.5)
    assert events == ["clock", "call", "wait npu", "clock"]


def test_the_eager_step_gives_the_logits_of_the_models_output():
    """eager_step(): the model's forward, its logits taken out of an object as the graphs take
    them (transformers' outputs)."""
    logits = torch.ones(1, 1, 4)
    step = generation.eager_step(lambda tokens, input_pos: types.SimpleNamespace(logits=logits))
    assert step(torch.zeros(1, 1), torch.zeros(1)) is logits


def test_the_decode_step_compiles_as_the_mre_does(monkeypatch):
    """build() compiles the model as one graph (fullgraph), for static shapes, with the backend's
    name and options: npugraph_ex's here, stood in for on the cpu (torch.compile compiles lazily,
    so no NPU is needed to see what it was asked)."""
    asked = []
    monkeypatch.setattr(torch, "compile", lambda model, **keywords: asked.append(keywords) or model)
    backend = Backend("npugraph_ex", "cpu", "stood in for")
    generation.build(backend)
    assert asked == [
        {"backend": "npugraph_ex", "fullgraph": True, "dynamic": False, "options": backend.options}
    ]
    assert backend.options


def rehearsals(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[tuple[torch.Tensor, ...]]:
    """The inputs each of `module`'s build() rehearses the model on, in place of rehearsing it."""
    rehearsed = []
    monkeypatch.setattr(module, "rehearse", lambda model, inputs: rehearsed.append(inputs))
    return rehearsed


def test_build_runs_the_model_and_its_graphs_on_the_backends_device(monkeypatch):
    """build() moves the model and its rehearsal's prompt to the backend's device, where the decode
    graphs run (the meta device stands in for the NPU)."""
    rehearsed = rehearsals(monkeypatch, generation)
    model, graphs = generation.build(Backend("aot_eager", "meta", "stood in for"))
    assert graphs.device == "meta"
    assert {parameter.device.type for parameter in model.parameters()} == {"meta"}
    assert [prompt.device.type for (prompt,) in rehearsed] == ["meta"]


def test_with_tensor_parallelism_build_runs_on_the_ranks_device(monkeypatch):
    """With a rank, build() shards the model by parallel_plan() on the rank's device, and
    rehearses it there."""
    name = "decode_parallel_project"
    own = tool(name, "toolkit.generation")
    rehearsed, sharded = rehearsals(monkeypatch, own), []

    def shard(model: torch.nn.Module, plan: Any) -> torch.nn.Module:
        sharded.append((model, plan))
        return model

    ranks = types.SimpleNamespace(device="meta", size=2, shard=shard)
    model, _ = own.build(select_backend(), ranks)
    ((sharded_model, plan),) = sharded
    expected = tool(name, "model").parallel_plan(2)
    assert sharded_model is model
    assert {key: type(style) for key, style in plan.items()} == {
        key: type(style) for key, style in expected.items()
    }
    assert {parameter.device.type for parameter in model.parameters()} == {"meta"}
    assert [prompt.device.type for (prompt,) in rehearsed] == ["meta"]


def test_a_prompt_that_fills_the_cache_batch_is_rehearsed(monkeypatch):
    """build() rehearses a prompt of exactly MAX_BATCH sequences: the cache holds it."""
    rehearsed = rehearsals(monkeypatch, generation)
    full = torch.zeros(model.MAX_BATCH, 2, dtype=torch.long)
    monkeypatch.setattr(model, "example_inputs", lambda: (full,))
    generation.build(select_backend())
    assert [prompt.shape for (prompt,) in rehearsed] == [full.shape]


def test_neither_build_nor_a_refusal_touches_an_accelerators_generator(monkeypatch):
    """Only the CPU's generator is forked around example_inputs(): on a machine of 8 accelerators
    (stood in for by CUDA's module, counting 8 on this CPU build), neither build() nor a refused
    request initializes one for its random state."""
    backend = select_backend()
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *args: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    generation.build(backend)
    with pytest.raises(generation.Refused):
        generation.run(1000, None, loop=generate.generate, sample=generate.sample)


def test_a_refusal_reads_as_its_reasons_a_line_each():
    """Refused's message is each reason on a line of its own, as generate prints them."""
    refused = generation.Refused(["a batch of 9 is too many", "a prompt too long"])
    assert str(refused) == "a batch of 9 is too many\na prompt too long"
    assert refused.reasons == ["a batch of 9 is too many", "a prompt too long"]


@pytest.mark.parametrize("name", PROJECTS)
def test_cache_compile_keeps_the_graphs_in_the_projects_cache_dir(name, monkeypatch):
    """In cache_compile mode build() asks for one cached step per capture size, in CACHE_DIR; with
    tensor parallelism, under this rank's own keywords."""
    asked = []

    def cached_steps(model: torch.nn.Module, sizes: tuple[int, ...], **keywords: Any) -> dict:
        asked.append((model, sizes, keywords))
        return {}

    settings = tool(name, "toolkit.project")
    monkeypatch.setattr(settings, "CACHE_COMPILE", True)
    monkeypatch.setattr(settings, "CACHE_DIR", "graphs-here")
    monkeypatch.setitem(
        sys.modules,
        f"{name}.toolkit.compile_cache",
        types.SimpleNamespace(cached_steps=cached_steps),
    )
    own = tool(name, "toolkit.generation")
    if name == "decode_parallel_project":
        with tool(name, "toolkit.parallel").tensor_parallel(select_backend().device) as ranks:
            made, _ = own.build(select_backend(), ranks)
        ranked = {"global_rank": 0, "tp_rank": 0}
    else:
        made, _ = own.build(select_backend())
        ranked = {}
    assert asked == [(made, limits().capture_sizes, {"cache_dir": "graphs-here", **ranked})]


def test_generate_json_reports_tokens_graphs_and_speed(json_result):
    """--json: each sequence's prompt and new ids, one graph per size, no recompile, tokens/s of
    both, and graph mode's tokens equal to eager's."""
    batch, length = model.PROMPT_SHAPE
    assert len(json_result["tokens"]) == batch
    assert {len(row) for row in json_result["tokens"]} == {length + 4}
    assert json_result["graphs"] == len(limits().capture_sizes)
    assert json_result["recompiles"] == []
    assert json_result["matches_eager"] is True
    assert json_result["first_difference"] is None


def test_generate_json_describes_the_batch_it_ran(json_result):
    """--json: the batch, the prompt's length and the capture size the batch ran at."""
    batch, length = model.PROMPT_SHAPE
    described = [json_result[key] for key in ("batch", "prompt_length", "capture_size")]
    assert described == [batch, length, limits().capture_size(batch)]


def test_tokens_per_second_count_every_sequences_new_tokens_over_each_runs_seconds(json_run):
    """tokens/s: the new tokens of all sequences, divided by the seconds of each greedy run (2 s
    eager, 4 s graph mode on CLOCK); each timing, of a run and of each of its 3 decode steps,
    waits for the backend's device."""
    batch = model.PROMPT_SHAPE[0]
    assert json_run.result["tokens_per_s"] == {"eager": 4 * batch / 2, "graph": 4 * batch / 4}
    assert json_run.synchronized == [select_backend().device] * 2 * (1 + 3)


def test_the_steps_figures_are_each_greedy_runs_decode_steps_as_clocked(json_result):
    """--json's steps: for each greedy run, its 3 decode steps (prefill and the sampled run
    apart), their p50, p95 and mean in ms as CLOCK reads them, p95 over p50, and whether too
    noisy."""
    steady = {"count": 3, "spread": 1.0, "too_noisy": False}
    assert json_result["steps"] == {
        "eager": {**steady, "p50_ms": 500.0, "p95_ms": 500.0, "mean_ms": 500.0},
        "graph": {**steady, "p50_ms": 1000.0, "p95_ms": 1000.0, "mean_ms": 1000.0},
    }


def test_generate_json_notes_a_stand_in_backend(json_result):
    """Off an NPU the result carries one note: the stand-in's tokens/s do not predict NPU speed;
    on an NPU none."""
    backend = select_backend()
    stand_in = f"{backend.name} stands in for npugraph_ex: its tokens/s do not predict NPU speed"
    assert json_result["note"] == (None if backend.is_npugraph_ex else stand_in)


def test_the_report_says_what_warm_up_captured(json_result):
    """The text report names each capture size warm-up captured, and each sequence's prompt and
    new tokens apart."""
    report = generation.render(json_result)
    count = len(limits().capture_sizes)
    sizes = ", ".join(map(str, limits().capture_sizes))
    assert f"captured {count} graph{'s' * (count != 1)} (batch {sizes})" in report
    first, *_ = json_result["tokens"]
    length = model.PROMPT_SHAPE[1]
    prompt, new = " ".join(map(str, first[:length])), " ".join(map(str, first[length:]))
    assert f"sequence 0  {prompt} | {new}" in report


class StepClock:
    """generate's clock, standing still but for the decode steps: each moves it on by its time."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def clock_steps(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    eager: Callable[[int], float],
    graph: Callable[[int], float],
) -> None:
    """Project `name`'s generate reads a StepClock on which its n-th eager decode step takes
    eager(n) seconds and its n-th graph-mode one graph(n) seconds, counting from 1 over every run."""
    own, clock = tool(name, "toolkit.generation"), StepClock()
    monkeypatch.setattr(own, "time", clock)
    calls = {"eager": 0, "graph": 0}

    def taking(mode: str, seconds: Callable[[int], float], step: Any) -> Any:
        def step_taking(*inputs: Any) -> Any:
            calls[mode] += 1
            clock.now += seconds(calls[mode])
            return step(*inputs)

        return step_taking

    eager_step = own.eager_step
    monkeypatch.setattr(own, "eager_step", lambda model: taking("eager", eager, eager_step(model)))
    graphs = tool(name, "toolkit.decode").DecodeGraphs
    step = graphs.__call__
    monkeypatch.setattr(graphs, "__call__", lambda self, *inputs: taking("graph", graph, step)(self, *inputs))


def about_as_long(call: int) -> float:
    """10 ms and 11 ms in turn: a machine's ordinary jitter."""
    return 0.010 if call % 2 else 0.011


def now_and_then_a_second(call: int) -> float:
    """10 ms, but every fifth call 1 s: another process took the machine (3 of 15 steps)."""
    return 1.0 if call % 5 == 0 else 0.010


def steps_of(name: str) -> dict[str, dict[str, Any]]:
    """--json's steps of `generate --json` on project `name`, 16 new tokens (15 decode steps)."""
    code, printed, _ = generate_command(name, "--json", "--new-tokens", "16")
    assert code == 0
    return json.loads(printed)["steps"]


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_a_run_whose_steps_take_about_as_long_each_is_quotable(built, monkeypatch):
    """Decode steps of 10 and 11 ms in turn, in both greedy runs: neither run's tokens/s is too
    noisy to quote."""
    clock_steps(monkeypatch, built, eager=about_as_long, graph=about_as_long)
    steps = steps_of(built)
    assert {mode: step["too_noisy"] for mode, step in steps.items()} == {
        "eager": False,
        "graph": False,
    }


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_a_run_with_a_few_very_slow_steps_is_too_noisy_to_quote(built, monkeypatch):
    """Graph-mode steps of 10 ms but every fifth of 1 s, eager's of 10 and 11 ms: graph mode's
    tokens/s is too noisy to quote, eager's is not."""
    clock_steps(monkeypatch, built, eager=about_as_long, graph=now_and_then_a_second)
    steps = steps_of(built)
    assert {mode: step["too_noisy"] for mode, step in steps.items()} == {
        "eager": False,
        "graph": True,
    }


def test_a_mean_step_of_exactly_noisy_mean_times_p50_is_still_quotable():
    """The rule is strict: steps whose mean is 1.1 times their p50 (nine of 10 ms, one of 20 ms)
    are quotable, a little more (one of 21 ms) is too noisy."""
    typical = [0.010] * 9
    assert generation.step_figures([*typical, 0.020])["too_noisy"] is False
    assert generation.step_figures([*typical, 0.021])["too_noisy"] is True


def test_a_few_long_stalls_in_a_long_run_are_too_noisy_though_p95_misses_them():
    """100 steps of 10 ms but 4 of 1 s: p95 is still 10 ms, yet the stalls make the run 5 times as
    long, so its tokens/s is too noisy to quote."""
    figures = generation.step_figures([0.010] * 96 + [1.0] * 4)
    assert figures["p95_ms"] == pytest.approx(10.0)
    assert figures["too_noisy"] is True


@pytest.mark.parametrize("built", ["decode_project"], indirect=True)
def test_a_run_that_ends_at_prefill_has_no_step_figures_and_nothing_too_noisy(built):
    """A loop that stops at prefill's token runs no decode step: each run's steps are 0, with no
    figures and nothing too noisy, and the report still renders."""

    def prefill_only(step: Any, model: Any, prompt: Any, new_tokens: int, sample: Any) -> Any:
        return generate.generate(step, model, prompt, 1, sample=sample)

    result = generation.run(2, None, loop=prefill_only, sample=generate.sample)
    none = {"count": 0, "p50_ms": None, "p95_ms": None, "mean_ms": None, "spread": None}
    none["too_noisy"] = False
    assert result["steps"] == {"eager": none, "graph": none}
    generation.render(result)


class Lookup(torch.nn.Module):
    """A decode model quick to compile: each token's logits are its row of a table (a row for
    each id of the sample's vocabulary, which its prompt draws from)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(model.VOCAB, 10))

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        return self.table[tokens]


@pytest.mark.parametrize("name", PROJECTS)
def test_more_sizes_than_the_recompile_limit_raise_it_with_a_note(name, monkeypatch, request):
    """Each capture size is one graph of one compiled model: more sizes than Dynamo's recompile
    limit raise the limit, and warm-up says so."""
    own = tool(name, "model")
    monkeypatch.setattr(own, "build_model", Lookup)
    monkeypatch.setattr(own, "CAPTURE_SIZES", (1, 2))
    ranks = []
    if name == "decode_parallel_project":
        monkeypatch.setattr(own, "parallel_plan", lambda world_size: {})
        ranks = [request.getfixturevalue("one_rank")]
    torch._dynamo.reset()
    _, graphs = tool(name, "toolkit.generation").build(select_backend(), *ranks)
    # Dynamo's own patch: it puts back whatever the warm-up raised the limit to.
    with torch._dynamo.config.patch(recompile_limit=1), torch.no_grad():
        warmup = graphs.warm_up()
    assert warmup.graphs == 2
    assert "recompile_limit raised from 1 to 2" in str(warmup)


def test_state_a_request_leaves_for_the_next_is_refused_before_anything_compiles(monkeypatch):
    """generate serves the prompt a second time after a whole first request, restoring nothing:
    a model whose state reaches the next request is refused in one line naming that state, exit 2,
    before a graph is captured."""
    from toolkit.test_check import RemembersRequests

    monkeypatch.setattr(model, "build_model", RemembersRequests)
    monkeypatch.setattr(DecodeGraphs, "warm_up", lambda graphs: pytest.fail("captured"))
    code, printed, told = generate_command("decode_project")
    assert (code, printed) == (2, "")
    (line,) = told.splitlines()
    assert line.startswith("generate: a second request of the same prompt")
    assert "state memory" in line
