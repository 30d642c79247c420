"""Parsers and metrics: the authors' numbers on gold echo, SPEC rules on hand-counted cases, property tests, CLI."""
import json, random, subprocess, sys
from pathlib import Path
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from toolpaper.data import load
from toolpaper.metrics import (deer_item, deer_summary, prf, retention_scores, score, seal_compat_counts,
                               seal_gold_answer, seal_strict_counts, umi_gold_steps, umi_scores, values_equal)
from toolpaper.parse import parse_caller, parse_deer, parse_seal, parse_umi
from toolpaper.schema import Call, DecisionSample, Instance, Tool, parse_call_expr

EXE = str(Path(sys.executable).with_name("toolpaper"))
SAMPLE = [i for s in ("dev", "test_in_domain", "test_out_domain") for i in load(f"seal-tools:{s}", "sample")]
DEER = load("tooldeer:valid", "sample") + load("tooldeer:test", "sample")
TRAJS = load("alpha-umi:steps", "sample")
N = 4_000  # examples per property test (derandomized); at 10,000 the three parser tests took 144 s of CI time
PROPS = settings(max_examples=N, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


# ------------------------------------------------------------------ gold echo on the released data
AUTHORS = {
    "dev": (0.99714, 0.99861, 0.99911),
    "test_in_domain": (0.99571, 0.99805, 0.99657),
    "test_out_domain": (0.99541, 0.99819, 0.99727),
}


@pytest.mark.parametrize("split", list(AUTHORS))
def test_gold_echo_reproduces_the_authors_numbers(released, split):
    gold = load(f"seal-tools:{split}", released)
    preds = [{"id": r.id, "output": r.answer} for r in load(f"seal-tools:finetune/{split}", released)]
    m = score("seal", preds, gold, "compat").metrics
    assert (round(m["format_acc"], 5), round(m["tool"]["f1"], 5), round(m["param"]["f1"], 5)) == AUTHORS[split]
    s = score("seal", preds, gold, "strict").metrics
    assert (s["format_acc"], s["tool"]["f1"], s["param"]["f1"], s["exact_match"]) == (1.0, 1.0, 1.0, 1.0)
    # our rendering of the gold answer is the released string itself
    by = {i.id: i for i in gold}
    assert all(seal_gold_answer(by[p["id"]]) == p["output"] for p in preds)


def test_compat_format_errors_come_from_apostrophes_and_literals(released):
    gold = load("seal-tools:dev", released)
    preds = [{"id": r.id, "output": r.answer} for r in load("seal-tools:finetune/dev", released)]
    lost = [
        p["output"]
        for p, it in zip(preds, score("seal", preds, gold, "compat").items)
        if it["lost"] and it["lost"][0].startswith("format")
    ]
    # both have a double quote inside a value (Python's repr of a value with an apostrophe, or a literal "), which the
    # released parser's quote replacement turns into broken JSON
    assert len(lost) == 2 and all('"' in o for o in lost)


def test_deer_gold_chains_score_perfectly_in_strict(released):
    for split in ("valid", "test"):
        samples = load(f"tooldeer:{split}", released)
        raw = json.loads((released / "tooldeer" / f"{split}.json").read_text())
        preds = [{"id": s.id, "output": r["conversations"][1]["value"]} for s, r in zip(samples, raw)]
        m = score("deer", preds, samples, "strict").metrics
        assert all(v in (1.0, None) for v in m.values()), m
        # compat is the authors' loop, which scores transcripts, not full chains: see tests/test_released_formats.py


def test_deer_baseline_counting(released):
    base = load("tooldeer:baselines/tool_corpus", released)
    preds = [
        {"id": s.id, "output": (f"Action: {s.gold_apis[0]}" if s.branch == "Call" else "Action: NoCallAPI")}
        for s in base
    ]
    m = score("deer", preds, base).metrics
    assert (m["p_call"], m["p_nocall"], m["p_dc"], m["p_nosearch"]) == (1.0, 1.0, 1.0, None)
    preds = [{"id": s.id, "output": "Action: NoCallAPI"} for s in base]
    m = score("deer", preds, base).metrics
    assert m["p_call"] == 0.0 and m["p_nocall"] == 1.0 and m["p_dc"] == pytest.approx(51 / 126)


# ------------------------------------------------------------------ SPEC rules, hand-counted
GOLD2 = Instance(id="x-difficult-0", query="Get the weather in Lima and mail it", calls=[
    Call(api="weather", arguments={"city": "Lima", "days": 5}, responses=["API_call_0"]),
    Call(api="mail", arguments={"body": "API_call_0", "to": "a@b.c"}, responses=["API_call_1"])])


def test_compat_no_json_means_format_error_but_gold_still_counts():
    c, _ = seal_compat_counts("I would call weather for Lima.", GOLD2)
    assert (c.format_ok, c.gold_tools, c.gold_params, c.pred_tools, c.correct_tools) == (0, 2, 4, 0, 0)


def test_compat_brackets_ignore_quotes():
    # a ']' inside a string closes the span early -> not JSON -> format error (released behaviour); strict reads it
    out = "[{'api': 'mail', 'parameters': {'body': 'see [1]', 'to': 'a@b.c'}, 'responses': []}]"
    assert parse_seal(out, "compat").format_ok is True      # balanced: '[1]' opens and closes
    out = "[{'api': 'mail', 'parameters': {'body': 'see 1]', 'to': 'a@b.c'}, 'responses': []}]"
    assert parse_seal(out, "compat").format_ok is False
    assert parse_seal(out, "strict").calls[0].arguments["body"] == "see 1]"


def test_compat_needs_responses_key():
    assert not parse_seal("[{'api': 'weather', 'parameters': {'city': 'Lima'}}]", "compat").format_ok
    assert parse_seal("[{'api': 'weather', 'parameters': {'city': 'Lima'}}]", "strict").format_ok


def test_compat_counts_hand_example():
    out = (
        "[{'api': 'weather', 'parameters': {'city': 'Lima', 'days': 5.0}, 'responses': ['API_call_0']},"
        " {'api': 'news', 'parameters': {'topic': 'x'}, 'responses': []}, {'api': 'mail', 'parameters': 'oops', "
        "'responses': []}]"
    )
    c, _ = seal_compat_counts(out, GOLD2)
    # pred tools 3 (weather, news, mail); correct tools 2; pred params 3 (mail's non-dict params not counted);
    # correct params 1 (city; 5.0 != 5 as strings)
    assert (c.pred_tools, c.correct_tools, c.pred_params, c.correct_params) == (3, 2, 3, 1)
    assert prf(c.correct_params, c.pred_params, c.gold_params)["p"] == pytest.approx(1 / 3)
    s, _ = seal_strict_counts(out, GOLD2)
    assert (s.correct_tools, s.correct_params) == (2, 2)       # 5.0 == 5 for strict


def test_compat_omits_zero_keys_and_strict_defines_them():
    r = score("seal", [{"id": GOLD2.id, "output": "nothing"}], [GOLD2], "compat").metrics
    assert r["tool"] == {"p": None, "r": None, "f1": None} and r["format_acc"] == 0
    r = score("seal", [{"id": GOLD2.id, "output": "nothing"}], [GOLD2], "strict").metrics
    assert r["tool"] == {"p": 0.0, "r": 0.0, "f1": 0.0}


def test_subsets_and_id_filter():
    r = score("seal", [{"id": i.id, "output": seal_gold_answer(i)} for i in SAMPLE], SAMPLE, "strict")
    assert r.subsets["single"]["n"] == sum(i.kind == "single" for i in SAMPLE)
    assert r.subsets["nested"]["n"] == sum(i.nested for i in SAMPLE)
    from toolpaper.metrics import seal_scores
    sub = seal_scores([seal_gold_answer(i) for i in SAMPLE], SAMPLE, "strict", ids=[SAMPLE[0].id])
    assert sub["metrics"]["n"] == 1


NS_GOLD = "#Begin# Don't need to look up the API Pool, I can answer this question with my own knowledge. #End#"
NC_GOLD = ("#Begin# Need to look up the API Pool. #SearchAPI# The API Pool including: [a, b] #NoCallAPI# No proper "
           "API, I answer myself. #End#")
C_GOLD = ("#Begin# Need to look up the API Pool. #SearchAPI# The API Pool including: [get_weather, b] #CallAPI# "
          "get_weather(city='Lima') #APIResponse#  #End#")
SEARCH = "#Begin# Need to look up the API Pool. #SearchAPI# pool "


@pytest.mark.parametrize("transcript, gold, branch, expect", [
    # rule 1: no #Begin#, nothing is correct
    ("#SearchAPI# p #CallAPI# get_weather() #APIResponse#", C_GOLD, "Call", dict(search_ok=0, call_ok=0)),
    # rule 2: #End# -> only NoSearch, and only with the literal phrase on both sides
    (NS_GOLD, NS_GOLD, "NoSearch", dict(nosearch_ok=1)),
    ("#Begin# No tool is needed here. #End#", NS_GOLD, "NoSearch", dict(nosearch_ok=0)),
    (C_GOLD, C_GOLD, "Call", dict(search_ok=0, call_ok=0)),                         # a full gold chain ends with #End#
    # rule 3: #NoCallAPI#
    (SEARCH + "#NoCallAPI#", NC_GOLD, "NoCall", dict(search_ok=1, nocall_ok=1)),
    (SEARCH + "#NoCallAPI#", C_GOLD, "Call", dict(search_ok=1, call_ok=0)),
    # searched although not needed: stop
    (SEARCH + "#NoCallAPI#", NS_GOLD, "NoSearch", dict(nosearch_ok=0, search_ok=0)),
    # rule 4: #CallAPI#: the name before the first '(' of the text after the LAST '#CallAPI# ', as a substring of the
    # gold call
    # arguments never read
    (SEARCH + "#CallAPI# get_weather(city='Paris') #APIResponse#", C_GOLD, "Call", dict(search_ok=1, call_ok=1)),
    # the last call counts
    (SEARCH + "#CallAPI# b(x=1) #CallAPI# get_weather(y=2) #APIResponse#", C_GOLD, "Call", dict(call_ok=1)),
    # no '(': find() = -1 drops the last character
    (SEARCH + "#CallAPI# get_weatherX #APIResponse#", C_GOLD, "Call", dict(call_ok=1)),
    # a substring is enough
    (SEARCH + "#CallAPI# weather(city='Lima') #APIResponse#", C_GOLD, "Call", dict(call_ok=1)),
    (SEARCH + "#CallAPI# (city='Lima') #APIResponse#", C_GOLD, "Call", dict(call_ok=1)),     # even an empty name
    (SEARCH + "#CallAPI# get_weather(city='Lima')", C_GOLD, "Call", dict(search_ok=1, call_ok=0)),   # no #APIResponse#
    (SEARCH + "#CallAPI# other(city='Lima') #APIResponse#", C_GOLD, "Call", dict(search_ok=1, call_ok=0)),
    # the gold has #NoCallAPI#
    (SEARCH + "#CallAPI# a() #APIResponse#", NC_GOLD, "NoCall", dict(search_ok=1, nocall_ok=0)),
    # a call without a pool still counts
    ("#Begin# #CallAPI# get_weather() #APIResponse#", C_GOLD, "Call", dict(search_ok=1, call_ok=1)),
    # rule 5 / no decision: a search that never decided
    (SEARCH, C_GOLD, "Call", dict(search_ok=0, call_ok=0)),
])
def test_deer_compat_counting_follows_the_authors_rules(transcript, gold, branch, expect):
    from toolpaper.metrics import deer_compat_counts
    c, _ = deer_compat_counts(transcript, gold, branch)
    assert {k: getattr(c, k) for k in expect} == expect
    call = (
        dict(gold_call=Call(api="get_weather", arguments={"city": "Lima"}), gold_call_text="get_weather(city='Lima')")
        if branch == "Call"
        else {}
    )
    s = DecisionSample(
        id="0",
        query="q",
        branch=branch,
        chain=gold,
        candidates=[Tool(name="get_weather")] if branch != "NoSearch" else [],
        **call,
    )
    assert deer_item(transcript, s, "compat")[0] == c


def test_deer_strict_reads_the_arguments():
    c = DecisionSample(
        id="2",
        query="q",
        branch="Call",
        candidates=[Tool(name="f")],
        gold_call_text="f(a=1)",
        gold_call=Call(api="f", arguments={"a": 1}),
    )
    assert deer_item("#Begin# #SearchAPI# p #CallAPI# (a=1) #APIResponse# #End#", c, "strict")[0].call_ok == 0
    assert deer_item("#Begin# #SearchAPI# p #CallAPI# f(a='1') #APIResponse# #End#", c, "strict")[0].call_ok == 1


def test_umi_rules():
    # only the planner's decision: plan right on the give-up step, everything else empty
    preds = [{}, {0: "No tool can book hotels. Next: give up."}]
    m = umi_scores(preds, TRAJS)["metrics"]
    assert (
        m["n_steps"] == 4 and m["plan_acc"] == 0.25 and m["act_em"] == 0.0 and m["arg_f1"] == 0.0 and m["hallu"] == 0.0
    )
    assert m["rouge_l"] == pytest.approx(0.0)
    # hallucination is over all steps
    preds = [{0: "assistant: x Next: caller.</s>caller: Action: book_hotel\nAction Input: {}"}, {}]
    assert umi_scores(preds, TRAJS)["metrics"]["hallu"] == 0.25
    assert umi_scores(preds, TRAJS, "strict")["metrics"]["hallu_call"] == 0.5


def test_umi_score_entry_and_missing_and_unknown_ids():
    ids = [f"{k}:{s}" for k, t in enumerate(TRAJS) for s in range(len(umi_gold_steps(t)))]
    assert ids == ["0:0", "0:1", "0:2", "1:0"]
    r = score("umi", [{"id": "1:0", "prediction": "No way. Next: give up."}], TRAJS)
    assert r.metrics["plan_acc"] == 0.25 and "3 gold item(s) had no prediction" in r.notes[0]
    with pytest.raises(ValueError, match="'2:0' is not in the gold"):
        score("umi", [{"id": "2:0", "prediction": ""}], TRAJS)


def test_retention():
    r = retention_scores(["a b c d"], ["a b c d"])
    assert r["bleu"] == pytest.approx(1.0) and r["rouge_l"] == pytest.approx(1.0, abs=1e-6)


# ------------------------------------------------------------------ property tests
def _mutate(rng: random.Random, s: str) -> str:
    s = list(s)
    for _ in range(rng.randint(0, 6)):
        op = rng.random()
        pos = rng.randint(0, len(s))
        if op < 0.3 and s: del s[min(pos, len(s) - 1)]
        elif op < 0.7: s.insert(pos, rng.choice("[]{}()'\",:#\\ \nTrueNone0API_call_1"))
        elif s: s[min(pos, len(s) - 1)] = rng.choice("'\"[]")
    return "".join(s)


SEAL_GOLD = [seal_gold_answer(i) for i in SAMPLE]
DEER_GOLD = [json.loads((Path(__import__("toolpaper").__file__).parent / "sample_data" / "tooldeer" / f).read_text())
             for f in ("valid.json", "test.json")]
DEER_GOLD = [r["conversations"][1]["value"] for part in DEER_GOLD for r in part]
# Pieces of the three output formats plus what breaks readers: quotes, escapes, unbalanced brackets, deep nesting,
# Python-only literals, integers past Python's 4,300-digit limit, null bytes and non-ASCII text.
_FORMAT_PIECES = st.sampled_from(
    [
        "[",
        "]",
        "{",
        "}",
        "(",
        ")",
        ",",
        ":",
        "=",
        "'",
        '"',
        "\\",
        "\n",
        " ",
        "```",
        "```json\n",
        "\x00",
        "é",
        "日",
        '{"api": ',
        "'api': ",
        '"parameters": ',
        "'responses': ",
        "'name'",
        "'arguments'",
        "'calls'",
        "API_call_0",
        "[]",
        "{}",
        "True",
        "None",
        "null",
        "true",
        "1",
        "-2.5",
        "1e999",
        "0x" + "f" * 4000,
        "1" * 4400,
        "[" * 120,
        "(" * 120,
        "{1: 2}",
        "{(1,): 2}",
        "#Begin#",
        "#End#",
        "#SearchAPI#",
        "#CallAPI# ",
        "#CallAPI#",
        "#NoCallAPI#",
        "#APIResponse#",
        "f(",
        "g(a=",
        "x='y'",
        "k=[1, 'a']",
        "assistant: ",
        "</s>",
        "caller: ",
        "conclusion: ",
        "Next: caller.",
        "Next: conclusion.",
        "Next: give up.",
        "Action: ",
        "Action Input: ",
        "f\n",
    ]
)
_FORMAT_TEXT = st.lists(_FORMAT_PIECES | st.text(max_size=4), max_size=24).map("".join)
outputs = st.one_of(
    st.text(max_size=300),
    _FORMAT_TEXT,
    st.tuples(st.sampled_from(SEAL_GOLD + DEER_GOLD), st.integers(0, 2**32)).map(
        lambda t: _mutate(random.Random(t[1]), t[0])
    ),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
        lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.text(max_size=6), ch, max_size=4),
        max_leaves=10,
    ).map(str),
)


@PROPS
@given(outputs)
def test_seal_parsers_and_metrics_never_raise(text):
    g = SAMPLE[hash(text) % len(SAMPLE)]
    for mode in ("compat", "strict"):
        out = parse_seal(text, mode)
        assert out.format_ok == (out.calls is not None) or mode == "compat"
    c, _ = seal_compat_counts(text, g)
    s, _ = seal_strict_counts(text, g)
    assert 0 <= s.correct_tools <= min(s.pred_tools, s.gold_tools) and 0 <= s.correct_params <= min(
        s.pred_params, s.gold_params
    )
    for k in ("tool", "param"):
        m = prf(getattr(s, f"correct_{k}s"), getattr(s, f"pred_{k}s"), getattr(s, f"gold_{k}s"), "strict")
        assert all(0.0 <= v <= 1.0 for v in m.values())
    assert c.correct_tools <= c.pred_tools and c.correct_params <= c.pred_params


@PROPS
@given(outputs)
def test_deer_parser_and_metric_never_raise(text):
    g = DEER[hash(text) % len(DEER)]
    parse_call_expr(text); parse_call_expr(text, ["a", "b"])
    for mode in ("compat", "strict"):
        assert (parse_deer(text, mode).branch == "Call") == ("#CallAPI#" in text)
        c, _ = deer_item(text, g, mode)
        assert all(0.0 <= v <= 1.0 for v in deer_summary(c).values() if v is not None)


@PROPS
@given(
    outputs,
    st.sampled_from(["assistant: ", ""]),
    st.sampled_from(["</s>caller: Action: get_weather_for_city\nAction Input: ", "</s>conclusion: ", ""]),
)
def test_umi_parser_and_metric_never_raise(text, head, tail):
    pred = head + text + tail + text[::-1]
    for mode in ("compat", "strict"):
        step = parse_umi(pred, mode)
        assert step.plan is None or "next:" in pred.lower()
        # a value that is not text counts as missing
        parse_umi({"planner": text, "caller": head + text, "summarizer": len(text) or None}, mode)
        parse_caller(text, mode)
        m = umi_scores([{0: pred, 1: text}, {0: pred}], TRAJS, mode)["metrics"]
        assert all(0.0 <= v <= 1.0 for k, v in m.items() if k != "n_steps" and v is not None)


@PROPS
@given(st.data())
def test_strict_invariant_to_order_and_renumbering(data):
    inst = data.draw(st.sampled_from(SAMPLE))
    from toolpaper.schema import dependencies
    deps = dependencies(inst.calls)
    # a random topological order of the calls
    order, left = [], set(range(len(inst.calls)))
    while left:
        ready = sorted(i for i in left if deps[i] <= set(order))
        nxt = data.draw(st.sampled_from(ready)); order.append(nxt); left.remove(nxt)
    offset = data.draw(st.integers(0, 50))
    old_ids = [r for i in order for r in inst.calls[i].responses]
    new = {r: f"API_call_{offset + k}" for k, r in enumerate(old_ids)}
    import re
    ren = lambda v: re.sub(r"API_call_\d+", lambda m: new.get(m.group(0), m.group(0)), v) if isinstance(v, str) else v
    calls = [{"api": inst.calls[i].api, "parameters": {k: ren(v) for k, v in inst.calls[i].arguments.items()},
              "responses": [new[r] for r in inst.calls[i].responses]} for i in order]
    text = data.draw(
        st.sampled_from(
            [repr(calls), json.dumps(calls), "Here you go:\n```json\n" + json.dumps(calls, indent=1) + "\n```"]
        )
    )
    c, why = seal_strict_counts(text, inst)
    assert why == [] and c.exact == 1 and c.correct_params == c.gold_params == c.pred_params


def test_compat_recall_can_exceed_one():
    g = SAMPLE[0]
    twice = seal_gold_answer(g)[:-1] + ", " + seal_gold_answer(g)[1:]
    c, _ = seal_compat_counts(twice, g)
    assert prf(c.correct_tools, c.pred_tools, c.gold_tools)["r"] == 2.0
    s, _ = seal_strict_counts(twice, g)
    assert prf(s.correct_tools, s.pred_tools, s.gold_tools, "strict")["r"] == 1.0


@settings(max_examples=2000, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda ch: st.lists(ch, max_size=3) | st.dictionaries(st.text(max_size=4), ch, max_size=3),
        max_leaves=8,
    )
)
def test_values_equal_reflexive_and_symmetric(v):
    assert values_equal(v, v)
    assert values_equal(v, json.loads(json.dumps(v))) == values_equal(json.loads(json.dumps(v)), v)


# ------------------------------------------------------------------ CLI
def test_cli_eval_json_keys(tmp_path, released):
    preds = [{"id": r.id, "output": r.answer} for r in load("seal-tools:finetune/test_in_domain", released)]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(p) for p in preds))
    r = subprocess.run(
        [
            EXE,
            "eval",
            "seal",
            "--pred",
            str(tmp_path / "p.jsonl"),
            "--gold",
            "seal-tools:test_in_domain",
            "--json",
            str(tmp_path / "m.json"),
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "TOOLPAPER_DATA_DIR": str(released)},
    )
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "m.json").read_text())
    assert set(m) >= {"n", "format_acc", "tool", "param", "subsets"} and set(m["subsets"]) == {
        "single",
        "multiple",
        "nested",
    }
    assert round(m["param"]["f1"], 5) == 0.99657 and m["n"] == 700


def test_cli_eval_unknown_id_and_bad_line(tmp_path):
    (tmp_path / "p.jsonl").write_text(json.dumps({"id": "nope", "output": ""}) + "\n")
    r = subprocess.run(
        [EXE, "eval", "deer", "--pred", str(tmp_path / "p.jsonl"), "--gold", "tooldeer:valid@sample"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "p.jsonl:1: id: 'nope' is not an item of the gold tooldeer:valid@sample" in r.stderr
    (tmp_path / "p.jsonl").write_text('{"id": "0", "output": "x"}\n{"id": \n')
    r = subprocess.run(
        [EXE, "eval", "deer", "--pred", str(tmp_path / "p.jsonl"), "--gold", "tooldeer:valid@sample"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "p.jsonl:2: invalid JSON" in r.stderr


def test_single_llm_compat_is_the_authors_backbone_scorer():
    """On the committed alpha-UMi outputs, compat counts the single-model runs as the authors' `evaluate-backbone.py`
    does (run on the same replies it gives Single-LLM at 20 trajectories Act EM 9.87, Plan ACC 54.72, and the base
    model Plan ACC 71.23; the role-file reading gave 11.84 / 55.7 / 71.7)."""
    from pathlib import Path
    from toolpaper.claims import load_scored, resample
    sc = load_scored(Path(__file__).resolve().parents[1] / "reports" / "alpha_umi" / "work")
    got = lambda c, m: round(100 * resample("umi", sc[c]["modes"]["compat"], m, "compat", 1)[0], 2)
    assert (got("single@n20", "act_em"), got("single@n20", "plan_acc")) == (9.87, 54.72)
    assert got("base@heldout", "plan_acc") == 71.23
