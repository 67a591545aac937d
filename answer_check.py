"""Cookiecutter's check of the answers, in its own process, before it writes anything.

cookiecutter.json names the extension below in `_extensions`, and its last variable, `__refusal`,
is `{{ cookiecutter | refuse_bad_answers }}`: cookiecutter renders that once every question is
answered, so a bad answer stops the bake before the project folder exists. The exception is one
the cookiecutter command reports as its message alone, with no traceback. The rules themselves
are hooks/answer_rules.py's, which copier applies too.

The post-generation hook's text renders the filter a second time: a replay file (`--replay-file`)
skips the questions, and with them `__refusal`. Then a bad answer stops the bake after the files are
written, and cookiecutter removes the project folder.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from cookiecutter.exceptions import FailedHookException
from jinja2 import Environment
from jinja2.ext import Extension

TEMPLATE = Path(__file__).resolve().parent


def load_rules() -> Any:
    """hooks/answer_rules.py as a module, by its path (hooks/ is no package), under the name
    that mutation testing knows it by."""
    spec = importlib.util.spec_from_file_location(
        "hooks.answer_rules", TEMPLATE / "hooks" / "answer_rules.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RULES = load_rules()
DEFAULTS = json.loads((TEMPLATE / "cookiecutter.json").read_text())


def refuse_bad_answers(answers: dict[str, Any]) -> str:
    """Return "" when every answer can work; else stop the bake with the answers' ERROR lines."""
    if message := RULES.refusal_message(dict(answers), str(TEMPLATE), DEFAULTS):
        raise FailedHookException(message)
    return ""


class AnswerCheck(Extension):
    """Adds the `refuse_bad_answers` filter."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.filters["refuse_bad_answers"] = refuse_bad_answers
