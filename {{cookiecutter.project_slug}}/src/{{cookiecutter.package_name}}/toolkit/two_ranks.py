"""One rank of a tensor-parallel project's two-rank test run (testing.py starts it).

    torchrun --standalone --nproc-per-node 2 <this file> FOLDER PORTABLE PACKAGE

One launch serves every two-rank test. Each rank runs its steps, in this order, each in an empty
folder of its own and with a process group of its own (run as a file, not as a module of the
package: the portable step must find the package unimported):

- portable: infer_one_step() of PORTABLE, the exported MRE, with this project unimportable, in
  the gloo process group its guard starts (if PORTABLE exists: export refuses a model that reads
  data files);
- mre: infer_one_step() of the project's MRE;
- bench: `python -m PACKAGE bench --iters 3 --warmup 1 --json`;
- profile: `python -m PACKAGE profile --steps 2 --json` (traces in its folder's prof/);
- generate, in a decode project: `python -m PACKAGE generate --new-tokens 4 --json`.

It saves what the tests check into FOLDER/rank<RANK>.pt: for each step what it returned (an
output, or the exit status), what it printed (on stdout, and on stderr) and how many graphs it compiled.
"""

import contextlib
import importlib
import io
import os
import runpy
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

# Run as a file, this folder leads sys.path, where its modules would stand in for the standard
# library's and torch's of the same name (profile.py for profile): the package is found on
# PYTHONPATH instead.
if __name__ == "__main__" and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]
# Off before torch is imported (the package does this too): where torch_npu is installed without
# CANN, torch's device-backend autoload would make `import torch` fail.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

# isort: split
import torch
import torch._dynamo
import torch.distributed as dist
from torch._dynamo.utils import counters
from torch.distributed.elastic.multiprocessing.errors import record

PACKAGE = sys.argv[3] if __name__ == "__main__" else ""
BENCH = ["bench", "--iters", "3", "--warmup", "1", "--json"]
PROFILE = ["profile", "--steps", "2", "--json"]
GENERATE = ["generate", "--new-tokens", "4", "--json"]
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
        # In plain sequence, as the file's guard runs it: a failing rank's group is destroyed by
        # main(), once the rank has claimed the failure.
        dist.init_process_group("gloo")
        output = infer_one_step()
        dist.destroy_process_group()
        return output
    finally:
        del sys.modules[PACKAGE]


def mre() -> Any:
    """infer_one_step() as the MRE's __main__ guard runs it, this process one rank of the job."""
    infer_one_step = importlib.import_module(f"{PACKAGE}.mre").infer_one_step
    select_backend = importlib.import_module(f"{PACKAGE}.toolkit.backend").select_backend
    tensor_parallel = importlib.import_module(f"{PACKAGE}.toolkit.parallel").tensor_parallel
    with tensor_parallel(select_backend().device):
        return infer_one_step()


def command(arguments: list[str]) -> int:
    """`python -m PACKAGE ARGUMENTS`, in this process: its exit status."""
    return importlib.import_module(f"{PACKAGE}.__main__").main(arguments)


def generate() -> dict[str, Any]:
    """`generate --json`'s exit status, and the state its model ends with: this rank's KV cache
    after graph-mode generation (None if generate refused the model)."""
    generation = importlib.import_module(f"{PACKAGE}.toolkit.generation")
    save = importlib.import_module(f"{PACKAGE}.toolkit.state").save

    build, built = generation.build, []

    def keep(*arguments: Any) -> Any:  # generation.build, keeping what it built
        built.append(build(*arguments))
        return built[-1]

    generation.build = keep
    try:
        code = command(GENERATE)
    finally:
        generation.build = build
    # No state where generate refused the model before it was built.
    return {"code": code, "state": save(built[0][0]) if built else None}


@record  # a rank's error goes to torchrun's summary, traceback included
def main(folder: Path, exported: str) -> None:
    results = {}
    if Path(exported).exists():  # not when export refuses the model's data files
        try:
            results["portable"] = run_step(folder, "portable", lambda: portable(exported))
        except BaseException as error:
            # The exported file's own error, said in a few lines as the MRE's would be (its
            # guard has no report of its own): the package may be imported now.
            failures = importlib.import_module(f"{PACKAGE}.toolkit.rank_failure")
            rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
            failures.report_when_uncaught(error, rank, size)
            # Only now: the other rank's collectives fail once the group goes, and must not
            # claim the failure first.
            if dist.is_initialized():
                dist.destroy_process_group()
            raise
    results["mre"] = run_step(folder, "mre", mre)
    results["bench"] = run_step(folder, "bench", lambda: command(BENCH))
    results["profile"] = run_step(folder, "profile", lambda: command(PROFILE))
    if importlib.import_module(f"{PACKAGE}.toolkit.project").DECODE:
        results["generate"] = run_step(folder, "generate", generate)
    torch.save(results, folder / f"rank{os.environ['RANK']}.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
