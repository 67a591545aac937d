{%- set decode = cookiecutter.workload == "decode" -%}
"""One rank of the suite's two-rank run under torchrun (not a test itself; conftest.py starts it).

    torchrun --standalone --nproc-per-node 2 tests/two_ranks.py FOLDER PORTABLE

One launch serves every two-rank test. Each rank runs {{ "five" if decode else "four" }} steps, in this order, each in an empty
folder of its own and with a process group of its own:

- portable: infer_one_step() of PORTABLE, the exported MRE, with this project unimportable, in
  the gloo process group its guard starts (if PORTABLE exists: export refuses a model that reads
  data files);
- mre: infer_one_step() of the project's MRE;
- bench: `python -m {{ cookiecutter.package_name }} bench --iters 3 --warmup 1 --json`;
- profile: `python -m {{ cookiecutter.package_name }} profile --steps 2 --json` (traces in its folder's prof/){{ ";" if decode else "." }}
{%- if decode %}
- generate: `python -m {{ cookiecutter.package_name }} generate --new-tokens 4 --json`.
{%- endif %}

It saves what the tests check into FOLDER/rank<RANK>.pt: for each step what it returned (an
output, or {{ "the exit status" if decode else "bench's exit status" }}), what it printed (on stdout, and on stderr) and how many graphs it compiled.
"""

import contextlib
import gc
import io
import os
import runpy
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

# Off before torch is imported (the package does this too): where torch_npu is installed without
# CANN, torch's device-backend autoload would make `import torch` fail.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
# No garbage collection while torch imports, as in conftest.py: what it allocates stays alive.
gc.disable()

# isort: split
import torch
import torch._dynamo
import torch.distributed as dist
from torch._dynamo.utils import counters
from torch.distributed.elastic.multiprocessing.errors import record

gc.freeze()
gc.enable()

PACKAGE = "{{ cookiecutter.package_name }}"
BENCH = ["bench", "--iters", "3", "--warmup", "1", "--json"]
PROFILE = ["profile", "--steps", "2", "--json"]
{%- if decode %}
GENERATE = ["generate", "--new-tokens", "4", "--json"]
{%- endif %}
AGENT_STORE = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
"""torchrun's own store, where rank 0 tells the others where each step's store is."""
TIMEOUT = timedelta(seconds=600)
STORES: list[dist.TCPStore] = []
"""The stores rank 0 hosts, open until the run ends."""


def fresh_store(step: str) -> None:
    """Point the next init_process_group (env://) at a new, empty store, hosted by rank 0.

    Each step starts a process group and destroys it. A second one on torchrun's store would meet
    the keys the first left there, and a rank could wait on an address that is gone.
    """
    agent = dist.TCPStore(*AGENT_STORE, is_master=False, timeout=TIMEOUT)
    if os.environ["RANK"] == "0":
        STORES.append(dist.TCPStore(AGENT_STORE[0], 0, is_master=True, wait_for_workers=False))
        agent.set(f"two_ranks/{step}", str(STORES[-1].port))
    os.environ["MASTER_PORT"] = agent.get(f"two_ranks/{step}").decode()


def run_step(folder: Path, step: str, run: Callable[[], Any]) -> dict[str, Any]:
    """run() in FOLDER/step: what it returned, what it printed on stdout and on stderr (a tool's
    refusal), and the graphs it compiled."""
    print(f"two_ranks.py: step {step}", file=sys.stderr, flush=True)  # torchrun's log says where
    (folder / step).mkdir(exist_ok=True)  # the ranks share it, as they share a user's folder
    fresh_store(step)
    torch._dynamo.reset()
    graphs = counters["stats"]["unique_graphs"]
    printed, told = io.StringIO(), io.StringIO()
    with (
        contextlib.chdir(folder / step),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(told),
    ):
        value = run()
    return {
        "value": value,
        "printed": printed.getvalue(),
        "told": told.getvalue(),
        "graphs": counters["stats"]["unique_graphs"] - graphs,
    }


def portable(path: str) -> Any:
    """infer_one_step() of the exported file, which must not import this project, in the process
    group the file's guard starts under torchrun."""
    loaded = sorted(name for name in sys.modules if name.partition(".")[0] == PACKAGE)
    assert not loaded, f"the project is imported before the portable step: {loaded}"
    sys.modules[PACKAGE] = None  # any import of it raises ImportError, installed or not
    try:
        infer_one_step = runpy.run_path(path, run_name="exported")["infer_one_step"]
        dist.init_process_group("gloo")
        try:
            return infer_one_step()
        finally:
            dist.destroy_process_group()
    finally:
        del sys.modules[PACKAGE]


def mre() -> Any:
    """infer_one_step() as the MRE's __main__ guard runs it, this process one rank of the job."""
    from {{ cookiecutter.package_name }}.mre import infer_one_step
    from {{ cookiecutter.package_name }}.toolkit.backend import select_backend
    from {{ cookiecutter.package_name }}.toolkit.parallel import tensor_parallel

    with tensor_parallel(select_backend().device):
        return infer_one_step()


def bench() -> int:
    from {{ cookiecutter.package_name }}.__main__ import main

    return main(BENCH)
{%- if decode %}


def generate() -> dict[str, Any]:
    """`generate --json`'s exit status, and the state its model ends with: this rank's KV cache
    after graph-mode generation (None if generate refused the model)."""
    from {{ cookiecutter.package_name }}.__main__ import main
    from {{ cookiecutter.package_name }}.toolkit import generation
    from {{ cookiecutter.package_name }}.toolkit.state import save

    build, built = generation.build, []

    def keep(*arguments: Any) -> Any:  # generation.build, keeping what it built
        built.append(build(*arguments))
        return built[-1]

    generation.build = keep
    try:
        code = main(GENERATE)
    finally:
        generation.build = build
    # No state where generate refused the model before it was built.
    return {"code": code, "state": save(built[0][0]) if built else None}
{%- endif %}


def profile() -> int:
    from {{ cookiecutter.package_name }}.__main__ import main

    return main(PROFILE)


@record  # a rank's error goes to torchrun's summary, traceback included
def main(folder: Path, exported: str) -> None:
    results = {}
    if Path(exported).exists():  # not when export refuses the model's data files
        results["portable"] = run_step(folder, "portable", lambda: portable(exported))
    results["mre"] = run_step(folder, "mre", mre)
    results["bench"] = run_step(folder, "bench", bench)
    results["profile"] = run_step(folder, "profile", profile)
{%- if decode %}
    results["generate"] = run_step(folder, "generate", generate)
{%- endif %}
    torch.save(results, folder / f"rank{os.environ['RANK']}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
