"""Train a DEER experiment's missing adapter stages on another machine (a lent GPU) and adopt them into the stage cache.

Three steps, each a subcommand:

  capture  (here)       python benchmarks/train_elsewhere.py capture --profile cpu --seed 2 --out jobs.pkl
           writes, for every adapter stage of `run_deer_experiment` at training seed `--seed` whose training log the
           stage cache does not hold yet, the examples, run settings, span labels and stage key the experiment itself
           would train with (its own functions build them: the key is the one the experiment looks up under
           `--precision fp32`, whatever this machine's `auto` would pick).
  train    (there)      python benchmarks/train_elsewhere.py train --jobs jobs.pkl --label "intra (seed 2)" --out DIR
           builds the registered base model as this machine does (`toolpaper.models.ensure_model`: the packaged GGUF
           de-quantised) and trains one job with `toolpaper.train.finetune` in fp32 (TF32 off, decoder layers eager);
           `hash` prints the sha256 of the base weights, to compare with this machine's before adopting.
  adopt    (here)       python benchmarks/train_elsewhere.py adopt --jobs jobs.pkl --from DIR
           places each trained folder in the experiment's work folder (the tokenizer files of this machine's base),
           writes its stage.json and its training log under stages/train/ with a `device` field saying where it ran
           (and `device_type`, torch's, which the stage cache reads);
           a job whose log exists already is refused (a stage is never overwritten).

With `--rebuild` (capture and adopt), the stages whose log the cache holds but whose weights are not here: a stage
trained on a lent GPU is rebuilt on such a GPU, since a CPU rebuild would be another draw of its seed (the stage cache
refuses that). adopt then places the weights and keeps the held log, the record of the training behind the cached
answers, and prints how the new losses compare with it; check the answers with
`toolpaper reproduce --only deer --verify N --before-weights` before the experiment asks anything new of them.

The experiment then reuses these stages like any other (`reproduce` answers with them on this machine's engine). A GPU
draws the LoRA initialisation and batch order from other random streams than a CPU: such an adapter is the recipe at
another draw of its seed, and the DEER page's seeds table says where each seed trained.
"""
import argparse, hashlib, json, os, pickle, shutil, sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def capture(profile: str, seed: int, work: Path, data_root=None, train_seeds: int | None = None,
            rebuild: bool = False) -> dict:
    """{label: job} of the adapter stages `run_deer_experiment` trains at training seed `seed` (`deer.training_arms`:
    every variant and the retention control) whose log `work`/stages/train does not hold (`rebuild`: whose log it
    holds but whose weights are not in `work`); a job: examples, cfg, key, folder, spans."""
    from toolpaper import data as D, deer as DE
    from toolpaper.report import profile_data_root
    from toolpaper.stages import holds_stage, train_key
    root = profile_data_root(profile, data_root)
    cfg = DE.DeerExpConfig.for_profile(profile, train_seeds=train_seeds or seed + 1)
    tools, valid, test = (D.load(f"tooldeer:{s}", root) for s in ("tools", "valid", "test"))
    jobs = {}
    for label, (ex, run) in DE.training_arms(tools, valid, test, cfg, work, train_seed=seed).items():
        folder = Path(run.output_dir).name
        # fp32 stated in the settings, not left to `auto` (bf16 on bf16 units): `train_key` resolves `auto` to a
        # value, so this is the key the experiment looks up under `--precision fp32`, and `train` trains just that
        run = replace(run, bf16=False)
        key = train_key(cfg.model, None, ex, run, list(DE.DEER_SPANS))
        held = (work / "stages" / "train" / f"{folder}-{key}.json").exists()
        if not rebuild and held: continue                      # trained before: its log is the record
        if rebuild and (not held or holds_stage(work / folder, key)): continue   # nothing to rebuild, or here already
        jobs[label] = dict(examples=ex, cfg=run, key=key, folder=folder, spans=list(DE.DEER_SPANS), model=cfg.model)
    return jobs


def weights_hash(model: str) -> str:
    "sha256 over the base model's state dict (names and bytes, in name order) as `ensure_model` builds it here."
    import torch
    from safetensors.torch import load_file
    from toolpaper.models import ensure_model
    sd = load_file(str(Path(ensure_model(model)) / "model.safetensors"))
    h = hashlib.sha256()
    for k in sorted(sd): h.update(k.encode()); h.update(sd[k].contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def train(job: dict, out: Path, label: str) -> dict:
    "Train one captured job into `out`/its folder in fp32 (TF32 off, layers eager); its device note (also kept there)."
    import torch
    import toolpaper.train as T
    torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False
    # bf16=False again: a job file captured before `capture` stated it must not train in `auto`'s precision either
    cfg = replace(job["cfg"], output_dir=str(out / job["folder"]), bf16=False)
    # compile_layers=False: the CPU path's numerics, no compiled decoder layers
    info = T.finetune(job["model"], job["examples"], cfg, span_labels=job["spans"], compile_layers=False)
    dev = f"{torch.cuda.get_device_name()} (lent GPU)" if torch.cuda.is_available() else "CPU"
    meta = {"label": label, "key": job["key"], "precision": info["precision"], "device_type": info["device_type"],
            "device": f"{dev}, {info['precision']} with TF32 off, eager, torch {torch.__version__}"}
    Path(cfg.output_dir, "device_meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def adopt(jobs: dict, src: Path, work: Path, commit: str, rebuild: bool = False) -> list[tuple[Path, str | None]]:
    """Place each trained folder of `jobs` found under `src` into `work` and write its stage.json and training log
    (with the device it names: `device`, and torch's `device_type`, which the stage cache reads); a job whose log
    exists, or whose folder names another key, stops. `rebuild`: weights of a stage whose log exists, which stays.
    Each job adopted: (its log, None; with `rebuild`: how the new losses compare with the kept log's)."""
    from toolpaper.io import atomic_write_text
    from toolpaper.stages import loss_agreement, weights_bytes
    ref = next((p for p in sorted(work.glob("adapter_*")) if (p / "stage.json").exists()
                and all((p / f).exists() for f in TOKENIZER_FILES)), None)
    done = []
    for label, job in jobs.items():
        s, out = src / job["folder"], work / job["folder"]
        log_p = work / "stages" / "train" / f"{job['folder']}-{job['key']}.json"
        if not (s / "device_meta.json").exists(): print(f"{label}: not trained in {src}, skipped"); continue
        meta = json.loads((s / "device_meta.json").read_text())
        if meta["key"] != job["key"]: raise ValueError(f"{s}: trained stage {meta['key']}, the job is {job['key']}")
        if log_p.exists() and not rebuild: raise FileExistsError(f"{log_p}: the stage cache holds this stage already")
        if rebuild and not log_p.exists(): raise FileNotFoundError(f"{log_p}: no log of this stage to rebuild for")
        if meta.get("precision", "fp32") != "fp32": raise ValueError(f"{s}: trained in {meta['precision']}, not fp32")
        info = json.loads((s / "toolpaper_train.json").read_text())
        kind = info.get("device_type") or meta.get("device_type")              # checked before anything is placed
        if kind is None and not rebuild:
            raise ValueError(f"{s}: names no device_type (trained before finetune wrote it); train it again")
        out.mkdir(parents=True, exist_ok=True); (out / "stage_pending.json").unlink(missing_ok=True)
        for f in s.iterdir():
            if f.name != "device_meta.json": shutil.copy2(f, out / f.name)
        for f in TOKENIZER_FILES if ref is not None else ():   # this machine's tokenizer files, as a run here writes
            shutil.copy2(ref / f, out / f)
        atomic_write_text(out / "stage.json", json.dumps({"key": job["key"]}) + "\n")
        if rebuild:                                            # the held log stays: the record behind the answers
            done.append((log_p, loss_agreement(json.loads(log_p.read_text()), info))); continue
        info.update(storage_bytes=weights_bytes(out), stage_key=job["key"], commit=commit, device=meta["device"],
                    device_type=kind)
        info["config"] = {**info["config"], "output_dir": os.path.relpath(out, log_p.parent)}
        atomic_write_text(log_p, json.dumps(info, indent=1, sort_keys=True, default=str) + "\n")
        done.append((log_p, None))
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("capture"); c.add_argument("--profile", default="cpu"); c.add_argument("--seed", type=int)
    c.add_argument("--work", default=str(ROOT / "reports" / "deer" / "work")); c.add_argument("--out", required=True)
    c.add_argument("--rebuild", action="store_true", help="held stages whose weights are not here")
    h = sub.add_parser("hash"); h.add_argument("--model", default="smollm2-135m-instruct")
    t = sub.add_parser("train"); t.add_argument("--jobs", required=True); t.add_argument("--label", required=True)
    t.add_argument("--out", required=True)
    a = sub.add_parser("adopt"); a.add_argument("--jobs", required=True); a.add_argument("--from", dest="src")
    a.add_argument("--work", default=str(ROOT / "reports" / "deer" / "work"))
    a.add_argument("--rebuild", action="store_true", help="weights of held stages: their logs stay")
    args = ap.parse_args(argv)
    if args.cmd == "capture":
        jobs = capture(args.profile, args.seed, Path(args.work), rebuild=args.rebuild)
        Path(args.out).write_bytes(pickle.dumps(jobs))
        for label, j in jobs.items(): print(f"{label}: stage {j['key']}, {len(j['examples'])} examples")
    elif args.cmd == "hash": print(weights_hash(args.model))
    elif args.cmd == "train":
        print(json.dumps(train(pickle.loads(Path(args.jobs).read_bytes())[args.label], Path(args.out), args.label)))
    else:
        from toolpaper.stages import git_commit
        jobs = pickle.loads(Path(args.jobs).read_bytes())
        for p, rebuilt in adopt(jobs, Path(args.src), Path(args.work), git_commit(), rebuild=args.rebuild):
            print(f"{p}: weights rebuilt, {rebuilt}" if rebuilt else f"adopted {p}")


if __name__ == "__main__":
    main()
