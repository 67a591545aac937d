"""Stand-in torch_npu.profiler: the API of torch-npu 2.13.0's, recording how it is called.

The real module (torch_npu/profiler/__init__.py) exports profile, ProfilerActivity, schedule,
tensorboard_trace_handler, _ExperimentalConfig, ProfilerLevel, AiCMetrics and ExportType. Here
each keeps the real signature and defaults, appends what it was called with to CALLS, and runs on
torch.profiler (CPU activity only). The handler writes the real output layout with stand-in data:
DIR/{worker}_{pid}_{time}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json (a bare list of
Chrome trace events, "ts" a string, every torch op and range "cpu_op", as
analysis/prof_common_func/_trace_event_manager.py writes them) and kernel_details.csv (one
row per leaf operator of each profiler step, as its kernel, at half the operator's time).
"""

from __future__ import annotations

import csv
import enum
import json
import os
import socket
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import torch.profiler
from torch.profiler import ProfilerAction  # torch_npu's scheduler.py defines the same four actions

CALLS: list[dict[str, Any]] = []
"""What the profiler was called with, in order: {"call": name, ...arguments}."""


class ProfilerActivity(enum.Enum):
    """torch_npu._C._profiler.ProfilerActivity: CPU and NPU only (profiler_interface.py L249)."""

    CPU = 0
    NPU = 1


class ProfilerLevel:
    """experimental_config.py; the values are analysis/prof_common_func/_constant.py's."""

    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"
    Level_none = "Level_none"


class AiCMetrics:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    AiCoreNone = "ACL_AICORE_NONE"


class ExportType:
    Db = "db"
    Text = "text"


class _ExperimentalConfig:
    """experimental_config.py L88-105: the defaults of the real one."""

    def __init__(
        self,
        profiler_level: str = ProfilerLevel.Level0,
        aic_metrics: str = AiCMetrics.PipeUtilization,
        l2_cache: bool = False,
        msprof_tx: bool = False,
        mstx: bool = False,
        data_simplification: bool = True,
        record_op_args: bool = False,
        op_attr: bool = False,
        gc_detect_threshold: float | None = None,
        export_type: str | list[str] = ExportType.Text,
        host_sys: list[str] | None = None,
        mstx_domain_include: list[str] | None = None,
        mstx_domain_exclude: list[str] | None = None,
        sys_io: bool = False,
        sys_interconnection: bool = False,
    ) -> None:
        self.settings = {
            "profiler_level": profiler_level,
            "aic_metrics": aic_metrics,
            "export_type": export_type,
            "data_simplification": data_simplification,
        }
        CALLS.append({"call": "_ExperimentalConfig", **self.settings})


class schedule:  # the real one: `from .scheduler import Schedule as schedule`
    """scheduler.py's Schedule: skip_first, then cycles of wait, warmup and active steps."""

    def __init__(
        self,
        wait: int,
        active: int,
        warmup: int = 0,
        repeat: int = 0,
        skip_first: int = 0,
        skip_first_wait: int = 0,
    ) -> None:
        self.wait, self.active, self.warmup = wait, active, warmup
        self.repeat, self.skip_first, self.skip_first_wait = repeat, skip_first, skip_first_wait
        CALLS.append(
            {
                "call": "schedule",
                "wait": wait,
                "warmup": warmup,
                "active": active,
                "repeat": repeat,
                "skip_first": skip_first,
            }
        )

    def __call__(self, step: int) -> ProfilerAction:
        # scheduler.py Schedule.__call__, as written there.
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        if self.skip_first_wait != 0:
            step += self.wait
        num_steps = self.wait + self.warmup + self.active
        if self.repeat > 0 and step / num_steps >= self.repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < self.wait:
            return ProfilerAction.NONE
        if mod_step < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE


def tensorboard_trace_handler(
    dir_name: str | None = None,
    worker_name: str | None = None,
    analyse_flag: bool = True,
    async_mode: bool = False,
):
    """profiler.py L180-198. A dir_name that is not a non-empty str is reset to the default, the
    working directory, with a warning (_profiler_path_creator.py ProfPathCreator.init)."""
    CALLS.append({"call": "tensorboard_trace_handler", "dir_name": dir_name, "worker_name": worker_name})
    folder = dir_name if dir_name and isinstance(dir_name, str) else str(Path.cwd())

    def handler_fn(prof_inst: torch.profiler.profile) -> None:
        # create_prof_dir (L54-79): {worker or hostname}_{pid}_{%Y%m%d%H%M%S%f minus 3 digits}.
        stamp = datetime.now(tz=UTC).astimezone().strftime("%Y%m%d%H%M%S%f")[:-3]
        span = f"{worker_name or socket.gethostname()}_{os.getpid()}_{stamp}_ascend_pt"
        output = Path(folder, span, "ASCEND_PROFILER_OUTPUT")
        output.mkdir(parents=True)
        CALLS.append({"call": "on_trace_ready", "folder": str(output.parent)})
        if analyse_flag:
            write_outputs(prof_inst, output)

    return handler_fn


def write_outputs(prof_inst: torch.profiler.profile, output: Path) -> None:
    """trace_view.json and kernel_details.csv, in their real formats, from the CPU trace."""
    with tempfile.TemporaryDirectory() as scratch:
        kineto = Path(scratch, "trace.json")
        prof_inst.export_chrome_trace(str(kineto))
        events = json.loads(kineto.read_text())["traceEvents"]
    host = [
        {**event, "cat": "cpu_op", "ts": str(event["ts"])}
        for event in events
        if event.get("ph") == "X" and event.get("cat") in {"cpu_op", "user_annotation"}
    ]
    (output / "trace_view.json").write_text(json.dumps(host))

    def inside(outer: dict, inner: dict) -> bool:
        start, end = float(outer["ts"]), float(outer["ts"]) + outer["dur"]
        return inner is not outer and start <= float(inner["ts"]) and float(inner["ts"]) + inner["dur"] <= end

    operators = [event for event in host if "::" in event["name"]]
    leaves = [op for op in operators if not any(inside(op, other) for other in operators)]
    steps = [event for event in host if event["name"].startswith("ProfilerStep#")]
    rows = []
    for step in steps:
        for op in (op for op in leaves if inside(step, op)):
            step_id = step["name"].partition("#")[2]
            name = op["name"].partition("::")[2]
            rows.append([step_id, 0, name, name, "AI_CORE", op["ts"], op["dur"] / 2, 0, 1])
    with (output / "kernel_details.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        # kernel_view_parser.py: "Step Id", then csv_headers.py OP_SUMMARY_KERNEL_BASE_HEADERS.
        writer.writerow(
            ["Step Id", "Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)",
             "Duration(us)", "Wait Time(us)", "Block Num"]
        )  # fmt: skip
        writer.writerows(rows)


class profile:
    """profiler.py L201-230: keyword-only arguments; start(), step(), stop(), a context manager."""

    def __init__(
        self,
        *,
        activities: Any = None,
        schedule: Any = None,
        on_trace_ready: Any = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        experimental_config: _ExperimentalConfig | None = None,
        execution_trace_observer: Any = None,
        custom_trace_id_callback: Any = None,
        use_cuda: bool | None = None,
    ) -> None:
        given = {
            name: value
            for name, value in locals().items()
            if name != "self" and value is not None and value is not False
        }
        CALLS.append(
            {
                "call": "profile",
                "keywords": sorted(given),
                "activities": [activity.name for activity in activities or ()],
                "experimental_config": getattr(experimental_config, "settings", None),
            }
        )
        self.inner = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=schedule,
            on_trace_ready=on_trace_ready,
        )

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        CALLS.append({"call": "start"})
        self.inner.start()

    def step(self) -> None:
        CALLS.append({"call": "step"})
        self.inner.step()

    def stop(self) -> None:
        CALLS.append({"call": "stop"})
        self.inner.stop()
