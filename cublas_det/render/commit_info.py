"""Which commit of cublas_det wrote a result: pytest-benchmark's ``commit_info``, from git when present."""

from __future__ import annotations

import functools
import os
import subprocess


def _git(directory: str, *args: str) -> str:
    return subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True, check=True,
                          timeout=10).stdout.strip()


@functools.cache
def commit_info(directory: str | None = None) -> dict:
    """pytest-benchmark's commit fields of the checkout holding this package; id ``unversioned`` outside git."""
    directory = directory or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    info = {"id": "unversioned", "time": None, "author_time": None, "dirty": False, "project": "cublas_det",
            "branch": "(unknown)"}
    try:
        # Only a checkout of this project: a wheel installed in some other project's tree is unversioned.
        if os.path.realpath(_git(directory, "rev-parse", "--show-toplevel")) != os.path.realpath(directory):
            return info
        commit, committed, authored = _git(directory, "show", "-s", "--pretty=format:%H %cI %aI").split()
        branch = _git(directory, "rev-parse", "--abbrev-ref", "HEAD")
        dirty = bool(_git(directory, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError, ValueError):
        return info
    return {**info, "id": commit, "time": committed, "author_time": authored, "dirty": dirty,
            "branch": "(detached head)" if branch == "HEAD" else branch}
