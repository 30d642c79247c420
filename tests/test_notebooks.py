"""Every notebook in nbs/ (library and experiment notebooks) runs as one test, as `nbdev_test` would run it."""
import tempfile
from pathlib import Path
import pytest
from nbdev.test import test_nb as run_notebook

NBS = Path(__file__).resolve().parents[1] / "nbs"
NOTEBOOKS = sorted(
    p for p in NBS.rglob("*.ipynb") if not any(part.startswith((".", "_")) for part in p.relative_to(NBS).parts)
)


def test_found_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert "00_schema.ipynb" in names and "00_dataset_stats.ipynb" in names


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[str(p.relative_to(NBS)) for p in NOTEBOOKS])
def test_notebook(nb, tmp_path, monkeypatch):
    # the notebooks' temporary folders (smoke report folders, adapters, caches) go under pytest's tmp_path, which pytest
    # prunes, not into /tmp for good
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ok, secs = run_notebook(nb, skip_flags=["notest", "slow"], showerr=True)
    assert ok, f"{nb.name} failed (traceback above)"
