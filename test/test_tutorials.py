"""Each tutorial runs offline, start to finish, as a user would run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
class TestQuickstart:
    def test_runs_and_shows_tools_at_work(self):
        done = subprocess.run(
            [sys.executable, str(ROOT / "tutorials" / "quickstart.py")],
            capture_output=True, text=True, timeout=240, cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.count("=== trajectory") == 4
        assert "tool [call_0]: 42" in out  # the calculator ran
        assert "division by zero" in out  # a ToolError became a message
        assert "unknown tool 'weather'" in out
        assert "Paris is the capital of France." in out  # three searches, one step
        assert "dispatch" in out and "3-step rollout of 4 trajectories" in out
