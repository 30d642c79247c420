"""The modules of toolpaper import each other without a circle: every import counts, those inside functions too (an
import moved into a function to dodge a circle still makes one)."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "toolpaper"


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    "module -> the toolpaper modules it imports anywhere in its file (top level or inside functions)."
    mods = {p.stem for p in pkg.glob("*.py") if p.stem not in ("__init__", "__main__", "_modidx")}
    graph = {m: set() for m in mods}
    for m in mods:
        for node in ast.walk(ast.parse((pkg / f"{m}.py").read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
                elif node.level == 0 and node.module and node.module.split(".")[0] == "toolpaper":
                    parts = node.module.split(".")
                    names = [parts[1]] if len(parts) > 1 else [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name.split(".")[1] for a in node.names if a.name.startswith("toolpaper.")]
            graph[m] |= {n for n in names if n in mods and n != m}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    "The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in sorted(graph):
        if root in index: continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on: low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    x = stack.pop(); on.discard(x); group.append(x)
                    if x == v: break
                if len(group) > 1: out.append(sorted(group))
    return out


def test_the_check_finds_a_circle(tmp_path):
    for name, text in {"a": "from .b import f\n", "b": "def f():\n    from toolpaper.c import g\n",
                       "c": "import toolpaper.a\n", "d": "from .a import x\n"}.items():
        (tmp_path / f"{name}.py").write_text(text)
    assert circles(import_graph(tmp_path)) == [["a", "b", "c"]]


def test_no_circles_between_modules():
    found = circles(import_graph())
    assert not found, f"modules that import each other in a circle: {found}"
