"""Write your model and the MRE as one self-contained .py file for a bug report, and verify it.

    python -m <package> export [-o FILE] [--target npu|portable]

The file holds your code and the MRE, nothing else, in the plain style of the repro.py that
PyTorch's minifier writes: a header comment, the imports, your modules (model.py, the modules of
yours it imports, relatively or absolutely, and the few toolkit definitions they import, such as
KVCacheParallel or npu_status: bundle.py), then mre.py in the seed's shape: its definitions,
def infer_one_step() with its fixed names, and the __main__ guard calling it. Third-party imports
stay imports.

mre.py's `backend = select_backend()` is written out as the target decides it (literal_mre.py).
`--target npu` (default) writes the seed's literal npugraph_ex form for a machine with torch_npu
and CANN; the file imports torch_npu first and, where it cannot, says so in one sentence and
exits 2. `--target portable` writes the aot_eager stand-in on the CPU, which runs anywhere. A
tensor-parallel MRE runs under torchrun: its guard starts the process group, calls
infer_one_step() and destroys the group, in plain sequence as the seed writes a step (a rank that
fails exits with its traceback, and torchrun ends the job).

Before it writes the file, the tool runs it: in a fresh process, in an empty folder, with this
project unimportable, while the project's MRE runs here; the outputs must match within each
dtype's tolerance (contract.tolerances). Off an NPU the npu target's literals cannot run, so its
portable rendering runs in its place, and the message says so. Exit 0: written, ran and matched.
Exit 1, and nothing written: it cannot be bundled (a name defined twice, a data file beside your
modules: one file cannot carry it), or the file fails or differs when run; the message starts
with the root cause. Exit 2, written: the file fails exactly as the MRE fails here, which is the
failure a bug report shows.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from . import project
from .bundle import (
    ENTRY,
    LINE_LENGTH,
    PACKAGE,
    TOOLKIT,
    BundleError,
    Bundler,
    import_lines,
    is_main_guard,
    names_bound,
    undefined_names,
)
from .literal_mre import LiteralMre, is_call_of

TORCHRUN_RANKS = 2
"""The ranks of the header's torchrun command for a tensor-parallel MRE."""
# What select_backend() decides, as each target writes it: (backend, device, where it runs).
TARGETS = {
    "npu": ("npugraph_ex", "npu", "an Ascend NPU, with torch_npu and CANN's set_env.sh sourced"),
    "portable": ("aot_eager", "cpu", "any machine, with the aot_eager stand-in on the CPU"),
}
# torch imports an installed torch_npu itself ("device backend autoload"), and dies with a
# RuntimeError where CANN is not sourced: the file switches that off first.
PRELUDE = """\
import os

# An installed torch_npu is imported below, if at all, not by `import torch`.
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
"""
# The npu file's import of torch_npu: where it fails, one sentence and exit 2, not a traceback.
TORCH_NPU_IMPORT = """\
try:
    import torch_npu  # noqa: F401  (the npu device and npugraph_ex)
except ImportError:
    print(
        "This MRE needs torch_npu with CANN sourced; its `--target portable` export runs anywhere.",
        file=sys.stderr,
    )
    sys.exit(2)
"""


# Writing the file.


def bundle(target: str, name: str) -> str:
    """The file `name` for `target`: your modules and the MRE as the target writes it."""
    bundler = Bundler()
    entry = bundler.module(ENTRY)
    bundler.entered.add(ENTRY)  # it travels as the target writes it, not whole
    # Read only where the npu target writes them: a stand-in project of the tests has none.
    options = partial(bundler.toolkit_literal, f"{TOOLKIT}.backend", "NPUGRAPH_EX_OPTIONS")
    backend, device, _ = TARGETS[target]
    mre = LiteralMre(entry, backend, device, options).written()
    bundler.add_imported_modules(entry, mre)
    bundler.add(entry, mre)
    main = next((node for node in entry.tree.body if is_main_guard(node)), ast.Pass())
    parallel = any(is_call_of(node, "tensor_parallel") for node in ast.walk(main))
    bundler.add(entry, guard(target, parallel), defined=names_bound(mre))
    if target == "npu":
        bundler.resolve(entry, "sys")  # the import of torch_npu tells its failure on stderr
    bundler.check()
    return render(bundler, target, header(target, name, parallel))


def guard(target: str, parallel: bool) -> str:
    """The __main__ guard: infer_one_step(); a tensor-parallel MRE's as one rank of those torchrun
    starts, in a process group of its own (hccl binds each rank to the NPU set before it)."""
    if not parallel:
        return 'if __name__ == "__main__":\n    infer_one_step()'
    lines = ['if __name__ == "__main__":', '    dist.init_process_group("gloo")']
    if target == "npu":
        lines[1:] = [
            '    torch.npu.set_device(int(os.environ["LOCAL_RANK"]))',
            '    dist.init_process_group("hccl")',
        ]
    return "\n".join([*lines, "    infer_one_step()", "    dist.destroy_process_group()"])


def header(target: str, name: str, parallel: bool) -> str:
    """A few comment lines: what the file is, for which target, how to run it, and with what."""

    def version(distribution: str) -> str:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    op = project.CUSTOM_OP + (f" ({project.OP_REGISTRATION})" if project.OP_REGISTRATION else "")
    model = f"{project.PROJECT}'s model (mode {project.MODE}, custom op {op})"
    run = f"torchrun --nproc-per-node {TORCHRUN_RANKS} {name}" if parallel else f"python {name}"
    versions = f"Python {platform.python_version()}, torch {version('torch')}, torch_npu "
    lines = [
        f"Minimal reproducible example: one graph-mode step of {model}.",
        f"Target {target}: runs on {TARGETS[target][2]}.",
        f"Run: {run}",
        f"Exported by `python -m {PACKAGE} export`; {versions}{version('torch-npu')}.",
    ]
    wrapped = (textwrap.wrap(line, LINE_LENGTH - 2, break_long_words=False) for line in lines)
    return "".join(f"# {line}\n" for each in wrapped for line in each)


def render(bundler: Bundler, target: str, head: str) -> str:
    """The file: the header, the imports as isort sorts them, then the code."""
    blocks = ["from __future__ import annotations\n"] if bundler.future_annotations else []
    blocks.append(PRELUDE)
    # The prelude imports os itself, before torch: isort keeps it there.
    imports = {name: value for name, value in bundler.imports.items() if name != "os"}
    blocks.extend("\n".join(section) + "\n" for section in import_lines(imports))
    if target == "npu":
        blocks.append(TORCH_NPU_IMPORT)
    body = "\n\n\n".join(bundler.chunks) + "\n"
    # isort leaves one blank line after the imports before a statement, ruff format two before a def.
    gap = "\n\n" if body.startswith(("def ", "@", "class ")) else "\n"
    return head + "\n" + "\n".join(blocks) + gap + body


def export(target: str, name: str = "mre_export.py") -> str:
    """The whole file `name` for `target` ("npu" or "portable"), checked without running it:
    it compiles and every name it reads is defined."""
    text = bundle(target, name)
    try:
        compile(text, f"<export --target {target}>", "exec")
    except SyntaxError as error:
        raise BundleError(f"the bundled file does not compile: {error}") from error
    if missing := undefined_names(text):
        raise BundleError(
            f"the bundled file would use undefined names: {', '.join(missing)}; "
            "define or import them at the top of your modules"
        )
    return text


# Running the file.


@dataclass
class Run:
    """One run of the MRE: its output as {leaf path: value}, or the error it raised."""

    output: dict[str, Any] | None = None
    error: str = ""
    """`Type: message` of what it raised, empty if it ran."""
    where: str = ""
    """Where in the file the error arose: ` (at mre_export.py:12: output = model(x))`."""


# The file, run as `python FILE` runs it (the guard calls infer_one_step(): this calls it itself, to
# keep its output), with this project unimportable; a tensor-parallel file as the one rank of the
# process group its guard starts. The output is saved leaf by leaf, on the CPU.
RUNNER = """\
import importlib.util, json, re, sys, traceback

path, result, package, group = sys.argv[1:]
sys.argv = [path]
sys.modules[package] = None  # the file must not need this project: importing it raises
try:
    # A module that stays in sys.modules, as `python FILE`'s __main__ does: Dynamo imports the
    # module whose globals a function it inlines reads (a submodule's forward).
    spec = importlib.util.spec_from_file_location("__export__", path)
    module = sys.modules["__export__"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if group:
        import torch.distributed as dist

        dist.init_process_group(group, store=dist.HashStore(), rank=0, world_size=1)
    output = module.infer_one_step()
except BaseException as error:
    # Dynamo names the traced line of the file in its message, a traceback the calling line.
    pattern = 'File "' + re.escape(path) + '", line ([0-9]+)'
    traced = [int(line) for line in re.findall(pattern, str(error))] or [
        frame.lineno
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename == path
    ]
    failure = {"error": f"{type(error).__name__}: {error}", "line": (traced or [None])[-1]}
    with open(result + ".json", "w") as file:
        json.dump(failure, file)
    sys.exit(1)
import torch
import torch.utils._pytree as pytree

leaves = pytree.tree_leaves_with_path(output)
flat = {pytree.keystr(key) or "output": value for key, value in leaves}
torch.save(pytree.tree_map_only(torch.Tensor, torch.Tensor.cpu, flat), result)
if group:
    dist.destroy_process_group()
"""
ISOLATED = "in a fresh process, in an empty folder, with this project unimportable"
"""How export runs the file it is about to write."""
ERROR_LINES = 8
"""Lines of an error message shown: the first, `Type: message`, is the root cause."""


def short(error: str) -> str:
    lines = [line for line in error.splitlines() if line.strip()][:ERROR_LINES]
    return "\n    ".join(lines)


def first_line(error: str) -> str:
    return next((line for line in error.splitlines() if line.strip()), error)


def rehearsal(target: str, text: str) -> tuple[str, str, str]:
    """What runs here to prove the file for `target`: its text, what it is, and what is not run.

    The npu target's literals (.npu(), npugraph_ex) need an NPU. Off one, its portable rendering,
    the same bundle with the stand-in backend, runs in its place.
    """
    if target == "npu":
        from .backend import npu_status

        npu_ok, why = npu_status()
        if not npu_ok:
            unrun = f"the npu literals (.npu(), npugraph_ex) were not run: they need an NPU ({why})"
            return export("portable"), "its portable rendering", unrun
    return text, "the file", ""


class FileRun:
    """`text` run as the file `name` in a fresh process, in an empty folder, with this project
    unimportable: started at once, so that other work goes on meanwhile; result() waits for it,
    close() stops it if it is still going and removes its folder."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name
        self.scratch = tempfile.TemporaryDirectory(prefix="export-")
        folder = Path(self.scratch.name, "empty")
        folder.mkdir()
        self.path, self.saved = folder / name, Path(self.scratch.name, "output.pt")
        self.path.write_text(text)
        self.stderr = Path(self.scratch.name, "stderr")
        # The process group the file's guard starts, if any: the run is its one rank.
        group = re.search(r'^\s+dist\.init_process_group\("(\w+)"\)', text, re.MULTILINE)
        command = [sys.executable, "-c", RUNNER, str(self.path), str(self.saved), PACKAGE]
        command.append(group[1] if group else "")
        output = subprocess.DEVNULL  # what it prints
        with self.stderr.open("w") as stderr:  # the process writes it; read once it has ended
            self.process = subprocess.Popen(command, cwd=folder, stdout=output, stderr=stderr)

    def close(self) -> None:
        """Stop the run if nothing waited for it to end, and remove its folder."""
        if self.process.returncode is None:
            self.process.kill()
        self.process.wait()
        self.scratch.cleanup()

    def result(self, timeout: float | None = None) -> Run:
        """The file's run once it has ended (subprocess.TimeoutExpired if it runs on past
        `timeout` seconds): its output leaf by leaf, or its error named by the file's line."""
        self.process.wait(timeout)
        if self.saved.exists():
            import torch

            return Run(torch.load(self.saved, weights_only=False))
        failure = Path(f"{self.saved}.json")
        if failure.exists():
            error, lines = json.loads(failure.read_text()), self.text.splitlines()
            line = error["line"]
            # The line itself: nothing is written to look it up in.
            where = f" (at {self.name}:{line}: {lines[line - 1].strip()})" if line else ""
            # Named as you will know it, not by this scratch folder's path.
            return Run(error=error["error"].replace(str(self.path), self.name), where=where)
        tail = "\n".join(self.stderr.read_text().strip().splitlines()[-ERROR_LINES:])
        return Run(error=f"the process exited {self.process.returncode}: {tail}")


def rehearse(text: str, name: str) -> tuple[Run, Run]:
    """Run `text` as the file `name` (FileRun), and meanwhile the project's MRE here: (the file's
    run, the MRE's run)."""
    with contextlib.closing(FileRun(text, name)) as file:
        mre = run_mre()
        return file.result(), mre


def leaves(output: Any) -> dict[str, Any]:
    """An MRE's output as export compares it: {leaf path: value}, each tensor on the CPU."""
    import torch
    import torch.utils._pytree as pytree

    flat = {
        pytree.keystr(key) or "output": value for key, value in pytree.tree_leaves_with_path(output)
    }
    return pytree.tree_map_only(torch.Tensor, torch.Tensor.cpu, flat)


def run_mre() -> Run:
    """The project's MRE, run here from an empty folder, a tensor-parallel one as one rank (as
    mre.py's guard runs it under plain python): its output leaf by leaf, or its error."""
    import torch

    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="export-mre-") as folder:
        try:
            mre = importlib.import_module(ENTRY)  # from here: the path may name where you are
            torch._dynamo.reset()  # a fresh compile, whatever this process compiled before
            os.chdir(folder)
            with contextlib.redirect_stdout(io.StringIO()), one_rank():
                output = mre.infer_one_step()
        except Exception as error:  # noqa: BLE001  (compared with the file's error)
            return Run(error=f"{type(error).__name__}: {error}")
        finally:
            os.chdir(here)
    return Run(leaves(output))


def one_rank() -> contextlib.AbstractContextManager[Any]:
    """A tensor-parallel project's process group of one rank; nothing otherwise."""
    if not project.TENSOR_PARALLEL:
        return contextlib.nullcontext()
    from .backend import select_backend
    from .parallel import tensor_parallel

    return tensor_parallel(select_backend().device)


def judge(file: Run, mre: Run, what: str) -> tuple[int, str]:
    """The exit status for `what`'s run against the MRE's, and why, the root cause first: 0 it
    matches; 1 it fails or differs (not written); 2 it fails as the MRE fails here."""
    from .contract import leaf_mismatch

    if file.error and first_line(file.error) == first_line(mre.error):
        same = "and so does the MRE run here in an empty folder, with the same error"
        return 2, f"{what} fails when run {ISOLATED}, {same}:\n    {short(file.error)}"
    if file.error:
        return 1, f"{short(file.error)}{file.where}\n  {what} fails when run {ISOLATED}"
    if mre.error:
        return 1, f"{short(mre.error)}\n  the MRE fails here, while {what} runs {ISOLATED}"
    if list(file.output) != list(mre.output):
        leaves = f"leaves {', '.join(file.output)} where the MRE has {', '.join(mre.output)}"
        differ = [f"the output's structure differs: {leaves}"]
    else:  # leaf by leaf, each within its dtype's tolerance (contract.tolerances)
        found = [
            leaf_mismatch(path, file.output[path], mre.output[path], {}) for path in mre.output
        ]
        differ = [str(mismatch) for mismatch in found if mismatch]
    if differ:
        shown = differ[:ERROR_LINES]
        if len(differ) > ERROR_LINES:
            shown.append(f"and {len(differ) - ERROR_LINES} more leaves differ")
        why = "\n    ".join(shown)
        return 1, f"{why}\n  {what}, run {ISOLATED}, differs from the MRE's output"
    return 0, f"{what} ran {ISOLATED}, and matches the MRE's output"


def write(path: Path, text: str) -> None:
    """Write `text` at `path` whole or not at all: a failed write leaves nothing half-made."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("mre_export.py"))
    parser.add_argument("--target", choices=list(TARGETS), default="npu")
    arguments = parser.parse_args(argv)
    output, target = arguments.output, arguments.target
    # Before the bundle and its run, which take seconds: a place the file cannot go.
    if output.is_dir() or not output.absolute().parent.is_dir():
        where = "is a folder" if output.is_dir() else "is in a folder that does not exist"
        parser.error(f"argument -o/--output: {output} {where}: give a file in an existing folder")
    try:
        text = export(target, output.name)
        runnable, what, unrun = rehearsal(target, text)
    except BundleError as error:
        print(f"export: cannot bundle the MRE: {error}", file=sys.stderr)
        return 1
    from .contract import ContractError

    try:
        code, verdict = judge(*rehearse(runnable, output.name), what)
    except ContractError as error:  # model.py's TOLERANCES, which judge() compares within
        print(
            f"export: {error} (README, section 'Tolerances'); nothing written to {output}",
            file=sys.stderr,
        )
        return 1
    if code == 1:
        print(f"export: {verdict}; nothing written to {output}", file=sys.stderr)
        return 1
    try:
        write(output, text)
    except OSError as error:
        print(f"export: cannot write {output}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {output} ({target} target): {verdict}", file=sys.stderr)
    if unrun:
        print(f"  {unrun}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
