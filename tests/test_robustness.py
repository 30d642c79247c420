"""Bad input gets a clear answer: malformed prediction files and gold data for all three tasks (an error naming file,
line
and field, or with --lenient a counted warning), closed pipes, and parsers and scorers that stay linear on 1 MB
adversarial input."""
import json, re, subprocess, sys, time
from pathlib import Path
import pytest
from toolpaper import data as D

EXE = str(Path(sys.executable).with_name("toolpaper"))
SAMPLE = D.data_dir("sample")


def cli(*args, **kw):
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, **kw)


def one_error(r, *parts):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    for p in parts: assert p in r.stderr, (p, r.stderr)


# ------------------------------------------------------------------ prediction files, all three tasks
SEAL_ID, DEER_ID = "dev-easy-0", "0"
BAD_OUTPUTS = [
    ("3", "a number"),
    ("[1, 2]", "a list"),
    ('{"api": "x"}', "an object"),
    ("null", "null"),
    ("NaN", "non-finite number"),
]


@pytest.mark.parametrize(
    "task,gold,pid", [("seal", "seal-tools:dev@sample", SEAL_ID), ("deer", "tooldeer:valid@sample", DEER_ID)]
)
@pytest.mark.parametrize("value,kind", BAD_OUTPUTS)
def test_non_text_output_is_an_error_or_a_counted_warning(tmp_path, task, gold, pid, value, kind):
    p = tmp_path / "p.jsonl"
    p.write_text(f'{{"id": "{pid}", "output": {value}}}\n')
    one_error(cli("eval", task, "--pred", p, "--gold", gold), "p.jsonl:1: output: expected text", kind)
    r = cli("eval", task, "--pred", p, "--gold", gold, "--lenient", "--json", tmp_path / "m.json")
    assert r.returncode == 0, r.stderr
    assert "p.jsonl:1: output:" in r.stderr and "scored as empty" in r.stderr and "had no prediction" in r.stderr
    assert json.loads((tmp_path / "m.json").read_text())["invalid_predictions"] == 1


@pytest.mark.parametrize("line,field,msg", [
    ('{"id": "dev-easy-0", "ouput": "x"}', "output", "is 'ouput' a misspelling?"),
    ('{"id": "dev-easy-0"}', "output", "missing"),
    ('{"output": "x"}', "id", "missing"),
    ('{"id": 1.0, "output": "x"}', "id", "expected a string (or an integer), got float 1.0"),
    ('["dev-easy-0", "x"]', None, "expected a JSON object"),
    ('{"id": "dev-easy-0", "output": ' + "[" * 100000 + "]" * 100000 + "}", None, "nested too deeply"),
])
def test_malformed_seal_records(tmp_path, line, field, msg):
    (tmp_path / "p.jsonl").write_text(line + "\n")
    one_error(
        cli("eval", "seal", "--pred", tmp_path / "p.jsonl", "--gold", "seal-tools:dev@sample"),
        "p.jsonl:1:",
        *([field] if field else []),
        msg,
    )


@pytest.mark.parametrize(
    "rec,expect",
    [
        ({"id": "0:0", "output": "Next: caller."}, "('output' is the seal / deer key)"),
        ({"id": "0:0", "planner": 3}, "planner: expected text or null, got a number"),
        (
            {"id": "0:0", "prediction": ["x"]},
            "prediction: expected text or a {planner, caller, summarizer} object, got a list",
        ),
        (
            {"id": "0:0", "prediction": {"planner": {"a": 1}}},
            "prediction.planner: expected text or null, got an object",
        ),
    ],
)
def test_malformed_umi_records(tmp_path, rec, expect):
    (tmp_path / "p.jsonl").write_text(json.dumps(rec) + "\n")
    one_error(
        cli("eval", "umi", "--pred", tmp_path / "p.jsonl", "--gold", "alpha-umi:steps@sample"), "p.jsonl:1:", expect
    )


def test_cli_paths_give_one_line(tmp_path):
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"id": "dev-easy-0", "output": "[]"}\n')
    one_error(cli("eval", "seal", "--pred", pred, "--gold", tmp_path), "is a folder")
    one_error(cli("eval", "seal", "--pred", pred, "--gold", "seal-tools:dev@sample", "--json", tmp_path), "is a folder")
    one_error(cli("eval", "seal", "--pred", pred, "--gold", "tooldeer:valid@sample"), "holds DecisionSample records")
    one_error(
        cli("eval", "seal", "--pred", tmp_path / "none.jsonl", "--gold", "seal-tools:dev@sample"),
        "none.jsonl",
        "no such file",
    )


def test_errors_name_file_and_line(tmp_path):
    ok = json.dumps({"id": "dev-easy-0", "output": "[]"})
    (tmp_path / "p.jsonl").write_text(ok + "\n" + json.dumps({"id": "X", "output": "[]"}) + "\n")
    one_error(cli("eval", "seal", "--pred", tmp_path / "p.jsonl", "--gold", "seal-tools:dev@sample"),
              "p.jsonl:2: id: 'X' is not an item of the gold seal-tools:dev@sample")
    (tmp_path / "q.jsonl").write_text('{"id": "dev-easy-0", "output": "[}\n')
    r = cli("eval", "seal", "--pred", tmp_path / "q.jsonl", "--gold", "seal-tools:dev@sample")
    one_error(r, "q.jsonl:1: invalid JSON (Unterminated string starting at column")
    assert "at at" not in r.stderr


def test_data_check_warning_is_one_clean_line(released):
    """The released out-of-domain file's known oddity (record 273) is a warning on one line, without Python's
    source line."""
    r = cli("data", "check", "--data-dir", released, "--no-download")
    warn = [l for l in r.stderr.splitlines() if l.strip()]
    assert warn and all(l.startswith("toolpaper: warning: ") for l in warn), r.stderr
    assert "record 273" in r.stderr and "UserWarning" not in r.stderr and "lambda" not in r.stderr, r.stderr


@pytest.mark.parametrize("argv,says", [
    (["bench", "seal", "--chunk", "0"], "argument --chunk: must be at least 1, got 0"),
    (["bench", "seal", "--max-tokens", "-5"], "argument --max-tokens: must be at least 1, got -5"),
    (["bench", "seal", "--concurrency", "0"], "argument --concurrency: must be at least 1"),
    (["bench", "seal", "--limit", "0"], "argument --limit: must be at least 1"),
    (["bench", "seal", "--batch-size", "0"], "argument --batch-size: must be at least 1"),
    (["bench", "seal", "--k", "zero"], "argument --k: 'zero' is not an integer"),
    (["serve", "--port", "99999"], "argument --port: a port is 1-65535, got 99999"),
])
def test_bad_flags_stop_before_anything_loads(monkeypatch, capsys, argv, says):
    from toolpaper import cli as C, client
    monkeypatch.setattr(client.LocalClient, "__init__", lambda *a, **k: pytest.fail("a model was loaded"))
    model = [] if argv[0] == "serve" and "--model" in argv else ["--model", "tiny-random-llama"]
    with pytest.raises(SystemExit) as e: C.main(argv + model)
    assert e.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("argv,says", [
    (["bench", "seal", "--model", "/nonexistent/model"], "--model /nonexistent/model: no such folder"),
    (["serve", "--model", "/nonexistent/model"], "--model /nonexistent/model: no such folder"),
    (["bench", "seal", "--model", "m", "--base-url", "127.0.0.1:9/v1"], "did you mean 'http://127.0.0.1:9/v1'"),
    (["bench", "seal", "--model", "tiny-random-llama", "--adapter", "/nope"], "/nope is not a PEFT adapter folder"),
])
def test_missing_paths_and_scheme_less_urls_are_named_before_loading(monkeypatch, capsys, argv, says):
    from toolpaper import cli as C, client
    monkeypatch.setattr(client.LocalClient, "__init__", lambda *a, **k: pytest.fail("a model was loaded"))
    assert C.main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


def test_closed_pipe_is_one_line(tmp_path):
    preds = [{"id": i.id, "output": "[]"} for i in D.load("seal-tools:dev", "sample")]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    r = subprocess.run(
        f"{EXE} eval seal --pred {tmp_path / 'p.jsonl'} --gold seal-tools:dev@sample | head -c 1",
        shell=True,
        capture_output=True,
        text=True,
        executable="/bin/bash",
    )
    assert "Traceback" not in r.stderr and "BrokenPipeError" not in r.stderr.replace("broken pipe", ""), r.stderr


# ------------------------------------------------------------------ broken gold data
def _seal_dev(tmp_path, edit):
    rows = [json.loads(l) for l in (SAMPLE / "seal-tools" / "dev.jsonl").read_text().splitlines()]
    edit(rows)
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "dev.jsonl"


def test_gold_with_non_finite_values_empty_names_or_queries_is_refused(tmp_path):
    cases = [
        (
            lambda r: r[2]["calling"][0]["parameters"].update(x=float("nan")),
            "dev.jsonl:3: calling[0].parameters.x: not a finite number",
        ),
        (lambda r: r[1]["calling"][0].update(api=" "), "dev.jsonl:2: calling.0.api: Value error, must not be empty"),
        (lambda r: r[0].update(query=""), "dev.jsonl:1: query: Value error, must not be empty"),
    ]
    for edit, msg in cases:
        with pytest.raises(D.DataError) as e: D.read_seal_instances(_seal_dev(tmp_path, edit))
        assert msg.replace("calling.0.", "calling[0].") in str(e.value), str(e.value)


def test_unknown_parameter_type_is_refused(tmp_path):
    rows = [json.loads(l) for l in (SAMPLE / "seal-tools" / "tool.jsonl").read_text().splitlines()]
    name = next(iter(rows[4]["parameters"]))
    rows[4]["parameters"][name]["type"] = "banana"
    (tmp_path / "tool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(D.DataError, match=rf"tool.jsonl:5: parameters.{name}: .*unknown type 'banana'"):
        D.read_seal_tools(tmp_path / "tool.jsonl")


def test_umi_dialogues_without_tools_or_with_repeated_ids_are_refused(tmp_path):
    rows = json.loads((SAMPLE / "alpha-umi" / "steps.json").read_text())
    bad = [dict(rows[0], tools=[]), rows[1]]
    (tmp_path / "s.json").write_text(json.dumps(bad))
    with pytest.raises(D.DataError, match=r"s.json\[record 0\]: tools: List should have at least 1 item"):
        D.read_umi_steps(tmp_path / "s.json")
    (tmp_path / "s.json").write_text(json.dumps([dict(rows[0], id="a"), dict(rows[1], id="a")]))
    with pytest.raises(D.DataError, match=r"s.json\[record 1\]: id: duplicate id 'a'"):
        D.read_umi_steps(tmp_path / "s.json")


def test_deeply_nested_data_file_names_its_line(tmp_path):
    (tmp_path / "dev.jsonl").write_text('{"id": "x", "query": ' + "[" * 100000 + "]" * 100000 + "}\n")
    with pytest.raises(D.DataError, match=r"dev.jsonl:1: invalid JSON \(nested too deeply\)"):
        D.read_seal_instances(tmp_path / "dev.jsonl")


# ------------------------------------------------------------------ linear time on 1 MB adversarial input
def _adversarial(n: int) -> dict[str, str]:
    return {
        "spaces": "Next:" + " " * n + "x",
        "action spaces": "Action:" + " " * n + "x",
        "brackets": "[" * (n // 2) + "]" * (n // 2),
        "open brackets": "[{" * (n // 2),
        "fences": "```" * (n // 3),
        "quotes": "'\"" * (n // 2),
        "markers": "#SearchAPI#" * (n // 11),
        "apostrophes": "a'b " * (n // 4),
        "json": '{"api": "' + "x" * n + '"}',
        "nested braces": "{" * (n // 2) + "}" * (n // 2),
        "name list": "[" + "a," * (n // 2) + "]",
        "python dict": "{" + "a: 1, " * (n // 6) + "}",
        "true words": "[" + "true, " * (n // 6) + "x]",
    }


def _targets():
    from toolpaper.metrics import deer_scores, seal_scores, umi_scores
    from toolpaper.parse import parse_caller, parse_deer, parse_seal, parse_umi
    from toolpaper.schema import (
        DecisionSample,
        Instance,
        Call,
        Trajectory,
        Turn,
        planner_decision,
        parse_call_expr,
        description_examples,
    )

    seal_gold = Instance(
        id="x-easy-0", query="q", calls=[Call(api="a", arguments={"k": "v"}, responses=["API_call_0"])]
    )
    deer_gold = DecisionSample(id="0", query="q", branch="NoSearch")
    umi_gold = Trajectory(
        id="0",
        instruction="q",
        turns=[
            Turn(role="user", content="q"),
            Turn(role="planner", content="ok. Next: conclusion."),
            Turn(role="summarizer", content="done"),
        ],
    )
    return {
        "parse_seal compat": lambda t: parse_seal(t, "compat"),
        "parse_seal strict": lambda t: parse_seal(t, "strict"),
        "parse_deer compat": lambda t: parse_deer(t, "compat"),
        "parse_deer strict": lambda t: parse_deer(t, "strict"),
        "parse_caller compat": lambda t: parse_caller(t, "compat"),
        "parse_caller strict": lambda t: parse_caller(t, "strict"),
        "parse_umi strict": lambda t: parse_umi(t, "strict"),
        "planner_decision": planner_decision,
        "parse_call_expr": lambda t: _quiet(parse_call_expr, t),
        "description_examples": description_examples,
        "seal_scores strict": lambda t: seal_scores([t], [seal_gold], "strict"),
        "deer_scores compat": lambda t: deer_scores([t], [deer_gold]),
        "umi_scores strict": lambda t: umi_scores(
            [{0: {"planner": t, "caller": t, "summarizer": t}}], [umi_gold], "strict"
        ),
    }


def _quiet(f, t):
    try: return f(t)
    except ValueError: return None


def test_every_parser_and_scorer_is_linear_on_1mb_adversarial_input():
    small, big = _adversarial(1000), _adversarial(1_000_000)
    slow = []
    for name, f in _targets().items():
        for kind in small:
            t0 = time.perf_counter(); f(small[kind]); t_small = max(time.perf_counter() - t0, 1e-4)
            t0 = time.perf_counter(); f(big[kind]); t_big = time.perf_counter() - t0
            # linear: ~1000x the 1 KB time; allow 20x more for constant costs, and 2 s for timer noise on tiny inputs
            if t_big > max(2.0, 20_000 * t_small):
                slow.append(f"{name} on {kind}: {t_big:.2f} s (1 KB: {t_small * 1000:.2f} ms)")
    assert not slow, "superlinear: " + "; ".join(slow)


def test_strict_reading_work_is_bounded_on_1mb_adversarial_input(monkeypatch):
    """Work, not time: the characters the strict parsers hand to JSON and to Python's literal reader. Nested spans
    used to be read one by one (64 x 1 MB) and Python's parser ran on megabytes (2.5 s each)."""
    import ast
    import toolpaper.parse as P
    read = {"json": 0, "python": 0, "python_max": 0}
    real_json, real_ast = P.json.loads, ast.literal_eval

    def counting_json(s, *a, **k):
        read["json"] += len(s); return real_json(s, *a, **k)

    def counting_ast(s, *a, **k):
        read["python"] += len(s); read["python_max"] = max(read["python_max"], len(s)); return real_ast(s, *a, **k)

    monkeypatch.setattr(P.json, "loads", counting_json)
    monkeypatch.setattr(ast, "literal_eval", counting_ast)
    for kind, text in _adversarial(1_000_000).items():
        for name, f in [("seal", P.parse_seal), ("caller", P.parse_caller), ("umi", lambda t, m: P.parse_umi(
                {"planner": "Next: caller.", "caller": "Action: a\nAction Input: " + t}, m))]:
            read.update(json=0, python=0, python_max=0)
            f(text, "strict")
            assert read["json"] <= 9 * len(text) + 1_000_000, (name, kind, read)
            assert read["python_max"] <= P.PYTHON_LITERAL_LIMIT, (name, kind, read)
            assert read["python"] <= 9 * P.PYTHON_LITERAL_LIMIT + 1_000_000, (name, kind, read)


# ------------------------------------------------------------------ the linear rewrites read exactly what the old
# patterns read
from hypothesis import example, given, settings, strategies as st

_PIECES = st.sampled_from(
    [
        "Next:",
        "next:",
        " ",
        "\n",
        "caller",
        "conclusion",
        "give",
        "up",
        ".",
        "Action",
        "Input",
        ":",
        "x",
        "{}",
        "(e.g.",
        "(eg.",
        "(for example",
        ",",
        ")",
        "(",
        "a b",
        "\t",
        "```",
        "json",
        "[",
        "]",
    ]
)
_TEXT = st.lists(_PIECES, max_size=14).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_TEXT)
@example("Next:giveup")
def test_planner_decision_matches_the_old_pattern(text):
    from toolpaper.schema import planner_decision
    m = re.compile(r"Next:\s*(caller|conclusion|give\s*up)\s*\.?\s*$", re.I).search(text.strip())
    # the pattern allows 'giveup' and 'give   up'; planner_decision names that decision 'give up' either way
    want = None if m is None else re.sub(r"\s+", "", m.group(1).lower()).replace("giveup", "give up")
    assert planner_decision(text) == want


@settings(max_examples=3000, deadline=None)
@given(_TEXT)
def test_action_line_matches_the_old_pattern(text):
    from toolpaper.parse import parse_caller
    m = re.search(r"Action\s*:\s*(.*?)\s*(?:\n|Action\s*Input\s*:|$)", text)
    mi = re.search(r"Action\s*Input\s*:\s*(.*)", text, re.S)
    action, raw, _ = parse_caller(text, "compat")
    assert action == (m.group(1).strip() or None if m else None)
    assert raw == (mi.group(1).strip() if mi else None)


@settings(max_examples=3000, deadline=None)
@given(_TEXT)
def test_description_examples_match_the_old_pattern(text):
    from toolpaper.schema import description_examples
    m = re.compile(r"\((?:e\.g\.|eg\.|for example)[,:]?\s*(.+?)\)\s*$", re.I).search(text)
    old = [p.strip().strip("'\"") for p in m.group(1).split(",") if p.strip()] if m else []
    assert description_examples(text) == old


@settings(max_examples=3000, deadline=None)
@given(_TEXT)
def test_fenced_blocks_match_the_old_pattern(text):
    from toolpaper.parse import fenced_blocks
    assert fenced_blocks(text) == [m.group(1) for m in re.finditer(r"```[a-zA-Z]*\s*\n?(.*?)```", text, re.S)]

