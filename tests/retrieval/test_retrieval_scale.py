"""benchmarks/retrieval_scale.py at 2k passages: the passages are deterministic, about 100 words and
titled by unique names; the tantivy index answers every title query (recall@5 and top-1 of 1); the
result JSON has its sections and the plot is a PNG. No timings are asserted."""

from __future__ import annotations

import json

import pytest

from benchmarks import retrieval_scale as rs
from benchmarks.retrieval_scale import PassageConfig, iter_passages, passage_name

N = 2_000


def test_passages_are_deterministic_about_100_words_and_uniquely_titled():
    first = list(iter_passages(PassageConfig(N, seed=3)))
    assert first == list(iter_passages(PassageConfig(N, seed=3)))
    assert first != list(iter_passages(PassageConfig(N, seed=4)))
    assert [d.title for d in first] == [passage_name(i, 3) for i in range(N)]
    assert len({d.title.lower() for d in first}) == N
    assert len({d.id for d in first}) == N
    words = [len(d.text.split()) for d in first]
    assert 90 <= min(words) and max(words) <= 115 and 93 <= sum(words) / N <= 105
    assert all(d.text.startswith(d.title) for d in first)  # each passage is about its title entity


def test_a_passage_count_beyond_the_names_is_refused():
    with pytest.raises(ValueError, match="passages must be between 1"):
        PassageConfig(0)
    with pytest.raises(ValueError, match="distinct 4-syllable names"):
        PassageConfig(rs.NAME_SPACE + 1)


def test_run_at_2k_finds_every_title_and_writes_the_json_and_plot(tmp_path):
    config = rs.ScaleConfig(passages=[N], queries=300, batch=16, processes=[1], seconds=0.2, latency_queries=20,
                            es_passages=0, work=tmp_path / "work")
    out = tmp_path / "results" / "retrieval_scale.json"
    report = rs.run(config, out, tmp_path / "img" / "bench-retrieval-scale.png", command="test")

    saved = json.loads(out.read_text())
    for key in ("command", "machine", "config", "builds", "search_entity_queries", "search_question_queries",
                "quality", "profile_at_largest", "target_met"):
        assert key in saved, key
    assert {"commit", "cores", "load_average_at_start", "load_average_at_end"} <= set(saved["machine"])
    build = saved["builds"][0]
    assert build["indexed"] == N and build["index_bytes"] > 0 and build["load_before"] and build["load_after"]
    for row in saved["quality"]:
        assert row["recall@5"] == 1.0 and row["top1"] == 1.0, row
    runs = saved["search_entity_queries"] + saved["search_question_queries"]
    assert [(r["form"], r["processes"]) for r in runs] == [("entity", 1), ("question", 1)]
    assert all(r["queries"] > 0 and r["qps"] > 0 for r in runs)
    assert saved["target_met"]["at_1M"] is False  # 2k passages: the target's size was not measured
    assert not (tmp_path / "work" / f"tantivy-{N}").exists()  # removed at the end
    assert report["builds"] == saved["builds"]
    assert (tmp_path / "img" / "bench-retrieval-scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
