"""Every notebook in nbs/ (library and experiment notebooks) runs as one test, as `nbdev_test` would run it."""
import tempfile
from pathlib import Path
import pytest
from nbdev.test import test_nb as run_notebook
from test_cli import REPRODUCED as REPRODUCED_NAMES
from toolpaper.report import EXPERIMENTS

NBS = Path(__file__).resolve().parents[1] / "nbs"
# experiment notebooks that test_cli.py::test_reproduce_smoke already runs (through `toolpaper reproduce`) run there
# only: each experiment notebook runs once in the tests
REPRODUCED = {EXPERIMENTS[name].notebook for name in REPRODUCED_NAMES}
NOTEBOOKS = sorted(
    p for p in NBS.rglob("*.ipynb")
    if not any(part.startswith((".", "_")) for part in p.relative_to(NBS).parts)
    and not (p.parent.name == "experiments" and p.name in REPRODUCED)
)


def test_found_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert "00_schema.ipynb" in names and "04_seal_tools.ipynb" in names
    # every experiment notebook is run once: here or by test_reproduce_smoke
    run_here = {p.name for p in NOTEBOOKS if p.parent.name == "experiments"}
    assert sorted(run_here | REPRODUCED) == sorted(e.notebook for e in EXPERIMENTS.values())
    assert not run_here & REPRODUCED


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[str(p.relative_to(NBS)) for p in NOTEBOOKS])
def test_notebook(nb, tmp_path, monkeypatch):
    # the notebooks' temporary folders (smoke report folders, adapters, caches) go under pytest's tmp_path, which pytest
    # prunes, not into /tmp for good
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ok, secs = run_notebook(nb, skip_flags=["notest", "slow"], showerr=True)
    assert ok, f"{nb.name} failed (traceback above)"
