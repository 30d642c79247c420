"""A fifth benchmark is one module (issue 76): a package outside toolpaper declares its suite in the entry-point group
`toolpaper.suites`, and `toolpaper bench` / `toolpaper eval` run it with no edit inside `toolpaper/` — its data, its
prompt and its scorer all live in the package."""
import json, os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).parent / "toolpaper")

TOY = '''"""A toy benchmark: capitals of countries, its data beside this module."""
import json
from dataclasses import dataclass
from pathlib import Path
from toolpaper.metrics import count_boot, ratio_arrays
from toolpaper.suites import Suite, register

DATA = Path(__file__).parent / "capitals.jsonl"

@dataclass
class Capital:
    id: str
    country: str
    capital: str

def read(path):
    return [Capital(**json.loads(line)) for line in Path(path).read_text().splitlines() if line.strip()]

class Predictor:
    def __init__(self, cfg, client, items): self.cfg, self.client = cfg, client
    def __call__(self, chunk):
        prompts = [[{"role": "user", "content": f"What is the capital of {x.country}?"}] for x in chunk]
        outs = self.client.generate(prompts, max_tokens=self.cfg.max_tokens)
        return [{"id": x.id, "output": o} for x, o in zip(chunk, outs)]

def scores(outputs, golds, mode="compat"):
    items = [{"id": g.id, "counts": {"n": 1, "correct": int(g.capital.lower() in (o or "").lower())}}
             for o, g in zip(outputs, golds)]
    n = sum(it["counts"]["correct"] for it in items)
    return {"metrics": {"accuracy": n / max(1, len(items))}, "counts": {"correct": n, "n": len(items)}, "items": items}

def boot(items, rng, n_boot, mode="compat"):
    return count_boot(items, rng, n_boot, lambda c: {"accuracy": ratio_arrays(c["correct"], c["n"])})

register(Suite(
    name="toy", title="Capitals (a toy suite of another package)", splits=("test",), gold_type=Capital,
    load=lambda split, data_dir=None, seed=0: read(DATA), draw=lambda recs, limit, seed, options: recs[:limit],
    predictor=Predictor, score=scores, boot=boot, headline=("accuracy",), quotes=lambda split: {},
    read_gold=read, max_tokens=8,
))
'''


def make_package(where: Path) -> Path:
    "An installed-looking package `toy_suite` (module, data, dist-info with the entry point) under `where`."
    pkg = where / "toy_suite"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(TOY)
    pairs = [("France", "Paris"), ("Peru", "Lima"), ("Japan", "Tokyo")]
    (pkg / "capitals.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "country": a, "capital": b}) + "\n"
                                                for i, (a, b) in enumerate(pairs)))
    info = where / "toy_suite-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-suite\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[toolpaper.suites]\ntoy = toy_suite\n")
    return pkg


def test_a_suite_from_another_package_runs_bench_and_eval(tmp_path):
    pkg = make_package(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    run = lambda *a: subprocess.run([EXE, *a], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    out = tmp_path / "run"
    r = run("bench", "toy", "--model", "tiny-random-llama", "--limit", "3", "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "accuracy" in (out / "metrics.json").read_text()
    preds = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(p["id"] for p in preds) == ["c0", "c1", "c2"]
    # scored by path with the package's own reader: a prediction naming the capital counts
    (tmp_path / "pred.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "output": o}) + "\n"
                                                 for i, o in enumerate(["Paris.", "Cusco", "Tokyo"])))
    r = run("eval", "toy", "--pred", str(tmp_path / "pred.jsonl"), "--gold", str(pkg / "capitals.jsonl"),
            "--json", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((tmp_path / "m.json").read_text())["accuracy"] == 2 / 3
    # without the package the name is refused, listing the suites there are
    r = subprocess.run([EXE, "eval", "toy", "--pred", "x", "--gold", "y"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "invalid choice: 'toy'" in r.stderr


def test_no_edit_inside_toolpaper_names_the_toy_suite():
    "The toy suite reaches the commands through discovery alone: no file of the package mentions it."
    assert not [p for p in (ROOT / "toolpaper").rglob("*.py") if "toy_suite" in p.read_text(encoding="utf-8")]
