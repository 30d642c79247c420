"""Loaders on the released data (the counts the papers' data must give) and on corrupted copies (precise errors)."""
import functools, http.server, json, shutil, threading
from collections import Counter
from pathlib import Path
import pytest
from toolpaper import data as D
from toolpaper.schema import Trajectory


# ---------------------------------------------------------------- released data
def test_seal_tools_counts(released):
    tools = D.load_seal_tools(released)
    assert len(tools) == 4076
    assert round(sum(len(t.required) for t in tools) / len(tools), 3) == 1.551
    expect = {"dev": (700, 200, 500, 28), "test_in_domain": (700, 200, 500, 30), "test_out_domain": (654, 94, 560, 27)}
    for split, (n, single, multiple, nested) in expect.items():
        inst = D.load_seal_split(split, released)
        kinds = Counter(i.kind for i in inst)
        assert (len(inst), kinds["single"], kinds["multiple"], sum(i.nested for i in inst)) == (
            n,
            single,
            multiple,
            nested,
        )
        # the id's easy/difficult marker agrees with the number of calls
        assert all(("easy" in i.id) == (i.kind == "single") for i in inst)


def test_seal_errata_is_the_only_forward_reference(released):
    noted = [
        (i.id, i.notes)
        for s in D.SPLITS
        if s.startswith("seal-tools:") and s.split(":")[1] in ("dev", "test_in_domain", "test_out_domain")
        for i in D.load(s, released)
        if i.notes
    ]
    assert [n[0] for n in noted] == ["test_out_domain-difficult-241"]


def test_released_record_reads_under_any_file_name(released, tmp_path):
    "Released data is read as released, however it is named: the erratum follows the record, not the file name."
    import subprocess, sys
    copy = tmp_path / "ood.jsonl"
    shutil.copy(released / "seal-tools" / "test_out_domain.jsonl", copy)
    got = {i.id: i.notes for i in D.read_seal_instances(copy)}
    assert len(got) == 654 and got["test_out_domain-difficult-241"]
    # `toolpaper eval` with the released file by path (under its own name and another) scores every record
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"id": k, "output": "[]"}) + "\n" for k in got))
    for gold in (released / "seal-tools" / "test_out_domain.jsonl", copy):
        cmd = [sys.executable, "-m", "toolpaper", "eval", "seal", "--pred", str(pred), "--gold", str(gold)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    # an edited record is not excused: its forward reference is an error naming file, line and field
    rows = [json.loads(x) for x in copy.read_text().splitlines()]
    k = next(n for n, r in enumerate(rows) if r["id"] == "test_out_domain-difficult-241")
    rows[k]["calling"][0]["api"] += "_edited"
    copy.write_text("".join(json.dumps(r) + "\n" for r in rows))
    expect(lambda: D.read_seal_instances(copy), f"ood.jsonl:{k + 1}:", "calling[0].parameters.target", "later call")


def test_seal_other_files(released):
    fields = D.load("seal-tools:fields", released)
    assert len(fields) == 146 and sum(map(len, fields.values())) == 5859
    for split, n in [("dev", 700), ("test_in_domain", 700), ("test_out_domain", 654)]:
        ft = D.load(f"seal-tools:finetune/{split}", released)
        assert len(ft) == n and ft[0].answer.startswith("[{'api'")
        assert len(D.load(f"seal-tools:dpr/{split}", released)) > n


def test_deer_counts(released):
    tools = D.load_deer_tools(released)
    examples = [e for t in tools for e in t.examples]
    assert (len(tools), len(examples)) == (977, 9393)
    assert sum(e.call is not None for e in examples) >= 9390   # upstream quirks are read, not dropped
    valid, test = D.load_deer_split("valid", released), D.load_deer_split("test", released)
    assert Counter(s.branch for s in valid) == {"Call": 526, "NoCall": 346, "NoSearch": 193}
    assert Counter(s.branch for s in test) == {"Call": 445, "NoCall": 298}
    assert all(len(s.candidates) == 5 for s in valid + test if s.branch != "NoSearch")
    assert all(
        s.gold_call is not None and s.gold_call.api in {c.name for c in s.candidates} | {s.gold_call.api}
        for s in valid
        if s.branch == "Call"
    )
    assert len(D.load("tooldeer:baselines/tool_bench", released)) == 200
    assert len(D.load("tooldeer:baselines/tool_corpus", released)) == 126


def test_registry_matches_shared_sha256sums(released):
    sums = dict(line.split()[::-1] for line in (released / "SHA256SUMS").read_text().splitlines() if line.strip())
    reg = {f"./{name}/{f.path}": f.sha256 for name, spec in D.DATASETS.items() for f in spec.files}
    assert {k: sums.get(k) for k in reg} == reg
    # GSM8K is registered with the math agent (issue 18)
    assert all(k.startswith("./gsm8k/") for k in set(sums) - set(reg))


def test_alpha_umi_released_dialogues_load_as_released(released):
    from toolpaper.metrics import umi_gold_steps

    with pytest.warns(
        UserWarning,
        match=r"out_of_domain.json\[record 273\]: conversations\[\d+\]: an observation must follow a caller turn; "
              r"kept as released",
    ):
        trajs = D.load("alpha-umi:toolbench/test_out_domain", released)
    assert len(trajs) == 400 and sum(len(umi_gold_steps(t)) for t in trajs) == 1547
    with pytest.raises(D.DataError, match=r"record 273\]: conversations\[\d+\]"):
        # strict: the check for toolpaper's own files
        D.read_umi_steps(released / "alpha-umi" / "toolbench" / "test" / "out_of_domain.json")
    counts = {
        r: len(D.load(f"alpha-umi:toolbench/train_{r}", released))
        for r in ("backbone", "planner", "caller", "summarizer")
    }
    assert counts == {"backbone": 79, "planner": 79, "caller": 59, "summarizer": 14}


def test_eval_umi_on_the_released_file_scores_its_gold_echo(released, tmp_path):
    import warnings
    from toolpaper.cli import main
    from toolpaper.metrics import umi_gold_steps
    path = released / "alpha-umi" / "toolbench" / "test" / "out_of_domain.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trajs = D.read_umi_steps(path, strict=False)
    recs = []
    for k, t in enumerate(trajs):
        for s, st in enumerate(umi_gold_steps(t)):
            caller = f"Action: {st.action}\nAction Input: {st.action_input}" if st.plan == "call" else None
            recs.append({"id": f"{k}:{s}", "planner": st.planner, "caller": caller, "summarizer": st.answer})
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert (
        main(
            [
                "eval",
                "umi",
                "--pred",
                str(tmp_path / "p.jsonl"),
                "--gold",
                str(path),
                "--json",
                str(tmp_path / "m.json"),
            ]
        )
        == 0
    )
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["plan_acc"] == 1.0 and m["act_em"] == 1.0 and m["n_steps"] == 1547


def test_every_split_exports_to_datasets(released):
    for split in ["seal-tools:dev", "tooldeer:valid", "tooldeer:tools", "seal-tools:tools"]:
        recs = D.load(split, released)
        ds = D.to_dataset(recs)
        assert len(ds) == len(recs)
        assert type(recs[0]).from_row(ds[3]) == recs[3]


# ---------------------------------------------------------------- sample data
def test_sample_has_everything(sample):
    assert len(D.load_seal_tools("sample")) >= 20
    inst = [i for s in ("dev", "test_in_domain", "test_out_domain") for i in D.load_seal_split(s, "sample")]
    assert len(inst) >= 30 and sum(i.nested for i in inst) >= 5
    assert {s.branch for s in D.load_deer_split("valid", "sample")} == {"NoSearch", "NoCall", "Call"}
    trajs = D.load("alpha-umi:steps", "sample")
    assert len(trajs) == 2 and isinstance(trajs[0], Trajectory)
    assert [t.role for t in trajs[0].turns][:3] == ["user", "planner", "caller"]


def test_data_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLPAPER_DATA_DIR", str(tmp_path / "env"))
    assert D.data_dir() == tmp_path / "env"
    assert D.data_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("TOOLPAPER_DATA_DIR")
    monkeypatch.setenv("TOOLPAPER_CACHE", str(tmp_path / "cache"))
    assert D.data_dir() == tmp_path / "cache" / "data"


# ---------------------------------------------------------------- corruption kinds
SAMPLE_SEAL = D.data_dir("sample") / "seal-tools"
SAMPLE_DEER = D.data_dir("sample") / "tooldeer"


def lines(name):
    return (SAMPLE_SEAL / name).read_text().splitlines()


def write(path: Path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def expect(fn, *parts):
    with pytest.raises(D.DataError) as e:
        fn()
    for p in parts:
        assert p in str(e.value), f"{p!r} not in {str(e.value)!r}"
    return e.value


def test_truncated_json_line(tmp_path):
    rows = lines("dev.jsonl"); rows[4] = rows[4][: len(rows[4]) // 2]
    err = expect(lambda: D.read_seal_instances(write(tmp_path / "dev.jsonl", rows)), "dev.jsonl:5:", "invalid JSON")
    assert err.line == 5


def test_missing_field(tmp_path):
    rows = [json.loads(x) for x in lines("tool.jsonl")]; del rows[2]["api_description"]
    expect(
        lambda: D.read_seal_tools(write(tmp_path / "tool.jsonl", rows)),
        "tool.jsonl:3:",
        "api_description",
        "Field required",
    )


def test_wrong_type(tmp_path):
    rows = [json.loads(x) for x in lines("dev.jsonl")]; rows[6]["calling"][1]["parameters"] = ["not", "a", "dict"]
    expect(
        lambda: D.read_seal_instances(write(tmp_path / "dev.jsonl", rows)),
        "dev.jsonl:7:",
        "calling[1].parameters",
        "dictionary",
    )


def test_dangling_reference(tmp_path):
    rows = [json.loads(x) for x in lines("dev.jsonl")]; rows[5]["calling"][1]["parameters"]["flight_id"] = "API_call_9"
    expect(
        lambda: D.read_seal_instances(write(tmp_path / "dev.jsonl", rows)),
        "dev.jsonl:6:",
        "calling[1].parameters.flight_id",
        "no call produces",
    )


def test_forward_reference(tmp_path):
    rows = [json.loads(x) for x in lines("dev.jsonl")]; r = rows[5]
    r["calling"][0]["parameters"]["origin"] = r["calling"][1]["responses"][0]
    expect(
        lambda: D.read_seal_instances(write(tmp_path / "dev.jsonl", rows)),
        "dev.jsonl:6:",
        "calling[0].parameters.origin",
        "later call 1",
    )


def test_duplicate_tool_name(tmp_path):
    rows = lines("tool.jsonl"); rows.append(rows[0])
    expect(
        lambda: D.read_seal_tools(write(tmp_path / "tool.jsonl", rows)),
        f"tool.jsonl:{len(rows)}:",
        "api_name",
        "duplicate tool name",
        "first on line 1",
    )


def test_duplicate_instance_id(tmp_path):
    rows = lines("dev.jsonl"); rows.append(rows[2])
    expect(
        lambda: D.read_seal_instances(write(tmp_path / "dev.jsonl", rows)), f"dev.jsonl:{len(rows)}:", "duplicate id"
    )


def test_required_not_a_parameter(tmp_path):
    rows = [json.loads(x) for x in lines("tool.jsonl")]; rows[0]["required"].append("ghost")
    expect(lambda: D.read_seal_tools(write(tmp_path / "tool.jsonl", rows)), "tool.jsonl:1:", "ghost")


def test_empty_file(tmp_path):
    (tmp_path / "dev.jsonl").write_text("\n  \n")
    expect(lambda: D.read_seal_instances(tmp_path / "dev.jsonl"), "dev.jsonl", "file is empty")
    (tmp_path / "valid.json").write_text("[]")
    expect(lambda: D.read_deer_chains(tmp_path / "valid.json", "valid"), "valid.json", "list of records is empty")


def test_non_utf8_bytes(tmp_path):
    raw = (SAMPLE_SEAL / "dev.jsonl").read_bytes().split(b"\n")
    raw[3] = (
        raw[3].replace(b"weather", b"w\xe9ather", 1) if b"weather" in raw[3] else raw[3][:20] + b"\xff" + raw[3][20:]
    )
    (tmp_path / "dev.jsonl").write_bytes(b"\n".join(raw))
    expect(lambda: D.read_seal_instances(tmp_path / "dev.jsonl"), "dev.jsonl:4:", "not valid UTF-8")


def test_unknown_chain_marker(tmp_path):
    rows = json.loads((SAMPLE_DEER / "valid.json").read_text())
    rows[4]["conversations"][1]["value"] = rows[4]["conversations"][1]["value"].replace("#CallAPI#", "#MaybeCallAPI#")
    (tmp_path / "valid.json").write_text(json.dumps(rows))
    expect(
        lambda: D.read_deer_chains(tmp_path / "valid.json", "valid"),
        "valid.json[record 4]",
        "conversations[1].value",
        "unknown marker #MaybeCallAPI#",
    )


def test_chain_marker_order(tmp_path):
    rows = json.loads((SAMPLE_DEER / "valid.json").read_text())
    rows[0]["conversations"][1]["value"] = "#Begin# hmm #CallAPI# weather_now(city='x') #End#"
    (tmp_path / "valid.json").write_text(json.dumps(rows))
    expect(
        lambda: D.read_deer_chains(tmp_path / "valid.json", "valid"),
        "valid.json[record 0]",
        "none of the three branches",
    )


def test_umi_turn_order(tmp_path):
    rows = json.loads((D.data_dir("sample") / "alpha-umi" / "steps.json").read_text())
    del rows[0]["conversations"][2]          # drop the caller turn: the observation now follows a planner
    (tmp_path / "steps.json").write_text(json.dumps(rows))
    expect(lambda: D.read_umi_steps(tmp_path / "steps.json"), "steps.json[record 0]", "conversations[2]", "caller turn")


def test_umi_unknown_role(tmp_path):
    rows = json.loads((D.data_dir("sample") / "alpha-umi" / "steps.json").read_text())
    rows[1]["conversations"][1]["from"] = "critic"
    (tmp_path / "steps.json").write_text(json.dumps(rows))
    expect(
        lambda: D.read_umi_steps(tmp_path / "steps.json"),
        "steps.json[record 1]",
        "conversations[1].from",
        "unknown role 'critic'",
    )


def test_baseline_missing_field(tmp_path, released):
    rows = json.loads((released / "tooldeer" / "baselines" / "tool_corpus.json").read_text())
    del rows[7]["is_call"]
    (tmp_path / "tool_corpus.json").write_text(json.dumps(rows))
    expect(lambda: D.read_deer_baseline(tmp_path / "tool_corpus.json"), "tool_corpus.json[record 7]", "is_call")


def test_wrong_checksum_on_load(tmp_path, released):
    d = tmp_path / "data" / "seal-tools"; d.mkdir(parents=True)
    src = (released / "seal-tools" / "dev.jsonl").read_text().splitlines()
    src[10] = src[10].replace("\"query\": \"", "\"query\": \"X", 1)
    (d / "dev.jsonl").write_text("\n".join(src) + "\n")
    with pytest.raises(D.ChecksumError, match="dev.jsonl.*registry pins"):
        D.load_seal_split("dev", tmp_path / "data", download=False)
    assert len(D.load_seal_split("dev", tmp_path / "data", download=False, verify=False)) == 700


# ---------------------------------------------------------------- downloads (from a local mirror on 127.0.0.1)
@pytest.fixture()
def mirror(tmp_path, released, monkeypatch):
    root = tmp_path / "mirror"
    for name, rel in [("seal-tools", "field.jsonl"), ("tooldeer", "baselines/tool_corpus.json")]:
        spec = D.DATASETS[name]; f = spec.file(rel)
        dest = root / spec.repo / spec.commit / f.upstream
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(released / name / rel, dest)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv("TOOLPAPER_DATA_URL", f"http://127.0.0.1:{srv.server_address[1]}/{{repo}}/{{commit}}/{{path}}")
    yield root
    srv.shutdown(); srv.server_close()


def test_download_verifies_and_loads(mirror, tmp_path):
    fields = D.load("seal-tools:fields", tmp_path / "data")
    assert len(fields) == 146
    assert (
        D.sha256(tmp_path / "data" / "seal-tools" / "field.jsonl")
        == D.DATASETS["seal-tools"].file("field.jsonl").sha256
    )
    assert len(D.load("tooldeer:baselines/tool_corpus", tmp_path / "data")) == 126


def test_download_with_bad_checksum_writes_nothing(mirror, tmp_path):
    spec = D.DATASETS["seal-tools"]
    bad = mirror / spec.repo / spec.commit / spec.file("field.jsonl").upstream
    bad.write_text(bad.read_text().replace("Sports", "Sport", 1))
    with pytest.raises(D.ChecksumError, match="nothing was written"):
        D.load("seal-tools:fields", tmp_path / "data")
    assert not (tmp_path / "data" / "seal-tools" / "field.jsonl").exists()
    assert not list((tmp_path / "data").rglob("*.tmp"))


def test_missing_file_message(mirror, tmp_path):
    with pytest.raises(D.DataMissingError) as e:
        D.load("seal-tools:dev", tmp_path / "data")       # the mirror does not have dev.jsonl (HTTP 404)
    msg = str(e.value)
    assert "dev.jsonl" in msg and "fairyshine/Seal-Tools" in msg and "TOOLPAPER_DATA_DIR" in msg and "HTTPError" in msg
    with pytest.raises(D.DataMissingError, match="downloads are disabled"):
        D.load("seal-tools:dev", tmp_path / "data", download=False)
