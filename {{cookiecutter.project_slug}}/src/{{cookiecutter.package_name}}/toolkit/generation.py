"""generate: the project's loop (generate.py) run eagerly and in graph mode, compared, timed, printed.

    python -m <package> generate [--new-tokens N] [--batch B] [--json]

The command line hands main() the loop and the sampler of the project's generate.py; this module
never imports that file, so the loop stays the user's to edit. Like the MRE it seeds
torch.manual_seed(0), then calls build_model(), then example_inputs() (the prompt). build() below
makes the model and its decode graphs, and bench times what it builds, so both run the same graphs.
Warm-up captures every capture size. Then the loop runs three times, each from the same prompt and
the same starting cache: in graph mode with the loop's sampler, seeded again, then greedy and
eager, then greedy in graph mode (whose cache the model keeps). The two greedy runs must choose the
same tokens; the sampled run's tokens are the ones printed (`greedy_tokens` in --json: the compared
ones). The comparison is greedy because on an NPU eager's logits and graph mode's
differ by rounding: a sampler may draw other tokens on each side, from one random state, though
graph mode is right. It prints the tokens, tokens per second of each greedy run, the spread of
its decode steps (and whether its tokens per second are too noisy to quote: NOISY_MEAN) and what
warm-up captured; --json prints one object instead.

With tensor parallelism it also runs on N ranks under torchrun (`torchrun --nproc-per-node N -m
<package> generate`): each rank holds its share of the heads (parallel_plan() in model.py), its KV
cache only those heads, and rank 0 prints. Every rank must choose the same tokens, and eager's.

Exit 0: generated, and graph mode chose the tokens eager chose. 1: they differ (`python -m
<package> check` compares one step leaf by leaf), or graph mode fails (a graph break: one line with
your line and the fix). 2: the request cannot run (a batch above the largest capture size, a
prompt plus new tokens longer than MAX_SEQ_LEN: every reason it cannot is a line on stderr), or
the model cannot: it fails eagerly, or keeps state that the tools cannot save and put back
(rehearsal.py); or generate.py's sample() gives other than one token id per sequence, or its
generate() other than the prompt followed by its new tokens (checked(), generated()).

A decode project's own: the template leaves this file out of forward projects.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import project
from .backend import select_backend
from .bench import latency
from .contract import ContractError, describe, to_device
from .decode import DecodeGraphs, Step, carried_over, limits, logits_of
from .rehearsal import GraphFailure, built, graph_failures, rehearse
from .report import synchronize
from .state import restore, save

if TYPE_CHECKING:
    from .backend import Backend
    from .parallel import Ranks

Sample = Callable[[torch.Tensor], torch.Tensor]
"""A sampler: the next token of each sequence, (batch, 1), from logits (batch, n, vocab)."""
Loop = Callable[..., torch.Tensor]
"""generate.py's generate(step, model, prompt, new_tokens, sample=...): the prompt and its new
tokens, (batch, length)."""

NEW_TOKENS = 16
GRAPH_TOKENS_FROM = 2
"""The fewest new tokens generate takes: the first is the eager prefill's, so with fewer no
decode step, and nothing of graph mode, would run."""
DESCRIPTION = (
    "Generation with your loop (generate.py): an eager prefill of the prompt, then one graph-mode "
    "decode step per new token, checked greedily against eager."
)
STAND_IN_NOTE = "{backend} stands in for npugraph_ex: its tokens/s do not predict NPU speed"
NOISY_MEAN = 1.1
"""A greedy run's tokens/s is too noisy to quote when its mean decode step took more than this
times its typical one, p50. tokens/s counts every step's time, so it follows the mean: a few steps
slowed by something else on the machine (another process, the host's scheduler) then set more
than a tenth of it. p95 alone would miss them: in a run of 100 steps, 4 stalls of a second each
leave p95 at the typical step, and the figure far too low."""


TOKEN_DTYPES = (torch.int64, torch.int32)
"""What an embedding takes as token ids, and so what a sampler must give."""


def checked(sample: Sample) -> Sample:
    """`sample`, with each token it chooses checked: one id per sequence, (batch, 1), or a
    ContractError naming what it gave, before a wrong shape reaches the model (and graph mode
    compiles for it)."""

    @functools.wraps(sample)
    def sample_checked(logits: torch.Tensor) -> torch.Tensor:
        token = sample(logits)
        expected = (logits.shape[0], 1)
        if (
            not isinstance(token, torch.Tensor)
            or token.dtype not in TOKEN_DTYPES
            or token.shape != expected
        ):
            raise ContractError(
                f"sample() must return the next token of each sequence, an integer tensor "
                f"{expected} (batch, 1), got {describe(token)}; e.g. `logits[:, -1:].argmax(-1)` "
                "or `torch.multinomial(probabilities, 1)`"
            )
        # Outside the vocabulary, the next step's embedding would fail deep in the model. Each
        # check waits for the device, in this run only: generate times the greedy runs.
        vocab = logits.shape[-1]
        if bool((token < 0).any() | (token >= vocab).any()):
            raise ContractError(
                f"sample() must choose token ids of the vocabulary, 0 to {vocab - 1} (the logits' "
                f"last dimension), got {token.flatten().tolist()}"
            )
        return token

    return sample_checked


def generated(tokens: Any, prompt: torch.Tensor) -> torch.Tensor:
    """What the loop returned, if it is the prompt's rows followed by their new tokens: else a
    ContractError naming what it was."""
    if (
        not isinstance(tokens, torch.Tensor)
        or tokens.dim() != 2
        or not torch.equal(tokens[:, : prompt.shape[1]], prompt)
    ):
        raise ContractError(
            f"generate() must return the prompt followed by its new tokens: (batch, length) = "
            f"({prompt.shape[0]}, {prompt.shape[1]} or more), its first {prompt.shape[1]} tokens "
            f"the prompt's; got {describe(tokens)}"
        )
    return tokens


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The comparison's sampler: each sequence's most likely next token, (batch, 1)."""
    return logits[:, -1:].argmax(-1)


def build(backend: Backend, ranks: Ranks | None = None) -> tuple[torch.nn.Module, DecodeGraphs]:
    """The model, seeded as in the MRE, and its decode step in graph mode at every capture size.

    With tensor parallelism, `ranks` is this process's rank: the model is sharded over the ranks
    by parallel_plan(), and runs on the rank's device.
    """
    torch.manual_seed(0)
    if ranks is None:
        device = backend.device
        model = built(project.from_model("build_model")).to(device).eval()
    else:
        # Only a tensor-parallel project's model.py has a plan.
        device = ranks.device
        model = built(project.from_model("build_model")).to(device).eval()
        model = ranks.shard(model, project.from_model("parallel_plan")(ranks.size))
    bounds = limits()
    # The random generator as build_model() left it, for the caller's example_inputs().
    with torch.random.fork_rng(devices=[]):
        (prompt,) = to_device(project.from_model("example_inputs")(), device)
    # Before anything compiles, the MRE's eager calls on the prompt: refuse a model that fails
    # eagerly, or keeps state out of sight. A prompt the cache cannot hold, the callers refuse
    # in their own words.
    if prompt.shape[0] <= bounds.max_batch and prompt.shape[1] < bounds.max_seq_len:
        rehearse(model, (prompt,))
    if project.CACHE_COMPILE:
        from .compile_cache import cached_steps

        # One cached method per capture size; with tensor parallelism each rank writes and loads
        # its own cache.
        keywords = {} if ranks is None else ranks.cache_keywords()
        compiled = cached_steps(
            model, bounds.capture_sizes, cache_dir=project.CACHE_DIR, **keywords
        )
    else:
        compiled_model = torch.compile(
            model,
            backend=backend.name,
            fullgraph=True,
            dynamic=False,
            options=backend.options,
        )
        # One compiled model: Dynamo compiles one graph for each batch size it meets.
        compiled = dict.fromkeys(bounds.capture_sizes, compiled_model)
    return model, DecodeGraphs(model, compiled, bounds, device)


def eager_step(model: torch.nn.Module) -> Step:
    """The model's decode step run eagerly, giving its logits as the graphs give theirs."""
    return lambda tokens, input_pos: logits_of(model(tokens, input_pos))


def prompt_of(batch: int | None, device: str) -> torch.Tensor:
    """example_inputs()'s prompt, its rows repeated in turn to `batch` sequences if given (and
    positive: run() refuses any other batch)."""
    (prompt,) = to_device(project.from_model("example_inputs")(), device)
    if batch is None or batch < 1:
        return prompt
    return prompt[torch.arange(batch, device=device) % prompt.shape[0]]


def timed(call: Any, device: str) -> tuple[Any, float]:
    """What `call()` returns, and the seconds it took until the device was done."""
    started = time.perf_counter()
    result = call()
    synchronize(device)
    return result, time.perf_counter() - started


def clocked(step: Step, device: str, seconds: list[float]) -> Step:
    """`step`, noting in `seconds` how long each call took until the device was done (timed())."""

    def clocked_step(tokens: torch.Tensor, input_pos: torch.Tensor) -> Any:
        logits, took = timed(lambda: step(tokens, input_pos), device)
        seconds.append(took)
        return logits

    return clocked_step


def step_figures(seconds: list[float]) -> dict[str, Any]:
    """A run's decode steps: how many, their p50, p95 and mean in ms (bench's latency()), p95 over
    p50 (their spread), and whether they are too noisy to quote (NOISY_MEAN). A run without a
    decode step (every sequence ended at prefill's token) has no figures, and nothing too noisy."""
    if not seconds:
        none = dict.fromkeys(("p50_ms", "p95_ms", "mean_ms", "spread"))
        return {"count": 0, **none, "too_noisy": False}
    figures = latency([second * 1e3 for second in seconds], [])
    p50, mean = figures["p50_ms"], figures["mean_ms"]
    return {
        "count": len(seconds),
        "p50_ms": p50,
        "p95_ms": figures["p95_ms"],
        "mean_ms": mean,
        "spread": figures["p95_ms"] / p50,
        "too_noisy": mean > NOISY_MEAN * p50,
    }


def run(
    new_tokens: int,
    batch: int | None,
    ranks: Ranks | None = None,
    *,
    loop: Loop,
    sample: Sample,
) -> dict[str, Any]:
    """Run `loop` greedily, eagerly then in graph mode, then in graph mode with `sample`, each
    from the same prompt and starting state (with tensor parallelism, as this rank of `ranks`)."""
    backend = select_backend()
    # The request first: one the cache cannot hold is refused before a model is built. Only the
    # prompt's shape counts here; its tokens are drawn after build_model(), as the MRE draws them.
    with torch.random.fork_rng(devices=[]):
        shape = prompt_of(batch, "cpu").shape
    bounds = limits()
    requested = shape[0] if batch is None else batch
    if refused := bounds.refusals(shape[1], new_tokens, requested, least=GRAPH_TOKENS_FROM):
        raise Refused(refused)
    size = bounds.capture_size(shape[0])
    model, graphs = build(backend, ranks)
    prompt = prompt_of(batch, backend.device if ranks is None else ranks.device)
    with torch.no_grad():
        start = save(model)
        # A second request after a whole first one, with nothing put back between them, must
        # choose the first one's tokens: else refused, naming the state that carried over.
        carried_over(model, prompt)
        restore(model, start)
        warmup = graphs.warm_up()
        # Seeded as the MRE is, on every rank: each rank all-reduces to the same logits, so each
        # draws rank 0's tokens.
        torch.manual_seed(0)
        tokens = generated(loop(graphs, model, prompt, new_tokens, sample=checked(sample)), prompt)
        restore(model, start)
        # Each decode step of the timed runs is clocked too, for their spread. Waiting for the
        # device after each step costs little: the sample loop waits for each token anyway, to
        # see whether every sequence has ended.
        steps: dict[str, list[float]] = {"eager": [], "graph": []}
        clocked_eager = clocked(eager_step(model), backend.device, steps["eager"])
        eager, eager_s = timed(
            lambda: loop(clocked_eager, model, prompt, new_tokens, sample=greedy),
            backend.device,
        )
        restore(model, start)
        # Last, so that the model ends with the state graph-mode greedy generation leaves.
        clocked_graphs = clocked(graphs, backend.device, steps["graph"])
        graph, graph_s = timed(
            lambda: loop(clocked_graphs, model, prompt, new_tokens, sample=greedy), backend.device
        )
    # Prefill runs eagerly on both sides: tokens per second of the decode steps together with it.
    decoded = (graph.shape[1] - prompt.shape[1]) * prompt.shape[0]
    return {
        "backend": backend.name,
        "reason": backend.reason,
        "batch": prompt.shape[0],
        "prompt_length": prompt.shape[1],
        "capture_size": size,
        "tokens": tokens.tolist(),
        "greedy_tokens": graph.tolist(),
        "graphs": warmup.graphs,
        "warmup": str(warmup),
        "recompiles": graphs.recompiles,
        "tokens_per_s": {"eager": decoded / eager_s, "graph": decoded / graph_s},
        "steps": {mode: step_figures(seconds) for mode, seconds in steps.items()},
        "matches_eager": torch.equal(graph, eager),
        "first_difference": first_difference(graph, eager),
        "note": None if backend.is_npugraph_ex else STAND_IN_NOTE.format(backend=backend.name),
    }


def first_difference(tokens: torch.Tensor, eager: torch.Tensor) -> str | None:
    """Where graph mode's tokens first part from eager's: sequence and position; None if nowhere."""
    differ = (tokens != eager).nonzero()
    if not len(differ):
        return None
    sequence, position = differ[differ[:, 1].argmin()].tolist()
    return f"sequence {sequence}, position {position}"


def render(result: dict[str, Any]) -> str:
    """The report as a few aligned lines, as the MRE prints its own; `|` ends each prompt."""
    rate = result["tokens_per_s"]
    prompt = result["prompt_length"]
    rows = [
        ("backend", f"{result['backend']} ({result['reason']})"),
        ("warm-up", result["warmup"]),
        *(
            (f"sequence {index}", f"{words(row[:prompt])} | {words(row[prompt:])}")
            for index, row in enumerate(result["tokens"])
        ),
        (
            "tokens/s",
            (
                f"eager {rate['eager']:.1f}, graph {rate['graph']:.1f} (batch {result['batch']}, "
                f"capture size {result['capture_size']})"
            ),
        ),
        ("steps", steps_text(result["steps"])),
        ("recompiles", "; ".join(result["recompiles"]) or "none"),
    ]
    if "ranks" in result:
        group = result["ranks"]
        rows.insert(1, ("ranks", f"{group['size']} ({group['backend']}), tokens from rank 0"))
    if result["note"]:
        rows.append(("note", result["note"]))
    return "\n".join(f"{name:<11} {value}" for name, value in rows)


def steps_text(steps: dict[str, dict[str, Any]]) -> str:
    """The report's steps line: each greedy run's decode steps, p50, p95 (and p95 over p50) and
    mean, then whose tokens/s, if anyone's, is too noisy to quote, and the rule."""
    runs = [
        f"{mode} p50 {step['p50_ms']:.3f} ms, p95 {step['p95_ms']:.3f} ms ({step['spread']:.2f}x), "
        f"mean {step['mean_ms']:.3f} ms"
        if step["count"]
        else f"{mode} no decode step"
        for mode, step in steps.items()
    ]
    if noisy := [mode for mode, step in steps.items() if step["too_noisy"]]:
        verdict = f"{' and '.join(noisy)} tokens/s too noisy to quote (mean over {NOISY_MEAN}x p50)"
    else:
        verdict = f"steady enough to quote (mean within {NOISY_MEAN}x p50)"
    return f"{'; '.join(runs)}: {verdict}"


def words(ids: list[int]) -> str:
    return " ".join(map(str, ids))


def across_ranks(results: list[dict[str, Any]], ranks: Ranks) -> dict[str, Any]:
    """Rank 0's result, for the job: graph mode matches eager only if it did on every rank, and
    every rank chose rank 0's tokens (each all-reduces to the same logits, so they must)."""
    first = results[0]
    differ = [
        rank
        for rank, result in enumerate(results)
        if result["tokens"] != first["tokens"]
        or result["greedy_tokens"] != first["greedy_tokens"]
        or not result["matches_eager"]
    ]
    group = {"size": ranks.size, "backend": ranks.backend, "differ": differ}
    return {**first, "matches_eager": not differ, "ranks": group}


def difference(result: dict[str, Any]) -> str:
    """What the one line on stderr says when graph mode's tokens differ: from where (with tensor
    parallelism, on which ranks: every one), and the command that compares one step."""
    command = f"python -m {project.PACKAGE} check"
    if "ranks" in result:
        # The ranks' check: the same plan over as many ranks, compared step by step on each.
        command = f"torchrun --nproc-per-node {result['ranks']['size']} -m {project.PACKAGE} check"
        ranks = result["ranks"]["differ"]
        where = f"rank{'s' * (len(ranks) > 1)} {', '.join(map(str, ranks))}"
        if result["first_difference"]:
            others = f" ({where} differ)" if ranks != [0] else ""
            where = f"{result['first_difference']} on rank 0{others}"
        differ = f"graph mode chose other tokens than eager, or than rank 0, from {where}"
    else:
        differ = f"graph mode chose other tokens than eager from {result['first_difference']}"
    return f"generate: {differ}: run `{command}` to compare one step leaf by leaf"


class Refused(ValueError):
    """A request that cannot run, with every reason why (each with its fix)."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("\n".join(reasons))
        self.reasons = reasons


def refuse(error: Exception) -> None:
    """Say on stderr why generate cannot run: each reason a request is refused a line of its own;
    a refusal of the model (its indented details and fix) as it is worded."""
    for reason in error.reasons if isinstance(error, Refused) else [str(error)]:
        print(f"generate: {reason}", file=sys.stderr)


def main(
    argv: Sequence[str] | None = None,
    prog: str | None = None,
    *,
    loop: Loop,
    sample: Sample,
) -> int:
    """Generate with `loop` and `sample` (generate.py's), print the result; the exit status."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    parser.add_argument(
        "--new-tokens",
        type=int,
        default=NEW_TOKENS,
        help=f"tokens to generate (default: {NEW_TOKENS})",
    )
    parser.add_argument(
        "--batch", type=int, help="sequences, the prompt's rows in turn (default: the prompt's)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    arguments = parser.parse_args(argv)
    asked = {"loop": loop, "sample": sample}
    # What your model and loop print goes to stderr: stdout holds the result (or the JSON) alone.
    quiet = contextlib.redirect_stdout(sys.stderr)
    if project.TENSOR_PARALLEL:
        from .parallel import tensor_parallel

        with quiet, tensor_parallel(select_backend().device) as ranks:
            try:
                with graph_failures():
                    result = run(arguments.new_tokens, arguments.batch, ranks, **asked)
            except (ValueError, ContractError, GraphFailure) as error:
                # Every rank refuses the same request, or fails on the same model: none waits in
                # a collective for another.
                if ranks.is_first:
                    refuse(error)
                return 1 if isinstance(error, GraphFailure) else 2
            result = across_ranks(ranks.gather(result), ranks)
        if not ranks.is_first:
            return 0 if result["matches_eager"] else 1
    else:
        try:
            with quiet, graph_failures():
                result = run(arguments.new_tokens, arguments.batch, **asked)
        except (ValueError, ContractError, GraphFailure) as error:
            refuse(error)
            return 1 if isinstance(error, GraphFailure) else 2
    print(json.dumps(result) if arguments.json else render(result))
    if not result["matches_eager"]:
        print(difference(result), file=sys.stderr)
        return 1
    return 0
