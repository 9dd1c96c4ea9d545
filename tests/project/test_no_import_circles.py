"""No import circles in agent_r1/ and flows/: a circle means neither module can be read, tested or
moved without the other, and at import time one of them runs half-initialised.

The graph's edges are tests/project/import_edges.py's: any import statement naming another module of
the project, at module level or inside a function alike (a lazy import still ties the two modules
together; it only defers the failure). A package's `__init__` is a node of its own: importing
`pkg.mod` is not counted as an edge to `pkg`, so that every module inside a package does not join its
`__init__`'s circle.

Circles are the graph's strongly connected components with more than one module; there must be none.
"""

from __future__ import annotations

from tests.project.import_edges import import_edges


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (tests/project/import_edges.py)."""
    graph: dict[str, set[str]] = {}
    for edge in import_edges():
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
    return found


def _show(component: frozenset[str], graph: dict[str, set[str]]) -> str:
    edges = sorted(f"{a} -> {b}" for a in component for b in graph[a] if b in component)
    return "  " + "\n  ".join(edges)


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert "agent_r1.models.lora" in graph["agent_r1.models.build"]  # a module-level import
    assert "agent_r1.rollout.vllm_engine" in graph["agent_r1.rollout.engines"]  # `from pkg import module`, lazily
    assert "flows.steps" in graph["flows.train_agent"]


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles (break one edge: move the shared piece down, or pass it in):\n" + "\n".join(
        _show(c, graph) for c in found)
