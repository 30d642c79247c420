"""Benchmark: what a full `paper` profile run trains, and what that costs on a GPU at the trainer throughput measured by
`benchmarks/gpu_throughput.py`: the experiments that fine-tune LLMs (seal_tools, deer, deer_ablation, alpha_umi; the
DEER pilot's paper point is the deer adapter itself, the math agent's corpus needs a sandbox run per GSM8K problem).

Each experiment function runs at the paper profile's settings and sizes (its full released splits, seeds, epochs,
schedules and variants) with a stage cache that counts instead of working: every training stage records its examples
and their tokens (`toolpaper.train.tokenize_example`, capped at the stage's `max_length`), and every request is
answered with an empty text (counted with its token limit). The tokens are SmolLM2's tokenizer's (the paper models'
tokenizers do not download here; LLaMA-2's splits the same text into a similar number of pieces), on up to `--sample`
examples per stage (the mean scales to the stage's count). GPU-hours of training: tokens x epochs x 6 x the model's
matrix-product parameters / the model TFLOP/s the toolpaper trainer reached (full fine-tuning, bf16, 1.17B Llama on
an H100). A LoRA stage skips the weight gradients (about a third of the FLOPs): its hours are an upper bound.
Generation is counted, not priced: no page measures a GPU decode rate yet.
Run: .venv/bin/python benchmarks/paper_cost.py [--out reports/benchmarks] [--only deer]
"""
import argparse, json, os, platform, random, sys, tempfile, time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _index import commit_line, measured_at, write_index  # noqa: E402

TOKENIZER = "smollm2-135m-instruct"
# LLaMA-2 7B: 32 layers of 4 x 4096^2 (attention) + 3 x 4096 x 11008 (MLP), and the 32000 x 4096 output head
LLAMA2_7B_MATMUL = 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008) + 32000 * 4096
EXPERIMENTS = ("seal_tools", "deer", "deer_ablation", "alpha_umi")


def counting_cache(work: Path, sample: int):
    "A `StageCache` under `work` whose stages count instead of training and generating."
    from toolpaper.client import Client, Completion
    from toolpaper.models import load_tokenizer
    from toolpaper.stages import StageCache
    from toolpaper.train import tokenize_example
    tok = load_tokenizer(TOKENIZER)

    class Empty(Client):
        "Answers every request with an empty text, counting requests and their token limits."
        def __init__(self, name, tally):
            super().__init__(); self.model, self.tally = name, tally

        def _complete(self, items, progress=False):
            self.tally["requests"] += len(items)
            self.tally["max_new_tokens"] += sum(p.max_tokens for _, _, p in items)
            return [Completion("", self.model, finish_reason="stop") for _ in items]

        def clear_cache(self): pass

    class Counting(StageCache):
        def __init__(self):
            super().__init__(work)
            self.runs, self.tally = [], Counter()

        def train(self, model, examples, cfg, adapter=None, span_labels=None):
            pick = random.Random(0).sample(list(examples), min(sample, len(examples)))
            spans = list(span_labels or ["answer"])
            lens = [len(tokenize_example(tok, e, spans, cfg.max_length)["input_ids"]) for e in pick]
            mean = sum(lens) / max(1, len(lens))
            n_tok = round(mean * len(examples))
            self.runs.append({"stage": Path(cfg.output_dir).name, "examples": len(examples), "tokens": n_tok,
                              "epochs": float(cfg.epochs), "lora": bool(cfg.lora), "max_length": cfg.max_length})
            return {"train_seconds": 0.0, "tokens": n_tok, "config": asdict(cfg), "history": [], "storage_bytes": 0,
                    "stage_key": "counted"}

        def client(self, model, adapter=None, batch_size=16):
            return Empty(Path(str(adapter)).name if adapter else str(model), self.tally)

    return Counting()


def run_experiment(name: str, sc, work: Path, data_dir: str):
    "Run experiment `name` at the paper profile (its model swapped for the tokenizer's: nothing loads it) through `sc`."
    from toolpaper import data as D
    root = data_dir
    small = {"model": TOKENIZER}
    if name == "seal_tools":
        from toolpaper import sealtools as ST
        cfg = ST.SealExpConfig.for_profile("paper", **small, dpr=dict(epochs=0))   # DPR's own training: minutes, apart
        tools, train = D.load("seal-tools:tools", root), D.load("seal-tools:dev", root)
        tests = {s: D.load(f"seal-tools:{s}", root) for s in ("test_in_domain", "test_out_domain")}
        released = {s: D.load(f"seal-tools:finetune/{s}", root) for s in ["dev", *tests]}
        ST.run_seal_experiment(tools, train, tests, cfg, work, released=released, stage_cache=sc)
    elif name == "deer":
        from toolpaper import deer as DE
        cfg = DE.DeerExpConfig.for_profile("paper", **small)
        tools, valid, test = (D.load(f"tooldeer:{s}", root) for s in ("tools", "valid", "test"))
        base = {}
        for key, label in (("tool_bench", "ToolBench"), ("tool_corpus", "ToolCorpus")):
            try: base[label] = D.load(f"tooldeer:baselines/{key}", root)
            except D.DataMissingError: pass
        DE.run_deer_experiment(tools, valid, test, base, cfg, work, stage_cache=sc)
    elif name == "deer_ablation":
        from toolpaper import deer as DE
        cfg = DE.DeerAblationConfig.for_profile("paper", **small)
        tools, valid, test = (D.load(f"tooldeer:{s}", root) for s in ("tools", "valid", "test"))
        DE.run_deer_ablation(tools, valid, test, cfg, cfg.grid, work, stage_cache=sc)
    elif name == "alpha_umi":
        from toolpaper import umi as UM
        cfg = UM.UmiExpConfig.for_profile("paper", **small)
        ood = D.load("alpha-umi:toolbench/test_out_domain", root)
        UM.run_umi_experiment(D.load("seal-tools:tools", root), D.load("seal-tools:dev", root),
                              D.load("seal-tools:test_in_domain", root), cfg, work, ood=ood, stage_cache=sc)
    else: raise ValueError(f"unknown experiment {name!r}; choose from {EXPERIMENTS}")


def gpu_hours(tokens_x_epochs: float, model_tflops: float) -> float:
    "Hours of training at `model_tflops` (6 x LLaMA-2 7B's matrix-product parameters per token)."
    return tokens_x_epochs * 6 * LLAMA2_7B_MATMUL / (model_tflops * 1e12) / 3600


def page(res: dict) -> str:
    thr = res["throughput"]
    lines = ["# What a full `paper` profile run trains, and its GPU-hours at the measured trainer throughput", "",
             f"Counted by running each experiment function at the paper profile (full released splits, the paper's "
             f"epochs, seeds, schedules and variants) with a stage cache that counts instead of training and "
             f"generating; tokens from SmolLM2's tokenizer on up to {res['sample']} examples per stage (capped at each "
             f"stage's max_length), scaled to the stage's examples. GPU-hours: tokens x epochs x 6 x LLaMA-2 7B's "
             f"{LLAMA2_7B_MATMUL / 1e9:.2f}B matrix-product parameters / {thr['model_tflops']:.0f} model TFLOP/s — the "
             f"toolpaper trainer's full fine-tuning rate on a 1.17B Llama in bf16 on an {thr['device']} "
             "(reports/benchmarks/gpu_throughput.md; a 7B model's larger products usually run at least as fast). A "
             "LoRA stage skips the weight gradients, about a third of the FLOPs: its hours are an upper bound. "
             "Generation is counted, not priced: no page measures a GPU decode rate yet. Requests: those an "
             "experiment makes with empty answers (a two-round DEER query or an agent's later steps after a real "
             "answer are not asked, so real runs ask more).", "",
             "| experiment | training stages | examples | tokens x epochs (M) | GPU-hours (H100, bf16) | LoRA stages | "
             "requests | new-token budget (M) | counted in s |",
             "|:--|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for e, r in res["experiments"].items():
        te = sum(x["tokens"] * x["epochs"] for x in r["runs"])
        lines.append(f"| {e} | {len(r['runs'])} | {sum(x['examples'] for x in r['runs']):,} | {te / 1e6:,.1f} | "
                     f"{gpu_hours(te, thr['model_tflops']):,.1f} | {sum(x['lora'] for x in r['runs'])} | "
                     f"{r['requests']:,} | {r['max_new_tokens'] / 1e6:,.1f} | {r['seconds']:.0f} |")
    lines += ["", "Stages per experiment (examples, tokens per example, epochs):", ""]
    for e, r in res["experiments"].items():
        parts = [f"{x['stage']} {x['examples']:,} x {x['tokens'] / max(1, x['examples']):.0f} x {x['epochs']:g}"
                 for x in r["runs"]]
        lines.append(f"- **{e}**: " + "; ".join(parts))
    lines += ["", f"Machine: {res['machine']}.", "", commit_line(res.get("code"))]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="reports/benchmarks")
    ap.add_argument("--only", action="append", default=None, choices=EXPERIMENTS)
    ap.add_argument("--sample", type=int, default=300, help="examples tokenised per training stage")
    ap.add_argument("--data-dir", default=os.environ.get("TOOLPAPER_DATA_DIR") or str(ROOT.parent / "shared" / "data"))
    a = ap.parse_args(argv)
    from toolpaper.io import atomic_write_text
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    gt = json.loads((ROOT / "reports" / "benchmarks" / "gpu_throughput.json").read_text())
    res = {"sample": a.sample, "experiments": {}, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "throughput": {"device": gt["device"], "model_tflops": gt["training"]["toolpaper trainer"]["model_tflops"]},
           "code": measured_at(out)}
    for name in a.only or EXPERIMENTS:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            sc = counting_cache(Path(tmp), a.sample)
            run_experiment(name, sc, Path(tmp), a.data_dir)
            res["experiments"][name] = {"runs": sc.runs, **sc.tally, "seconds": time.perf_counter() - t0}
        print(name, len(sc.runs), "stages", dict(sc.tally), flush=True)
    atomic_write_text(out / "paper_cost.json", json.dumps(res, indent=1, default=str) + "\n")
    atomic_write_text(out / "paper_cost.md", page(res))
    write_index(out)
    print(page(res))
    return res


if __name__ == "__main__":
    main()
