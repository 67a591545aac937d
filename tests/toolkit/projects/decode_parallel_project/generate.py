"""Your generation loop: an eager prefill of the prompt, then one decode step per new token.

    python -m decode_parallel_project generate [--new-tokens N] [--batch B] [--json]

generate() is the loop and sample() chooses each token: both are yours to edit. The command hands
them to toolkit/generation.py (main() below), which builds the model and its decode graphs (one per capture
size), warms them up, runs your loop, times it and prints the tokens.

The check is greedy: your loop with argmax in place of sample(), eagerly and in graph mode, must
choose the same tokens (exit 1 otherwise). The printed tokens come from graph mode with your
sample(). On an NPU eager's logits and graph mode's differ by rounding, so a sampler could draw
other tokens on each side, even from one random state, though graph mode is right.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .toolkit import generation
from .toolkit.decode import logits_of

EOS_ID: int | None = None
"""A token id that ends a sequence (your tokenizer's eos_token_id); None: always generate all."""


def sample(logits: torch.Tensor) -> torch.Tensor:
    """The next token of each sequence, (batch, 1), from the logits (batch, n, vocab): greedy.

    Your sampler goes here, e.g. `torch.multinomial(torch.softmax(logits[:, -1] / 0.8, -1), 1)`.
    It runs outside the graph, so the captured step stays as it is, with no random-number op in it.
    """
    return logits[:, -1:].argmax(-1)


def generate(
    step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    model: torch.nn.Module,
    prompt: torch.Tensor,
    new_tokens: int,
    sample: Callable[[torch.Tensor], torch.Tensor] = sample,
) -> torch.Tensor:
    """The prompt followed by up to `new_tokens` new tokens per sequence, (batch, length).

    Prefill runs the whole prompt through `model` eagerly and fills its cache. Then `step` (the
    model's decode step, in graph mode or not) gives the logits of each token on (tokens (batch,
    1), input_pos (1,)), and `sample` chooses the next. A sequence that produced EOS_ID repeats
    it; generation stops early once every sequence has.
    """
    input_pos = torch.arange(prompt.shape[1], device=prompt.device)
    token = sample(logits_of(model(prompt, input_pos)))
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
        token = sample(logits)
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


def main(arguments: list[str] | None = None, prog: str | None = None) -> int:
    """`python -m decode_parallel_project generate`: the toolkit runs your loop and sampler."""
    return generation.main(arguments, prog, loop=generate, sample=sample)
