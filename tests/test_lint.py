"""ruff with the project's configuration (ruff.toml) over the notebooks, tests and benchmarks."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> str:
    exe = Path(sys.executable).with_name("ruff")
    found = str(exe) if exe.exists() else shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: it is pinned in requirements.txt (make install)")
    return found


def _check(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", *paths],
                          cwd=ROOT, capture_output=True, text=True)


def test_project_passes_ruff():
    r = _check()
    assert r.returncode == 0, (
        f"ruff found problems (fix them in the notebooks, then nbdev_export):\n{r.stdout}{r.stderr}"
    )


def test_config_catches_each_rule_family(tmp_path):
    """The configuration catches what it promises: an unused import, a shadowed builtin, mutable and call defaults, a
    long line."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n"
                   "def config(): return {}\n"
                   "def f(list=None, xs=[], cfg=config()):\n"
                   f"    return {'x' * 130!r}\n")
    r = _check("--config", str(ROOT / "ruff.toml"), str(bad))
    assert r.returncode == 1
    for code in ["F401", "A002", "B006", "B008", "E501"]:
        assert f" {code} " in r.stdout, (code, r.stdout)
