"""`cookiecutter.<name>` under copier: the template's files are written for cookiecutter, and copier
renders the very same files, so every render gets the namespace cookiecutter would have given it.

The namespace holds the answers, cookiecutter.json's `_` settings as they are, and its `__`
variables rendered from their own expressions in cookiecutter.json, in its order, as cookiecutter
renders them: nothing of them is written a second time here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from copier.errors import UserMessageError
from copier_template_extensions import ContextHook
from jinja2 import Environment, Template, UndefinedError

COOKIECUTTER_JSON = json.loads((Path(__file__).parents[1] / "cookiecutter.json").read_text())
# cookiecutter.json's name for copier's answers file: under cookiecutter it is "", a file name that
# cookiecutter skips; under copier it names the file `copier update` reads.
ANSWERS_FILE = "__answers"
# cookiecutter's check of all the answers at once (answer_check.py): copier refuses each answer as
# it is typed, by the same rules, instead.
REFUSAL = "__refusal"
ANSWERED = [name for name in COOKIECUTTER_JSON if not name.startswith("_")]
DERIVED = {
    name: expression
    for name, expression in COOKIECUTTER_JSON.items()
    if name.startswith("__") and isinstance(expression, str) and name not in (ANSWERS_FILE, REFUSAL)
}
SETTINGS = {
    name: value
    for name, value in COOKIECUTTER_JSON.items()
    if name not in ANSWERED and name not in DERIVED and name not in (ANSWERS_FILE, REFUSAL)
}


class Namespace(dict):
    """The `cookiecutter` namespace; the answers file's name is read only when a render asks for
    it, since copier computes that name by rendering too."""

    def __init__(self, values: dict[str, Any], copier_conf: Any) -> None:
        super().__init__(values)
        self.copier_conf = copier_conf

    def __missing__(self, key: str) -> Any:
        if key != ANSWERS_FILE:
            raise KeyError(key)
        return str(self.copier_conf["answers_file"])


def slugify_filter() -> Any:
    """python-slugify's slugify, the one behind cookiecutter's `slugify` filter: the same slug for
    the same project name, accents and all."""
    try:
        from slugify import slugify
    except ImportError as error:
        raise UserMessageError(
            "This template needs python-slugify beside copier, for the same project slugs as "
            "cookiecutter: e.g. pipx inject copier copier-template-extensions python-slugify"
        ) from error
    return slugify


class CookiecutterNamespace(ContextHook):
    """Adds `cookiecutter` to every copier render, and the `slugify` filter cookiecutter has."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        environment.filters.setdefault("slugify", slugify_filter())
        self.derived: dict[str, Template] = {}  # compiled at first use: the environment is not ready yet
        # Copier renders thousands of times a bake (each file, path and question), with few
        # distinct sets of answers: the namespace is built once per set.
        self.built: dict[tuple, dict[str, Any]] = {}

    def values(self, answers: dict[str, Any]) -> dict[str, Any]:
        key = tuple(answers.get(name, self) for name in ANSWERED)
        if key not in self.built:
            values = {**SETTINGS, **{name: answers[name] for name in ANSWERED if name in answers}}
            if not self.derived:
                self.derived = {name: self.environment.from_string(text) for name, text in DERIVED.items()}
            for name, template in self.derived.items():
                try:
                    values[name] = template.render(cookiecutter=values)
                except UndefinedError:
                    # An answer it reads is not given yet: copier is still asking the questions.
                    continue
            self.built[key] = values
        return self.built[key]

    def hook(self, context: dict[str, Any]) -> None:
        context["cookiecutter"] = Namespace(self.values(context), context["_copier_conf"])
