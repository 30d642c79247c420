"""Benchmark: fine-tuning throughput of toolpaper's engine vs a naive pad-to-max Trainer, fp32 and bf16, and generation
speed.

Prints (and with --out writes as Markdown + JSON) real (non-padding) training tokens per second, model-FLOPs
utilisation against the measured matmul peak of this machine in that precision (fp32: a 2048^3 product; bf16: the
SmolLM2-shaped product of toolpaper.precision), the engine's loss curve in bf16 (autocast, fp32 master weights) beside
fp32's on the same samples, what training precision `auto` picks here, and greedy generation tokens per second.
A profile of the engine's training steps in fp32 and bf16 (`train_profile`) says where a step's time goes: weight
products, attention, autocast's casts, the optimizer, the rest.
Run: .venv/bin/python benchmarks/train_throughput.py [--model smollm2-135m-instruct] [--steps 6] [--batch 2]
[--no-profile] [--out reports/benchmarks]
Memory: the naive run pads every batch to --max-length; at batch 4 x 2048 tokens it passed 24 GB and was killed on the
24 GB reference machine, so the default batch is 2 (a machine with more memory can ask for more).
Targets (CPU): engine >= 2x the naive baseline and >= 50% of the measured peak; on a CPU with bf16 units, bf16 >= 1.8x
fp32's real tokens/s with the loss curve within 2% (relative, per step).
"""
import argparse, json, os, tempfile, time
from pathlib import Path
import torch


def matmul_peak(n: int = 2048, reps: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2): a @ b
    t0 = time.perf_counter()
    for _ in range(reps): a @ b
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def examples(n: int):
    from toolpaper.data import load
    from toolpaper.prompts import seal_prompt
    from toolpaper.retrieval import BM25Retriever, candidate_lists
    try:
        tools, insts = load("seal-tools:tools"), load("seal-tools:dev")
    except Exception:
        tools, insts = load("seal-tools:tools", "sample"), load("seal-tools:dev", "sample")
    insts = insts[:n]
    ranked = BM25Retriever("words").fit(tools).search([i.query for i in insts], 5)
    by = {t.name: t for t in tools}
    cands = candidate_lists(insts, ranked, tools, k=5, inject_gold=True)
    return [seal_prompt(i, [by[x] for x in c.tools]) for i, c in zip(insts, cands)]


def trainer(model: str, exs, naive: bool, steps: int, batch: int, max_length: int, lora: bool, bf16: bool = False,
            callbacks=None):
    """The trainer a setup runs (toolpaper's `SpanTrainer`, or with `naive` every batch padded to `max_length` in
    random order), its dataset and model."""
    from toolpaper.train import SFTConfig, SpanCollator, SpanTrainer, build_dataset, training_args
    from toolpaper.models import load_model
    m, tok = load_model(model, device="cpu", dtype=torch.float32, trainable=True)
    if lora:
        from peft import LoraConfig, get_peft_model
        m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    labels = ["answer"]
    ds = build_dataset(tok, exs, labels, max_length)
    cfg = SFTConfig(
        tempfile.mkdtemp(), max_steps=steps, batch_size=batch, logging_steps=1, group_by_length=not naive, lr=1e-5,
        bf16=bf16,
    )
    collate = SpanCollator(tok.pad_token_id)
    if naive:   # the usual recipe: every sequence padded to max_length, random order
        base = collate
        def collate(feats):
            out = base(feats)
            pad = max_length - out["input_ids"].shape[1]
            if pad > 0:
                z = lambda t, v: torch.cat([t, torch.full((t.shape[0], pad), v, dtype=t.dtype)], 1)
                out = {
                    "input_ids": z(out["input_ids"], tok.pad_token_id),
                    "attention_mask": z(out["attention_mask"], 0),
                    "labels": z(out["labels"], -100),
                    "span_ids": z(out["span_ids"], 0),
                }
            return out
    tr = SpanTrainer(model=m, args=training_args(cfg), train_dataset=ds, data_collator=collate, span_labels=labels,
                     callbacks=callbacks)
    return tr, ds, m


def run(model: str, exs, naive: bool, steps: int, batch: int, max_length: int, lora: bool, bf16: bool = False):
    tr, ds, m = trainer(model, exs, naive, steps, batch, max_length, lora, bf16)
    t0 = time.perf_counter(); tr.train(); secs = time.perf_counter() - t0
    # real tokens seen: batches of `batch` examples for `steps` steps (the sampler's order decides which)
    sampler = tr._get_train_sampler(ds) if hasattr(tr, "_get_train_sampler") else None
    order = list(iter(sampler)) if sampler is not None else list(range(len(ds)))
    seen = [order[i % len(order)] for i in range(steps * batch)]
    real = sum(ds[i]["length"] for i in seen)
    n_params = sum(p.numel() for p in (m.get_base_model() if lora else m).parameters())
    flops_per_token = (4 if lora else 6) * n_params  # LoRA: no weight gradients for the frozen matrices
    return {
        "seconds": secs,
        "real_tokens": real,
        "tokens_per_s": real / secs,
        "model_flops_per_s": real * flops_per_token / secs,
        "losses": [h["loss"] for h in tr.state.log_history if "loss" in h],
    }


# operator groups of a training step's profile (self time; every other operator is "other operators")
PROFILE_GROUPS = {
    "products": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_flash_attention_for_cpu_backward"),
    "casts and copies": ("aten::_to_copy", "aten::copy_"),
}


def train_profile(model: str, exs, batch: int, max_length: int, lora: bool, bf16: bool, active: int = 3) -> dict:
    """Where a training step's time goes (toolpaper's engine): a torch profile of `active` steps after one warm-up
    step, operator self time grouped into weight products, attention, casts and copies (autocast's), the optimizer
    (`_foreach_` operators) and the rest, per step; the time outside operators is Python and the trainer's own."""
    from torch.profiler import profile, schedule
    from transformers import TrainerCallback

    class Step(TrainerCallback):       # the profiler's windows run from one step's end to the next's
        def __init__(self): self.prof, self.ends = None, []
        def on_step_end(self, args, state, control, **kw):
            self.ends.append(time.perf_counter()); self.prof.step()

    cb = Step()
    tr, _, _ = trainer(model, exs, False, 1 + active, batch, max_length, lora, bf16, callbacks=[cb])
    with profile(schedule=schedule(wait=0, warmup=1, active=active), acc_events=True) as p:
        cb.prof = p
        tr.train()
    ms = dict.fromkeys([*PROFILE_GROUPS, "optimizer", "other operators"], 0.0)
    calls = 0
    for e in p.key_averages():
        g = next((k for k, names in PROFILE_GROUPS.items() if e.key in names),
                 "optimizer" if e.key.startswith(("aten::_foreach", "aten::_fused_adam")) else "other operators")
        ms[g] += e.self_cpu_time_total / 1000; calls += e.count
    step_ms = 1000 * (cb.ends[active] - cb.ends[0]) / active
    out = {"precision": "bf16" if bf16 else "fp32", "steps": active, "ms / step": round(step_ms, 1),
           "operator calls / step": round(calls / active),
           **{f"{k} ms / step": round(v / active, 1) for k, v in ms.items()}}
    out["outside operators ms / step"] = round(step_ms - sum(ms.values()) / active, 1)
    return out


def profile_section(res: dict) -> str:
    "The page's profile table and what it says about bf16's gain (empty without a profile)."
    rows = res.get("profile")
    if not rows: return ""
    cols = [k for k in rows[0] if k.endswith("/ step") and k != "ms / step"]
    by = {r["precision"]: r for r in rows}
    g = res["product_gflops"]
    lines = ["", f"## Where a training step goes (toolpaper's engine, {rows[0]['steps']} profiled steps after a "
             "warm-up)", "",
             "| precision | ms / step (profiled) | " + " | ".join(c.replace(" / step", "") for c in cols) + " |",
             "|:--|--:|" + "--:|" * len(cols)]
    lines += [f"| {r['precision']} | {r['ms / step']:.0f} | " + " | ".join(f"{r[c]:g}" for c in cols) + " |"
              for r in rows]
    if {"fp32", "bf16"} <= set(by):
        f, b = by["fp32"], by["bf16"]
        pr = lambda r: r["products ms / step"]
        rest = lambda r: r["ms / step"] - pr(r)
        big = max((c[:-len(" ms / step")] for c in cols if c.endswith(" ms / step") and c != "products ms / step"),
                  key=lambda g: b[g + " ms / step"])      # the largest part bf16 leaves
        lines += ["", f"Operator self time in milliseconds per step. The products took {pr(f):.0f} ms in fp32 and "
                  f"{pr(b):.0f} ms in bf16 ({pr(f) / max(pr(b), 1e-9):.2f}x; the measured SmolLM2-shaped product runs "
                  f"{g['bf16'] / g['fp32']:.2f}x faster in bf16 than in fp32 here, which bounds bf16's gain on the "
                  f"products); everything else took {rest(f):.0f} ms in fp32 and {rest(b):.0f} ms in bf16, most of "
                  f"it {big} ({f[big + ' ms / step']:.0f} ms against {b[big + ' ms / step']:.0f}, "
                  f"{f[big + ' ms / step'] / max(b[big + ' ms / step'], 1e-9):.2f}x). With the products as profiled "
                  "and everything else free, bf16 / fp32 real tokens/s would be "
                  f"{f['ms / step'] / max(pr(b), 1e-9):.2f}x on this machine."]
    return "\n".join(lines) + "\n"


def gen_speed(model: str, exs, n: int = 4, new_tokens: int = 32):
    from toolpaper.client import LocalClient
    g = LocalClient(model, device="cpu", batch_size=n, precision="fp32")
    g.generate([e.messages for e in exs[:n]], max_tokens=new_tokens)
    u = g.usage
    return {
        "generated_tokens": u.completion_tokens,
        "seconds": u.seconds,
        "tokens_per_s": u.completion_tokens / u.seconds,
    }


def auto_training(prof: dict) -> tuple[str, str]:
    """What training precision `auto` picks on this machine (`toolpaper.precision.train_bf16`) and what decided it:
    the kept training verdict where there is one, else the bf16 units and the measured products."""
    from toolpaper.precision import read_verdict, train_bf16
    v = read_verdict("training")
    pick = "bf16" if train_bf16(prof, env={}) else "fp32"
    if v: return pick, (f"this machine's kept training verdict, "
                        f"{v.get('evidence', {}).get('page', 'precision_verdict_train.md')}: task metrics decide")
    return pick, "no training verdict kept: bf16 only with bf16 units and a bf16 product >= 1.5x fp32"


def page(res: dict) -> str:
    """The page of a run's results `res` (what `main` records; runs recorded before batch and steps were default
    ones). `auto_why` says what decided the training precision `auto` picks."""
    e, n, b16 = res["toolpaper engine"], res["naive pad-to-max"], res["toolpaper engine, bf16"]
    f32, full, peak = e, not res["lora"], res["fp32_matmul_peak_gflops"] * 1e9
    prof = {"gflops": res["product_gflops"], "machine": res["machine"]}
    why = res.get("auto_why", "bf16 only with bf16 units and a bf16 product >= 1.5x fp32")
    md = (
        f"# Training throughput ({res['model']}, {'LoRA' if not full else 'full'}, batch {res.get('batch', 2)}, "
        f"{res.get('steps', 6)} steps, {res['threads']} threads)\n\n"
        + (f"Load {res['load']} (1-minute average) when the run began.\n\n" if res.get("load") is not None else "")
        + f"Measured fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s (2048^3). The SmolLM2-shaped product "
        f"({'x'.join(map(str, (1024, 576, 1536)))}, `toolpaper.precision`): fp32 {prof['gflops']['fp32']}, bf16 "
        f"{prof['gflops']['bf16']}, int8 {prof['gflops']['int8']} GFLOP/s; CPU flags "
        f"{', '.join(prof['machine']['flags'])}. Model FLOPs per real token: {'4' if not full else '6'} x "
        "parameters; bf16 MFU is against the measured bf16 product.\n\n"
        "| setup | real tokens/s | MFU |\n|:--|--:|--:|\n"
        f"| naive pad-to-max Trainer (fp32) | {n['tokens_per_s']:.1f} | {n['mfu']:.1%} |\n"
        f"| toolpaper engine (fp32) | {e['tokens_per_s']:.1f} | {e['mfu']:.1%} |\n"
        "| toolpaper engine (bf16 autocast, fp32 master weights) | "
        f"{b16['tokens_per_s']:.1f} | {b16['mfu']:.1%} |\n\n"
        f"Speed-up {res['speedup']:.2f}x over the naive Trainer; bf16 runs at {res['bf16_speedup']:.2f}x fp32's "
        f"speed, its loss curve at most {res['bf16_loss_max_rel_diff']:.2%} (relative) from fp32's per step "
        f"(losses fp32 {', '.join(f'{x:.4f}' for x in f32['losses'])}; bf16 "
        f"{', '.join(f'{x:.4f}' for x in b16['losses'])}). Training precision `auto` picks here: "
        f"**{res['auto_trains_in']}** ({why}). Greedy "
        f"generation: {res['generation']['tokens_per_s']:.1f} tokens/s (batch 4, fp32).\n"
    )
    return md + profile_section(res)


def render(path: Path, out) -> dict:
    """`--render`: the page of an earlier run; where this machine is the kind it measured (`machine_key` equal), what
    `auto` trains in is read anew (a training verdict kept since then decides it)."""
    from toolpaper.precision import machine_profile
    res = json.loads(path.read_text())
    prof = machine_profile()
    if prof["machine"] == res["machine"]: res["auto_trains_in"], res["auto_why"] = auto_training(prof)
    md = page(res)
    print(md)
    if out:
        from _index import write_page
        write_page(Path(out), "train_throughput", res, md)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--full", action="store_true", help="full fine-tuning instead of LoRA")
    ap.add_argument("--no-profile", action="store_true", help="leave out the profile of the engine's training steps")
    ap.add_argument("--out", default=None)
    ap.add_argument("--render", default=None, metavar="JSON",
                    help="write the page from an earlier run's JSON (no run); on the machine kind it measured, what "
                    "`auto` trains in is read anew")
    a = ap.parse_args()
    if a.render: return render(Path(a.render), a.out)
    torch.manual_seed(0)
    peak = matmul_peak()
    exs = examples(a.steps * a.batch)
    res = {
        "model": a.model,
        "lora": not a.full,
        "threads": torch.get_num_threads(),
        "fp32_matmul_peak_gflops": peak / 1e9,
        "load": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }
    from toolpaper.precision import machine_profile
    prof = machine_profile(refresh=True)
    res["machine"], res["product_gflops"] = prof["machine"], prof["gflops"]
    res["batch"], res["steps"] = a.batch, a.steps
    res["auto_trains_in"], res["auto_why"] = auto_training(prof)
    peaks = {False: peak, True: prof["gflops"]["bf16"] * 1e9}
    for name, naive, bf16 in (("naive pad-to-max", True, False), ("toolpaper engine", False, False),
                              ("toolpaper engine, bf16", False, True)):
        r = run(a.model, exs, naive, a.steps, a.batch, a.max_length, not a.full, bf16)
        r["mfu"] = r["model_flops_per_s"] / peaks[bf16]
        res[name] = r
        print(
            f"{name:18s} {r['tokens_per_s']:8.1f} real tokens/s   MFU {r['mfu']:.1%}   ({r['real_tokens']} tokens in "
            f"{r['seconds']:.1f} s)"
        )
    res["speedup"] = res["toolpaper engine"]["tokens_per_s"] / res["naive pad-to-max"]["tokens_per_s"]
    f32, b16 = res["toolpaper engine"], res["toolpaper engine, bf16"]
    res["bf16_speedup"] = b16["tokens_per_s"] / f32["tokens_per_s"]
    res["bf16_loss_max_rel_diff"] = max(abs(x - y) / abs(x) for x, y in zip(f32["losses"], b16["losses"]))
    print(f"bf16 / fp32 real tokens/s {res['bf16_speedup']:.2f}x; loss curves differ by at most "
          f"{res['bf16_loss_max_rel_diff']:.2%} per step; auto trains in {res['auto_trains_in']} here")
    if not a.no_profile:
        res["profile"] = [train_profile(a.model, exs, a.batch, a.max_length, not a.full, bf16)
                          for bf16 in (False, True)]
        for r in res["profile"]: print("profile", r, flush=True)
    res["generation"] = gen_speed(a.model, exs)
    print(
        f"fp32 matmul peak {peak / 1e9:.1f} GFLOP/s; engine speed-up {res['speedup']:.2f}x; generation "
        f"{res['generation']['tokens_per_s']:.1f} tokens/s"
    )
    if a.out:
        from _index import write_page
        write_page(Path(a.out), "train_throughput", res, page(res))


if __name__ == "__main__":
    main()
