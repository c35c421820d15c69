"""README's quickstart block runs as written, in a fresh folder, and shows what it promises:
the first solve admits its entry, the second recalls it and reinforces it (a newcomer once ran
it, saw nothing printed, and had to write a stand-in agent first)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_prints_its_decisions(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Quickstart")[1].split("```python")[1].split("```")[0]
    out = io.StringIO()
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README quickstart", "exec"), {"__name__": "quickstart"})
    finally:
        os.chdir(here)
    actions = [line.split()[0] for line in out.getvalue().splitlines() if line.strip()]
    assert actions == ["admit", "reinforce"], out.getvalue()
    assert (tmp_path / "agent.sqlite").exists()
