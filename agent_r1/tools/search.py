"""The search tool: batched retrieval over any `Retriever`, hits formatted for the model."""

from __future__ import annotations

from typing import Any

from agent_r1.tools.base import ToolResult
from agent_r1.tools.registry import register_tool


def format_hits(hits: list[Any], max_chars_per_doc: int) -> str:
    """`Doc 1 (Title): text` lines; the rollout applies the observation token budget after this."""
    if not hits:
        return "No results."
    lines = []
    for i, h in enumerate(hits, 1):
        text = h.text if len(h.text) <= max_chars_per_doc else h.text[:max_chars_per_doc] + "..."
        lines.append(f"Doc {i} ({h.title}): {text}")
    return "\n".join(lines)


@register_tool("search")
class SearchTool:
    """Runs in the rollout's process (`isolate = False`): the retriever is a tantivy index handle
    (Rust threads and file handles) or an Elasticsearch client (a pool of open sockets), neither of
    which may be shared with a forked worker or pickled to one. Its calls are bounded without one:
    tantivy is in-memory and fast, Elasticsearch calls end at the client's request timeout (then
    retry and raise ServiceUnavailableError). A node that hangs longer than the runner's timeout
    is caught by `max_consecutive_timeouts`: that many timed-out searches in a row stop the run."""

    name = "search"
    isolate = False
    description = "Search the knowledge base. Returns the top documents for a query."
    parameters = {
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 1, "description": "search query"}},
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, retriever: Any, k: int = 3, max_chars_per_doc: int = 600, max_consecutive_timeouts: int = 3):
        if max_consecutive_timeouts < 1:
            raise ValueError(f"search: max_consecutive_timeouts must be >= 1, got {max_consecutive_timeouts}")
        self.retriever = retriever
        self.max_consecutive_timeouts = max_consecutive_timeouts
        self.k = k
        self.max_chars_per_doc = max_chars_per_doc

    def call(self, arguments: dict[str, Any]) -> ToolResult:
        return self.batch_call([arguments])[0]

    def batch_call(self, arguments: list[dict[str, Any]]) -> list[ToolResult]:
        """One retriever round-trip for all queries of a rollout turn."""
        queries = [str(a["query"]) for a in arguments]
        all_hits = self.retriever.search(queries, self.k)
        return [
            ToolResult(
                text=format_hits(hits, self.max_chars_per_doc),
                success=True,
                metadata={"titles": [h.title for h in hits], "ids": [h.id for h in hits]},
            )
            for hits in all_hits
        ]
