"""Benchmark: rank-bm25 (reference) vs toolpaper's sparse-matrix BM25 on all Seal-Tools queries.

Prints both timings and whether the top-10 rankings agree. Run: `make bench` (or .venv/bin/python
benchmarks/bm25_speed.py).
Target: the sparse path at least 20x faster with identical rankings.
"""
import time
from toolpaper.data import load
from toolpaper.retrieval import BM25Retriever, rank_scores


def main():
    tools = load("seal-tools:tools")
    queries = [i.query for s in ("dev", "test_in_domain", "test_out_domain") for i in load(f"seal-tools:{s}")]
    print(f"{len(tools)} tools, {len(queries)} queries")
    for tok in ("authors", "words"):
        times, ranks = {}, {}
        for backend in ("rank_bm25", "sparse"):
            t0 = time.perf_counter()
            r = BM25Retriever(tok, backend=backend).fit(tools)
            ranks[backend] = rank_scores(r.scores(queries), 10)
            times[backend] = time.perf_counter() - t0
        same = bool((ranks["rank_bm25"] == ranks["sparse"]).all())
        print(f"tokenize={tok:8s} rank-bm25 {times['rank_bm25']:7.2f} s | sparse {times['sparse']:6.2f} s | "
              f"speed-up {times['rank_bm25'] / times['sparse']:5.1f}x | identical top-10: {same}")


if __name__ == "__main__":
    main()
