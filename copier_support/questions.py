"""copier.yml's questions, written out from cookiecutter.json by cog: the names, defaults, help
texts and choices are cookiecutter.json's, in its order; `when:`, `validator:` and the defaults
offered call the hooks' rules (hook_rules.py). After a change to cookiecutter.json or to the hooks' ASKED_WHEN:

    nox -s copier_yml
"""

from __future__ import annotations

import json

from hook_rules import COOKIECUTTER_JSON, rules


def quoted(text: str) -> str:
    """A YAML scalar that reads back as `text`, whatever it holds: JSON strings are YAML."""
    return json.dumps(text, ensure_ascii=False)


def question(name: str) -> list[str]:
    value, prompt = COOKIECUTTER_JSON[name], COOKIECUTTER_JSON["__prompts__"].get(name, name)
    labels = dict(prompt) if isinstance(prompt, dict) else {}
    lines = [f"{name}:", "  type: str", f"  help: {quoted(labels.pop('__prompt__', prompt))}"]
    if isinstance(value, list):
        lines.append("  choices:")
        lines += [f"    {quoted(labels.get(choice, choice))}: {quoted(choice)}" for choice in value]
        lines.append(f"  default: {quoted(value[0])}")
    else:
        offered = "{% set default %}" + value + "{% endset %}{{ offered(" + repr(name) + ", default) }}"
        lines.append(f"  default: {quoted(offered)}")
        lines.append(f"  validator: {quoted('{{ refusal(' + repr(name) + ') }}')}")
    if name in rules.ASKED_WHEN:
        lines.append(f"  when: {quoted('{{ asked(' + repr(name) + ') }}')}")
    return lines


def yaml() -> str:
    """Every question of cookiecutter.json, in its order, as copier.yml entries."""
    names = [name for name in COOKIECUTTER_JSON if not name.startswith("_")]
    return "\n".join(line for name in names for line in question(name))
