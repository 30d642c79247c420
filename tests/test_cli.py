"""The console script: data check / export, and reproduce on the smoke profile."""
import json, subprocess, sys
from pathlib import Path
from toolpaper.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("toolpaper"))
# the experiments `test_reproduce_smoke` runs through `toolpaper reproduce`; test_notebooks runs every other one, so
# each experiment notebook runs once in the tests
REPRODUCED = ["dataset_stats", "metric_audit", "deer_sampling", "generation_yield"]


def test_data_check_on_released(released):
    r = subprocess.run(
        [EXE, "data", "check", "--data-dir", str(released), "--no-download"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all files verified" in r.stdout
    assert "seal-tools:dev: 700 records" in r.stdout and "tooldeer:tools: 977 records" in r.stdout
    from toolpaper.data import DATASETS
    assert r.stdout.count("OK ") == sum(len(spec.files) for spec in DATASETS.values()) == 23
    assert "alpha-umi:toolbench/test_out_domain: 400 records" in r.stdout
    assert "gsm8k:train: 7473 records" in r.stdout and "gsm8k:test: 1319 records" in r.stdout
    # listed, not required: it is fetched on a connected machine
    assert "math/MATH (archive" in r.stdout


def test_data_check_reports_missing(tmp_path):
    r = subprocess.run(
        [EXE, "data", "check", "--data-dir", str(tmp_path), "--no-download"], capture_output=True, text=True
    )
    assert r.returncode == 1 and "MISSING  seal-tools/tool.jsonl" in r.stdout


def test_data_export_sample(tmp_path, capsys):
    import datasets
    from toolpaper.data import load
    from toolpaper.schema import Instance
    assert main(["data", "export", "--to", str(tmp_path), "--data-dir", "sample"]) == 0
    assert "skipped" in capsys.readouterr().out          # the sample has no fine-tuning / DPR files
    back = datasets.load_from_disk(str(tmp_path / "seal-tools" / "dev"))
    assert Instance.from_row(back[0]) == load("seal-tools:dev", "sample")[0]


def test_data_export_released(tmp_path, released):
    import datasets
    assert main(["data", "export", "--to", str(tmp_path), "--data-dir", str(released)]) == 0
    assert len(datasets.load_from_disk(str(tmp_path / "tooldeer" / "valid"))) == 1065
    assert len(datasets.load_from_disk(str(tmp_path / "seal-tools" / "finetune" / "test_out_domain"))) == 654


def test_reproduce_smoke(tmp_path):
    """The reproduce mechanics (papermill runs, parameters, manifest, index) on the quick experiments; the other
    experiment notebooks run at smoke in test_notebooks."""
    out = tmp_path / "reports"
    quick = REPRODUCED
    r = subprocess.run(
        [
            EXE,
            "reproduce",
            "--profile",
            "smoke",
            "--out",
            str(out),
            "--no-progress",
            "-p",
            "data_dir=sample",
            *[x for q in quick for x in ("--only", q)],
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    man = json.loads((out / "manifest.json").read_text())
    assert man["profile"] == "smoke" and man["experiments"]["dataset_stats"]["status"] == "ok"
    assert man["packages"]["torch"].startswith("2.13")
    assert (out / "dataset_stats" / "dataset_stats.ipynb").exists()
    assert (out / "dataset_stats" / "seal_fig6_required_params.png").stat().st_size > 1000
    index = (out / "README.md").read_text()
    assert "seal_table1" in index and "deer_table2" in index
    assert "| instances " in (out / "dataset_stats" / "seal_table1.md").read_text()
    assert {k: v["status"] for k, v in man["experiments"].items()} == {k: "ok" for k in quick}
    assert all(man["experiments"][k].get("git_commit") for k in quick)
    for exp, item in [("generation_yield", "generation_yield_seal.csv"),
                      ("generation_yield", "generation_examples.csv"), ("deer_sampling", "deer_fig4_pools.png")]:
        assert (out / exp / item).stat().st_size > 100, (exp, item)


def test_reproduce_rejects_unknown_experiment(capsys):
    import pytest
    with pytest.raises(SystemExit):
        main(["reproduce", "--only", "nope"])


def test_reproduce_rejects_unknown_parameter(tmp_path):
    r = subprocess.run(
        [EXE, "reproduce", "--profile", "smoke", "--out", str(tmp_path), "-p", "modle=x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "no parameter(s) ['modle']" in r.stderr
