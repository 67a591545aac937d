{%- set cache = cookiecutter.mode == "cache_compile" -%}
{%- set tp = cookiecutter.parallel == "tensor_parallel" -%}
"""Greedy generation: an eager prefill of the prompt, then one graph-mode decode step per new token.

The decode step replays one graph per capture size.

    python -m {{ cookiecutter.package_name }} generate [--new-tokens N] [--batch B] [--json]

Like the MRE it seeds torch.manual_seed(0), then calls build_model(), then example_inputs() (the
prompt), so anyone can rebuild the eager reference. The model and its decode graphs come from
build() in toolkit/generation.py, which bench times too. It generates twice from the same prompt
and the same starting cache: eagerly, then in graph mode, and the tokens must agree. It prints the
tokens, tokens per second of each and what warm-up captured; --json prints one object instead.
{%- if tp %}

It also runs on N ranks under torchrun (`torchrun --nproc-per-node N -m
{{ cookiecutter.package_name }} generate`): each rank holds its share of the heads
(parallel_plan() in model.py), its KV cache only those heads, and rank 0 prints. Every rank must
choose the same tokens, and eager's.
{%- endif %}

Exit 0: generated, and graph mode chose the tokens eager chose. 1: they differ (`python -m
{{ cookiecutter.package_name }} check` compares one step leaf by leaf). 2: the request cannot run (a
batch above the largest capture size, a prompt plus new tokens longer than MAX_SEQ_LEN).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch

from .model import example_inputs
from .toolkit.backend import select_backend
from .toolkit.contract import ContractError, to_device
from .toolkit.decode import Step, prefill
from .toolkit.generation import build
{%- if tp %}
from .toolkit.parallel import Ranks, tensor_parallel
{%- endif %}
from .toolkit.report import synchronize
from .toolkit.state import restore, save

EOS_ID: int | None = None
"""A token id that ends a sequence (your tokenizer's eos_token_id); None: always generate all."""
NEW_TOKENS = 16


def generate(
    step: Step, model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int
) -> torch.Tensor:
    """The prompt followed by up to `new_tokens` greedy tokens per sequence, (batch, length).

    Prefill runs the whole prompt through `model` eagerly and fills its cache. Then `step` (the
    model, compiled or not) runs once per token on (tokens (batch, 1), input_pos (1,)). A sequence
    that produced EOS_ID repeats it; generation stops early once every sequence has.
    """
    token = prefill(model, prompt)
    generated = [token]
    done = ended(token)
    # A tensor, advanced in place (as gpt-fast does): a new position is new data for the same
    # graph, where a Python int would be a constant and compile a graph per position.
    input_pos = torch.tensor([prompt.shape[1]], device=prompt.device)
    for _ in range(new_tokens - 1):
        if done.all():
            break
        logits = step(token, input_pos)
        input_pos += 1
{%- if cache %}
        # The choice runs outside the graph: sampling draws random numbers, and cache_compile
        # refuses graphs with RNG ops. Replace argmax with your sampler here.
{%- else %}
        # The choice runs outside the graph, so a sampler of yours replaces argmax here and the
        # captured step stays as it is.
{%- endif %}
        token = logits[:, -1:].argmax(-1)
        if EOS_ID is not None:
            token = token.masked_fill(done[:, None], EOS_ID)
        done |= ended(token)
        generated.append(token)
    return torch.cat([prompt, *generated], dim=1)


def ended(token: torch.Tensor) -> torch.Tensor:
    """Which sequences the new tokens (batch, 1) end: those that produced EOS_ID."""
    if EOS_ID is None:
        return torch.zeros(token.shape[0], dtype=torch.bool, device=token.device)
    return token[:, 0] == EOS_ID


def prompt_of(batch: int | None, device: str) -> torch.Tensor:
    """example_inputs()'s prompt, its rows repeated in turn to `batch` sequences if given."""
    (prompt,) = to_device(example_inputs(), device)
    if batch is None:
        return prompt
    return prompt[torch.arange(batch, device=device) % prompt.shape[0]]


def timed(call: Any, device: str) -> tuple[Any, float]:
    """What `call()` returns, and the seconds it took until the device was done."""
    started = time.perf_counter()
    result = call()
    synchronize(device)
    return result, time.perf_counter() - started


{% if tp -%}
def run(new_tokens: int, batch: int | None, ranks: Ranks) -> dict[str, Any]:
    """Generate eagerly, then in graph mode, from the same prompt and starting state, as this rank
    of `ranks`."""
    backend = select_backend()
    model, graphs = build(backend, ranks)
    prompt = prompt_of(batch, ranks.device)
{%- else -%}
def run(new_tokens: int, batch: int | None) -> dict[str, Any]:
    """Generate eagerly, then in graph mode, from the same prompt and starting state."""
    backend = select_backend()
    model, graphs = build(backend)
    prompt = prompt_of(batch, backend.device)
{%- endif %}
    graphs.limits.check_length(prompt.shape[1], new_tokens)
    size = graphs.limits.capture_size(prompt.shape[0])
    with torch.no_grad():
        start = save(model)
        warmup = graphs.warm_up()
        eager, eager_s = timed(lambda: generate(model, model, prompt, new_tokens), backend.device)
        restore(model, start)
        tokens, graph_s = timed(lambda: generate(graphs, model, prompt, new_tokens), backend.device)
    # Prefill runs eagerly on both sides: tokens per second of the decode steps together with it.
    decoded = (tokens.shape[1] - prompt.shape[1]) * prompt.shape[0]
    return {
        "backend": backend.name,
        "reason": backend.reason,
        "batch": prompt.shape[0],
        "prompt_length": prompt.shape[1],
        "capture_size": size,
        "tokens": tokens.tolist(),
        "graphs": warmup.graphs,
        "warmup": str(warmup),
        "recompiles": graphs.recompiles,
        "tokens_per_s": {"eager": decoded / eager_s, "graph": decoded / graph_s},
        "matches_eager": torch.equal(tokens, eager),
        "first_difference": first_difference(tokens, eager),
        "note": None if backend.is_npugraph_ex else STAND_IN_NOTE.format(backend=backend.name),
    }


STAND_IN_NOTE = "{backend} stands in for npugraph_ex: its tokens/s do not predict NPU speed"


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
        ("recompiles", "; ".join(result["recompiles"]) or "none"),
    ]
{%- if tp %}
    if "ranks" in result:
        group = result["ranks"]
        rows.insert(1, ("ranks", f"{group['size']} ({group['backend']}), tokens from rank 0"))
{%- endif %}
    if result["note"]:
        rows.append(("note", result["note"]))
    return "\n".join(f"{name:<11} {value}" for name, value in rows)


def words(ids: list[int]) -> str:
    return " ".join(map(str, ids))
{%- if tp %}


def across_ranks(results: list[dict[str, Any]], ranks: Ranks) -> dict[str, Any]:
    """Rank 0's result, for the job: graph mode matches eager only if it did on every rank, and
    every rank chose rank 0's tokens (each all-reduces to the same logits, so they must)."""
    first = results[0]
    differ = [
        rank
        for rank, result in enumerate(results)
        if result["tokens"] != first["tokens"] or not result["matches_eager"]
    ]
    group = {"size": ranks.size, "backend": ranks.backend, "differ": differ}
    return {**first, "matches_eager": not differ, "ranks": group}
{%- endif %}


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
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
{%- if tp %}
    with tensor_parallel(select_backend().device) as ranks:
        try:
            result = run(arguments.new_tokens, arguments.batch, ranks)
        except (ValueError, ContractError) as error:
            # Every rank refuses the same request: none waits in a collective for another.
            if ranks.is_first:
                print(f"generate: {error}", file=sys.stderr)
            return 2
        result = across_ranks(ranks.gather(result), ranks)
    if not ranks.is_first:
        return 0 if result["matches_eager"] else 1
{%- else %}
    try:
        result = run(arguments.new_tokens, arguments.batch)
    except (ValueError, ContractError) as error:
        print(f"generate: {error}", file=sys.stderr)
        return 2
{%- endif %}
    print(json.dumps(result) if arguments.json else render(result))
    if not result["matches_eager"]:
{%- if tp %}
        where = f"rank {result['ranks']['differ'][0]}"
        if result["first_difference"]:
            where = f"{result['first_difference']} on rank 0"
        print(
            f"generate: graph mode chose other tokens than eager, or than rank 0, from {where}"
            ": run `python -m {{ cookiecutter.package_name }} check` to compare one step leaf by leaf",
            file=sys.stderr,
        )
{%- else %}
        print(
            f"generate: graph mode chose other tokens than eager from {result['first_difference']}"
            ": run `python -m {{ cookiecutter.package_name }} check` to compare one step leaf by leaf",
            file=sys.stderr,
        )
{%- endif %}
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
