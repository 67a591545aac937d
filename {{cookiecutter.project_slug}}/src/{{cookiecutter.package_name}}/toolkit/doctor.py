"""Why won't graph mode run here? One screen of OK / WARN / FAIL lines, each FAIL with its fix.

    python -m <package> doctor [--json]
    python -m <package> doctor [--json] [--nproc-per-node N]   # with tensor parallelism

--nproc-per-node is the torchrun option you will run the MRE with (default: $LOCAL_WORLD_SIZE,
else 1): the ranks check wants an NPU per rank, the plan check that parallel_plan() splits
build_model() across that many ranks. The model line runs your model eagerly where the MRE would
(rehearsal.py): a model that only builds is not one that runs. A decode project's doctor also
checks the decode contract, a cache_compile project's the cache folder.

Exit 0 when the MRE runs in graph mode (npugraph_ex) on this machine, 1 when it runs but falls
back to a stand-in, 2 when it cannot run at all. Whatever is broken, it reports instead of
crashing: a check that fails unexpectedly is itself a FAIL line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import project

CANN_VARIABLES = ("ASCEND_HOME_PATH", "ASCEND_OPP_PATH")
CANN_PARTS = ("runtime", "compiler")
SET_ENV_SCRIPTS = (
    "/usr/local/Ascend/ascend-toolkit/set_env.sh",
    "/usr/local/Ascend/cann/set_env.sh",  # the CANN 9.1 layout
)
SOURCE_CANN = "source <CANN>/set_env.sh, e.g. /usr/local/Ascend/ascend-toolkit/set_env.sh"


# Each check's stable code, which tests and scripts read instead of its wording (in --json and
# before the check's name in the report), in the order the doctor runs them.
CODES = {
    name: f"DOC{number:03}"
    for number, name in enumerate(
        [
            "python",
            "versions",
            "torch-build",
            "torch_npu",
            "npu",
            "ASCEND_HOME_PATH",
            "ASCEND_OPP_PATH",
            "cann-packages",
            "set_env.sh",
            "backends",
            "mre-backend",
            "cache-dir",
            "model",
            "jit-compile",
            "internal-format",
            "decode",
            "mre-import",
            "ranks",
            "plan",
            "hccl-mode",
        ],
        start=1,
    )
}


@dataclass
class Check:
    name: str
    status: str
    """OK, WARN or FAIL."""
    detail: str
    fix: str = ""
    blocking: bool = False
    """A FAIL that stops the MRE from running at all, not just from running in graph mode."""
    code: str = field(init=False)
    """The check's stable code, DOC001 and on (CODES)."""

    def __post_init__(self) -> None:
        self.code = CODES.get(self.name, "")


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def base_version(version: str) -> str:
    """X.Y.Z+cpu and X.Y.Z.* both mean X.Y.Z here."""
    return version.split("+")[0].removesuffix(".*")


def torch_npu_wants() -> str | None:
    """The torch version the installed torch_npu requires, from its metadata."""
    for requirement in importlib.metadata.requires("torch-npu") or []:
        if match := re.fullmatch(
            r"torch\s*\(?\s*==\s*([\w.+*]+)\s*\)?", requirement.split(";")[0].strip()
        ):
            return base_version(match.group(1))
    return None


def check_python() -> Check:
    return Check("python", "OK", f"{platform.python_version()} ({sys.executable})")


def check_versions() -> Check:
    torch_version, npu_version = installed_version("torch"), installed_version("torch-npu")
    if torch_version is None:
        return Check(
            "versions", "FAIL", "torch is not installed", 'pip install -e "."', blocking=True
        )
    if npu_version is None:
        return Check("versions", "OK", f"torch {torch_version} (torch_npu not installed)")
    detail = f"torch {torch_version}, torch_npu {npu_version}"
    wanted = torch_npu_wants()
    if wanted and wanted != base_version(torch_version):
        fix = f"pip install torch=={wanted} --index-url https://download.pytorch.org/whl/cpu"
        return Check(
            "versions", "FAIL", f"{detail}: torch_npu {npu_version} needs torch {wanted}", fix
        )
    if npu_version != project.TORCH_NPU:
        return Check(
            "versions", "WARN", f"{detail}; this project pins torch_npu {project.TORCH_NPU}"
        )
    return Check("versions", "OK", f"{detail}, a matching pair")


def check_torch() -> Check:
    # Imported inside the checks: a broken torch must become a FAIL line, not a traceback.
    import torch

    build = f"torch {torch.__version__}"
    if torch.version.cuda and installed_version("torch-npu"):
        fix = "install torch's CPU build: torch_npu refuses to load beside a CUDA build"
        return Check("torch-build", "FAIL", f"{build} is a CUDA build", fix)
    return Check("torch-build", "OK", build)


def check_torch_npu() -> list[Check]:
    if importlib.util.find_spec("torch_npu") is None:
        fix = 'on an Ascend machine: pip install -e ".[npu]"'
        return [
            Check("torch_npu", "WARN", "not installed: graph mode falls back to the stand-in", fix)
        ]
    try:
        torch_npu = importlib.import_module("torch_npu")
    except Exception as error:  # noqa: BLE001  (a half-sourced CANN raises a bare Exception)
        from .backend import import_diagnosis

        what, fix = import_diagnosis(error)
        fix += "; meanwhile `import torch` elsewhere fails unless TORCH_DEVICE_BACKEND_AUTOLOAD=0"
        return [Check("torch_npu", "FAIL", f"installed but unusable: {what}", fix)]
    import torch

    checks = [Check("torch_npu", "OK", f"torch_npu {torch_npu.__version__} imports")]
    count = torch.npu.device_count() if torch.npu.is_available() else 0
    if count == 0:
        fix = "check `npu-smi info`, the driver, and ASCEND_RT_VISIBLE_DEVICES"
        return [*checks, Check("npu", "FAIL", "no NPU visible", fix)]
    soc = torch.npu.get_device_name(0)
    from .backend import ACLOP_CAPTURE_HINT, capture_refusal
    from .socs import CAPTURE_SOCS, can_capture

    if not can_capture(soc):
        fix = f"run graph mode on {CAPTURE_SOCS}"
        return [*checks, Check("npu", "WARN", f"{count} x {capture_refusal(soc)}", fix)]
    # The one capture failure torch_npu gives a fix for: say it where a capture will run.
    detail = f"{count} x {soc}, aclgraph capture supported; {ACLOP_CAPTURE_HINT}"
    return [*checks, Check("npu", "OK", detail)]


def check_cann() -> list[Check]:
    needed = installed_version("torch-npu") is not None
    checks = []
    for variable in CANN_VARIABLES:
        value = os.environ.get(variable)
        if value and not Path(value).exists():
            detail = f"{variable}={value} does not exist"
            checks.append(Check(variable, "FAIL", detail, f"{SOURCE_CANN}, or unset {variable}"))
        elif value:
            checks.append(Check(variable, "OK", value))
        elif needed and os.environ.get("ASCEND_HOME_PATH"):
            # torch_npu's import refuses ASCEND_HOME_PATH without ASCEND_OPP_PATH.
            detail = "not set, though ASCEND_HOME_PATH is (CANN half-sourced)"
            checks.append(Check(variable, "FAIL", detail, f"{SOURCE_CANN}: it sets both"))
        else:
            status = "WARN" if needed else "OK"
            checks.append(
                Check(variable, status, "not set (CANN not sourced)", SOURCE_CANN if needed else "")
            )
    home = os.environ.get("ASCEND_HOME_PATH")
    if needed and home and Path(home).is_dir():
        # torch_npu's import also refuses an ASCEND_HOME_PATH without these packages.
        missing = [part for part in CANN_PARTS if not (Path(home) / part).exists()]
        if missing:
            detail = f"ASCEND_HOME_PATH={home} has no {', '.join(f'{part}/' for part in missing)}"
            packages = " and ".join(missing)
            fix = f"install CANN's {packages} package there, or {SOURCE_CANN} of a full CANN"
            checks.append(Check("cann-packages", "FAIL", detail, fix))
        else:
            checks.append(Check("cann-packages", "OK", f"{', '.join(CANN_PARTS)} in {home}"))
    candidates = [*SET_ENV_SCRIPTS, *([str(Path(home).parent / "set_env.sh")] if home else [])]
    found = [script for script in candidates if Path(script).is_file()]
    if found:
        checks.append(Check("set_env.sh", "OK", found[0]))
    else:
        status = "WARN" if needed else "OK"
        checks.append(
            Check(
                "set_env.sh",
                status,
                "none found in the usual places",
                "install CANN" if needed else "",
            )
        )
    return checks


def check_backends() -> Check:
    import torch._dynamo

    known = torch._dynamo.list_backends()
    if "npugraph_ex" in known:
        return Check("backends", "OK", f"npugraph_ex is registered ({len(known)} backends)")
    detail = f"npugraph_ex is not registered; torch sees {', '.join(known)}"
    return Check("backends", "WARN", detail, "install torch_npu, which registers npugraph_ex")


def check_choice() -> Check:
    from .backend import select_backend

    try:
        backend = select_backend()
    except (RuntimeError, ValueError) as error:
        return Check(
            "mre-backend",
            "FAIL",
            str(error),
            "unset NPUGRAPH_BACKEND or fix its value",
            blocking=True,
        )
    status = "OK" if backend.is_npugraph_ex else "WARN"
    return Check("mre-backend", status, f"{backend.name}: {backend.reason}")


def check_cache_dir() -> list[Check]:
    """The cache-dir line, in a cache_compile project only: see cache_dir()."""
    return [cache_dir()] if project.CACHE_COMPILE else []


def cache_dir() -> Check:
    """cache_compile's folder is this user's, its files mode 0600."""
    folder = Path(project.CACHE_DIR)
    if not folder.exists():
        return Check("cache-dir", "OK", f"{folder}/ not written yet: the first NPU run writes it")
    paths = [folder, *sorted(folder.rglob("*"))]  # sorted: the first named is the same each run
    size = sum(path.stat().st_size for path in paths if path.is_file())
    uid = getattr(os, "getuid", lambda: None)()
    foreign = [path for path in paths if uid is not None and path.stat().st_uid != uid]
    loose = [path for path in paths if path.is_file() and path.stat().st_mode & 0o777 != 0o600]
    fix = f"remove it (rm -r {folder}); the next NPU run rebuilds it"
    if foreign:
        # cache_compile raises on a cache folder it does not own: on an NPU the MRE cannot start.
        from .backend import npu_status

        detail = f"{folder}/ has files owned by another user: {first_of(foreign)}"
        return Check("cache-dir", "FAIL", detail, fix, blocking=npu_status()[0])
    if loose:
        # cache_compile clears a cache whose files are not mode 0600 and rebuilds it: slow, not fatal.
        detail = f"{folder}/ has files not mode 0600: {first_of(loose)}"
        return Check("cache-dir", "WARN", detail, fix)
    return Check(
        "cache-dir",
        "OK",
        f"{folder}/, {len(paths) - 1} entries, {size / 1e6:.1f} MB, yours, mode 0600",
    )


def first_of(paths: list[Path]) -> str:
    """The first of `paths`, and how many more there are: a cache holds many files."""
    more = f" and {len(paths) - 1} more" if len(paths) > 1 else ""
    return f"{paths[0]}{more}"


def check_model() -> Check:
    """build_model() and example_inputs() run and keep the contract, and the model runs eagerly
    as the MRE runs it (rehearsal.py): else nothing can run."""
    import torch

    from .backend import npu_status
    from .contract import ContractError, constant_inputs, constant_note, describe_tree, to_device
    from .rehearsal import rehearse
    from .state import StateOutOfSight

    fix = "fix model.py: README, section 'Your own model'"
    try:
        build_model, example_inputs = project.from_model("build_model", "example_inputs")
        torch.manual_seed(0)
        model = build_model()
        inputs = to_device(example_inputs(), "cpu")
    except ContractError as error:
        return Check("model", "FAIL", str(error), fix, blocking=True)
    except Exception as error:  # noqa: BLE001  (whatever your model raises, say it)
        detail = f"model.py fails: {type(error).__name__}: {error}".splitlines()[0]
        return Check("model", "FAIL", detail, fix, blocking=True)
    if not isinstance(model, torch.nn.Module):
        detail = f"build_model() returned {type(model).__name__}, not a torch.nn.Module"
        return Check("model", "FAIL", detail, fix, blocking=True)
    detail = f"build_model() gives {type(model).__name__}, example_inputs() {describe_tree(inputs)}"
    notes = [constant_note(path, value) for path, value in constant_inputs(inputs)]
    device = "npu" if npu_status()[0] else "cpu"
    try:
        # On the MRE's device: a model that only builds is not a model that runs.
        rehearse(model.to(device).eval(), to_device(inputs, device))
    except StateOutOfSight as error:
        # The MRE runs it, so a WARN: but every tool that compares it with graph mode refuses it.
        refusal = (
            "it runs eagerly, but the tools that compare it with graph mode refuse it: "
            + "; ".join(error.found),
            error.fix,
        )
        notes.insert(0, refusal)
    except ContractError as error:  # EagerFailure, or the decode contract broken
        return Check("model", "FAIL", f"{detail}; but {error}".splitlines()[0], fix, blocking=True)
    except Exception as error:  # noqa: BLE001  (moving it to the device may fail too)
        what = f"{detail}; but it cannot run on {device}: {type(error).__name__}: {error}"
        return Check("model", "FAIL", what.splitlines()[0], fix, blocking=True)
    else:
        ran = "the prompt's prefill and one decode step run" if project.DECODE else "one step runs"
        detail += f"; {ran} eagerly on {device}"
    if notes:
        # The MRE runs, so a WARN, not a FAIL: but new constant values recompile, then fail.
        detail += "; " + "; ".join(what for what, _ in notes)
        return Check("model", "WARN", detail, "; ".join(fix for _, fix in notes))
    return Check("model", "OK", detail)


def check_aclop_switches() -> list[Check]:
    """A line for each run-time switch that sends operators to aclop, which capture refuses
    (backend.ACLOP_SWITCHES): JIT compile and internal formats. Read where npugraph_ex runs, after
    the model line has built your model (model.py may set them); elsewhere each line says it could
    not run. What the MRE's own process sets later is for backend.aclop_switches() to read."""
    from .backend import ACLOP_SWITCHES, npu_status

    if not npu_status()[0]:
        detail = "could not run: npugraph_ex does not run here (the mre-backend line says why)"
        return [Check(switch.code, "OK", detail) for switch in ACLOP_SWITCHES]
    lines = []
    for switch in ACLOP_SWITCHES:
        if switch.is_on():
            # Graph mode's capture fails on the first aclop operator; blocking is kept for what
            # stops the MRE whatever the backend.
            lines.append(Check(switch.code, "FAIL", switch.on, switch.fix))
        else:
            lines.append(Check(switch.code, "OK", f"{switch.name} is off, as capture needs"))
    return lines


def check_decode() -> list[Check]:
    """The decode line, in a decode project only: see decode_contract()."""
    return [decode_contract()] if project.DECODE else []


def decode_contract() -> Check:
    """MAX_BATCH, MAX_SEQ_LEN and CAPTURE_SIZES keep the decode contract, and hold the prompt."""
    import torch

    from .contract import ContractError, describe, to_device
    from .decode import limits

    fix = "fix model.py: README, section 'Generation'"
    try:
        bounds = limits()
    except ContractError as error:
        # The MRE runs without them; generate, bench and the tests refuse to.
        return Check("decode", "FAIL", str(error), fix)
    detail = (
        f"MAX_BATCH {bounds.max_batch}, MAX_SEQ_LEN {bounds.max_seq_len}, "
        f"CAPTURE_SIZES {bounds.capture_sizes}"
    )
    try:
        inputs = to_device(project.from_model("example_inputs")(), "cpu")
    except Exception:  # noqa: BLE001  (the model line says what is wrong with model.py)
        return Check("decode", "OK", detail)
    prompt = inputs[0] if len(inputs) == 1 else None
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 or prompt.is_floating_point():
        # describe, not repr: a tensor's repr spans lines, and this is one line of a report.
        what = f"{len(inputs)} inputs" if prompt is None else describe(prompt)
        detail = f"example_inputs() must return (prompt,), token ids (batch, length); got {what}"
        return Check("decode", "FAIL", detail, fix, blocking=True)
    batch, length = prompt.shape
    if batch > bounds.max_batch:
        detail = f"{detail}; the prompt's {batch} sequences are more than the cache's rows"
        return Check("decode", "FAIL", detail, f"raise MAX_BATCH to {batch}", blocking=True)
    if length >= bounds.max_seq_len:
        detail = f"{detail}; a prompt of {length} tokens leaves the decode step no position"
        fix = f"raise MAX_SEQ_LEN above {length}, or shorten the prompt"
        return Check("decode", "FAIL", detail, fix, blocking=True)
    if batch > bounds.capture_sizes[-1]:
        detail = f"{detail}; the prompt's {batch} sequences are more than the largest size"
        return Check("decode", "FAIL", detail, f"add a capture size of {batch} or more")
    detail += (
        f"; the prompt {tuple(prompt.shape)} runs at capture size {bounds.capture_size(batch)}, "
        f"{bounds.max_seq_len - length} positions left to generate"
    )
    return Check("decode", "OK", detail)


def fit_ranks(npu_ok: bool, visible: int, wanted: int) -> Check:
    """The ranks check from what was probed: `wanted` ranks, and `visible` NPUs if npu_ok."""
    ranks = f"rank{'s' * (wanted != 1)}"
    if not npu_ok:
        detail = f"{wanted} CPU {ranks} over gloo (no NPU: hccl needs one per rank)"
        return Check("ranks", "OK", detail)
    if visible < wanted:
        detail = f"--nproc-per-node {wanted} needs {wanted} NPUs (one per rank); {visible} visible"
        fix = (
            f"lower --nproc-per-node to at most {visible}, or make {wanted} NPUs visible with "
            "ASCEND_RT_VISIBLE_DEVICES (npu-smi info lists them)"
        )
        return Check("ranks", "FAIL", detail, fix, blocking=True)
    return Check("ranks", "OK", f"{wanted} {ranks} over hccl, one NPU each ({visible} visible)")


def check_ranks(wanted: int) -> Check:
    """torch.distributed, the backend the ranks need, and an NPU for each rank on an NPU."""
    import torch
    import torch.distributed as dist

    from .backend import npu_status

    npu_ok, _ = npu_status()
    if not dist.is_available():
        fix = "install a torch build with torch.distributed (the official wheels have it)"
        return Check("ranks", "FAIL", "this torch has no torch.distributed", fix, blocking=True)
    # torch_npu registers hccl when it loads, which npu_status() has done on an NPU.
    if npu_ok and "hccl" not in dist.Backend.backend_list:
        fix = "reinstall torch_npu: it registers hccl with torch.distributed when it loads"
        return Check("ranks", "FAIL", "torch.distributed has no hccl backend", fix, blocking=True)
    if not npu_ok and not dist.is_gloo_available():
        fix = "install a torch build with gloo (the official wheels have it)"
        return Check("ranks", "FAIL", "torch.distributed has no gloo backend", fix, blocking=True)
    return fit_ranks(npu_ok, torch.npu.device_count() if npu_ok else 0, wanted)


def check_plan(wanted: int) -> Check:
    """parallel_plan() shards build_model() across `wanted` ranks and the sharded model runs on
    example_inputs(): rehearsed in this process, with no torchrun and no device."""
    import torch

    from .contract import to_device
    from .parallel import PlanError, rehearse

    fix = (
        "as the message says: another --nproc-per-node, or change parallel_plan() or the model "
        "in model.py"
    )
    try:
        # Inside: model.py may fail to import, or lack a name, and that is this check's FAIL.
        build_model, example_inputs, parallel_plan = project.from_model(
            "build_model", "example_inputs", "parallel_plan"
        )
        torch.manual_seed(0)
        plan = parallel_plan(wanted)
        rehearse(build_model, plan, to_device(example_inputs(), "cpu"), wanted)
    except PlanError as error:
        return Check("plan", "FAIL", str(error), fix, blocking=True)
    except Exception as error:  # noqa: BLE001  (your model and plan may raise anything)
        detail = f"{type(error).__name__}: {error}".splitlines()[0]
        return Check("plan", "FAIL", detail, fix, blocking=True)
    ranks = f"{wanted} rank{'s' * (wanted != 1)}"
    entries = f"{len(plan)} entr{'ies' if len(plan) != 1 else 'y'}"
    detail = f"parallel_plan({wanted}) splits build_model() over {ranks} ({entries}), and it runs"
    return Check("plan", "OK", detail)


def check_mre_imports() -> Check:
    """What the MRE imports is there, so `python -m <package>.mre` gets as far as running: the
    names it takes from model.py and the toolkit modules it runs on.

    mre.py itself is yours to edit, so no tool imports it: this reads the contract the MRE is
    written against, model.py and the toolkit, as the MRE imports them in this project.
    """
    entry = f"{project.PACKAGE}.mre"
    fix = f"python -m {entry} shows the traceback"
    contract = ["build_model", "example_inputs"]
    toolkit = ["backend", "contract", "report"]
    if project.CACHE_COMPILE:
        toolkit.append("compile_cache")
    if project.DECODE:
        toolkit.append("decode")
    if project.TENSOR_PARALLEL:
        contract.append("parallel_plan")
        toolkit.append("parallel")
    toolkit.sort()
    # Shown as the MRE names them (from .model, from .toolkit.<module>), and imported relative to
    # this package.
    modules = {"model": "..model", **{f"toolkit.{module}": f".{module}" for module in toolkit}}
    loaded = {}
    for shown, module in modules.items():
        try:
            loaded[shown] = importlib.import_module(module, __package__)
        except Exception as error:  # noqa: BLE001  (an import can fail in any way)
            detail = f"{entry} cannot import {shown}: {type(error).__name__}: {error}"
            return Check("mre-import", "FAIL", detail.splitlines()[0], fix, blocking=True)
    if missing := [name for name in contract if not hasattr(loaded["model"], name)]:
        detail = f"model.py has no {', '.join(missing)}, which {entry} imports from it"
        return Check("mre-import", "FAIL", detail, fix, blocking=True)
    detail = (
        f"model.py's {', '.join(contract)} and the toolkit's {', '.join(toolkit)} import, "
        f"as {entry} needs"
    )
    return Check("mre-import", "OK", detail)


CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    check_python,
    check_versions,
    check_torch,
    check_torch_npu,
    check_cann,
    check_backends,
    check_choice,
    check_model,
    check_aclop_switches,
    check_decode,
    check_mre_imports,
    check_cache_dir,
)
"""Every project's checks; one that does not concern this project returns no line."""
HCCL_MODE = "HCCL_OP_EXPANSION_MODE"
AIV_CAVEAT = (
    "if a capture fails with rtEventRecord error 507009, or a replay hangs, unset it: AIV fails "
    "with collectives inside the task groups npugraph_ex captures (vllm-ascend issue 13688)"
)
"""The caveat that goes with HCCL's AIV mode wherever the doctor advises it or sees it set."""


def hccl_mode(graph_mode: bool, wanted: int, value: str | None) -> Check:
    """Whether captured collectives have the HCCL expansion mode vllm-ascend sets for aclgraphs."""
    if not graph_mode or wanted < 2:
        why = "one rank has no collective" if graph_mode else "no aclgraph is captured here"
        return Check("hccl-mode", "OK", f"{HCCL_MODE} {value or 'unset'}: {why}")
    if value == "AIV":
        return Check("hccl-mode", "OK", f"{HCCL_MODE}=AIV; {AIV_CAVEAT}")
    if value:
        return Check("hccl-mode", "OK", f"{HCCL_MODE}={value}")
    # vllm-ascend's fix for capture failures with HCCL (error 507903, streams exhausted).
    return Check(
        "hccl-mode",
        "WARN",
        f"{HCCL_MODE} is unset: HCCL's default expansion may exhaust the streams aclgraph "
        "capture needs (capture error 507903)",
        f"export {HCCL_MODE}=AIV, as vllm-ascend does for graph capture (README: Tensor "
        f"parallelism, On an NPU); {AIV_CAVEAT}",
    )


def check_hccl_mode(wanted: int) -> Check:
    from .backend import select_backend

    try:
        graph_mode = select_backend().is_npugraph_ex
    except (RuntimeError, ValueError):  # a bad $NPUGRAPH_BACKEND: the mre-backend line says so
        graph_mode = False
    return hccl_mode(graph_mode, wanted, os.environ.get(HCCL_MODE))


RANK_CHECKS: tuple[Callable[[int], Check], ...] = (check_ranks, check_plan, check_hccl_mode)
"""The checks that take the number of ranks (--nproc-per-node): with tensor parallelism only."""


def run_checks(wanted: int = 1) -> list[Check]:
    """Every check, each shielded: one that crashes is reported as a FAIL with its error.

    `wanted` is the number of ranks, for RANK_CHECKS, which run with tensor parallelism only.
    """
    results = []
    calls = [(check, ()) for check in CHECKS]
    if project.TENSOR_PARALLEL:
        calls += [(check, (wanted,)) for check in RANK_CHECKS]
    for check, arguments in calls:
        try:
            outcome = check(*arguments)
        except Exception as error:  # noqa: BLE001  (the doctor must report, never crash)
            name = check.__name__.removeprefix("check_")
            outcome = Check(name, "FAIL", f"the check itself failed: {error!r}")

        results += outcome if isinstance(outcome, list) else [outcome]
    return results


def verdict(checks: list[Check]) -> tuple[int, str]:
    """The exit code, and the sentence that explains it."""
    if failed := [check.name for check in checks if check.status == "FAIL" and check.blocking]:
        return 2, f"the MRE cannot run here: fix {', '.join(failed)} first"
    # The doctor runs the model eagerly and never compiles it: whether it is one graph, the same
    # as eager, is check's to say.
    ready = (
        f"your model runs eagerly: `python -m {project.PACKAGE} check` says if graph mode runs it"
    )
    choice = next((check for check in checks if check.name == "mre-backend"), None)
    if choice and choice.status == "OK":
        return 0, f"graph mode (npugraph_ex) can run here, and {ready}"
    return 1, f"graph mode falls back to a stand-in here (see WARN and FAIL above), and {ready}"


def render(checks: list[Check], summary: str) -> str:
    width = max(len(check.name) for check in checks)
    lines = []
    for check in checks:
        lines.append(f"{check.status:<4}  {check.code} {check.name:<{width}}  {check.detail}")
        if check.fix and check.status != "OK":
            lines.append(f"{'':<4}  {'':<6} {'':<{width}}  fix: {check.fix}")
    return "\n".join([*lines, "", summary])


def ranks_count(text: str) -> int:
    """argparse type: a number of ranks, 1 or more."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of ranks (1 or more)")
    return int(text)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    if project.TENSOR_PARALLEL:
        parser.add_argument(
            "--nproc-per-node",
            type=ranks_count,
            # A string: argparse parses a default through `type` too.
            default=os.environ.get("LOCAL_WORLD_SIZE", "1"),
            metavar="N",
            help="ranks you will run on this machine, as torchrun's option (default: "
            "$LOCAL_WORLD_SIZE, else 1)",
        )
    arguments = parser.parse_args(argv)
    # What your model prints goes to stderr: stdout holds the report (or the JSON) alone.
    with contextlib.redirect_stdout(sys.stderr):
        checks = run_checks(arguments.nproc_per_node if project.TENSOR_PARALLEL else 1)
    code, summary = verdict(checks)
    if arguments.json:
        report = {
            "verdict": code,
            "summary": summary,
            "checks": [asdict(check) for check in checks],
        }
        print(json.dumps(report, indent=2))
    else:
        print(render(checks, summary))
    return code


if __name__ == "__main__":
    sys.exit(main())
