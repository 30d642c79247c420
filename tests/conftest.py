"""Shared fixtures: where the released data is (../shared/data beside the clone, or TOOLPAPER_DATA_DIR)."""
import os
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# training and generation precision `auto` are chosen by measuring this machine (toolpaper.precision); the tests pin
# fp32 so their results do not depend on which kind of CPU runs them
os.environ.setdefault("TOOLPAPER_TRAIN_PRECISION", "fp32")
os.environ.setdefault("TOOLPAPER_PRECISION", "fp32")
# `make test` runs one pytest worker per core (pytest-xdist): each worker, and the processes its tests start, computes
# on one thread, so the workers do not fight over the cores
if os.environ.get("PYTEST_XDIST_WORKER"): os.environ.setdefault("OMP_NUM_THREADS", "1")


def _released() -> Path | None:
    for cand in [os.environ.get("TOOLPAPER_DATA_DIR"), ROOT.parent / "shared" / "data"]:
        if cand and (Path(cand) / "seal-tools" / "tool.jsonl").exists():
            return Path(cand)
    return None


@pytest.fixture(scope="session")
def released() -> Path:
    """Folder with the authors' released data; tests needing it are skipped (with the reason) when it is absent."""
    d = _released()
    if d is None:
        pytest.skip("released data not found: put ../shared/data beside the clone or set TOOLPAPER_DATA_DIR")
    return d


@pytest.fixture(scope="session")
def sample() -> Path:
    from toolpaper.data import data_dir
    return data_dir("sample")
