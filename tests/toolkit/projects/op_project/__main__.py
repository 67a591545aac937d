"""The project's command line: `python -m op_project <command> [--help]`."""

import argparse
import importlib
import re
import sys
import traceback
from pathlib import Path

from .toolkit.commands import offered
from .toolkit.project import Project, using


def your_code_failed(error: ImportError | SyntaxError) -> str | None:
    """One line for a failure to import your own code: a syntax error in a file of yours, a
    failing import in one, or a contract name model.py lacks. None for an error of anything
    else, which keeps its traceback."""
    package = Path(__file__).parent
    missing = re.match(r"cannot import name '(\w+)'", str(error))
    if missing and error.name == f"{__package__}.model":
        return (
            f"model.py defines no {missing[1]}, which this command needs (README, section "
            "'What is where', lists the names)"
        )
    broken = Path(error.filename or "") if isinstance(error, SyntaxError) else None
    if broken and broken.is_relative_to(package):
        where = broken.relative_to(package.parent)
        return f"{where}, line {error.lineno}: SyntaxError: {error.msg}"
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if Path(frame.filename).is_relative_to(package)
        and not Path(frame.filename).is_relative_to(package / "toolkit")
        and Path(frame.filename) != Path(__file__)
    ]
    if frames:
        where = Path(frames[-1].filename).relative_to(package.parent)
        return f"{where}, line {frames[-1].lineno}: {type(error).__name__}: {error}"
    return None


def main(argv: list[str] | None = None) -> int:
    # Each command's module loads only when it runs: `--help` stays instant, and a broken torch
    # cannot stop the doctor from starting.
    commands = offered(__package__)
    width = max(map(len, commands))
    listing = "\n".join(f"  {name:<{width}}  {about.answers}" for name, about in commands.items())
    parser = argparse.ArgumentParser(
        prog=f"python -m {__package__}",
        description=f"commands:\n{listing}\n\nThe MRE itself: python -m {__package__}.mre",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=commands, metavar="command", help="one of the above")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the command's own (--help)")
    parsed = parser.parse_args(argv)
    module_name = commands[parsed.command].module
    prog = f"python -m {__package__} {parsed.command}"
    try:
        module = importlib.import_module(f".{module_name}", __package__)
        # The toolkit imports nothing of this project: the tool serves the project it is given.
        with using(Project.of(__package__)):
            return module.main(parsed.arguments, prog=prog)
    except (ImportError, SyntaxError) as error:
        if (told := your_code_failed(error)) is None:
            raise
        print(f"{parsed.command}: {told}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
