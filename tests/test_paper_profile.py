"""The paper profile where researchers run it (issue 75): `--profile paper --sizes smoke` keeps every paper setting —
the released splits, prompts, token limits, training schedule and LoRA targets — and takes only smoke's sizes. Every
experiment config resolves at those sizes; the experiments whose paper settings run quickly on the tiny model run end
to end here, the rest when TOOLPAPER_PAPER_SMOKE=all (their tiny-model generations run to the paper's token limits:
minutes each on two cores)."""
import importlib, inspect, json, os, pkgutil, subprocess, sys
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("toolpaper"))
DATA = ROOT.parent / "shared" / "data"
# run in `make test`: under a minute each at paper@smoke; the others (minutes each) with TOOLPAPER_PAPER_SMOKE=all
QUICK = ["dataset_stats", "metric_audit", "deer_sampling"]


def profiled_configs() -> list[type]:
    "Every experiment config class (`config.Profiled`) the package defines."
    import toolpaper
    from toolpaper.config import Profiled
    out = []
    for m in pkgutil.iter_modules(toolpaper.__path__):
        if m.name.startswith("_"): continue
        mod = importlib.import_module(f"toolpaper.{m.name}")
        out += [c for c in vars(mod).values() if inspect.isclass(c) and issubclass(c, Profiled) and c is not Profiled
                and c.__module__ == mod.__name__]
    return out


def _flat(cfg, prefix=""):
    out = {}
    for f in fields(cfg):
        v = getattr(cfg, f.name)
        out.update(_flat(v, f"{prefix}{f.name}.") if is_dataclass(v) else {f"{prefix}{f.name}": v})
    return out


def _paths(d: dict, prefix: str = "") -> set[str]:
    return {p for k, v in d.items() for p in (_paths(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k})}


def test_every_config_keeps_the_papers_settings_at_smoke_sizes():
    """At paper@smoke each field is smoke's where smoke states a size there (`sizes_only`), and the paper's everywhere
    else: its data, prompts, token limits, schedule, LoRA targets, strategies."""
    from toolpaper.config import sizes_only
    classes = profiled_configs()
    assert len(classes) >= 9, [c.__name__ for c in classes]
    for cls in classes:
        paper, small, smoke = (_flat(cls.for_profile(p)) for p in ("paper", "paper@smoke", "smoke"))
        sized = _paths(sizes_only(cls.PROFILES["smoke"]))
        for k, v in small.items():
            want = smoke[k] if k in sized else paper[k]
            assert v == want, f"{cls.__name__}.{k}: {v!r} at paper@smoke, want {want!r}"
        if "model" in sized: assert small["model"] in ("tiny-random-llama", "oracle"), (cls.__name__, small["model"])


@pytest.mark.skipif(not (DATA / "SHA256SUMS").exists(), reason="needs the released data at ../shared/data")
@pytest.mark.parametrize("exp", QUICK)
def test_paper_profile_runs_at_smoke_sizes(exp, tmp_path):
    """The experiment's notebook end to end under the paper profile at smoke sizes, on the released data: a setting
    only the paper profile reaches fails here."""
    run_paper_smoke([exp], tmp_path)


@pytest.mark.skipif(os.environ.get("TOOLPAPER_PAPER_SMOKE") != "all",
                    reason="minutes per experiment on two cores: set TOOLPAPER_PAPER_SMOKE=all")
def test_paper_profile_runs_every_experiment_at_smoke_sizes(tmp_path):
    from toolpaper.report import EXPERIMENTS
    run_paper_smoke([e for e in EXPERIMENTS if e not in QUICK], tmp_path)


def run_paper_smoke(names: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "TOOLPAPER_DATA_DIR": str(DATA), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = tmp_path / "reports"
    r = subprocess.run([EXE, "reproduce", "--profile", "paper", "--sizes", "smoke", "--out", str(out), "--no-progress",
                        *[x for n in names for x in ("--only", n)]], capture_output=True, text=True, cwd=ROOT, env=env)
    man = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").exists() else {}
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert man["profile"] == "paper@smoke"
    assert {k: v["status"] for k, v in man["experiments"].items()} == {n: "ok" for n in names}
