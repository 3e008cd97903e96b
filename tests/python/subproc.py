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
