"""export's command: the file's run before it is written (the rehearsal), the verdict on that run,
what it writes and when, and the command line. (What the file holds: test_export_targets.py and
test_export_bundle.py.)"""

import contextlib
import enum
import importlib
import importlib.metadata
import io
import json
import os
import runpy
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.utils._pytree as pytree
from torch import nn

import forward_project
from forward_project import mre
from forward_project.toolkit import backend, export
from toolkit.projects import PROJECTS

TARGETS = ["npu", "portable"]
PACKAGE = "forward_project"
"""The project whose export most tests run: its MRE, its toolkit."""
MISSING = "a_module_this_machine_lacks"
"""A module the written file imports in the tests that make it fail when run."""
FAILS_HERE = "and so does the MRE run here in an empty folder, with the same error"
"""What export says of a file that fails as the MRE fails here."""


def run_export(*arguments: str) -> tuple[int, str]:
    """export.main(arguments) here: its exit status and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        code = export.main(list(arguments))
    return code, printed.getvalue()


@pytest.fixture
def real_run():
    """For a test that runs the MRE and the file: Dynamo forgets what it compiled, before and after."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.usefixtures("real_run")
def test_the_default_export_runs_alone_matches_the_mre_and_is_written(tmp_path, monkeypatch):
    """`export` with no arguments: the npu file, written to mre_export.py once its portable
    rendering ran alone (off an NPU) and matched the MRE here: exit 0, said so."""
    monkeypatch.chdir(tmp_path)
    code, message = run_export()
    assert code == 0, message
    assert message.startswith(
        f"wrote mre_export.py (npu target): its portable rendering ran {export.ISOLATED}, and "
        "matches the MRE's output\n"
    )
    assert (tmp_path / "mre_export.py").read_text() == export.export("npu")


@pytest.mark.usefixtures("real_run")
def test_a_tensor_parallel_export_runs_as_one_rank_and_matches(tmp_path):
    """A tensor-parallel cache_compile project's portable file runs as the one rank of the
    process group its guard starts, and the MRE here as one rank too: they match, exit 0."""
    tool = importlib.import_module("parallel_cache_project.toolkit.export")
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        code = tool.main(["-o", str(tmp_path / "bug.py"), "--target", "portable"])
    assert code == 0, printed.getvalue()
    assert (tmp_path / "bug.py").exists()


@pytest.mark.usefixtures("real_run")
def test_a_file_that_fails_when_run_is_not_written(monkeypatch, tmp_path):
    """A file that fails when run: exit 1, its error on the first line with the line of the file
    that raised it, and no file."""
    prelude = f"{export.PRELUDE}import {MISSING}\n"
    monkeypatch.setattr(export, "PRELUDE", prelude)
    path = tmp_path / "mre.py"
    code, message = run_export("-o", str(path), "--target", "portable")
    line = export.export("portable").splitlines().index(f"import {MISSING}") + 1
    assert code == 1
    assert message.splitlines() == [
        f"export: ModuleNotFoundError: No module named '{MISSING}' (at mre.py:{line}: import {MISSING})",
        f"  the file fails when run {export.ISOLATED}; nothing written to {path}",
    ]
    assert not path.exists()


@pytest.mark.usefixtures("real_run")
def test_a_file_that_fails_as_the_mre_fails_is_written_with_exit_2(monkeypatch, tmp_path):
    """A file that fails with the very error the MRE raises here reproduces it, as a bug report
    should: written, exit 2 (never 0), the error named."""
    prelude = f"{export.PRELUDE}import {MISSING}\n"
    monkeypatch.setattr(export, "PRELUDE", prelude)

    def infer_one_step():
        raise ModuleNotFoundError(f"No module named '{MISSING}'")

    monkeypatch.setattr(mre, "infer_one_step", infer_one_step)
    path = tmp_path / "mre.py"
    assert run_export("-o", str(path), "--target", "portable") == (
        2,
        (
            f"wrote {path} (portable target): the file fails when run {export.ISOLATED}, "
            f"{FAILS_HERE}:\n    ModuleNotFoundError: No module named '{MISSING}'\n"
        ),
    )
    assert path.exists()


@pytest.mark.usefixtures("real_run")
def test_a_file_whose_output_differs_is_not_written(monkeypatch, tmp_path):
    """A file that runs but computes another output than the MRE's: exit 1, the differing leaf
    first, and no file. (Its run is stood in for: the MRE's output, plus one.)"""
    leaves = []

    def rehearse(text, name):
        reference = export.run_mre()
        leaves.extend(reference.output)
        plus_one = pytree.tree_map_only(torch.Tensor, lambda t: t + 1, reference.output)
        return export.Run(plus_one), reference

    monkeypatch.setattr(export, "rehearse", rehearse)
    path = tmp_path / "mre.py"
    code, message = run_export("-o", str(path), "--target", "portable")
    assert code == 1
    first = message.splitlines()[0]
    assert any(first.startswith(f"export: {leaf}: ") for leaf in leaves), message
    assert "differs from the MRE's output" in message
    assert not path.exists()


# model.py of a copy of a project that reads weights.pt beside it: each way a model finds it.
READS_DATA = {
    "Path(__file__).parent": """\
from pathlib import Path

import torch
from torch import nn

WEIGHTS = Path(__file__).parent / "weights.pt"


def build_model() -> nn.Module:
    model = nn.Linear(4, 4)
    model.load_state_dict(torch.load(WEIGHTS))
    return model
""",
    "importlib.resources": """\
from importlib.resources import files

import torch
from torch import nn

WEIGHTS = files(__package__) / "weights.pt"


def build_model() -> nn.Module:
    model = nn.Linear(4, 4)
    with WEIGHTS.open("rb") as file:
        model.load_state_dict(torch.load(file))
    return model
""",
}
MODEL_REST = """

def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 4),)
"""


@pytest.fixture(scope="module")
def data_file_exports(tmp_path_factory) -> dict[str, tuple[int, str, Path]]:
    """`python -m forward_project export` in copies of that project whose model.py reads
    weights.pt beside it, one copy per way of finding it (READS_DATA), side by side, each in a
    process of its own."""
    source = Path(forward_project.__file__).parent
    launched = {}
    for how, model in READS_DATA.items():
        root = tmp_path_factory.mktemp("reads-data")
        package = root / "src" / PACKAGE
        shutil.copytree(source, package, ignore=shutil.ignore_patterns("__pycache__"))
        (package / "model.py").write_text(model + MODEL_REST)
        torch.save(nn.Linear(4, 4).state_dict(), package / "weights.pt")
        path = root / "mre_export.py"
        paths = [str(root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
        process = subprocess.Popen(
            [sys.executable, "-m", PACKAGE, "export", "-o", str(path)],
            cwd=root,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            stderr=subprocess.PIPE,
            text=True,
        )
        launched[how] = (process, path)
    written = {}
    for how, (process, path) in launched.items():
        _, message = process.communicate(timeout=600)  # refused before anything runs: seconds
        written[how] = (process.returncode, message, path)
    return written


@pytest.mark.parametrize("how", READS_DATA)
def test_a_data_file_the_model_reads_is_named_and_refused(data_file_exports, how):
    """A model.py that reads weights.pt beside it, through Path(__file__).parent or
    importlib.resources: `export` refuses it, exit 1, the file named first with the fix, and no
    file."""
    code, message, path = data_file_exports[how]
    assert code == 1, message
    first = message.splitlines()[0]
    # Among them: a tool that keeps files beside the sources (a mutation tester) adds its own.
    assert "cannot carry the data files your modules read: " in first
    assert "weights.pt" in first.partition(" (in ")[0]
    assert "found at model.py:" in first
    assert "from the seed" in first
    assert not path.exists()


def test_a_file_that_runs_and_matches_is_judged_0():
    """Equal leaves, a float within its dtype's tolerance: exit 0, said in one line."""
    mre_output = {"[0]": torch.tensor([1.0, 2.0]), "[1]": 3}
    file_output = {"[0]": torch.tensor([1.0, 2.0 + 1e-7]), "[1]": 3}
    assert export.judge(export.Run(file_output), export.Run(mre_output), "the file") == (
        0,
        f"the file ran {export.ISOLATED}, and matches the MRE's output",
    )


def test_a_file_whose_leaves_differ_is_judged_1_with_the_first_differences():
    """Each differing leaf on a line of its own, the first eight at most, then how many more
    differ, then what differs."""
    mre_output = {f"[{i}]": i for i in range(10)}
    file_output = {f"[{i}]": i + 1 for i in range(10)}
    code, message = export.judge(export.Run(file_output), export.Run(mre_output), "the file")
    assert code == 1
    lines = [f"[{i}]: int {i + 1} where eager has int {i}" for i in range(8)]
    lines.append("and 2 more leaves differ")
    assert message == (
        "\n    ".join(lines) + f"\n  the file, run {export.ISOLATED}, differs from the MRE's output"
    )


def test_every_leaf_that_differs_is_named_up_to_eight():
    """Eight leaves that differ are all named, one line each, with no count of more."""
    file = export.Run({f"[{i}]": i + 1 for i in range(8)})
    mre = export.Run({f"[{i}]": 0 for i in range(8)})
    code, message = export.judge(file, mre, "the file")
    lines = [f"[{i}]: int {i + 1} where eager has int 0" for i in range(8)]
    assert (code, message.splitlines()[:8]) == (1, [lines[0], *(f"    {line}" for line in lines[1:])])
    assert "more leaves" not in message


def test_a_file_whose_output_has_other_leaves_is_judged_1_naming_them():
    """Leaves that are not the MRE's: both lists of leaves named."""
    file, mre = export.Run({"[0]": 1, "[1]": 2, "[2]": 3}), export.Run({"[0]": 1, "[1]": 2})
    assert export.judge(file, mre, "the file") == (
        1,
        (
            "the output's structure differs: leaves [0], [1], [2] where the MRE has [0], [1]\n"
            f"  the file, run {export.ISOLATED}, differs from the MRE's output"
        ),
    )


def test_a_file_that_fails_where_the_mre_runs_is_judged_1_error_first():
    """The file's error first (its first lines, where in the file), then that the file failed."""
    error = "\n".join(f"line {i}" for i in range(10))
    file = export.Run(error=f"ValueError: bad\n\n{error}", where=" (at mre.py:3: x = f())")
    code, message = export.judge(file, export.Run({"output": 1}), "the file")
    assert code == 1
    shown = "\n    ".join(["ValueError: bad", *(f"line {i}" for i in range(7))])
    assert message == f"{shown} (at mre.py:3: x = f())\n  the file fails when run {export.ISOLATED}"


def test_an_mre_that_fails_where_the_file_runs_is_judged_1_error_first():
    """The MRE's own error first, then that the MRE failed while the file ran."""
    mre = export.Run(error="RuntimeError: the MRE broke")
    assert export.judge(export.Run({"output": 1}), mre, "its portable rendering") == (
        1,
        (
            "RuntimeError: the MRE broke\n"
            f"  the MRE fails here, while its portable rendering runs {export.ISOLATED}"
        ),
    )


def test_a_file_that_fails_as_the_mre_fails_is_judged_2():
    """The same first line of the error, blank lines aside: the file reproduces the MRE's failure,
    the bug report's point: exit 2, the error shown."""
    file = export.Run(error="\nValueError: bad\nin the file", where=" (at mre.py:3: x = f())")
    mre = export.Run(error="ValueError: bad\nin the MRE")
    assert export.judge(file, mre, "the file") == (
        2,
        (f"the file fails when run {export.ISOLATED}, {FAILS_HERE}:\n    ValueError: bad\n    in the file"),
    )


def test_a_file_that_fails_otherwise_than_the_mre_is_judged_1():
    """Both fail, with different errors: the file's error is the one shown, exit 1."""
    file = export.Run(error="ValueError: bad")
    mre = export.Run(error="ValueError: worse")
    assert export.judge(file, mre, "the file") == (
        1,
        f"ValueError: bad\n  the file fails when run {export.ISOLATED}",
    )


class Phase(enum.Enum):
    """An output leaf that is neither a tensor nor a number."""

    PREFILL = "prefill"
    DECODE = "decode"


class FakeProcess:
    """Stands in for the process rehearse() starts: it checks how it was started, then ends the
    way RUNNER's run of the file ends (`ending`): saved output, a failure file, or a crash."""

    def __init__(self, ending: str) -> None:
        self.ending = ending
        self.started: dict = {}
        self.killed = self.waited = False
        self.returncode: int | None = None
        """None until it is waited for, as Popen's."""
        self.ending_code = 0
        self.cwd = Path()

    def __call__(self, command, cwd, stdout, stderr) -> "FakeProcess":
        path, result, package, group = command[3:]
        self.cwd = Path(cwd)
        self.started = {
            "command": command[:3],
            "package": package,
            "group": group,
            "folder": sorted(item.name for item in Path(cwd).iterdir()),
            "text": Path(path).read_text(),
            "result beside the file": Path(result).parent == Path(cwd),
            "stdout": stdout,
        }
        if self.ending == "runs":
            torch.save({"[0]": torch.ones(2), "[1]": Phase.DECODE}, result)
        elif self.ending == "fails":
            failure = {"error": f"ValueError: bad value in {path}", "line": 2}
            Path(f"{result}.json").write_text(json.dumps(failure))
        elif self.ending == "fails nowhere":
            Path(f"{result}.json").write_text(json.dumps({"error": "ValueError: x", "line": None}))
        else:
            lines = 12 if self.ending == "dies" else 1
            stderr.write("".join(f"stderr line {i}\n" for i in range(lines)) + "\n")
            self.ending_code = -9
        return self

    def kill(self) -> None:
        self.killed = True

    def wait(self, timeout: float | None = None) -> int:
        self.waited = True
        self.returncode = self.ending_code
        return self.returncode


TEXT = "import torch\nvalue = torch.ones(2)\n"
"""The file rehearse() is given to run: line 2 is where FakeProcess("fails") fails."""


@pytest.fixture
def fake_process(monkeypatch) -> Callable[[str], FakeProcess]:
    """rehearse() starts a FakeProcess instead of Python; the MRE's run is Run(error="mre")."""

    def fake(ending: str) -> FakeProcess:
        process = FakeProcess(ending)
        monkeypatch.setattr(export.subprocess, "Popen", process)
        return process

    monkeypatch.setattr(export, "run_mre", lambda: export.Run(error="mre"))
    return fake


READS_A_GLOBAL = """\
import torch
from torch import nn

SCALE = 2.0


class Scaled(nn.Module):
    def forward(self, x):
        return x * SCALE


def infer_one_step():
    model = nn.Sequential(Scaled())
    return torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=False)(torch.ones(2))
"""
"""A file whose submodule's forward reads a global of the file: Dynamo imports its module."""


@pytest.mark.usefixtures("real_run")
def test_the_file_runs_as_a_module_that_stays_importable_as_python_file_runs_it(tmp_path, monkeypatch):
    """The rehearsal's runner keeps the file's module in sys.modules, as `python FILE` keeps
    __main__: Dynamo looks up the module of each global that a submodule's forward reads."""
    path, result, runner = tmp_path / "mre_export.py", tmp_path / "output.pt", tmp_path / "run.py"
    path.write_text(READS_A_GLOBAL)
    runner.write_text(export.RUNNER)
    monkeypatch.setattr(sys, "argv", [str(runner), str(path), str(result), MISSING, ""])
    monkeypatch.setitem(sys.modules, MISSING, None)
    monkeypatch.setitem(sys.modules, "__export__", None)  # put back when the test ends
    try:
        runpy.run_path(str(runner), run_name="__main__")
    except SystemExit:
        pytest.fail(Path(f"{result}.json").read_text())
    assert torch.equal(torch.load(result)["output"], torch.full((2,), 2.0))


@pytest.mark.usefixtures("real_run")
def test_a_file_whose_guard_starts_a_process_group_runs_as_its_one_rank():
    """A file whose guard starts a process group (a tensor-parallel MRE's) runs as its one rank:
    infer_one_step() sees a world of one, on the backend the guard names."""
    text = (
        "import torch\nimport torch.distributed as dist\n\n\ndef infer_one_step():\n"
        "    return torch.tensor([dist.get_world_size(), dist.get_rank()])\n\n\n"
        'if __name__ == "__main__":\n    dist.init_process_group("gloo")\n    infer_one_step()\n'
        "    dist.destroy_process_group()\n"
    )
    with contextlib.closing(export.FileRun(text, "mre.py")) as run:
        result = run.result(timeout=600)
    assert result.error == ""
    assert result.output["output"].tolist() == [1, 0]


def test_a_tensor_parallel_mre_runs_here_as_one_rank(monkeypatch):
    """run_mre() in a tensor-parallel project: the MRE's step in a process group of one rank,
    which it leaves when the step ends."""
    tool = importlib.import_module("parallel_project.toolkit.export")
    parallel_mre = importlib.import_module("parallel_project.mre")
    monkeypatch.setattr(parallel_mre, "infer_one_step", lambda: torch.tensor(dist.get_world_size()))
    assert tool.run_mre().output["output"].item() == 1
    assert not dist.is_initialized()


def test_the_file_runs_alone_in_a_fresh_python_in_an_empty_folder(fake_process, tmp_path, monkeypatch):
    """rehearse() starts this Python on RUNNER with the file alone in its folder, its output
    saved elsewhere, its project made unimportable, the file's printing discarded; and it
    leaves nothing behind, here or there."""
    monkeypatch.chdir(tmp_path)
    process = fake_process("dies")
    export.rehearse(TEXT, "mre.py")
    assert list(tmp_path.iterdir()) == []
    assert not process.cwd.exists()
    assert process.started == {
        "command": [sys.executable, "-c", export.RUNNER],
        "package": PACKAGE,
        "group": "",
        "folder": ["mre.py"],
        "text": TEXT,
        "result beside the file": False,
        "stdout": subprocess.DEVNULL,
    }
    assert process.waited


def test_the_output_the_file_saved_is_its_run(fake_process):
    """A run that saved its output: that output, leaves that are not tensors too (torch's
    weights-only loader refuses an enum), against the MRE's run made meanwhile."""
    fake_process("runs")
    file, mre = export.rehearse(TEXT, "mre.py")
    assert list(file.output) == ["[0]", "[1]"]
    assert torch.equal(file.output["[0]"], torch.ones(2))
    assert file.output["[1]"] is Phase.DECODE
    assert (file.error, mre) == ("", export.Run(error="mre"))


def test_a_failure_is_named_by_the_file_name_and_the_line(fake_process):
    """The error as the file's user knows it: the file's name, not the scratch path, and the
    failing line of the file quoted."""
    fake_process("fails")
    file, _ = export.rehearse(TEXT, "mre.py")
    assert file == export.Run(
        error="ValueError: bad value in mre.py", where=" (at mre.py:2: value = torch.ones(2))"
    )


def test_a_failure_with_no_line_in_the_file_names_none(fake_process):
    """An error raised outside the file's own lines: no line quoted."""
    fake_process("fails nowhere")
    file, _ = export.rehearse(TEXT, "mre.py")
    assert file == export.Run(error="ValueError: x", where="")


@pytest.mark.parametrize(("ending", "shown"), [("dies", range(4, 12)), ("dies at once", [0])])
def test_a_process_that_dies_is_named_with_its_exit_status_and_last_words(fake_process, ending, shown):
    """A run that saved nothing (killed, out of memory): its exit status and the last eight lines
    it printed, or all of them."""
    fake_process(ending)
    file, _ = export.rehearse(TEXT, "mre.py")
    last = "\n".join(f"stderr line {i}" for i in shown)
    assert file == export.Run(error=f"the process exited -9: {last}")


def test_an_interrupted_rehearsal_stops_the_file_run(fake_process, monkeypatch):
    """Ctrl-C while the MRE runs here: the file's process is killed and waited for, and the
    interrupt goes on."""
    process = fake_process("runs")

    def interrupted() -> export.Run:
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "run_mre", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export.rehearse(TEXT, "mre.py")
    assert process.killed
    assert process.waited


@pytest.mark.parametrize("package", PROJECTS)
def test_bundling_imports_no_torch(package):
    """export bundles every configuration's MRE without importing torch: a project's tests start
    the file's run before collection imports torch (seconds), so that it runs meanwhile."""
    source = Path(importlib.import_module(package).__file__).parents[1]
    code = f"import sys, {package}.toolkit.export as e; e.export('portable'); print('torch' in sys.modules)"
    ran = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(source)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "False\n"


def test_a_file_run_that_outlasts_its_wait_goes_on_until_closed():
    """A project's tests start the file's run early and wait for it with a timeout: one that
    runs on past it raises TimeoutExpired and keeps running; close() kills it and removes its
    folder."""
    run = export.FileRun("import time\ntime.sleep(20)\n", "mre.py")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            run.result(timeout=0.2)
        assert run.process.poll() is None
    finally:
        run.close()
    assert run.process.returncode == -9
    assert not run.path.parent.exists()


def test_the_mre_runs_here_in_an_empty_folder_output_leaf_by_leaf(monkeypatch, capsys):
    """run_mre(): the MRE's step from an empty folder, the folder restored after, what it prints
    silenced, its output flattened to {leaf path: value}."""
    here, seen = Path.cwd(), {}

    def infer_one_step():
        seen["folder"] = sorted(Path().iterdir())
        seen["cwd"] = Path.cwd()
        print("the report")
        sys.stdout.write("and a progress bar\n")
        return {"logits": torch.ones(2), "cache": (torch.zeros(1), 3)}

    monkeypatch.setattr(mre, "infer_one_step", infer_one_step)
    run = export.run_mre()
    assert (seen["folder"], seen["cwd"] != here, Path.cwd()) == ([], True, here)
    assert capsys.readouterr().out == ""
    assert list(run.output) == ["['logits']", "['cache'][0]", "['cache'][1]"]
    assert run.output["['cache'][1]"] == 3
    assert run.error == ""


def test_a_lone_tensor_output_is_the_leaf_named_output(monkeypatch):
    """An MRE that returns one tensor: its one leaf is called `output`."""
    monkeypatch.setattr(mre, "infer_one_step", lambda: torch.ones(2))
    assert list(export.run_mre().output) == ["output"]


def test_an_mre_that_raises_is_its_error_and_the_folder_is_restored(monkeypatch):
    """An MRE that raises: `Type: message`, and the working folder back where it was."""
    here = Path.cwd()

    def infer_one_step():
        raise ValueError("bad input")

    monkeypatch.setattr(mre, "infer_one_step", infer_one_step)
    assert export.run_mre() == export.Run(error="ValueError: bad input")
    assert Path.cwd() == here


def test_the_file_is_written_whole_or_not_at_all(tmp_path):
    """write() leaves the whole text; a write that fails leaves neither the file nor a part."""
    path = tmp_path / "mre.py"
    export.write(path, TEXT)
    assert path.read_text() == TEXT
    assert sorted(item.name for item in tmp_path.iterdir()) == ["mre.py"]
    taken = tmp_path / "taken"
    (taken / "inside").mkdir(parents=True)
    with pytest.raises(OSError):  # noqa: PT011  (which OSError depends on the system)
        export.write(taken, TEXT)
    assert sorted(item.name for item in tmp_path.iterdir()) == ["mre.py", "taken"]


MATCHING = (export.Run({"output": 1}), export.Run({"output": 1}))
"""A file's run and the MRE's that agree."""


@dataclass
class Stage:
    """What the staged rehearsal returns (the file's run, the MRE's), and what it was given."""

    runs: tuple[export.Run, export.Run] = MATCHING
    rehearsed: list[tuple[str, str]] = field(default_factory=list)


@pytest.fixture
def staged(monkeypatch) -> Stage:
    """export.main() around stand-ins, off an NPU: export() gives `# the <target> file`, and the
    rehearsal returns Stage.runs and keeps the (text, name) it ran."""
    stage = Stage()

    def rehearse(text, name):
        stage.rehearsed.append((text, name))
        return stage.runs

    monkeypatch.setattr(export, "export", lambda target, name="": f"# the {target} file\n")
    monkeypatch.setattr(export, "rehearse", rehearse)
    monkeypatch.setattr(backend, "npu_status", lambda: (False, "no NPU here"))
    return stage


UNRUN = "the npu literals (.npu(), npugraph_ex) were not run: they need an NPU (no NPU here)"


def test_the_npu_target_off_an_npu_is_proven_by_its_portable_rendering(staged, tmp_path, monkeypatch):
    """By default the npu target is written to mre_export.py; off an NPU its portable rendering
    is what runs, and the message says so, and what did not run."""
    monkeypatch.chdir(tmp_path)
    assert run_export() == (
        0,
        (
            f"wrote mre_export.py (npu target): its portable rendering ran {export.ISOLATED}, and "
            f"matches the MRE's output\n  {UNRUN}\n"
        ),
    )
    assert staged.rehearsed == [("# the portable file\n", "mre_export.py")]
    assert (tmp_path / "mre_export.py").read_text() == "# the npu file\n"


def test_the_npu_target_on_an_npu_is_proven_by_itself(staged, tmp_path, monkeypatch):
    """On an NPU the npu file itself runs before it is written."""
    monkeypatch.setattr(backend, "npu_status", lambda: (True, "Ascend910B2"))
    path = tmp_path / "bug.py"
    code, message = run_export("-o", str(path), "--target", "npu")
    assert (code, message) == (
        0,
        (f"wrote {path} (npu target): the file ran {export.ISOLATED}, and matches the MRE's output\n"),
    )
    assert staged.rehearsed == [("# the npu file\n", "bug.py")]
    assert path.read_text() == "# the npu file\n"


def test_a_file_that_differs_is_not_written_and_says_so(staged, tmp_path, monkeypatch):
    """A rehearsal that differs: exit 1, why first, `nothing written`, no file."""
    staged.runs = (export.Run({"output": 2}), MATCHING[1])
    path = tmp_path / "bug.py"
    assert run_export("-o", str(path), "--target", "portable") == (
        1,
        (
            f"export: output: int 2 where eager has int 1\n  the file, run {export.ISOLATED}, "
            f"differs from the MRE's output; nothing written to {path}\n"
        ),
    )
    assert not path.exists()


def test_tolerances_model_py_gets_wrong_are_named_and_nothing_is_written(staged, tmp_path, monkeypatch):
    """A TOLERANCES entry with a misspelt key, which the comparison of the two runs reads: exit 1,
    one line naming it and where the README says more, no file."""
    floats = (export.Run({"output": torch.ones(2)}), export.Run({"output": torch.ones(2)}))
    staged.runs = floats
    monkeypatch.setattr(forward_project.model, "TOLERANCES", {torch.float32: {"rtl": 1e-3}}, raising=False)
    path = tmp_path / "bug.py"
    assert run_export("-o", str(path)) == (
        1,
        (
            "export: TOLERANCES[torch.float32] must be a dict with rtol and/or atol, got "
            '{\'rtl\': 0.001}; e.g. TOLERANCES = {torch.bfloat16: {"rtol": 5e-2, "atol": 5e-2}} '
            f"(README, section 'Tolerances'); nothing written to {path}\n"
        ),
    )
    assert not path.exists()


def test_a_file_that_fails_as_the_mre_does_is_written_exit_2(staged, tmp_path, monkeypatch):
    """A file that fails as the MRE fails here is what a bug report shows: written, exit 2."""
    failing = (export.Run(error="ValueError: bad"), export.Run(error="ValueError: bad"))
    staged.runs = failing
    path = tmp_path / "bug.py"
    assert run_export("-o", str(path), "--target", "portable") == (
        2,
        (
            f"wrote {path} (portable target): the file fails when run {export.ISOLATED}, "
            f"{FAILS_HERE}:\n    ValueError: bad\n"
        ),
    )
    assert path.read_text() == "# the portable file\n"


@pytest.mark.parametrize("target", TARGETS)
def test_a_project_that_cannot_be_bundled_is_refused_before_anything_runs(
    staged, monkeypatch, tmp_path, target
):
    """A BundleError, from the file asked for or from the portable rendering the npu target runs
    off an NPU: exit 1, `cannot bundle` and the reason, nothing run, nothing written."""

    def refuse(asked: str, name: str = "") -> str:
        if asked == "portable":
            raise export.BundleError("the reason")
        return "# the npu file\n"

    monkeypatch.setattr(export, "export", refuse)
    path = tmp_path / "bug.py"
    assert run_export("-o", str(path), "--target", target) == (
        1,
        "export: cannot bundle the MRE: the reason\n",
    )
    assert (staged.rehearsed, path.exists()) == ([], False)


def test_the_command_line_names_itself_and_its_targets(help_of, capsys):
    """--help shows the program name given and the module's first docstring line; an unknown
    target is refused by name with the choices."""
    shown = help_of(export.main, "npu-export")
    assert shown.startswith("usage: npu-export [-h] [-o OUTPUT] [--target {npu,portable}]")
    assert export.__doc__.splitlines()[0] in shown
    with pytest.raises(SystemExit) as refused:
        export.main(["--target", "gpu"])
    assert refused.value.code == 2
    assert "argument --target: invalid choice: 'gpu'" in capsys.readouterr().err


@pytest.mark.parametrize("npu_ok", [False, True])
def test_what_runs_to_prove_each_target(monkeypatch, npu_ok):
    """The portable file proves itself; the npu file too on an NPU, its portable rendering off
    one, with what was not run and why."""
    monkeypatch.setattr(backend, "npu_status", lambda: (npu_ok, "the probe's reason"))
    monkeypatch.setattr(export, "export", lambda target, name="": f"# the {target} file\n")
    assert export.rehearsal("portable", "# the portable file\n") == (
        "# the portable file\n",
        "the file",
        "",
    )
    expected = (
        ("# the npu file\n", "the file", "")
        if npu_ok
        else (
            "# the portable file\n",
            "its portable rendering",
            "the npu literals (.npu(), npugraph_ex) were not run: they need an NPU (the probe's reason)",
        )
    )
    assert export.rehearsal("npu", "# the npu file\n") == expected


@pytest.mark.parametrize("where", ["missing/bug.py", "."])
def test_an_output_no_file_can_be_written_at_is_refused_before_the_bundle(
    where, tmp_path, monkeypatch, capsys
):
    """-o in a folder that does not exist, or naming a folder: a usage error (exit 2) saying
    which, before anything is bundled or run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(export, "export", lambda *_: pytest.fail("bundled for an output it cannot write"))
    with pytest.raises(SystemExit) as exit_:
        export.main(["-o", where])
    assert exit_.value.code == 2
    told = capsys.readouterr().err.splitlines()[-1]
    reason = "is a folder" if where == "." else "is in a folder that does not exist"
    assert told.endswith(f"argument -o/--output: {where} {reason}: give a file in an existing folder")
