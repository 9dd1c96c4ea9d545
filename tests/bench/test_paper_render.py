"""benchmarks/paper_table.py's markdown: rows in the paper's order whatever order a resumed run wrote them
in, partial seeds marked, and a difference called supported only when its paired interval
excludes 0."""

from __future__ import annotations


from benchmarks import paper_table

DS = ("synthetic_test", "synthetic_comparison_ood")


def _row(label: str, ems: list[int]) -> dict:
    em = 100.0 * sum(ems) / len(ems)
    metrics = {d: {"n": len(ems), "em": em if d == DS[0] else 0.0, "f1": em, "sub_em": em} for d in DS}
    return {"label": label, "metrics": metrics, "em_per_question": {DS[0]: ems, DS[1]: [0] * len(ems)}}


def _res() -> dict:
    strong, weak = [1] * 36 + [0] * 4, [1] * 8 + [0] * 32
    per_seed = {}
    for seed in (0, 1):
        # grpo before ppo in the file (a resumed run adds what it runs last), ablation before its method
        per_seed[str(seed)] = {"baselines": {"agent": _row("Agent, SFT warm start (no RL)", weak)},
                               "methods": {"grpo_loss_mask_off": _row("GRPO, loss mask off", strong),
                                           "grpo": _row("GRPO", strong), "ppo": _row("PPO (GAE + critic)", weak)}}
    del per_seed["1"]["methods"]["grpo_loss_mask_off"]  # run for one seed of two so far
    return {"seeds": [0, 1], "per_seed": per_seed, "datasets": {d: 40 for d in DS}, "command": "python x",
            "config_hash": "abc", "wall_seconds": 60.0, "machine": {"cpus": 2}, "model_params": 1e6,
            "budget": {"sft_steps": 5, "guess_fraction": 0.6, "iterations": 1, "prompts_per_iter": 2, "n_samples": 2}}


def test_rows_follow_the_papers_order_and_partial_seeds_are_marked():
    render = paper_table
    res = _res()
    assert [n for _, n, _ in render.rows_of(res)] == ["agent", "ppo", "grpo", "grpo_loss_mask_off"]
    md = render.render_markdown(res)
    assert "| GRPO, loss mask off | 90.0" in md and "(1 of 2 seeds)" in md
    assert md.index("| PPO (GAE + critic) |") < md.index("| GRPO |")


def test_only_differences_whose_interval_excludes_zero_are_supported():
    render = paper_table
    md = render.render_markdown(_res())
    lines = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if " - " in line}
    assert lines["PPO (GAE + critic) - GRPO"].endswith("| yes: GRPO higher |")
    assert lines["GRPO - Agent, SFT warm start (no RL)"].endswith("| yes: GRPO higher |")
    # run for one seed of the two: no paired interval is drawn against a method run for both
    assert not any(k.startswith("GRPO, loss mask off - GRPO") for k in lines)
