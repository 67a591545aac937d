"""The decode contract, and the machinery around a decode step captured once per batch size.

model.py of a decode project defines, besides build_model() and example_inputs() (the prompt):
- `MAX_BATCH`, `MAX_SEQ_LEN`: the rows and positions of the model's static KV cache;
- `CAPTURE_SIZES`: the batch sizes whose decode step is captured once each at warm-up, smallest
  first. A batch runs padded up to the next size, as vllm-ascend pads to its capture sizes.
forward(tokens, input_pos) takes tokens (batch, n) at positions input_pos (n,), writes those
positions of cache rows [:batch] in place, and returns logits (batch, n, vocab) or an object whose
.logits they are. input_pos is a tensor: a new position is new data, not a new graph.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._dynamo
from torch import nn
from torch._dynamo.utils import counters

from . import project
from .contract import ContractError, PromptTooLong, mismatches
from .state import State, StateCarriedOver, restore, save, state_mismatches

Step = Callable[[torch.Tensor, torch.Tensor], Any]
"""A decode step: the model, compiled or not, called as step(tokens, input_pos)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    """What model.py declares about its cache and its capture sizes, checked."""

    max_batch: int
    max_seq_len: int
    capture_sizes: tuple[int, ...]

    def capture_size(self, batch: int) -> int:
        """The capture size a batch of `batch` sequences runs at: the smallest that holds it."""
        if batch < 1:
            raise ValueError(f"a batch of {batch} sequences: generate at least 1")
        size = next((size for size in self.capture_sizes if size >= batch), None)
        if size is None:
            raise ValueError(
                f"a batch of {batch} sequences is more than the largest capture size, "
                f"{self.capture_sizes[-1]}: run at most {self.capture_sizes[-1]} at once, or add "
                f"a size to CAPTURE_SIZES in model.py (at most MAX_BATCH = {self.max_batch})"
            )
        return size

    def refusals(self, prompt_len: int, new_tokens: int, batch: int, least: int = 1) -> list[str]:
        """Every reason a request (a batch of prompts, new tokens, at least `least` of them)
        cannot run, each with its fix; none if it can. All of them: a request refused for one
        reason alone would be refused again, after the fix, for the next."""
        found = []
        for check in (
            lambda: self.check_length(prompt_len, new_tokens, least),
            lambda: self.capture_size(batch),
        ):
            try:
                check()
            except ValueError as error:
                found.append(str(error))
        return found

    def check_prompt(self, prompt_len: int) -> None:
        """Refuse example_inputs()'s prompt if the decode step after it has no position left."""
        if prompt_len >= self.max_seq_len:
            raise PromptTooLong(
                f"example_inputs()'s prompt has {prompt_len} tokens: the decode step after it "
                f"writes position {prompt_len}, beyond MAX_SEQ_LEN = {self.max_seq_len}; "
                "shorten the prompt or raise MAX_SEQ_LEN in model.py"
            )

    def check_length(self, prompt_len: int, new_tokens: int, least: int = 1) -> None:
        """Refuse fewer than `least` new tokens, or a prompt plus new tokens that the cache
        cannot hold."""
        if new_tokens < least:
            raise ValueError(
                f"--new-tokens {new_tokens}: generate at least 1 token"
                if least == 1
                else f"--new-tokens {new_tokens}: generate at least {least} tokens (the first new "
                "token is the eager prefill's; decode steps make the rest)"
            )
        if prompt_len + new_tokens > self.max_seq_len:
            room = self.max_seq_len - prompt_len
            fix = (
                f"ask for at most {room} new tokens, or raise MAX_SEQ_LEN in model.py"
                if room >= least
                # Asking for fewer cannot help: even `least` new tokens do not fit.
                else f"raise MAX_SEQ_LEN in model.py to at least {prompt_len + least}, or make "
                "example_inputs()'s prompt shorter"
            )
            raise ValueError(
                f"a prompt of {prompt_len} tokens plus {new_tokens} new ones is "
                f"{prompt_len + new_tokens} positions, more than MAX_SEQ_LEN = {self.max_seq_len}: "
                + fix
            )


SETTINGS = {
    "MAX_BATCH": "a positive int, the cache's rows (the most sequences at once)",
    "MAX_SEQ_LEN": "a positive int, the cache's positions (a prompt and its new tokens)",
    "CAPTURE_SIZES": "the batch sizes to capture a decode step for, e.g. (1, 2, 4)",
}
"""What a decode project's model.py must set, and what each is."""


def limits() -> Limits:
    """MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES from model.py, or a ContractError naming the fix."""
    # Looked up at each use, so a model.py a test patches counts (as contract.own_tolerances()).
    model = project.model()
    if missing := [name for name in SETTINGS if not hasattr(model, name)]:
        raise ContractError(
            f"model.py sets no {', '.join(missing)}: "
            + "; ".join(f"set {name} to {SETTINGS[name]}" for name in missing)
        )
    values = {}
    for name in ("MAX_BATCH", "MAX_SEQ_LEN"):
        value = getattr(model, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ContractError(f"model.py must set {name} to a positive int, got {value!r}")
        values[name] = value
    sizes = model.CAPTURE_SIZES
    example = "e.g. CAPTURE_SIZES = (1, 2, 4)"
    if not isinstance(sizes, tuple) or not sizes or not all(type(s) is int for s in sizes):
        raise ContractError(f"CAPTURE_SIZES must be a tuple of ints, got {sizes!r}; {example}")
    if list(sizes) != sorted(set(sizes)) or sizes[0] < 1:
        raise ContractError(
            f"CAPTURE_SIZES = {sizes!r} must be positive and strictly increasing; {example}"
        )
    if sizes[-1] > values["MAX_BATCH"]:
        raise ContractError(
            f"the largest capture size, {sizes[-1]}, is more than MAX_BATCH = "
            f"{values['MAX_BATCH']}: the cache has no rows for it; lower it or raise MAX_BATCH"
        )
    return Limits(values["MAX_BATCH"], values["MAX_SEQ_LEN"], sizes)


# A decode step Dynamo traces may call this: a mutation tester's dispatch would break the graph.
def logits_of(output: Any) -> torch.Tensor:  # pragma: no mutate block
    """The logits of a forward's output: the tensor itself, or its .logits (transformers)."""
    logits = output if isinstance(output, torch.Tensor) else getattr(output, "logits", None)
    if not isinstance(logits, torch.Tensor):
        raise ContractError(
            f"forward(tokens, input_pos) must return logits (batch, n, vocab) or an object with "
            f".logits, got {type(output).__name__}"
        )
    return logits


def prefill(model: nn.Module, prompt: torch.Tensor) -> torch.Tensor:
    """Run the prompt through the model eagerly, filling its cache: the first new token of each
    sequence, greedy, as (batch, 1)."""
    input_pos = torch.arange(prompt.shape[1], device=prompt.device)
    return logits_of(model(prompt, input_pos))[:, -1:].argmax(-1)


def first_step(model: nn.Module, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill, then the inputs of the first decode step: (tokens (batch, 1), input_pos (1,))."""
    tokens = prefill(model, prompt)
    return tokens, torch.tensor([prompt.shape[1]], device=prompt.device)


def next_step(tokens: torch.Tensor, input_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs of the step after one on (tokens, input_pos): other tokens, the next position, the
    same shapes. A check calls it again with these to see that a new position compiles nothing."""
    return torch.zeros_like(tokens), input_pos + 1


@dataclass
class Request:
    """One request served eagerly and greedily: its new tokens, the logits of each call (the
    prefill's, then each decode step's), and the state its prefill left."""

    tokens: torch.Tensor
    logits: list[torch.Tensor]
    after_prefill: State


def request(model: nn.Module, prompt: torch.Tensor, new_tokens: int) -> Request:
    """Serve `prompt` as a new request: prefill from position 0, then decode steps, greedily."""
    input_pos = torch.arange(prompt.shape[1], device=prompt.device)
    logits = [logits_of(model(prompt, input_pos)).clone()]
    after_prefill = save(model)
    tokens = [logits[-1][:, -1:].argmax(-1)]
    input_pos = torch.tensor([prompt.shape[1]], device=prompt.device)
    for _ in range(new_tokens - 1):
        logits.append(logits_of(model(tokens[-1], input_pos)).clone())
        tokens.append(logits[-1][:, -1:].argmax(-1))
        input_pos = input_pos + 1
    return Request(torch.cat(tokens, dim=1), logits, after_prefill)


CARRY_OVER_FIX = (
    "reset that state when a request starts (a call from input_pos 0), as the README's wrapper "
    "zeroes a recurrent layer's states (README, section 'A transformers Llama with a "
    "StaticCache'); or keep it at the positions input_pos names, which a request writes before "
    "it reads them"
)


REQUEST_TOKENS = 4
"""The tokens of each request the carry-over check serves (fewer if the cache cannot hold them)."""


def carried_over(model: nn.Module, prompt: torch.Tensor) -> None:
    """Serve `prompt` twice, the second request right after the whole first, with nothing put back
    between them: a model whose state reaches the next request gives other tokens or logits the
    second time. Raise StateCarriedOver naming them and the state that differs after each
    prefill; leave the model as the second request left it."""
    new_tokens = max(1, min(REQUEST_TOKENS, limits().max_seq_len - prompt.shape[1]))
    first = request(model, prompt, new_tokens)
    second = request(model, prompt, new_tokens)
    logits = mismatches(second.logits, first.logits)
    if torch.equal(second.tokens, first.tokens) and not logits:
        return
    what = "other logits" if torch.equal(second.tokens, first.tokens) else "other tokens"
    state = [each.path for each in state_mismatches(second.after_prefill, first.after_prefill)]
    through = f" through {', '.join(state)}" if state else ""
    raise StateCarriedOver(
        f"a second request of the same prompt, served after a whole first one, gives {what} "
        f"(logits {logits[0]}): the state a request leaves reaches the next one{through}",
        CARRY_OVER_FIX,
    )


def ensure_recompile_limit(sizes: tuple[int, ...]) -> str | None:
    """Let Dynamo compile one graph per capture size: raise its recompile limit if there are more
    sizes than it allows, and say so; refuse beyond torch's limit for all graphs together."""
    limit = torch._dynamo.config.recompile_limit
    if len(sizes) <= limit:
        return None
    overall = torch.compiler.config.accumulated_recompile_limit
    if len(sizes) > overall:
        raise ContractError(
            f"{len(sizes)} capture sizes are more graphs than torch compiles for one function "
            f"(torch.compiler.config.accumulated_recompile_limit = {overall}): use fewer sizes"
        )
    torch._dynamo.config.recompile_limit = len(sizes)
    return (
        f"{len(sizes)} capture sizes, one graph each: torch._dynamo.config.recompile_limit raised "
        f"from {limit} to {len(sizes)}"
    )


@dataclass
class Warmup:
    """What warm-up captured: one graph per capture size, and how long it took."""

    sizes: tuple[int, ...]
    graphs: int
    seconds: float
    note: str | None = None

    def __str__(self) -> str:
        text = (
            f"captured {self.graphs} graph{'s' * (self.graphs != 1)} "
            f"(batch {', '.join(map(str, self.sizes))}) in {self.seconds:.1f} s"
        )
        return f"{text}; {self.note}" if self.note else text


@dataclass
class DecodeGraphs:
    """The decode step in graph mode at every capture size: a batch runs padded up to its size.

    `compiled` maps each capture size to its compiled step: in npugraph_ex mode one torch.compile,
    for which Dynamo compiles one graph per size; under cache_compile one cache_compile method per
    size, since a recompile deletes the cache.
    """

    model: nn.Module
    compiled: dict[int, Step]
    limits: Limits
    device: str
    recompiles: list[str] = field(default_factory=list)
    """Graphs compiled after warm-up, each with the batch and position it ran at: none expected."""

    def __call__(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        """Logits (batch, n, vocab) of one step, run at the batch's capture size."""
        # As warm-up captured them: int32 ids from a sampler would compile a graph of their own.
        tokens = tokens.long()
        batch = tokens.shape[0]
        size = self.limits.capture_size(batch)
        if size > batch:
            # Padding rows run on token 0 and write cache rows [batch:size], which no real
            # sequence reads: attention never mixes rows.
            padding = tokens.new_zeros(size - batch, *tokens.shape[1:])
            tokens = torch.cat([tokens, padding])
        graphs = counters["stats"]["unique_graphs"]
        logits = logits_of(self.compiled[size](tokens, input_pos))[:batch]
        if counters["stats"]["unique_graphs"] != graphs:
            self.recompiles.append(
                f"batch {batch} (capture size {size}) at positions {input_pos.tolist()} compiled "
                "a new graph"
            )
        return logits

    def warm_up(self) -> Warmup:
        """Capture every size's graph once, then give the model back the state it had before."""
        note = ensure_recompile_limit(self.limits.capture_sizes)
        if note:
            log.warning("decode: %s", note)
        state = save(self.model)
        graphs = counters["stats"]["unique_graphs"]
        started = time.perf_counter()
        for size in self.limits.capture_sizes:
            tokens = torch.zeros(size, 1, dtype=torch.long, device=self.device)
            self.compiled[size](tokens, torch.zeros(1, dtype=torch.long, device=self.device))
        seconds = time.perf_counter() - started
        restore(self.model, state)
        graphs = counters["stats"]["unique_graphs"] - graphs
        return Warmup(self.limits.capture_sizes, graphs, seconds, note)
