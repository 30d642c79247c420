"""The benchmark scripts' own logic (their timings are never asserted: they print figures)."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def _prompts():
    from toolpaper import generate as G
    t = {"api_name": "getWeather", "api_description": "Weather of a city", "required": ["city"],
         "parameters": {"city": {"type": "str", "description": "City (e.g., Lima)"}},
         "responses": {"temp": {"type": "float", "description": "Temperature"}}}
    plan = [{"api": "getWeather", "parameters": {}, "responses": ["API_call_0"]}]
    calls = [{"api": "getWeather", "parameters": {"city": "Lima"}, "responses": ["API_call_0"]}]
    dt = {"api_name": "weather", "description_for_human": "Weather", "description_for_model": "Weather now",
          "api_function": "weather(city: str)"}
    return [G.prompt_fields(3), G.prompt_subfields("Travel", 3), G.prompt_tools("Travel", "Hotels", 3),
            G.prompt_backfill([t]), G.prompt_single(t, {}), G.prompt_query(t, {"city": "Lima"}),
            G.prompt_combo([t, t], 3), G.prompt_multi([t], plan, {}), G.prompt_multi([t], plan, {}, query=False),
            G.prompt_multi_query([t], calls), G.prompt_deer_examples(dt, 2),
            G.prompt_deer_filter(dt, [{"query": "q", "call": "c"}]), G.prompt_deer_check("f(x)", "q", "f(1)")]


def test_grammar_speed_names_every_generation_stage():
    "The benchmark groups recorded requests by their prompt's opening: it must agree with the prompts' own stages."
    from grammar_speed import stage_of
    from toolpaper.generate import prompt_origin
    for msgs in _prompts():
        assert stage_of(msgs, "{}") == prompt_origin(msgs[-1]["content"])[0], msgs[-1]["content"][:60]
    assert stage_of([{"role": "user", "content": "Tell me a joke"}], "{}") == "other"


def test_grammar_speed_names_a_bad_record_line(tmp_path):
    "The benchmark reads the request cache with the project's reader: a bad line is skipped and named."
    from toolpaper.client import RecordReplay
    p = tmp_path / "cache.jsonl"
    good = json.dumps({"key": "k", "messages": [{"role": "user", "content": "x"}], "text": "[]", "params": {}})
    p.write_text(good + "\n{oops\n" + good + "\n")
    with pytest.warns(UserWarning, match=r"cache.jsonl:2: skipped: not valid JSON"):
        assert list(RecordReplay(None, p, "replay").entries) == ["k"]


def test_benchmark_pages_name_their_commit(tmp_path):
    "A page ends with the commit it was measured at; a re-rendered page keeps its JSON's; the index lists both."
    from _index import commit_line, write_page
    write_page(tmp_path, "new", {"x": 1}, "# New page\n\nbody")
    saved = json.loads((tmp_path / "new.json").read_text())
    assert len(saved["code"]["git_commit"]) == 40 and isinstance(saved["code"]["git_dirty"], bool)
    assert (tmp_path / "new.md").read_text().endswith(commit_line(saved["code"]) + "\n")
    write_page(tmp_path, "old", {"code": {"git_commit": "ab" * 20, "git_dirty": True}}, "# Old page")
    assert "Measured at commit `abababababab` with uncommitted changes." in (tmp_path / "old.md").read_text()
    (tmp_path / "legacy.md").write_text("# Legacy page\n\nno commit\n")
    write_page(tmp_path, "new", saved, "# New page\n\nbody")                   # refreshes the index
    index = (tmp_path / "README.md").read_text()
    assert f"[New page](new.md) — commit `{saved['code']['git_commit'][:12]}`" in index
    assert "[Old page](old.md) — commit `abababababab` with uncommitted changes" in index
    assert "[Legacy page](legacy.md) — commit not recorded" in index
    assert commit_line(None) == "Commit not recorded."


def test_llama_cpp_prefills_every_request_in_full():
    "Each request starts from an empty llama.cpp cache: a prefill-only call must not shorten the timed run after it."
    from types import SimpleNamespace
    from generation_speed import LlamaCpp

    class FakeLlama:
        def __init__(self): self.cached, self.prefilled = [], []
        def token_eos(self): return 0
        def reset(self): self.cached = []
        def generate(self, ids, temp=0.0, top_k=1, reset=True):
            keep = 0                                  # llama-cpp-python reuses the longest cached prefix
            while keep < min(len(ids), len(self.cached)) and ids[keep] == self.cached[keep]: keep += 1
            self.prefilled.append(len(ids) - keep); self.cached = list(ids)
            yield from [5, 6, 7, 0]

    eng = object.__new__(LlamaCpp)
    eng.llm, eng.eos = FakeLlama(), {0}
    eng.tok = SimpleNamespace(decode=lambda toks, skip_special_tokens=True: " ".join(map(str, toks)))
    eng.stats = SimpleNamespace(generated_tokens=0)
    req = SimpleNamespace(ids=[1, 2, 3, 4], max_new_tokens=8)
    eng.generate([SimpleNamespace(ids=req.ids, max_new_tokens=1)]); [out] = eng.generate([req])
    assert eng.llm.prefilled == [4, 4] and out.tokens == [5, 6, 7]


def test_precision_verdict_page_names_paths_from_the_repository_and_what_was_not_run():
    """The page names models inside the repository by relative path (never this machine's absolute one) and says why a
    precision was left out."""
    import precision_verdict as pv
    assert pv._shown(str(pv.ROOT / "reports/seal_tools/work/adapter")) == "reports/seal_tools/work/adapter"
    assert pv._shown("/elsewhere/adapter") == "/elsewhere/adapter" and pv._shown("smollm2") == "smollm2"
    row = lambda p: {"precision": p, "seconds by task": {"seal": 1.0, "deer": 0.5},
                     "metrics": {"seal format_acc": (0.0, -1.0, 1.0)}}
    res = {"verdict": {"pick": "fp32", "why": "fp32, the fastest eligible precision.", "eligible": ["fp32"],
                       "tolerance": 2.0},
           "rows": [row("fp32"), row("int8")], "skipped": {"bf16": "not run: emulated here"}, "n": 3,
           "models": {"seal": "reports/seal_tools/work/adapter", "deer": "m + a"}, "load": 0.5,
           "machine": {"cpu": "x", "threads": 2, "torch": "2"}}
    md = pv.page(res)
    assert "bf16: not run: emulated here." in md and "| int8 | 1.00 | 0.50 |" in md and "| no |" in md


def test_precision_verdict_runs_end_to_end(tmp_path):
    """The verdict benchmark on the tiny model and the sample: every precision answers the same items, each metric's
    difference to fp32 has its interval (or none), and the page names the pick."""
    from precision_verdict import main
    res = main(["--tiny", "--precisions", "fp32,int8,w8", "--work", str(tmp_path / "runs"), "--out", str(tmp_path)])
    assert [r["precision"] for r in res["rows"]] == ["fp32", "int8", "w8"]
    assert res["resolved"]["int8"] == {"seal": "int8", "deer": "int8"} and res["resolved"]["w8"]["deer"] == "w8"
    fp32 = res["rows"][0]["metrics"]
    assert set(fp32) == {"seal format_acc", "seal tool.f1", "seal param.f1", "deer p_nocall", "deer p_call",
                         "deer p_dc"}
    assert all(v == (0.0, 0.0, 0.0) for v in fp32.values() if v[0] is not None)      # fp32 against itself
    assert res["verdict"]["pick"] in res["verdict"]["eligible"]
    md = (tmp_path / "precision_verdict_tiny.md").read_text()
    assert f"**Verdict: {res['verdict']['pick']}.**" in md and "Measured at commit" in md


def test_measured_at_counts_code_not_pages(tmp_path, monkeypatch):
    "A page written while a background run changes other pages under reports/ is not 'with uncommitted changes'."
    import subprocess
    import _index
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)
    (tmp_path / "reports" / "deer").mkdir(parents=True)
    (tmp_path / "code.py").write_text("x = 1\n"); (tmp_path / "reports" / "deer" / "out.jsonl").write_text("{}\n")
    git("init", "-q"); git("add", "."); git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x")
    monkeypatch.setattr(_index, "ROOT", tmp_path)
    (tmp_path / "reports" / "deer" / "out.jsonl").write_text("{}\n{}\n")          # a regeneration's growing output
    assert _index.measured_at(tmp_path / "reports" / "benchmarks")["git_dirty"] is False
    assert _index.measured_at(tmp_path / "pages")["git_dirty"] is False        # pages written outside reports/ too
    (tmp_path / "code.py").write_text("x = 2\n")
    assert _index.measured_at(tmp_path / "reports" / "benchmarks")["git_dirty"] is True


def test_train_profile_groups_a_step():
    "The training profile of the tiny model: every group per step, and the page's section reads fp32 against bf16."
    from train_throughput import examples, profile_section, train_profile
    r = train_profile("tiny-random-llama", examples(4), batch=2, max_length=256, lora=True, bf16=False, active=2)
    groups = ["products", "attention", "casts and copies", "optimizer", "other operators", "outside operators"]
    assert all(f"{g} ms / step" in r for g in groups) and r["precision"] == "fp32" and r["ms / step"] > 0
    assert r["products ms / step"] > 0 and r["operator calls / step"] > 0
    b = dict(r, precision="bf16",
             **{"ms / step": r["ms / step"] / 2, "products ms / step": r["products ms / step"] / 4})
    md = profile_section({"profile": [r, b], "product_gflops": {"fp32": 200.0, "bf16": 400.0}})
    assert "| fp32 |" in md and "| bf16 |" in md and "2.00x faster in bf16" in md
    assert f"would be {r['ms / step'] / b['products ms / step']:.2f}x" in md
    big = max(["attention", "casts and copies", "optimizer", "other operators", "outside operators"],
              key=lambda g: b[g + " ms / step"])
    assert f"most of it {big} (" in md
    assert profile_section({"product_gflops": {}}) == ""


def test_precision_verdict_on_one_task_is_never_kept(tmp_path):
    "A verdict on DEER alone names what was not run; asking to keep it for `auto` stops before any answer."
    from precision_verdict import main
    res = main(["--tiny", "--tasks", "deer", "--precisions", "fp32,int8", "--work", str(tmp_path / "r"),
                "--out", str(tmp_path)])
    assert list(res["models"]) == ["deer"] and set(res["rows"][0]["metrics"]) == {"deer p_nocall", "deer p_call",
                                                                                  "deer p_dc"}
    assert not (tmp_path / "precision_verdict_tiny.md").exists()          # the full verdict's page stays apart
    md = (tmp_path / "precision_verdict_tiny_deer.md").read_text()
    assert md.startswith("# Precision verdict on fine-tuned models (DEER only)\n")
    assert "Only DEER answered: Seal-Tools was not run, so a reduced" in md and "**Verdict on these tasks:" in md
    assert "DEER `test` items per precision" in md and "Seal-Tools `test_in_domain`" not in md
    with pytest.raises(SystemExit) as e: main(["--tiny", "--tasks", "seal,toolbench"])
    assert "expected some of seal, deer" in str(e.value)
    from precision_verdict import keepable
    assert keepable(["seal", "deer"], {"pick": "int8"}) is None and keepable(["deer"], {"pick": "fp32"}) is None
    assert "may still rule out" in keepable(["deer"], {"pick": "w8"})


def test_training_verdict_runs_end_to_end(tmp_path):
    """The training verdict on the tiny model and the sample: the DEER recipe trained in fp32 at two seeds and bf16 at
    one (a rerun reuses all three), each adapter answering the same items; bf16's interval comes from the two-level
    bootstrap, the fp32 seeds' spread is on the page, with losses and the pick."""
    from precision_verdict import main
    args = ["--train", "--tiny", "--fp32-seeds", "2", "--work", str(tmp_path / "runs"), "--out", str(tmp_path)]
    res = main(args)
    assert [r["precision"] for r in res["rows"]] == ["fp32", "bf16"]
    assert [r["seeds"] for r in res["rows"]] == [2, 1] and [len(res["runs"][p]) for p in ("fp32", "bf16")] == [2, 1]
    assert [r["seed"] for r in res["runs"]["fp32"]] == [0, 1]
    assert all(v == (0.0, 0.0, 0.0) for v in res["rows"][0]["metrics"].values())
    assert set(res["rows"][1]["metrics"]) == set(res["seed_spread"]) == {"deer p_nocall", "deer p_call", "deer p_dc"}
    for m, d in res["seed_spread"].items():        # two fp32 seeds: their scores, sd and gap agree with each other
        a, b = d["per seed"]
        if a is not None and b is not None: assert d["spread"] == round(abs(a - b), 2)
    assert res["loss_steps"]["steps"] > 0 and res["verdict"]["pick"] in ("fp32", "bf16")
    assert all(r["source"].startswith("trained by this benchmark") for p in res["runs"] for r in res["runs"][p])
    assert not list((tmp_path / "runs").glob("train-*/stage_pending.json"))      # finished: nothing left to resume
    md = (tmp_path / "precision_verdict_train_tiny.md").read_text()
    assert f"**Verdict: train in {res['verdict']['pick']}.**" in md and "| bf16 | 0 |" in md and "| fp32 | 1 |" in md
    assert "## How far the fp32 seeds land apart" in md
    again = main(args)                                               # every training reused: the same scores
    assert again["runs"]["fp32"][1]["scores"] == res["runs"]["fp32"][1]["scores"]
    one = main(args[:2] + ["--fp32-seeds", "1"] + args[4:])          # one fp32 seed: the page says what it cannot see
    assert one["rows"][0]["seeds"] == 1 and "cannot hold the seed-to-seed spread" in \
        (tmp_path / "precision_verdict_train_tiny.md").read_text()


def test_training_verdict_says_what_the_seed_spread_lets_it_see():
    """The training page reads the bf16 intervals against zero and the fp32 seeds' own gap against the margin: a
    margin tighter than the seed spread cannot be met, and the page says fp32 stays for that reason, not because bf16
    was shown worse; with one fp32 seed it says nothing of the kind."""
    from precision_verdict import margin_reading
    rows = [{"precision": "fp32", "seeds": 3, "metrics": {"a": (0.0, 0.0, 0.0), "b": (0.0, 0.0, 0.0)}},
            {"precision": "bf16", "seeds": 3, "metrics": {"a": (-3.0, -12.0, 6.0), "b": (-9.0, -15.0, -3.0)}}]
    spread = {"a": {"spread": 8.5, "sd": 4.0}, "b": {"spread": 1.0, "sd": 0.7}}
    text = margin_reading(rows, spread, 2.0)
    assert "bf16's interval holds zero on a (not shown different" in text
    assert "excludes zero on b [-15.0, -3.0] (shown different)" in text
    few = [dict(r, seeds=2) if r["precision"] == "fp32" else dict(r, seeds=1) for r in rows]   # the seed rule applies
    wide = margin_reading(few, {"a": {"spread": 8.5, "sd": 4.0}, "b": {"spread": 9.0, "sd": 6.0}}, 2.0)
    assert "b (-9.0, seed noise ±14.4)" in wide and "(shown different)" not in wide   # 1.96 · 6 · √1.5 = 14.4
    assert "(shown different)" in margin_reading(few, spread, 2.0)                    # 9.0 > 1.96 · 0.7 · √1.5
    assert "further apart than ±2 points on a (largest gap 8.5)" in text and "on b" not in text.split("apart than")[1]
    assert "not because it was shown worse" in text
    assert "The fp32 seeds alone" not in margin_reading(rows, {"a": {"spread": 1.0, "sd": 0.7},
                                                               "b": {"spread": 0.5, "sd": 0.3}}, 2.0)
    assert margin_reading(rows, {"a": {"spread": None, "sd": None}, "b": {"spread": None, "sd": None}}, 2.0) == ""


def test_keep_an_earlier_verdict(tmp_path, monkeypatch):
    """--keep takes a page's verdict for `auto` only when it was measured on this machine kind, on the real models and
    is keepable; nothing is answered."""
    import json
    import pytest
    from precision_verdict import main
    from toolpaper.precision import machine_key, read_verdict
    monkeypatch.setenv("TOOLPAPER_CACHE", str(tmp_path / "cache"))
    rows = [{"precision": "fp32", "seconds": 1.0, "metrics": {"deer p_call": (0.0, 0.0, 0.0)}}]
    page = {"verdict": {"pick": "fp32", "eligible": ["fp32"], "tolerance": 2.0, "why": "w"}, "rows": rows, "n": 100,
            "models": {"deer": "m + a"}, "machine": machine_key(), "tiny": False}
    p = tmp_path / "precision_verdict_deer.json"
    for bad, says in (({"tiny": True}, "a --tiny run"), ({"machine": {"cpu": "elsewhere"}}, "not on this machine"),
                      ({"verdict": {**page["verdict"], "pick": "int8"}}, "not kept: read on deer only")):
        p.write_text(json.dumps({**page, **bad}))
        with pytest.raises(SystemExit, match=says): main(["--keep", str(p)])
    assert read_verdict() is None
    p.write_text(json.dumps(page)); main(["--keep", str(p)])
    assert read_verdict()["pick"] == "fp32" and read_verdict("training") is None
    p.write_text(json.dumps({**page, "kind": "training", "verdict": {**page["verdict"], "pick": "fp32"}}))
    main(["--keep", str(p)])
    assert read_verdict("training")["pick"] == "fp32"


def test_seal_target_is_judged_in_the_kept_verdicts_precision():
    "The Seal-Tools target reads the precision this machine's kept verdict picks, with that precision's prefill floor."
    from generation_speed import targets
    row = lambda p, s: {"path": f"toolpaper engine ({p})", "s / prompt": s, "prompts": 16, "prompt tokens": 16 * 1000,
                        "prefill s": 16 * s / 2, "identical outputs": "1/16"}
    res = {"workloads": {"seal": [row("fp32", 3.4), row("int8", 0.9), row("bf16", 2.3)]}, "units": "avx512_bf16",
           "floors": {"fp32 GFLOP/s": 200.0}, "matmul_params": 100_000_000,
           "verdict": {"pick": "fp32", "page": "precision_verdict_deer.md", "training": "fp32"}, "auto_train": "fp32"}
    seal, training = targets(res)
    assert "(fp32: this machine's kept verdict, precision_verdict_deer.md): NOT met (toolpaper engine (fp32) 3.4 s" \
        in seal and "fastest 0.9 s" in seal and "alone take at least 1.00 s" in seal
    assert training.endswith("`auto` trains in fp32 (the kept training verdict, fp32).")
    res["verdict"] = {}
    assert "(no verdict kept on this machine: judged on the fastest path): met (toolpaper engine (int8) 0.9 s" \
        in targets(res)[0]


def test_long_prompt_reading_names_the_part_under_its_limit():
    "The long-prompt workload's reading sets prefill against the fp32 product and decode against the weight-read bound."
    from generation_speed import umi_ood_reading
    eng = {"path": "toolpaper engine (fp32)", "prefill s": 20.0, "decode s": 30.0, "prefill GFLOP/s": 80.0,
           "decode tokens / s": 40.0}
    fl = {"fp32 GFLOP/s": 100.0, "copy GB/s": 4.0}
    text = umi_ood_reading([{"path": "reference"}, eng], fl, 100_000_000)      # bound: 8 * 4e9 / 4e8 = 80 tokens/s
    assert "40% of its generation time in prefill" in text and "80% of the fp32 product" in text
    assert "50% of 80 tokens/s" in text and text.endswith("these hours are the machine's more than the engine's.")
    slow = umi_ood_reading([dict(eng, **{"decode tokens / s": 20.0})], fl, 100_000_000)
    assert slow.endswith("A part under half its limit is where engine work would pay.")
    assert umi_ood_reading([{"path": "reference"}], fl, 1) == "The engine's prefill / decode split was not measured."


def test_train_throughput_page_says_what_decides_auto(tmp_path, monkeypatch):
    "The training page names what `auto` trains in and what decided it: a kept training verdict, or the products."
    from toolpaper.precision import machine_profile, save_verdict
    from train_throughput import auto_training, page
    monkeypatch.setenv("TOOLPAPER_CACHE", str(tmp_path))
    prof = {"machine": {"flags": ["avx2"]}, "gflops": {"fp32": 100.0, "bf16": 20.0, "int8": 150.0}}
    assert auto_training(prof) == ("fp32", "no training verdict kept: bf16 only with bf16 units and a bf16 product "
                                           ">= 1.5x fp32")
    save_verdict({"pick": "fp32"}, {"page": "precision_verdict_train.md"}, kind="training")
    pick, why = auto_training(machine_profile())
    assert pick == "fp32" and why.startswith("this machine's kept training verdict, precision_verdict_train.md")
    run = {"tokens_per_s": 10.0, "mfu": 0.1, "losses": [1.0, 0.9]}
    res = {"model": "m", "lora": True, "threads": 2, "fp32_matmul_peak_gflops": 100.0, "product_gflops": prof["gflops"],
           "machine": prof["machine"], "naive pad-to-max": run, "toolpaper engine": run, "toolpaper engine, bf16": run,
           "speedup": 1.0, "bf16_speedup": 1.0, "bf16_loss_max_rel_diff": 0.0, "generation": {"tokens_per_s": 5.0},
           "auto_trains_in": pick, "auto_why": why}
    md = page(res)
    assert "picks here: **fp32** (this machine's kept training verdict" in md and "Load" not in md


def test_paper_cost_counts_instead_of_training(tmp_path):
    "The counting stage cache records a training stage's examples and tokens and answers with empty texts; the hours."
    from paper_cost import LLAMA2_7B_MATMUL, counting_cache, gpu_hours
    from toolpaper.config import SFTConfig
    from toolpaper.prompts import PromptExample
    sc = counting_cache(tmp_path, sample=5)
    ex = [PromptExample(f"e{i}", [{"role": "user", "content": "Say hi " * i}], [("answer", "hi")]) for i in range(8)]
    log = sc.train("unused", ex, SFTConfig(str(tmp_path / "adapter"), epochs=3, max_length=64))
    (run,) = sc.runs
    assert (run["stage"], run["examples"], run["epochs"]) == ("adapter", 8, 3.0) and log["tokens"] == run["tokens"] > 8
    assert not (tmp_path / "adapter").exists()                      # nothing trained, nothing written
    assert sc.client("m").generate(["a", "b"], max_tokens=7) == ["", ""]
    assert (sc.tally["requests"], sc.tally["max_new_tokens"]) == (2, 14)
    # 6 x 6.61B FLOPs per token at 307 TFLOP/s: about 36 GPU-hours per billion tokens
    assert LLAMA2_7B_MATMUL == 6_607_077_376 and round(gpu_hours(1e9, 307.0), 1) == 35.9


def test_train_elsewhere_captures_the_experiments_own_stages(tmp_path, monkeypatch):
    """capture builds the keys the experiment looks up in fp32 (the main adapter's equals main_training's under
    `--precision fp32`), even where `auto` would train in bf16, and skips held ones."""
    from train_elsewhere import capture
    from toolpaper import data as D, deer as DE
    from toolpaper.report import profile_data_root
    from toolpaper.stages import train_key
    monkeypatch.setenv("TOOLPAPER_TRAIN_PRECISION", "bf16")           # this machine's pick: not the jobs' precision
    jobs = capture("smoke", 1, tmp_path)
    monkeypatch.setenv("TOOLPAPER_TRAIN_PRECISION", "fp32")
    cfg = DE.DeerExpConfig.for_profile("smoke", train_seeds=2)
    assert list(jobs) == ["mixture 2:1:2 (seed 1)", "random (seed 1)", "mixture 2:1:2 w/o NoSearch (seed 1)"]
    root = profile_data_root("smoke", None)
    ex, run, spans = DE.main_training(*(D.load(f"tooldeer:{s}", root) for s in ("tools", "valid", "test")), cfg,
                                      tmp_path, train_seed=1)
    main = jobs["mixture 2:1:2 (seed 1)"]
    assert main["key"] == train_key(cfg.model, None, ex, run, spans)
    assert all(j["cfg"].bf16 is False for j in jobs.values())           # stated, so `train` needs no environment
    assert main["folder"] == Path(run.output_dir).name
    (tmp_path / "stages" / "train").mkdir(parents=True)
    (tmp_path / "stages" / "train" / f"{main['folder']}-{main['key']}.json").write_text("{}")
    assert "mixture 2:1:2 (seed 1)" not in capture("smoke", 1, tmp_path)          # its log is held: not a job
    # --rebuild: the held stages whose weights are not here, and only those
    assert list(capture("smoke", 1, tmp_path, rebuild=True)) == ["mixture 2:1:2 (seed 1)"]


def test_train_elsewhere_adopts_a_trained_folder_once(tmp_path):
    "adopt writes the folder's stage.json and a log naming the device; a held stage or another key is refused."
    from train_elsewhere import adopt
    src, work = tmp_path / "src", tmp_path / "work"
    job = {"folder": "adapter_x_(seed_2)", "key": "k1"}
    f = src / job["folder"]; f.mkdir(parents=True)
    (f / "adapter_model.safetensors").write_bytes(b"0" * 10)
    (f / "toolpaper_train.json").write_text(json.dumps({"config": {"output_dir": "."}, "precision": "fp32"}))
    (f / "device_meta.json").write_text(json.dumps({"key": "k1", "device": "GPU Z, fp32", "precision": "fp32"}))
    (work / "stages" / "train").mkdir(parents=True)
    with pytest.raises(ValueError, match="names no device_type"): adopt({"x (seed 2)": job}, src, work, "abc")
    assert not (work / job["folder"]).exists()                                   # refused before anything is placed
    (f / "device_meta.json").write_text(json.dumps({"key": "k1", "device": "GPU Z, fp32", "precision": "fp32",
                                                    "device_type": "cuda"}))
    [(log, rebuilt)] = adopt({"x (seed 2)": job}, src, work, "abc")
    info = json.loads(log.read_text())
    got = (info["device"], info["device_type"], info["stage_key"], info["storage_bytes"], info["commit"], rebuilt)
    assert got == ("GPU Z, fp32", "cuda", "k1", 10, "abc", None)
    assert info["config"]["output_dir"] == "../../adapter_x_(seed_2)"
    assert json.loads((work / job["folder"] / "stage.json").read_text()) == {"key": "k1"}
    assert not (work / job["folder"] / "device_meta.json").exists()
    with pytest.raises(FileExistsError, match="holds this stage"): adopt({"x (seed 2)": job}, src, work, "abc")
    # --rebuild: the weights of the held stage are placed again, its log (the answers' record) stays as it was
    kept = log.read_text()
    (work / job["folder"] / "adapter_model.safetensors").unlink(); (work / job["folder"] / "stage.json").unlink()
    hist = {"history": [{"step": 1, "loss": 0.5}]}
    log.write_text(json.dumps({**json.loads(kept), **hist})); kept = log.read_text()
    (src / job["folder"] / "toolpaper_train.json").write_text(json.dumps({**hist, "config": {}, "device_type": "cuda"}))
    [(again, rebuilt)] = adopt({"x (seed 2)": job}, src, work, "abc", rebuild=True)
    assert again == log and log.read_text() == kept and "loss" in rebuilt, rebuilt   # compared, not written
    assert json.loads((work / job["folder"] / "stage.json").read_text()) == {"key": "k1"}
    assert (work / job["folder"] / "adapter_model.safetensors").stat().st_size == 10
    (tmp_path / "bare" / "stages" / "train").mkdir(parents=True)                # a clone without this stage's log
    with pytest.raises(FileNotFoundError, match="no log"):
        adopt({"x": job}, src, tmp_path / "bare", "abc", rebuild=True)
    with pytest.raises(ValueError, match="trained stage k1"):
        adopt({"x (seed 2)": dict(job, key="k2")}, src, work, "abc")
