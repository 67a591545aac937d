"""Time `nox -s demo` against the same steps done by hand, each from a new virtual environment.

By hand: `python -m venv`, `pip install cookiecutter`, `cookiecutter --no-input`, `pip install -e`
the project, `python -m <package>.mre`. Both use the same pip cache (warm after the first run),
so the ratio is nox's own overhead. Run with `python benchmarks/demo.py [repeats]` from the
template's root, with nox installed; prints medians and the ratio, asserts nothing.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from noxfile import COOKIECUTTER


def run(*command: str | Path, cwd: Path = ROOT) -> None:
    subprocess.run([str(part) for part in command], cwd=cwd, check=True, capture_output=True)


def by_hand() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        folder = Path(workdir)
        run(sys.executable, "-m", "venv", folder / "venv")
        python = folder / "venv" / "bin" / "python"
        run(python, "-m", "pip", "install", "--quiet", COOKIECUTTER)
        run(folder / "venv" / "bin" / "cookiecutter", "--no-input", "--output-dir", folder / "out", ROOT)
        (project,) = (folder / "out").iterdir()
        (package,) = (project / "src").iterdir()
        run(python, "-m", "pip", "install", "--quiet", "-e", project)
        run(python, "-m", f"{package.name}.mre", cwd=project)


def with_nox() -> None:
    run(sys.executable, "-m", "nox", "-s", "demo", "--reuse-venv", "no")


def seconds(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main(repeats: int) -> None:
    hand, nox = [], []
    for _ in range(repeats):  # alternate, so that a busy moment hits both alike
        hand.append(seconds(by_hand))
        nox.append(seconds(with_nox))
    hand_median, nox_median = statistics.median(hand), statistics.median(nox)
    print(f"by hand (venv, cookiecutter, bake, install, MRE)  {hand_median:6.1f} s")
    print(f"nox -s demo                                       {nox_median:6.1f} s")
    print(f"ratio                                             {nox_median / hand_median:6.2f} x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
