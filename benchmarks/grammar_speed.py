"""Benchmark: JSON-schema constrained decoding on this machine — which grammar library the engine uses, and what the
constraint costs per token.

Libraries: xgrammar (vLLM's and SGLang's), llguidance (llama.cpp's), lm-format-enforcer (its transformers integration
is tried as shipped). Workload: Seal-Tools test prompts (the toolpaper layout, the gold tools as the candidates),
SmolLM2-135M-Instruct on the engine in fp32, greedy, at most `--max-new` (384) new tokens, each answer
constrained by `seal_answer_schema` of its candidates. Per library: the schema compile time (first use, cold), the
mask time per token (the matcher replayed along the constrained answers: fill the token bitmask and apply it to a
logits row, then accept the token), seconds per prompt of the whole constrained generation beside the unconstrained
run, the answers cut by the token limit, the share of answers that parse, and Format ACC / Tool F1 (the authors'
scorer) beside the unconstrained answers.
A constrained answer can only fail to parse when the token limit cuts it; the verdict ranks libraries by the answers
that parse, then by the mask cost per token.
Second table, the generation pipelines' own schemas (`toolpaper.generate.answer_schema`: tools, parameter values, the
multiple-tool plan with its typed values and earlier-call ids, the request pattern that holds given values, DEER
signatures, the yes/no check): every constrained answer recorded by the `generation_yield` report (`--records`, its
record/replay file) is tokenized again and replayed through each library, per stage: schema size, compile time (each
distinct schema once, cold, after the library's one-time start-up), mask + accept time per token, and the answers a
library refuses (its compiler, or a token of an answer that another library let through).
Run: .venv/bin/python benchmarks/grammar_speed.py [--prompts 16] [--max-new 384] [--records FILE] [--out DIR]
"""
import argparse, json, os, platform, time
import torch


def lmfe_status(tok) -> str:
    "Whether lm-format-enforcer's transformers integration loads with the installed transformers (as shipped)."
    try:
        from lmformatenforcer.integrations.transformers import build_token_enforcer_tokenizer_data
        build_token_enforcer_tokenizer_data(tok)
        return "ok"
    except Exception as e:                      # its import of transformers internals fails on transformers 5
        return f"{type(e).__name__}: {str(e)[:120]}"


def workload(n: int):
    from toolpaper import sealtools as ST
    from toolpaper.data import load
    tools = load("seal-tools:tools")
    by = {t.name: t for t in tools}
    insts = ST.subsample(load("seal-tools:test_in_domain"), n, 0, 3)
    cands = ST.candidates(insts, tools, None, 5, gold_only=True, seed=0)
    ex = ST.seal_examples(insts, cands, "toolpaper")
    return insts, ex, [ST.seal_answer_schema([by[t.name] for t in c]) for c in cands]


def mask_cost(g, schemas, token_lists, vocab: int) -> tuple[float, int]:
    "Seconds per token of mask + accept, replaying each answer's tokens through a fresh matcher."
    logits, secs, n = torch.zeros(vocab), 0.0, 0
    for s, toks in zip(schemas, token_lists):
        m = g.matcher(s)
        for t in toks:
            t0 = time.perf_counter(); m.mask(logits); m.accept(t); secs += time.perf_counter() - t0; n += 1
    return secs / max(n, 1), n


# the generation prompts' openings -> the stage that sends them (`toolpaper.generate`; `prompt_origin` knows only the
# prompts its own process built)
STAGE_OPENINGS = [("Name ", "fields"), ("The area is", "subfields"), ("Here is an example web API", "tools"),
                  ("Some parameter descriptions below lack", "backfill"), ("Here is an API:", "single"),
                  ("Here is an API and one call", "query"), ("Here are some APIs", "combos"),
                  ("API name:", "deer_examples"), ("API: ", "deer_filter"), ("API signature:", "deer_check")]


def stage_of(messages: list[dict], schema: str) -> str:
    "The pipeline stage of a recorded request (a multiple-tool prompt: 'multi' for its values, 'multi_query' after)."
    text = messages[-1]["content"]
    if text.startswith("APIs:"): return "multi_query" if "Calls, in order" in text else "multi"
    return next((st for head, st in STAGE_OPENINGS if text.startswith(head)), "other")


def pipeline_cost(tok, vocab: int, eos, path, backends) -> list[dict]:
    "Per stage and library: the recorded constrained answers of the generation pipelines replayed through a matcher."
    from collections import defaultdict
    from toolpaper.grammar import Grammars
    from toolpaper.client import RecordReplay
    recs = [(stage_of(r["messages"], schema), schema, tok(r["text"], add_special_tokens=False)["input_ids"])
            for r in RecordReplay(None, path, "replay").entries.values()      # the project's reader: errors name lines
            if (schema := (r.get("params") or {}).get("schema"))]
    rows, logits = [], torch.zeros(vocab)
    for backend in backends:
        g, compiled = Grammars(tok, vocab, eos, backend), set()
        w = g.matcher({"type": "array", "items": {"type": "string"}}); w.mask(logits)  # one-time start-up, not timed
        acc = defaultdict(lambda: {"answers": 0, "tokens": 0, "mask_s": 0.0, "compile_s": [], "refused": 0,
                                   "chars": 0})
        for stage, schema, toks in recs:
            a = acc[stage]; a["answers"] += 1; a["chars"] += len(schema)
            try:
                t0 = time.perf_counter(); m = g.matcher(schema); dt = time.perf_counter() - t0
            except Exception:
                a["refused"] += 1; continue
            if schema not in compiled: compiled.add(schema); a["compile_s"].append(dt)
            try:
                for t in toks:
                    t0 = time.perf_counter(); m.mask(logits); m.accept(t); a["mask_s"] += time.perf_counter() - t0
                    a["tokens"] += 1
            except ValueError:
                a["refused"] += 1
        for stage, a in sorted(acc.items()):
            rows.append({"stage": stage, "library": backend, "answers": a["answers"],
                         "schema chars (mean)": round(a["chars"] / a["answers"]),
                         "compile ms (mean, cold)": round(1000 * sum(a["compile_s"]) / max(len(a["compile_s"]), 1), 1),
                         "tokens replayed": a["tokens"],
                         "mask + accept ms / token": round(1000 * a["mask_s"] / max(a["tokens"], 1), 3),
                         "refused": a["refused"]})
            print(rows[-1], flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--max-new", type=int, default=384)
    ap.add_argument("--out", default=None)
    ap.add_argument("--records", default="reports/generation_yield/work/llm_cache.jsonl")
    a = ap.parse_args()
    from toolpaper.engine import Engine, Request
    from toolpaper.grammar import BACKENDS, Grammars, schema_text
    from toolpaper.metrics import seal_scores
    from toolpaper.models import load_model
    from toolpaper.prompts import render
    m, tok = load_model(a.model, device="cpu", dtype=torch.float32)
    insts, ex, schemas = workload(a.prompts)
    ids = [tok(render(tok, e.messages), add_special_tokens=False)["input_ids"] for e in ex]
    texts = [schema_text(s) for s in schemas]
    load0 = [round(x, 2) for x in os.getloadavg()]
    rows = []

    def row(name, outs, secs, extra):
        sc = seal_scores([o.text for o in outs], insts, "compat")["metrics"]
        ok = 0
        for o in outs:
            try: json.loads(o.text); ok += 1
            except json.JSONDecodeError: pass
        f1 = sc["tool"].get("f1") if isinstance(sc["tool"], dict) else None
        rows.append({"decoding": name, "prompts": len(outs), "generated tokens": sum(len(o.tokens) for o in outs),
                     "s / prompt": round(secs / len(outs), 2), "cut by the limit":
                         sum(o.finish_reason == "length" for o in outs), "answers that parse": ok,
                     "Format ACC (compat)": round(100 * sc["format_acc"], 1),
                     "Tool F1 (compat)": None if f1 is None else round(100 * f1, 1), **extra})
        print(rows[-1], flush=True)

    eng = Engine(m, tok, precision="fp32")
    t0 = time.perf_counter(); free = eng.generate([Request(i, a.max_new) for i in ids]); row("unconstrained", free,
                                                                                      time.perf_counter() - t0, {})
    vocab = m.lm_head.out_features
    for backend in BACKENDS:
        g = Grammars(tok, vocab, eng.eos, backend)
        t0 = time.perf_counter(); g.matcher(schemas[0]); compile_s = time.perf_counter() - t0
        eng = Engine(m, tok, precision="fp32", grammar=backend)
        t0 = time.perf_counter()
        outs = eng.generate([Request(i, a.max_new, schema=s) for i, s in zip(ids, texts)])
        secs = time.perf_counter() - t0
        per_tok, n = mask_cost(Grammars(tok, vocab, eng.eos, backend), schemas,
                               [[t for t in o.tokens if t not in eng.eos] for o in outs], vocab)
        row(f"constrained: {backend}", outs, secs, {"compile ms (first schema)": round(1000 * compile_s, 1),
                                                    "mask + accept ms / token": round(1000 * per_tok, 3)})
    free_ms = 1000 * sum(r["s / prompt"] * r["prompts"] for r in rows[:1]) / max(rows[0]["generated tokens"], 1)
    pipe = pipeline_cost(tok, vocab, eng.eos, a.records, BACKENDS) if os.path.exists(a.records) else []
    status = lmfe_status(tok)
    res = {"model": a.model, "threads": torch.get_num_threads(), "machine": f"{platform.machine()}, torch "
           f"{torch.__version__}", "rows": rows, "pipeline": pipe, "records": a.records,
           "engine ms / token (unconstrained, batched)": round(free_ms, 1), "lm-format-enforcer": status,
           "load_start": load0,
           "load_end": [round(x, 2) for x in os.getloadavg()],
           "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    cons = [r for r in rows if r["decoding"].startswith("constrained")]
    best = min(cons, key=lambda r: (-r["answers that parse"], r["mask + accept ms / token"]))
    name = best["decoding"].split(": ")[1]
    rest = "; ".join(f"{r['decoding'].split(': ')[1]}: {r['answers that parse']}/{r['prompts']} parse, "
                     f"{r['cut by the limit']} cut by the limit, {r['mask + accept ms / token']} ms per token"
                     for r in cons)
    res["verdict"] = (f"Ranked by answers that parse, then by mask cost per token, the best library here is `{name}` "
                      f"({rest}). lm-format-enforcer: {status}.")
    import pandas as pd
    from toolpaper.metrics import df_markdown
    md = "\n".join([
        f"# Constrained decoding ({a.model}, {res['threads']} threads, {res['machine']})", "",
        "Produced by `benchmarks/grammar_speed.py` in one run: the same Seal-Tools prompts (gold tools as the "
        "candidates, toolpaper layout) decoded greedily by the engine in fp32, free and under each answer's "
        "`seal_answer_schema`, with each grammar library. Mask + accept: the library's per-token work, replayed along "
        "the constrained answers (a cost the decoding loop pays once per token on top of the model's forward pass). "
        "Format ACC and Tool F1 count as the authors' scorer does (`../shared/SPEC-scoring.md`): a predicted call is "
        "matched against the gold calls without using them up, so a call repeated in an answer counts twice and Tool "
        "F1 can exceed 100.",
        "", f"Measured {res['measured']}; load average {load0} at the start, {res['load_end']} at the end (2 cores).",
        f"At most {a.max_new} new tokens per answer.", "", df_markdown(pd.DataFrame(rows)), "", "## Verdict", "",
        res["verdict"], "", "## The generation pipelines' schemas", "",
        (f"Every constrained answer in `{a.records}` (the `generation_yield` report's record/replay file: "
         "SmolLM2-135M-Instruct under llguidance, the library the engine uses) tokenized again and replayed "
         "through each library, grouped by the stage that asked for it. Compile: each distinct schema once, cold "
         "(after the library's one-time start-up on a trivial schema, not counted). "
         "Refused: the library would not compile the schema or take a token of the recorded answer. For scale, the "
         f"engine's unconstrained run above spent {free_ms:.1f} ms of wall time per generated token (batched, "
         "prompt processing included)." if pipe else f"No record file at `{a.records}`: run the `generation_yield` "
         "report first."), "", df_markdown(pd.DataFrame(pipe)) if pipe else "", ""])
    print(md)
    if a.out:
        from _index import write_page
        write_page(a.out, "grammar_speed", res, md)


if __name__ == "__main__":
    main()
