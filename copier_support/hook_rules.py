"""The rules cookiecutter bakes by (hooks/), for copier.yml: which questions are asked (`when:`),
which answers are refused (`validator:`), which defaults are offered (`default:`) and which files
are pruned (`_exclude`).

The rules live in hooks/ alone, where cookiecutter applies them; copier calls the same functions
through the Jinja globals below, so the two tools cannot drift apart.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from jinja2 import Environment, pass_context
from jinja2.ext import Extension
from jinja2.runtime import Context

TEMPLATE = Path(__file__).resolve().parents[1]
COOKIECUTTER_JSON = json.loads((TEMPLATE / "cookiecutter.json").read_text())
# Stand-ins for the questions not asked yet, which a rule of an earlier question never reads:
# the hooks' functions take every answer.
NOT_YET_ASKED = {
    name: value[0] if isinstance(value, list) else value
    for name, value in COOKIECUTTER_JSON.items()
    if not name.startswith("_")
}


def load_hook(name: str) -> ModuleType:
    """hooks/<name>.py as a module: unrendered, its answers placeholder is an unused string."""
    spec = importlib.util.spec_from_file_location(f"npugraph_hooks.{name}", TEMPLATE / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rules = load_hook("answer_rules")
post_gen = load_hook("post_gen_project")


def answers_in(context: Context) -> dict[str, Any]:
    return {**NOT_YET_ASKED, **context["cookiecutter"]}


@pass_context
def asked(context: Context, variable: str) -> bool:
    """Whether copier asks `variable`, after the answers given so far."""
    return rules.asked(variable, answers_in(context))


@pass_context
def refusal(context: Context, variable: str) -> str:
    """The rules' ERROR lines about the answer just typed for `variable`, or ""."""
    return rules.refusal(variable, answers_in(context))


@pass_context
def offered(context: Context, variable: str, default: str) -> Any:
    """cookiecutter.json's default for `variable`, rendered, unless the hook refuses it under the
    answers so far (a slug of "json" makes a package name that shadows a module): copier stops on
    a default its validator refuses, before the user could type another, so then it offers none.
    A question not asked keeps its default, refused or not, as under cookiecutter."""
    answers = {**answers_in(context), variable: default}
    if rules.asked(variable, answers) and rules.refusal(variable, answers):
        return context["UNSET"]  # copier's "no default": the user must type an answer
    return default


@pass_context
def pruned_paths(context: Context) -> str:
    """The post-generation hook's paths to remove, one per line: copier never writes them."""
    return "\n".join(f"/{path}" for path in post_gen.paths_to_remove(answers_in(context)))


class HookRules(Extension):
    """asked(), refusal(), offered() and pruned_paths() for copier.yml's templated settings."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.globals.update(asked=asked, refusal=refusal, offered=offered, pruned_paths=pruned_paths)
