"""Benchmark: GPU throughput of a random-initialised ~1B-parameter Llama in bf16 — full fine-tuning with toolpaper's
trainer (length-grouped batches, no vocabulary logits over the prompt) beside a plain pad-to-max PyTorch loop, and
greedy generation with toolpaper's engine beside transformers' `generate` (toolpaper's `HFEngine`), in one run.

Prints, and with --out writes, `gpu_throughput.md` / `.json`: real (non-padding) training tokens per second, model-FLOPs
utilisation (6 x the parameters that multiply, i.e. all but the input embedding table, per real token; attention's
quadratic term not counted) against the bf16 matmul peak measured here and against the card's dense bf16 figure, the
losses, and generated tokens per second.
Nothing is downloaded: the model is built from a config with random weights (seeded); the training examples are random
token sequences whose lengths are drawn uniformly from [--min-len, --max-len] with the last fifth as the answer (the
shape of tool-call fine-tuning: long prompts, short answers). A tokenizer folder is needed only for the engines' text
(any Llama-family tokenizer; its vocabulary size sets the model's).
Run on a CUDA machine: python benchmarks/gpu_throughput.py --tokenizer DIR [--commit SHA] [--save DIR] --out
reports/benchmarks   (--save keeps the random bf16 model, e.g. for `toolpaper bench --model DIR`)
`--tiny` runs the same code on a 2-layer model (a check of the script on CPU; its numbers mean nothing).
`--variants` picks the rows: `plain`, `trainer` (as `finetune` runs it on CUDA: GPU path, decoder layers compiled),
`eager` (GPU path, layers not compiled), `cpu` (the CPU path), `compile` (whole model compiled instead), `liger`
(Liger's Triton kernels instead of compiling; needs the `liger-kernel` package). `--accum N`: N batches per optimizer
step. Target (issue 15): >= 40% model-FLOPs utilisation in bf16 training.
"""
import argparse, json, platform, sys, time, traceback
from pathlib import Path
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CPU_PATH = "toolpaper trainer, CPU path (attention mask, exact lengths)"
COMPILED = "toolpaper trainer + torch.compile (dynamic shapes)"
LAYERS = "toolpaper trainer + compiled decoder layers (dynamic shapes)"
EAGER = "toolpaper trainer, GPU path, layers not compiled"
LIGER = "toolpaper trainer + Liger kernels (RMSNorm, SwiGLU, RoPE)"
VARIANTS = {"plain": "plain pad-to-max loop", "trainer": "toolpaper trainer", "eager": EAGER, "cpu": CPU_PATH,
            "compile": COMPILED, "layers": LAYERS, "liger": LIGER}   # liger patches Llama module-wide: keep it last


class _Skipped(Exception): "Generation was not asked for."


CARD_BF16_TFLOPS = {"H100": 989.4, "H200": 989.4, "A100": 312.0}   # dense bf16 tensor-core figures of the spec sheets


def sync():
    if torch.cuda.is_available(): torch.cuda.synchronize()


def bf16_peak(dev: str, n: int, reps: int = 20) -> float:
    "Measured bf16 matmul FLOP/s of an n x n x n product on `dev`."
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3): a @ b
    sync(); t0 = time.perf_counter()
    for _ in range(reps): a @ b
    sync()
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def build_model(vocab: int, tiny: bool, dev: str):
    from transformers import LlamaConfig, LlamaForCausalLM
    shape = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2) if tiny else dict(hidden_size=2048, intermediate_size=5632,
                                                          num_hidden_layers=22, num_attention_heads=32,
                                                          num_key_value_heads=4)
    cfg = LlamaConfig(vocab_size=vocab, max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
                      bos_token_id=1, eos_token_id=2, **shape)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(dev): m = LlamaForCausalLM(cfg)
    return m


def matmul_params(m) -> int:
    "Parameters that take part in a matrix product per token: all but the input embedding table."
    return sum(p.numel() for p in m.parameters()) - m.get_input_embeddings().weight.numel()


def examples(n: int, lo: int, hi: int, vocab: int, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        L = int(torch.randint(lo, hi + 1, (1,), generator=g))
        ids = torch.randint(3, vocab, (L,), generator=g).tolist()
        a = max(16, L // 5)            # the answer: the last fifth
        out.append({"input_ids": ids, "labels": [-100] * (L - a) + ids[L - a:], "span_ids": [0] * (L - a) + [1] * a,
                    "length": L})
    return out


def _profiler():
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if torch.cuda.is_available()
                                                    else [])
    return torch.profiler.profile(activities=acts)


def _prof_table(prof) -> str:
    key = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=18, max_name_column_width=60)


def plain_loop(model, exs, batch: int, warm: int, steps: int, max_len: int, pad_id: int, profile: bool = False,
               accum: int = 1) -> dict:
    """The reference: batches in random order padded to --max-len, full logits, autocast bf16 over fp32 weights, fused
    AdamW (what a hand-written loop does); `accum` batches per optimizer step."""
    dev = next(model.parameters()).device
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=dev.type == "cuda")
    order = torch.randperm(len(exs), generator=torch.Generator().manual_seed(0)).tolist()
    losses, real, t0, ends, prof = [], 0, None, [], None
    model.train()
    for s in range(warm + steps):
        if profile and s == warm: prof = _profiler(); prof.__enter__()
        if s == warm: sync(); t0 = time.perf_counter()
        for k in range(accum):
            part = [exs[order[((s * accum + k) * batch + i) % len(exs)]] for i in range(batch)]
            ids = torch.full((batch, max_len), pad_id); lab = torch.full((batch, max_len), -100)
            att = torch.zeros(batch, max_len, dtype=torch.long)
            for i, e in enumerate(part):
                L = len(e["input_ids"])
                ids[i, :L], lab[i, :L], att[i, :L] = torch.tensor(e["input_ids"]), torch.tensor(e["labels"]), 1
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = model(input_ids=ids.to(dev), attention_mask=att.to(dev), labels=lab.to(dev)).loss
            (loss / accum).backward()
            if s >= warm: real += sum(len(e["input_ids"]) for e in part)
        opt.step(); opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        ends.append(time.perf_counter())
    sync()
    secs = time.perf_counter() - t0
    if prof is not None:
        prof.__exit__(None, None, None)
        return {"profile": _prof_table(prof)}
    return {"seconds": secs, "real_tokens": real, "tokens_per_s": real / secs, "losses": losses,
            "step_seconds": [b - a for a, b in zip(ends[warm - 1:], ends[warm:])]}


def apply_kernels(model, kind: str | None):
    """`compile`: the whole model through `torch.compile(dynamic=True)`; `layers`: each decoder layer compiled in place
    (one graph shared by the layers, PyTorch's regional compilation); `liger`: Liger's Triton kernels for RMSNorm,
    SwiGLU and rotary embeddings (the loss stays toolpaper's: no fused linear cross-entropy)."""
    if kind == "compile": return torch.compile(model, dynamic=True)
    if kind == "layers":
        for layer in model.model.layers: layer.compile(dynamic=True)
    if kind == "liger":
        from liger_kernel.transformers import apply_liger_kernel_to_llama
        apply_liger_kernel_to_llama(rope=True, rms_norm=True, swiglu=True, cross_entropy=False,
                                    fused_linear_cross_entropy=False, model=model)
    return model


def toolkit_trainer(model, exs, batch: int, warm: int, steps: int, pad_id: int, out_dir: str,
                    profile: bool = False, gpu_path: bool = True, kernels: str | None = None, accum: int = 1) -> dict:
    """toolpaper's trainer: `SpanTrainer` + `SpanCollator` + `training_args` of an `SFTConfig` (full fine-tuning, bf16);
    `gpu_path=False` runs it as on the CPU (attention mask kept, exact batch lengths); `kernels`: `apply_kernels`."""
    from transformers import TrainerCallback
    from toolpaper.config import SFTConfig
    from toolpaper.train import SpanCollator, SpanTrainer, training_args
    cfg = SFTConfig(out_dir, max_steps=warm + steps, batch_size=batch, logging_steps=1, lr=1e-5, lora=False,
                    bf16=True, group_by_length=True, grad_accum=accum)
    seen: list[int] = []
    base = SpanCollator(pad_id, 64 if gpu_path else None)

    def collate(feats):
        seen.append(sum(len(f["input_ids"]) for f in feats))
        return base(feats)

    marks: dict[int, float] = {}
    prof = _profiler() if profile else None

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if prof is not None and state.global_step == warm: prof.__enter__()

        def on_step_end(self, args, state, control, **kw):
            sync(); marks[state.global_step] = time.perf_counter()

    model = apply_kernels(model, kernels)     # warm-up steps take any compilation
    tr = SpanTrainer(model=model, args=training_args(cfg), train_dataset=exs, data_collator=collate,
                     span_labels=["answer"], callbacks=[Clock()], gpu_path=gpu_path,
                     compile_layers=gpu_path and kernels is None)   # the default on CUDA
    tr.train()
    if prof is not None:
        prof.__exit__(None, None, None)
        return {"profile": _prof_table(prof)}
    secs = marks[warm + steps] - marks[warm]
    real = sum(seen[warm * accum:(warm + steps) * accum])   # the timed steps' batches (the loader may fetch one more)
    losses = [h["loss"] for h in tr.state.log_history if "loss" in h]
    return {"seconds": secs, "real_tokens": real, "tokens_per_s": real / secs, "losses": losses,
            "step_seconds": [marks[i + 1] - marks[i] for i in range(warm, warm + steps)],
            "optim": str(tr.args.optim), "max_grad_norm": tr.args.max_grad_norm}


def generation(model, tok, n: int, prompt_len: int, new: int, vocab: int) -> dict:
    "Greedy generation of `new` tokens for `n` random prompts: toolpaper's engine, then transformers via HFEngine."
    from toolpaper.engine import Engine, HFEngine, Request
    g = torch.Generator().manual_seed(1)
    reqs = [Request(ids=torch.randint(3, vocab, (prompt_len,), generator=g).tolist(), max_new_tokens=new)
            for _ in range(n)]
    model.eval()
    res = {}
    for name, eng in (("toolpaper engine", lambda: Engine(model, tok, slots=n, precision="bf16")),
                      ("transformers generate (HFEngine)", lambda: HFEngine(model, tok, batch_size=n))):
        try:
            e = eng()
            e.generate(reqs[:2])                      # warm-up: kernels, allocator
            sync(); t0 = time.perf_counter()
            outs = e.generate(reqs)
            sync(); secs = time.perf_counter() - t0
            gen = sum(len(o.tokens) for o in outs)
            res[name] = {"seconds": secs, "generated_tokens": gen, "tokens_per_s": gen / secs,
                         "prompt_tokens": n * prompt_len}
        except Exception as ex:
            res[name] = {"error": f"{type(ex).__name__}: {ex}", "trace": traceback.format_exc()[-2000:]}
        print(name, {k: v for k, v in res[name].items() if k != "trace"}, flush=True)
    return res


def _kernels(name: str) -> str | None:
    return {COMPILED: "compile", LAYERS: "layers", LIGER: "liger", EAGER: "eager"}.get(name)


def train_row(name: str, exs, a, vocab: int, pad: int, res: dict) -> dict:
    "One training row: a fresh model (seed 0), timed steps, model FLOPs utilisation, peak memory."
    import tempfile
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        model = build_model(vocab, a.tiny, dev)
        res["parameters"] = sum(p.numel() for p in model.parameters())
        res["matmul_parameters"] = matmul_params(model)
        if dev == "cuda": torch.cuda.reset_peak_memory_stats()
        if name.startswith("plain"):
            r = plain_loop(model, exs, a.batch, a.warm, a.steps, a.max_len, pad, accum=a.accum)
        else:
            r = toolkit_trainer(model, exs, a.batch, a.warm, a.steps, pad, tempfile.mkdtemp(),
                                gpu_path=name != CPU_PATH, kernels=_kernels(name), accum=a.accum)
        flops = 6 * res["matmul_parameters"] * r["tokens_per_s"]
        r["model_tflops"] = flops / 1e12
        r["mfu_measured_peak"] = flops / (res["peak_tflops_measured"] * 1e12)
        r["mfu_card"] = flops / (res["peak_tflops_card"] * 1e12) if res["peak_tflops_card"] else None
        if dev == "cuda": r["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
        del model
        if dev == "cuda": torch.cuda.empty_cache()
    except Exception as ex:
        r = {"error": f"{type(ex).__name__}: {ex}", "trace": traceback.format_exc()[-3000:]}
    return r


def profile_row(name: str, exs, a, vocab: int, pad: int) -> str:
    "torch.profiler table of two steps of a trainer row, on a fresh model, after the same warm-up."
    import tempfile
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        model = build_model(vocab, a.tiny, dev)
        r = toolkit_trainer(model, exs, a.batch, a.warm, 2, pad, tempfile.mkdtemp(), profile=True,
                            kernels=_kernels(name))
        del model
        if dev == "cuda": torch.cuda.empty_cache()
        return r["profile"]
    except Exception as ex:
        return f"failed: {type(ex).__name__}: {ex}\n{traceback.format_exc()[-1500:]}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="folder of a Llama-family tokenizer")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--accum", type=int, default=1, help="batches per optimizer step (every row)")
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--min-len", type=int, default=256)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--gen-n", type=int, default=16)
    ap.add_argument("--gen-prompt", type=int, default=512)
    ap.add_argument("--gen-new", type=int, default=128)
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--commit", default=None, help="the commit measured (for machines without the git history)")
    ap.add_argument("--profile", action="store_true", help="then profile 2 steps of each (torch.profiler; printed)")
    ap.add_argument("--no-generation", action="store_true", help="training only")
    ap.add_argument("--variants", default="plain,trainer,cpu",
                    help="comma-separated, run in this order: " + ", ".join(f"{k} ({v})" for k, v in VARIANTS.items()))
    ap.add_argument("--save", default=None, help="also save the bf16 random model and the tokenizer here (for `bench`)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import transformers
    from transformers import AutoTokenizer
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    res = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "device": torch.cuda.get_device_name(0) if dev == "cuda" else platform.processor() or "cpu",
           "tiny": a.tiny, "batch": a.batch, "accum": a.accum, "timed_steps": a.steps,
           "lengths": [a.min_len, a.max_len]}
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    vocab = len(tok)
    res["peak_tflops_measured"] = bf16_peak(dev, 1024 if a.tiny else 8192) / 1e12
    card = next((v for k, v in CARD_BF16_TFLOPS.items() if k in res["device"]), None)
    res["peak_tflops_card"] = card
    print(json.dumps(res), flush=True)
    exs = examples(max(64, a.batch * a.accum * (a.warm + a.steps)), a.min_len, a.max_len, vocab)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    runs, res["profiles"] = {}, {}
    names = [VARIANTS[k.strip()] for k in a.variants.split(",") if k.strip()]
    for name in names:
        runs[name] = train_row(name, exs, a, vocab, pad, res)
        print(name, {k: v for k, v in runs[name].items() if k != "trace"}, flush=True)
        if a.profile and name in (VARIANTS["trainer"], VARIANTS["liger"]):
            res["profiles"][name] = profile_row(name, exs, a, vocab, pad)
            print(f"== profile: {name}\n{res['profiles'][name]}", flush=True)
    res["training"] = runs
    try:
        if a.no_generation: raise _Skipped
        model = build_model(vocab, a.tiny, dev).to(torch.bfloat16)
        res["generation"] = generation(model, tok, a.gen_n, a.gen_prompt, a.gen_new, vocab)
        res["generation_setup"] = {"prompts": a.gen_n, "prompt_tokens": a.gen_prompt, "new_tokens": a.gen_new}
        if a.save: model.save_pretrained(a.save); tok.save_pretrained(a.save)
    except _Skipped: pass
    except Exception as ex:
        res["generation"] = {"error": f"{type(ex).__name__}: {ex}", "trace": traceback.format_exc()[-3000:]}
    if a.out: write(Path(a.out), res, a.commit)


def _cell(r: dict, key: str, fmt: str) -> str:
    v = r.get(key)
    return "—" if v is None else format(v, fmt)


def write(out: Path, res: dict, commit: str | None):
    tr, gen = res["training"], res.get("generation", {})
    lines = [
        f"# GPU throughput ({'tiny 2-layer check' if res['tiny'] else 'random-initialised ~1B Llama'}, bf16, "
        f"{res['device']})",
        "",
        f"Model: Llama layout, {res.get('parameters', 0) / 1e9:.2f}B parameters "
        f"({res.get('matmul_parameters', 0) / 1e9:.2f}B in matrix products), random weights (seed 0); torch "
        f"{res['torch']}, transformers {res['transformers']}. Training: full fine-tuning, batch "
        f"{res['batch']}" + (f" x {res['accum']} accumulated per optimizer step" if res.get("accum", 1) > 1 else "")
        + f", {res['timed_steps']} timed steps after warm-up, random "
        f"token sequences of {res['lengths'][0]}-{res['lengths'][1]} tokens (uniform; the last fifth is the answer), "
        "autocast bf16 over fp32 master weights in both. Model FLOPs per real token: 6 x the matrix-product parameters "
        "(attention's quadratic term not counted). Peaks: bf16 8192^3 product measured here "
        f"{res['peak_tflops_measured']:.0f} TFLOP/s; the card's dense bf16 figure "
        + (f"{res['peak_tflops_card']:.0f} TFLOP/s." if res.get("peak_tflops_card") else "unknown."),
        "",
        "| training | real tokens/s | model TFLOP/s | MFU (measured peak) | MFU (card) | peak memory GiB "
        "| loss first → last | seconds per timed step |",
        "|:--|--:|--:|--:|--:|--:|:--|:--|",
    ]
    for name, r in tr.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error'][:200]} | | | | | | |"); continue
        lines.append(
            f"| {name} | {r['tokens_per_s']:,.0f} | {r['model_tflops']:.0f} | {r['mfu_measured_peak']:.1%} | "
            f"{_cell(r, 'mfu_card', '.1%')} | {_cell(r, 'peak_memory_gib', '.1f')} | "
            f"{r['losses'][0]:.3f} → {r['losses'][-1]:.3f} | "
            f"{min(r['step_seconds']):.3f}–{max(r['step_seconds']):.3f} |")
    plain = tr.get(VARIANTS["plain"], {"error": 1})
    ours = {k: r for k, r in tr.items() if k.startswith("toolpaper trainer") and k != CPU_PATH and "error" not in r}
    if ours:
        best = max(ours, key=lambda k: ours[k]["tokens_per_s"])
        t = ours[best]
        lines += ["", "Each trainer row against the plain loop's real tokens/s: " + "; ".join(
            f"{k}: {r['tokens_per_s'] / plain['tokens_per_s']:.2f}x" for k, r in ours.items()) + "." if "error" not in
            plain else "", f"Fastest: {best}, {t['mfu_measured_peak']:.1%} MFU. "
            f"Target >= 40% MFU: {'met' if t['mfu_measured_peak'] >= 0.4 else 'not met'} against the measured "
            "peak" + (f", {'met' if (t['mfu_card'] or 0) >= 0.4 else 'not met'} against the card's figure."
                      if t.get("mfu_card") else ".")]
    if gen and "error" not in gen:
        s = res["generation_setup"]
        lines += ["", f"Greedy generation, bf16 weights: {s['prompts']} random prompts of {s['prompt_tokens']} tokens, "
                  f"{s['new_tokens']} new tokens each, all in one batch.", "",
                  "| generation | generated tokens/s | seconds |", "|:--|--:|--:|"]
        for name, r in gen.items():
            lines.append(f"| {name} | failed: {r['error'][:200]} | |" if "error" in r else
                         f"| {name} | {r['tokens_per_s']:,.0f} | {r['seconds']:.2f} |")
    elif gen:
        lines += ["", f"Generation failed: {gen['error'][:300]}"]
    lines += ["", f"Measured at commit `{commit[:12]}`." if commit else "Commit not recorded."]
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_throughput.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "gpu_throughput.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
