"""The Python snippets of the README and the docs pages run as written against the packaged sample (model names swapped
for the tiny random Llama and sizes scaled to the sample, listed below), every `-p` name they mention is a notebook
parameter, and every relative link in them points at a file of the repository."""
import os, re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the README, then the docs pages in the order their snippets build on each other (a later one may read what an
# earlier one wrote, e.g. runs/deer)
DOCS = ["getting_started", "scoring_and_benchmarking", "pipelines/retrieval_and_sampling", "training_and_engine",
        "pipelines/data_generation", "pipelines/seal_tools_and_deer", "pipelines/alpha_umi", "clients", "reproducing",
        "development", "README"]
PAGES = [ROOT / "README.md"] + [ROOT / "docs" / f"{d}.md" for d in DOCS]
README = "\n\n".join(p.read_text() for p in PAGES)
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)

# The sample holds a few records of each file, and tests run on the tiny model: these are the only edits.
SMALL = {
    '"smollm2-135m-instruct"': '"tiny-random-llama"',
    '"Qwen/Qwen2.5-0.5B-Instruct"': '"tiny-random-llama"',
    "m=30": "m=3",
    'R.DPRConfig(loss="multi_positive")': 'R.DPRConfig(loss="multi_positive", max_steps=2)',
    "n_fields=5, subfields_per_field=10, tools_per_subfield=10, n_single=500, "
    "n_multi=500": "n_fields=2, subfields_per_field=2, tools_per_subfield=2, n_single=2, n_multi=1, max_tokens=32",
    'load("tooldeer:tools")[:20]': 'load("tooldeer:tools")[:2]',
    'generate_deer(llm, seeds, "runs/gen")': 'generate_deer(llm, seeds, "runs/gen", DeerGenConfig(max_tokens=32))',
    "from toolpaper.generate import SealGenConfig, generate_seal, "
    "generate_deer": "from toolpaper.generate import DeerGenConfig, SealGenConfig, generate_seal, generate_deer",
    'train_n=None, test_n=None), "runs/seal")':
    # the sample has no released prompts
    (
        "train_n=6, test_n=4, min_nested=1, k=3, max_new_tokens=8, "
        "dpr=__import__('toolpaper.retrieval').retrieval.DPRConfig(epochs=0), "
        "prompt_style='toolpaper', settings=('base:bm25', 'ft:bm25', 'ftgold:gold'), "
        "train=__import__('toolpaper.config').config.SFTConfig(max_steps=2, batch_size=2, max_length=384)), "
        "\"runs/seal\")"
    ),
    '{"ToolBench": load("tooldeer:baselines/tool_bench"), "ToolCorpus": load("tooldeer:baselines/tool_corpus")}': "{}",
    "DE.DeerExpConfig(train_n=None)": (
        "DE.DeerExpConfig.for_profile('smoke', clusters=3, train={'max_length': 384})"
    ),
    'train_methods("tiny-random-llama", corpus, '
    '"runs/umi")': 'train_methods("tiny-random-llama", corpus, "runs/umi", GLPFTConfig(max_steps=1, batch_size=2, '
                   'max_length=384))',
    'SFTConfig("runs/deer", epochs=1, batch_size=8)': 'SFTConfig("runs/deer", max_steps=2, batch_size=8)',
    "from toolpaper.agent import train_methods,": "from toolpaper.agent import GLPFTConfig, train_methods,",
    'make_agent("alpha_umi", trained, '
    '"tiny-random-llama")': 'make_agent("alpha_umi", trained, "tiny-random-llama", max_new_tokens=(8, 8, 8))',
    "UM.UmiExpConfig(train_n=200, scaling=(50, 100))": (
        "UM.UmiExpConfig(model='tiny-random-llama', train_n=4, test_n=2, scaling=(2,), max_new_tokens=(8, 8, 8), "
        "glpft=__import__('toolpaper.agent').agent.GLPFTConfig(max_steps=1, batch_size=2, max_length=384))"
    ),
    "max_tokens=256, stop": "max_tokens=8, stop",
    "max_tokens=128, stop": "max_tokens=8, stop",
    "max_tokens=64, prefixes": "max_tokens=8, prefixes",
}


def small(code: str, used: set | None = None) -> str:
    for a, b in SMALL.items():                 # in order: a later edit may read the result of an earlier one
        if a in code and used is not None: used.add(a)
        code = code.replace(a, b)
    return code


def test_every_substitution_is_used():
    used: set = set()
    for b in BLOCKS: small(b, used)
    unused = [a for a in SMALL if a not in used]
    assert not unused, f"README no longer contains {unused}: update the snippet test"
    assert len(BLOCKS) >= 8


def test_readme_python_snippets_run_on_the_sample(tmp_path):
    env = {
        **os.environ,
        "TOOLPAPER_DATA_DIR": str(ROOT / "toolpaper" / "sample_data"),
        "HF_HUB_OFFLINE": "1",
        "MPLBACKEND": "Agg",
    }
    # in order, in one folder: a later snippet may use what an earlier one wrote (runs/deer)
    for i, code in enumerate(BLOCKS):
        r = subprocess.run(
            [sys.executable, "-c", small(code)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        assert r.returncode == 0, f"README python block {i} failed:\n{small(code)}\n{r.stderr[-3000:]}"


def test_every_p_option_in_the_readme_is_a_notebook_parameter():
    from toolpaper.report import EXPERIMENTS, notebook_parameters
    params = {n: set(notebook_parameters(ROOT / "nbs" / "experiments" / e.notebook)) for n, e in EXPERIMENTS.items()}
    named = set(re.findall(r"-p ([a-z_]+)=", README)) - {"key"}          # "-p key=value" is the syntax itself
    assert named >= {"train_n", "test_n", "scaling", "model"}
    for name in named: assert any(name in p for p in params.values()), f"-p {name} is no experiment's parameter"
    for exp in ("seal_tools", "deer", "alpha_umi"):                  # "-p train_n=... -p test_n=... shrink any of them"
        assert {"train_n", "test_n"} <= params[exp], exp


def test_readme_overview_is_the_index_notebook():
    """nbs/index.ipynb is the source of the overview: its markdown cells before the first code cell open README.md word
    for word."""
    import nbformat
    readme = (ROOT / "README.md").read_text()
    nb = nbformat.read(ROOT / "nbs" / "index.ipynb", as_version=4)
    head = []
    for c in nb.cells:
        if c.cell_type != "markdown": break
        head.append(c.source)
    assert head, "nbs/index.ipynb starts with no overview"
    assert readme.startswith("\n\n".join(head)), (
        "README.md's overview differs from nbs/index.ipynb: edit the notebook and copy it over"
    )


def test_readme_hand_made_prediction_files_score_as_described(tmp_path, released):
    """The README's three hand-written prediction files, made by its own bash block, score item by item as the README
    says."""
    from toolpaper.cli import read_predictions_file
    from toolpaper.metrics import score
    block = next(b for b in re.findall(r"```bash\n(.*?)```", README, re.S) if "cat > seal.jsonl" in b)
    subprocess.run(["bash", "-c", block], cwd=tmp_path, check=True)
    at = f"@{released}"
    seal = score("seal", read_predictions_file(tmp_path / "seal.jsonl", "seal"), "seal-tools:test_in_domain" + at,
                 "strict", n_boot=0)
    items = {it["id"]: it for it in seal.items}
    assert items["test_in_domain-easy-0"]["counts"]["exact"] == 1
    c = items["test_in_domain-easy-1"]["counts"]
    assert (c["correct_tools"], c["gold_params"], c["correct_params"]) == (1, 2, 1)
    deer = score("deer", read_predictions_file(tmp_path / "deer.jsonl", "deer"), "tooldeer:valid" + at, n_boot=0)
    ok = {it["id"]: it["counts"] for it in deer.items if it["id"] in ("0", "1", "2")}
    assert (ok["0"]["nocall_ok"], ok["1"]["call_ok"], ok["2"]["nosearch_ok"]) == (1, 1, 1)
    assert ok["0"]["search_ok"] == ok["1"]["search_ok"] == 1
    umi = score("umi", read_predictions_file(tmp_path / "umi.jsonl", "umi"), "alpha-umi:toolbench/test_out_domain" + at,
                n_boot=0)
    first = next(it for it in umi.items if it["id"] == "0:0")
    assert first["values"] == {"plan": 1.0, "hallu": 0.0, "act": 1.0, "arg": 1.0}


def test_every_docs_page_is_linked_and_every_relative_link_resolves():
    "The README links every docs page (through docs/README.md at least), and no relative link is broken."
    index = (ROOT / "docs" / "README.md").read_text()
    for p in (ROOT / "docs").rglob("*.md"):
        if p.name != "README.md": assert str(p.relative_to(ROOT / "docs")) in index, f"docs/README.md omits {p}"
    assert "docs/README.md" in (ROOT / "README.md").read_text() or "(docs/" in (ROOT / "README.md").read_text()
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+://", target): continue
            if not (page.parent / target).exists(): broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_readme_stays_short_and_dateless():
    text = (ROOT / "README.md").read_text()
    assert len(text.encode()) <= 25_000, len(text.encode())
    assert not re.search(r"20\d\d-\d\d-\d\d", text), "the README states no dates: history belongs to git"


def test_claims_summary_is_the_ledgers():
    "The README's and the index notebook's claims summary are what `claims_summary` makes of reports/claims.csv."
    import json
    import pandas as pd
    from toolpaper.claims import SUMMARY_END, SUMMARY_START, claims_summary
    want = claims_summary(pd.read_csv(ROOT / "reports" / "claims.csv"))
    index = json.loads((ROOT / "nbs" / "index.ipynb").read_text())
    pages = {"README.md": (ROOT / "README.md").read_text(),
             "nbs/index.ipynb": "".join("".join(c["source"]) for c in index["cells"])}
    for name, text in pages.items():
        block = re.search(re.escape(SUMMARY_START) + r"\n(.*?)\n" + re.escape(SUMMARY_END), text, re.S)
        assert block, f"{name}: no generated claims summary"
        assert block.group(1) == want, f"{name}: the claims summary differs from reports/claims.csv (rerun claims)"
    counts = pd.read_csv(ROOT / "reports" / "claims.csv")["verdict"].value_counts()
    assert f"**{counts.get('reproduced', 0)} reproduced" in want
