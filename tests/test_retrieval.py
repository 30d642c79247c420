"""Retrieval (BM25 fast path, dense cache, candidate lists, DPR) and DEER sampling / decision data."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from toolpaper.data import load
from toolpaper import retrieval as R, sampling as S


@pytest.fixture(scope="module")
def seal(released):
    tools = load("seal-tools:tools", released)
    insts = [i for s in ("dev", "test_in_domain", "test_out_domain") for i in load(f"seal-tools:{s}", released)]
    return tools, insts


def test_bm25_fast_path_matches_rank_bm25_on_released_queries(seal):
    """Scores equal to 1e-8 and identical top-10 on every fourth released query (benchmarks/bm25_speed.py compares all
    2,054; the reference takes ~2 min)."""
    tools, insts = seal
    assert len(insts) == 2054
    qs = [i.query for i in insts[::4]]
    fast = R.BM25Retriever("authors").fit(tools).scores(qs)
    ref = R.BM25Retriever("authors", backend="rank_bm25").fit(tools).scores(qs)
    assert np.abs(fast - ref).max() < 1e-8
    assert (R.rank_scores(fast, 10) == R.rank_scores(ref, 10)).all()


def test_bm25_words_tokenizer_matches_reference_on_a_subset(seal):
    tools, insts = seal
    qs = [i.query for i in insts[::7]]
    fast = R.BM25Retriever("words", with_name=True).fit(tools).search(qs, 10)
    ref = R.BM25Retriever("words", with_name=True, backend="rank_bm25").fit(tools).search(qs, 10)
    assert (fast == ref).all()


def test_dense_embeddings_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLPAPER_CACHE", str(tmp_path))
    tools = load("seal-tools:tools", "sample")
    a = R.DenseRetriever().fit(tools)
    files = list((tmp_path / "embeddings").glob("*.npy"))
    assert len(files) == 1
    b = R.DenseRetriever().fit(tools)
    assert np.array_equal(a.emb, b.emb)
    R.DenseRetriever().fit(tools[:-1])                     # another corpus, another key
    assert len(list((tmp_path / "embeddings").glob("*.npy"))) == 2


def test_candidate_lists_inject_replace_lowest_and_shuffle_by_seed():
    tools = load("seal-tools:tools", "sample")
    dev = load("seal-tools:dev", "sample")
    names = [t.name for t in tools]
    inst = next(i for i in dev if i.kind == "multiple")
    gold = [c.api for c in inst.calls]
    ranked = np.array([[k for k in range(len(tools)) if names[k] not in gold][:8]])   # retriever found no gold tool
    cl = R.candidate_lists([inst], ranked, tools, k=5, inject_gold=True, shuffle=False)[0]
    assert cl.tools[:5 - len(gold)] == [names[k] for k in ranked[0][:5 - len(gold)]]   # top of the list kept in order
    assert sorted(cl.tools[5 - len(gold):]) == sorted(gold) and sorted(cl.injected) == sorted(gold)
    a = R.candidate_lists([inst], ranked, tools, inject_gold=True, shuffle=True, seed=3)[0].tools
    b = R.candidate_lists([inst], ranked, tools, inject_gold=True, shuffle=True, seed=3)[0].tools
    assert a == b and sorted(a) == sorted(cl.tools)
    assert R.candidate_lists([inst], ranked, tools, inject_gold=False, shuffle=False)[0].injected == []


def _margin(ret, insts):
    sc = ret.scores([i.query for i in insts])
    idx = {t.name: k for k, t in enumerate(ret.tools)}
    out = []
    for row, i in zip(sc, insts):
        g = [idx[c.api] for c in i.calls]
        out.append(row[g].mean() - np.delete(row, g).mean())
    return float(np.mean(out))


def test_dpr_losses_train():
    tools = load("seal-tools:tools", "sample")
    dev = load("seal-tools:dev", "sample")
    base = _margin(R.DenseRetriever(cache=False).fit(tools), dev)
    for loss in ("contrastive", "multi_positive"):
        ret, hist = R.train_dpr_retriever(tools, dev, R.DPRConfig(loss=loss, batch_size=8, epochs=4, lr=1e-4))
        assert len(hist) >= 8 and all(np.isfinite(h["loss"]) for h in hist)
        assert ret.emb.shape == (len(tools), 384)
        assert _margin(ret, dev) > base + 0.02, loss      # gold tools moved closer to their queries than the rest


# ------------------------------------------------------------------ sampling properties
@pytest.fixture(scope="module")
def deer_clusters(released):
    tools = load("tooldeer:tools", released)
    return tools, S.cluster_tools(tools, m=30, seed=0)


@pytest.fixture(scope="module")
def small_clusters():
    tools = load("tooldeer:tools", "sample")
    return S.cluster_tools(tools, m=6, seed=0)       # clusters smaller than k exist


def _check(cl, gold, k, strategy, call, seed):
    pool, used = S.sample_pool(cl, gold, k, strategy, call, np.random.default_rng(seed))
    assert len(pool) == k and len(set(pool)) == k
    assert pool.count(gold) == (1 if call else 0)
    others = [i for i in pool if i != gold]
    g = cl.labels[gold]
    if used == "inter":
        labs = [cl.labels[i] for i in others]
        assert g not in labs
        if cl.m - 1 >= k: assert len(set(labs)) == len(labs)
    if used == "intra" and len(cl.members(g)) - 1 >= len(others):
        assert all(cl.labels[i] == g for i in others)
    return used


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 976), st.sampled_from(S.STRATEGIES), st.booleans(), st.integers(0, 10**6))
def test_sampling_properties_real_pool(deer_clusters, gold, strategy, call, seed):
    _, cl = deer_clusters
    _check(cl, gold, 5, strategy, call, seed)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data(), st.sampled_from(S.STRATEGIES), st.booleans(), st.integers(0, 10**6))
def test_sampling_properties_small_clusters(small_clusters, data, strategy, call, seed):
    cl = small_clusters
    gold = data.draw(st.integers(0, len(cl.names) - 1))
    _check(cl, gold, 5, strategy, call, seed)


def test_sampling_is_deterministic_and_mixture_ratio(deer_clusters):
    _, cl = deer_clusters
    draws = [S.sample_pool(cl, g % 977, 5, "mixture", True, np.random.default_rng(g)) for g in range(3000)]
    again = [S.sample_pool(cl, g % 977, 5, "mixture", True, np.random.default_rng(g)) for g in range(3000)]
    assert draws == again
    from collections import Counter
    c = Counter(u for _, u in draws)
    assert (
        abs(c["random"] / 3000 - 0.4) < 0.03
        and abs(c["intra"] / 3000 - 0.2) < 0.03
        and abs(c["inter"] / 3000 - 0.4) < 0.03
    )


def test_too_small_pool_is_a_clear_error(small_clusters):
    sub = small_clusters.subset(small_clusters.names[:5])
    with pytest.raises(ValueError, match="needs at least 6 tools"):
        S.sample_pool(sub, 0, 5, "random", call=False)


def test_decision_data_real(deer_clusters, released, tmp_path):
    tools, cl = deer_clusters
    valid, test = load("tooldeer:valid", released), load("tooldeer:test", released)
    dd = S.build_decision_data(tools, valid, test, clusters=cl, seed=0)
    assert (
        dd.info["tool_split"].startswith("recovered")
        and dd.info["unseen_tools"] == 77
        and dd.info["train_tools"] == 900
    )
    unseen = {c.name for s in test for c in s.candidates}
    assert not any(c.name in unseen for s in dd.train + dd.valid for c in s.candidates)
    evalq = {s.query for s in valid + test}
    assert not any(s.query in evalq for s in dd.train + dd.valid if s.branch != "NoSearch")
    assert not {s.query for s in dd.train if s.branch == "NoSearch"} & {s.query for s in dd.heldout_nosearch}
    calls = [s for s in dd.train if s.branch != "NoSearch"]
    assert abs(sum(s.branch == "Call" for s in calls) / len(calls) - 0.6) < 0.03
    source = lambda s: s.id[len("train-"):].rsplit("-", 1)[0]           # ids are train-<tool>-<example number>
    assert all([c.name for c in s.candidates].count(source(s)) == (1 if s.branch == "Call" else 0) for s in calls)
    assert all(s.gold_call_text for s in calls if s.branch == "Call")
    h1 = S.save_decision_data(dd, tmp_path / "a")
    h2 = S.save_decision_data(S.build_decision_data(tools, valid, test, clusters=cl, seed=0), tmp_path / "b")
    h3 = S.save_decision_data(S.build_decision_data(tools, valid, test, clusters=cl, seed=1), tmp_path / "c")
    assert h1 == h2 and h1["train.json"] != h3["train.json"]
    from toolpaper.data import read_deer_chains
    rows = read_deer_chains(tmp_path / "a" / "train.json", "train")
    assert [r.branch for r in rows] == [s.branch for s in dd.train]
