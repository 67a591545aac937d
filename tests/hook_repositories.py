"""Can pre-commit fetch a config's hook repositories from here? Standard library only: the
template's noxfile imports this before anything is installed."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

# `- repo: URL` followed by its `rev: TAG`, as every .pre-commit-config.yaml here writes them.
REPOSITORY = re.compile(r"^\s*- repo: (?P<url>\S+)\n\s+rev: (?P<rev>\S+)$", re.MULTILINE)


def revisions(config: Path) -> dict[str, str]:
    """Each remote hook repository of the config, with its pinned revision."""
    return {match["url"]: match["rev"] for match in REPOSITORY.finditer(config.read_text())}


def unreachable(config: Path) -> list[str]:
    """The config's hook repositories that git cannot list now: a read, nothing cloned or written."""
    return [url for url in revisions(config) if not reachable(url)]


@functools.cache  # once per process: many baked projects share the same hook repositories
def reachable(url: str, timeout: float = 15) -> bool:
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # fail instead of asking for a login
    try:
        subprocess.run(
            ["git", "ls-remote", "--exit-code", url, "HEAD"],
            env=environment,
            capture_output=True,
            timeout=timeout,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return True
