"""The released formats, read at run time from the released files: Seal-Tools prompts byte for byte, DEER chains byte
for byte,
and the authors' DEER counting on the released chains."""
from toolpaper import data as D


def test_seal_released_prompts_are_rebuilt_byte_for_byte(released):
    from toolpaper.prompts import SealTemplate, released_tool_list, seal_prompt
    tools = {t.name: t for t in D.load("seal-tools:tools", released)}
    template = SealTemplate.from_records(
        D.load("seal-tools:finetune/dev", released)[:1], D.load("seal-tools:dev", released)
    )
    n = 0
    for split in ("dev", "test_in_domain", "test_out_domain"):
        insts = {x.id: x for x in D.load(f"seal-tools:{split}", released)}
        for r in D.load(f"seal-tools:finetune/{split}", released):
            names = [d["api_name"] for d in released_tool_list(r.prompt)]
            ex = seal_prompt(insts[r.id], [tools[x] for x in names], template=template)
            assert ex.messages[0]["content"] == r.prompt, r.id
            assert ex.target == r.answer, r.id
            n += 1
    assert n == 2054


def test_released_gold_coverage_matches_the_spec(released):
    from toolpaper.sealtools import released_gold_coverage

    cover = {
        s: released_gold_coverage(D.load(f"seal-tools:{s}", released), D.load(f"seal-tools:finetune/{s}", released))
        for s in ("dev", "test_in_domain", "test_out_domain")
    }
    assert cover == {"dev": (697, 700), "test_in_domain": (698, 700), "test_out_domain": (651, 654)}


def test_deer_chains_render_with_the_released_phrases(released, monkeypatch):
    "The phrases are read from the data folder in use (the packaged sample words its chains differently)."
    from toolpaper.sampling import released_phrases, render_chain
    # the phrases are cached per resolved folder: no clearing needed
    monkeypatch.setenv("TOOLPAPER_DATA_DIR", str(released))
    for split in ("valid", "test"):
        samples = D.load(f"tooldeer:{split}", released)
        assert [render_chain(s) for s in samples] == [s.chain for s in samples]
    assert released_phrases(released) != released_phrases("sample")


def test_authors_counting_gives_gold_transcripts_full_marks(released):
    from toolpaper.audit import transcript
    from toolpaper.metrics import deer_scores
    valid = D.load("tooldeer:valid", released)
    m = deer_scores([transcript(s.chain) for s in valid], valid, "compat")["metrics"]
    assert m and all(v == 1.0 for v in m.values()), m


def test_authors_counting_sends_full_chains_through_the_end_rule(released):
    "A full gold chain of a searching sample contains #End#, so rule 2 scores it as a failed search (SPEC-scoring §2)."
    from toolpaper.metrics import deer_scores
    valid = [s for s in D.load("tooldeer:valid", released) if s.branch != "NoSearch"][:20]
    m = deer_scores([s.chain for s in valid], valid, "compat")["metrics"]
    assert m and all(v == 0.0 for k, v in m.items() if "nosearch" not in k.lower()), m


# ------------------------------------------------------------------ alpha-UMi role files in the authors' layout
ROLES = ("backbone", "planner", "caller", "summarizer")


def _role_file(released, role):
    import json
    return json.loads((released / "alpha-umi" / "toolbench" / "train-example" / f"train_{role}.json").read_text())


def test_umi_role_layouts_rebuild_every_released_input_byte_for_byte(released):
    "The layouts are learned from one record of each file; every record of the four files then renders back exactly."
    from toolpaper.trajectories import released_role_templates
    tpls = released_role_templates(released)
    n, prefix = 0, []
    for role in ROLES:
        for i, r in enumerate(_role_file(released, role)):
            thought = r["history"][-1]["value"] if role == "caller" else ""
            if tpls[role].render(r["tools"], r["history"], thought) != r["input"]:
                # a quirk of the released backbone file: a few inputs show only the first k turns of their `history`
                assert [
                    k
                    for k in range(len(r["history"]))
                    if tpls[role].render(r["tools"], r["history"][:k], thought) == r["input"]
                ], (role, i)
                prefix.append((role, i))
            n += 1
    assert n == 79 + 79 + 59 + 14
    assert prefix == [("backbone", i) for i in (6, 31, 36, 41, 60, 74)]


def test_toolpaper_role_files_have_the_authors_keys_roles_and_markers(released, tmp_path):
    "Role files written from the released ToolBench dialogues look like the authors' files, field for field."
    import re
    from toolpaper.trajectories import umi_role_records, write_umi_role_file
    from toolpaper.data import read_umi_role_file
    dialogues = D.load("alpha-umi:toolbench/test_out_domain", released)[:30]
    markers = {"planner": re.compile(r"(^|\n) Next: (caller|conclusion|give up)\.$"),
               "caller": re.compile(r"^Action: [^\n]+\nAction Input: ", re.S),
               "backbone": re.compile(r"\n(Action: [^\n]+\nAction Input: |conclusion: )", re.S)}
    for role in ROLES:
        theirs = _role_file(released, role)
        ours = umi_role_records(dialogues, role, root=released)
        assert ours, role
        write_umi_role_file(tmp_path / f"train_{role}.json", ours)
        # the reader of the authors' files takes ours
        assert len(read_umi_role_file(tmp_path / f"train_{role}.json")) == len(ours)
        assert {tuple(r) for r in ours} == {tuple(r) for r in theirs} == {("tools", "history", "input", "target")}
        assert {tuple(t) for r in ours for t in r["tools"]} == {tuple(t) for r in theirs for t in r["tools"]}
        assert {h["from"] for r in ours for h in r["history"]} <= {h["from"] for r in theirs for h in r["history"]}
        end = lambda rs: {r["input"][-12:] for r in rs}
        assert end(ours) == end(theirs), role                                                # same closing cue per role
        if role in markers:
            assert all(markers[role].search(r["target"]) for r in theirs), role
            assert all(markers[role].search(r["target"]) for r in ours), role
        if role == "caller":  # the caller's input repeats the planner's last turn, as theirs does
            assert all(
                r["history"][-1]["from"] == "assistant"
                and r["history"][-1]["value"] in r["input"].rsplit("</s>", 1)[-1]
                for r in ours + theirs
            )


def test_the_authors_role_files_train_in_toolpaper(released, tmp_path):
    """Each of the four released files is read into training examples (prompt masked, spans labelled) and trains one
    step."""
    import math
    from toolpaper.trajectories import SPAN_LABELS, file_role_examples
    from toolpaper.train import SFTConfig, finetune, tokenize_example
    from toolpaper.models import load_tokenizer
    tok = load_tokenizer("tiny-random-llama")
    examples = []
    for role in ROLES:
        ex = file_role_examples(released / "alpha-umi" / "toolbench" / "train-example" / f"train_{role}.json", role)
        assert len(ex) == len(_role_file(released, role))
        f = tokenize_example(tok, ex[0], SPAN_LABELS, max_length=4096)
        n_target = sum(1 for x in f["labels"] if x != -100)
        assert 0 < n_target < f["length"] and f["labels"][: f["length"] - n_target] == [-100] * (f["length"] - n_target)
        examples += ex[:2]
    out = finetune(
        "tiny-random-llama",
        examples,
        SFTConfig(str(tmp_path / "run"), max_steps=1, batch_size=2, max_length=384, logging_steps=1),
    )
    assert out["history"] and all(math.isfinite(h["loss"]) for h in out["history"] if "loss" in h)


def test_bench_umi_prompts_in_the_authors_layout(released, tmp_path):
    """`toolpaper bench umi` (default --prompt released) sends the authors' role-file inputs: plain text, their closing
    cue."""
    import json, subprocess, sys
    from pathlib import Path
    exe = Path(sys.executable).with_name("toolpaper")
    out = tmp_path / "umi"
    r = subprocess.run(
        [
            str(exe),
            "bench",
            "umi",
            "--model",
            "tiny-random-llama",
            "--limit",
            "1",
            "--max-tokens",
            "4",
            "--data-dir",
            str(released),
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    reqs = [json.loads(l) for l in (out / "requests.jsonl").read_text().splitlines()]
    theirs = _role_file(released, "backbone")[0]["input"]
    prompts = [q.get("prompt", q.get("messages")) for q in reqs]  # a plain-text request is recorded as `prompt`
    assert reqs and all(
        isinstance(p, str) and p.startswith(theirs[:30]) and p.endswith(theirs[-12:]) for p in prompts
    ), prompts[:1]
    assert json.loads((out / "config.json").read_text())["run"]["prompt"] == "released"
