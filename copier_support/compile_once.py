"""Copier compiles every templated string it renders again each time: each part of each path, the
answers file's name for every path, each question's settings. A bake renders the same few hundred
strings over and over, so one compilation each, kept for the bake, halves its Jinja time.

A compiled template depends on its source and on the environment's options only, which stay fixed
for the environment's life (one bake). Copier's `{% yield %}` resets its state while compiling;
this template's paths use no yield tag, so skipping the recompilation changes nothing.
"""

from __future__ import annotations

from typing import Any

from jinja2 import Environment
from jinja2.ext import Extension


class CompileOnce(Extension):
    """Memoises the environment's compile(): each source is compiled once per bake."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        compile_source = environment.compile
        compiled: dict[tuple, Any] = {}

        def compile_once(source: Any, *arguments: Any, **keywords: Any) -> Any:
            key = (source, *arguments, *sorted(keywords.items()))
            if key not in compiled:
                compiled[key] = compile_source(source, *arguments, **keywords)
            return compiled[key]

        environment.compile = compile_once
