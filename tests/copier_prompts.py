"""Copier's questionnaire as a user at a terminal meets it, answered from a script: which questions
it asks, what it refuses as it is typed, and the answers it ends with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from copier._main import Worker
from copier._settings import SettingsModel

# Copier's own words before a validator's message.
REFUSED = "Validation error for question '{}': "


@dataclass
class Session:
    asked: list[str] = field(default_factory=list)
    """The questions shown, in order."""
    refused: dict[str, list[str]] = field(default_factory=dict)
    """Per question, each message a typed answer got, copier's prefix taken off."""
    answers: dict[str, Any] = field(default_factory=dict)
    """The answers copier ends with, hidden questions' defaults included."""


class OutOfAnswers(Exception):
    """Every answer scripted for a question was refused: copier would ask it forever."""


def answer_questions(
    template: Path,
    typed: Mapping[str, Sequence[str] | str],
    monkeypatch: pytest.MonkeyPatch,
    data: Mapping[str, str] | None = None,
) -> Session:
    """Run copier's questions on `template`: each question shown takes its scripted answers in turn
    until one passes its validator (a question without a script takes the default offered), as the
    terminal asks again after a refusal. `data` is given as `copier copy --data` gives it."""
    session = Session()

    def prompt(questions: list[dict[str, Any]], answers: dict[str, Any]) -> dict[str, Any]:
        (question,) = questions
        name = question["name"]
        if not question["when"](answers):
            return answers  # questionary shows nothing and keeps the default it was given
        session.asked.append(name)
        if name in typed:
            attempts = typed[name]
        elif "default" in question:  # the user takes the default offered
            attempts = [getattr(question["default"], "value", question["default"])]
        else:
            raise OutOfAnswers(f"{name} offers no default, and none is scripted")
        for attempt in [attempts] if isinstance(attempts, str) else attempts:
            verdict = question.get("validate", lambda _: True)(attempt)
            if verdict is True:
                return {name: question["filter"](attempt)}
            session.refused.setdefault(name, []).append(verdict.removeprefix(REFUSED.format(name)))
        raise OutOfAnswers(name)

    monkeypatch.setattr("copier._main.unsafe_prompt", prompt)
    # Only the questionnaire runs: Worker's own step before it renders anything.
    with Worker(
        src_path=str(template), dst_path=template.parent / "unused", data=dict(data or {}), unsafe=True,
        settings=SettingsModel(),
    ) as worker:  # fmt: skip
        worker._ask()
        session.answers = dict(worker.answers.combined)
    return session
