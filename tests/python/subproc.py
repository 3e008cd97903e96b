"""Python in a fresh process, for the tests that need one (import-time behaviour, settings the core
reads once per process, the command line): without the caller's METAL_LINALG_* settings."""

from __future__ import annotations

import os
import subprocess
import sys


def clean_env(*extras: dict | None) -> dict:
    """os.environ without its METAL_LINALG_* variables, then each of extras (None: nothing), in
    order."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("METAL_LINALG_")}
    for extra in extras:
        env.update(extra or {})
    return env


def run(args, *extras: dict | None, timeout: float = 120, cwd=None) -> subprocess.CompletedProcess:
    """sys.executable with args under clean_env(*extras), its output captured as text; a failure
    is the caller's to check (returncode)."""
    return subprocess.run(
        [sys.executable, *args],
        check=False,
        capture_output=True,
        text=True,
        env=clean_env(*extras),
        timeout=timeout,
        cwd=cwd,
    )


def policy_file_line(package: str, path) -> tuple[subprocess.CompletedProcess, str | None]:
    """`python -m <package> info` with METAL_LINALG_POLICY_FILE=path: the process and its
    "policy file:" line (None if it has none)."""
    env = {"METAL_LINALG_POLICY_FILE": str(path), "COLUMNS": "400"}
    out = run(["-W", "ignore", "-m", package, "info"], env)
    line = next((x for x in out.stdout.splitlines() if x.startswith("policy file:")), None)
    return out, line


# Code that makes importing the module `top` (and its submodules) fail in the process it starts:
# BLOCK_IMPORT.format(top="torch") + the code that must run without it.
BLOCK_IMPORT = """
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {top!r} or name.startswith({top!r} + "."):
            raise ImportError("blocked for this test: " + name)
        return None
sys.meta_path.insert(0, _Block())
"""
