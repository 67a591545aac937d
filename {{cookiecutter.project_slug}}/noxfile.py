{%- set op_plugin = cookiecutter.custom_op != "none" and cookiecutter.op_registration == "op_plugin" -%}
"""Developer tasks: `nox` runs the default sessions; `nox -s mre` runs the minimal reproducible example."""

import nox

PACKAGE = "{{ cookiecutter.package_name }}"

nox.needs_version = ">=2024.10.9"
nox.options.sessions = ["lint", "tests"{{ ', "check_ops"' if op_plugin else "" }}]
# torch is large: reuse each session's environment instead of reinstalling it on every run.
nox.options.reuse_venv = "yes"


@nox.session
def lint(session: nox.Session) -> None:
    """Ruff lint and format check."""
    session.install("ruff>=0.8")
    session.run("ruff", "check", *session.posargs)
    session.run("ruff", "format", "--check")


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (NPU-only tests skip themselves off-NPU)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session
def mre(session: nox.Session) -> None:
    """One inference step, with the report of what ran and why."""
    session.install("-e", ".")
    session.run("python", "-m", f"{PACKAGE}.mre")


# No virtualenv of its own: the doctor examines the environment you run the project in.
@nox.session(venv_backend="none")
def doctor(session: nox.Session) -> None:
    """Why graph mode will or won't run here (exit 0 graph mode, 1 fallback, 2 cannot run)."""
    arguments = ["python", "-m", f"{PACKAGE}.doctor", *session.posargs]
    session.run(*arguments, env={"PYTHONPATH": "src"}, success_codes=[0, 1])


@nox.session
def bench(session: nox.Session) -> None:
    """Eager against graph mode on the same model and input: `nox -s bench -- --iters 200`."""
    session.install("-e", ".")
    session.run("python", "-m", f"{PACKAGE}.bench", *session.posargs)


@nox.session
def export_mre(session: nox.Session) -> None:
    """Write the MRE as one self-contained file: `nox -s export_mre -- -o bug.py --target npu`."""
    session.install("-e", ".")
    session.run("python", "-m", f"{PACKAGE}.export_mre", *session.posargs)
{%- if op_plugin %}


@nox.session
def check_ops(session: nox.Session) -> None:
    """Check op_plugin_functions.yaml (or the files given) for build and graph-mode problems."""
    session.install("-e", ".")
    session.run("python", "-m", f"{PACKAGE}.opschema", "--strict", *session.posargs)
{%- endif %}
