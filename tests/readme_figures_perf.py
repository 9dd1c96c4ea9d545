"""docs/performance.md's figures (perf_rollout.json, perf_update.json, perf_trl.json) for the
registry in tests/readme_figures.py: the same `Figure` entries, kept in a file of their own because the
page quotes so many. How to add one is at the top of tests/readme_figures.py.
"""

from __future__ import annotations

from typing import Any

from tests.readme_figures_lib import Figure, med, num, seq

R, U, T = "perf_rollout.json", "perf_update.json", "perf_trl.json"
EQ = "modes.equal_work.cells"
TOOL = "modes.tool"


def dig_tool(d: Any) -> Any:
    return d["modes"]["tool"]


def dig_floor(d: Any) -> Any:
    return d["modes"]["equal_work"]["cells"]["128x256"]["floor"]


def tool_pair(d: Any, key: str, sub: str) -> list[float]:
    return [dig_tool(d)[side][key][sub] for side in ("agent_r1", "trl")]


def trl_row(cell: str) -> Figure:
    # one entry per row of the equal-work table (s/iter both sides, ratio (range), generation and update
    # tok/s): a failure then shows the whole row as the file gives it
    label = {"32x64": "32 x 64", "32x256": "32 x 256", "128x64": "128 x 64", "128x256": "128 x 256, idle machine"}

    def fmt(c: Any) -> str:
        a, t = c["agent_r1"], c["trl"]
        pair = seq(0, " / ", comma=True)
        return " | ".join([num(2)(a["seconds_per_iteration"]["median"]), num(2)(t["seconds_per_iteration"]["median"]),
                           med(2)(c["ratio_agent_r1_over_trl"]),
                           pair([a["generation_tokens_per_s"]["median"], t["generation_tokens_per_s"]["median"]]),
                           pair([a["update_tokens_per_s"]["median"], t["update_tokens_per_s"]["median"]])])
    return Figure(f"TRL table row {label[cell]}", T, f"{EQ}.{cell}", fmt,
                  f"| {label[cell]} | @@ |")


PERF: list[Figure] = [
    Figure("perf: rollout / generate replaying the turns", R, "overhead.rollout_over_raw_replay", med(2),
           "replaying the same turns | @@ |"),
    Figure("perf: rollout / one generate call", R, "overhead.rollout_over_raw_generate.median", num(2),
           "call on the first prompts | @@ |"),
    Figure("perf: turns per trajectory", R, "overhead.rollout_stats.0.mean_turns", num(1),
           "reach the tantivy index (@@ turns and"),
    Figure("perf: searches per trajectory", R, "overhead.rollout_stats.0.tool_calls / trajectories", num(0),
           "turns and @@ searches per trajectory",
           lambda d: (lambda s: s["tool_calls"] / s["trajectories"])(d["overhead"]["rollout_stats"][0])),
    Figure("perf: rollout sampled tokens", R, "overhead.rollout_stats.0.sampled_tokens", num(0),
           "`params.yaml` budgets, @@ sampled tokens"),
    Figure("perf: rollout tokens in all", R, "overhead.rollout_stats.0.total_tokens", num(0, comma=True),
           "sampled tokens, @@ tokens in all"),
    Figure("perf: rollout tokens/s", R, "overhead.rollout_tokens_per_s.median", num(0),
           "The rollout samples @@ tokens/s"),
    Figure("perf: replay tokens/s", R, "overhead.raw_replay_tokens_per_s.median", num(0),
           "for the same token count: @@ tokens/s"),
    Figure("perf: tantivy searches in the rollout", R, "overhead.rollout_stats.0.tool_calls", num(0),
           "tag parsing, @@ tantivy searches"),
    Figure("perf: one generate call tokens/s", R, "overhead.raw_generate_tokens_per_s.median",
           num(0, comma=True), "for the same number of tokens reaches @@ tokens/s"),
    Figure("perf: tokens per action", R, "overhead.rollout_stats.0: sampled_tokens / (trajectories x turns)",
           num(1), "(actions average @@ tokens",
           lambda d: (lambda s: s["sampled_tokens"] / (s["trajectories"] * s["mean_turns"]))(
               d["overhead"]["rollout_stats"][0])),
    Figure("perf: KV reuse off", R, "speedups.no_kv_reuse.seconds_over_all_on.median", num(2),
           "across turns off @@x slower"),
    Figure("perf: one trajectory at a time", R, "speedups.one_at_a_time.seconds_over_all_on.median", num(2),
           "instead of one batch @@x;"),
    Figure("perf: none of the speed-ups", R, "speedups.none_of_them.seconds_over_all_on.median", num(2),
           "kept in the batch @@x."),
    Figure("perf: finished rows kept", R, "speedups.no_early_drop.seconds_over_all_on.median", num(2),
           "no gain on its own here (@@x, noise)"),
    Figure("perf: rollout peak RSS", R, "peak_rss_mb", num(0), "rollout benchmark @@ MiB"),
    Figure("perf: seconds for 8 / 32 / 128 trajectories", R, "scaling.trajectories.{8,32,128}.seconds.median",
           seq(2, " / "), "128 trajectories take @@ s,",
           lambda d: [d["scaling"]["trajectories"][n]["seconds"]["median"] for n in ("8", "32", "128")]),
    Figure("perf: ms per trajectory", R, "scaling.trajectories.*.ms_per_trajectory", seq(1, " / "),
           "@@ ms per trajectory: time grows",
           lambda d: [d["scaling"]["trajectories"][n]["ms_per_trajectory"] for n in ("8", "32", "128")]),
    Figure("perf: time exponent", R, "scaling.time_exponent_8_to_128_trajectories", num(2), "time grows as n^@@,"),
    Figure("perf: seconds per max turns 1..5", R, "scaling.turns.*.seconds.median", seq(2, " / "),
           "Max turns 1..5 (32 trajectories): @@ s for",
           lambda d: [d["scaling"]["turns"][str(k)]["seconds"]["median"] for k in range(1, 6)]),
    Figure("perf: turns taken per max turns", R, "scaling.turns.*.mean_turns", seq((1, 1, 1, 1, 2), " / "),
           " s for @@ turns taken",
           lambda d: [d["scaling"]["turns"][str(k)]["mean_turns"] for k in range(1, 6)]),
    Figure("perf: tokens processed, 1 and 5 turns", R, "scaling.turns.{1,5}.total_tokens",
           seq(0, " -> ", comma=True), "the tokens actually processed (@@)",
           lambda d: [d["scaling"]["turns"][k]["total_tokens"] for k in ("1", "5")]),
    Figure("perf: update / bare torch", U, "trainer_over_bare", med(2), "tokens/s / bare torch step | @@ |"),
    Figure("perf: update / bare torch, item 2", U, "trainer_over_bare", med(2), "tokens/s, ratio @@. With"),
    Figure("perf: tokens per update", U, "config.tokens_per_update", num(0, comma=True),
           "over 64 trajectories, @@ tokens per update"),
    Figure("perf: update vs bare tokens/s", U, "tokens_per_s.{trainer_update,bare_torch}.median",
           seq(0, " vs ", comma=True), "alternated repeats: @@ tokens/s",
           lambda d: [d["tokens_per_s"][k]["median"] for k in ("trainer_update", "bare_torch")]),
    Figure("perf: update per-repeat ratios", U, "trainer_over_bare.runs", seq(2), "per-repeat ratios are @@, the"),
    Figure("perf: update load at start", U, "machine.load_average_at_start.0", num(1),
           "(load average @@ at the start), the last three"),
    Figure("perf: update peak RSS", U, "peak_rss_mb", num(0, comma=True), "Peak RSS @@ MiB."),
    Figure("perf: update peak RSS, item 5", U, "peak_rss_mb", num(0, comma=True), "MiB, update @@ MiB,"),
    Figure("perf: agent-r1 / TRL equal work, idle", T, f"{EQ}.128x256.ratio_agent_r1_over_trl", med(2),
           "256), idle machine | @@ |"),
    Figure("perf: floor / TRL, table", T, f"{EQ}.128x256.floor.ratio_over_trl.median", num(2),
           "the bare model doing the same work is @@ of TRL"),
    Figure("perf: skip_zero_advantage / TRL", T, f"{EQ}.128x256.agent_r1_skip_zero_advantage.ratio_over_trl",
           med(2), "not equal work) | @@ |"),
    Figure("perf: rows skipped", T, f"{EQ}.128x256.agent_r1_skip_zero_advantage.skipped_rows_fraction.median",
           num(0, scale=100), "skip_zero_advantage` (@@% of rows skipped"),
    Figure("perf: rows skipped, prose", T, f"{EQ}.128x256.agent_r1_skip_zero_advantage.skipped_rows_fraction.median",
           num(0, scale=100), "at 128 x 256, where @@% of rows had zero advantage"),
    Figure("perf: skip ratio, prose", T, f"{EQ}.128x256.agent_r1_skip_zero_advantage.ratio_over_trl.median",
           num(2), "which give such rows a gradient): @@ at"),
    Figure("perf: agent-r1 / TRL with a tool", T, f"{TOOL}.ratio_agent_r1_over_trl", med(2),
           "tool calls per trajectory) | @@ |"),
    Figure("perf: tool calls per trajectory, warm-up", T, f"{TOOL}.checks.tool_calls_per_trajectory_warmup",
           seq(3, " vs "), "(token-identical prompts; @@ tool calls per trajectory)",
           lambda d: list(dig_tool(d)["checks"]["tool_calls_per_trajectory_warmup"].values())),
    Figure("perf: tool calls per trajectory, prose", T, f"{TOOL}.checks.tool_calls_per_trajectory_warmup",
           seq(3, " vs "), "Tool calls per trajectory @@ on the",
           lambda d: list(dig_tool(d)["checks"]["tool_calls_per_trajectory_warmup"].values())),
    Figure("perf: tool calls per trajectory, timed", T, f"{TOOL}.{{agent_r1,trl}}.per_trajectory.tool_calls",
           seq(2, " vs "), "warm-up (@@ timed)", lambda d: tool_pair(d, "per_trajectory", "tool_calls")),
    Figure("perf: tool s per iteration", T, f"{TOOL}.*.seconds_per_iteration.median", seq(1, " vs "),
           "timed); @@ s per iteration, ratio", lambda d: tool_pair(d, "seconds_per_iteration", "median")),
    Figure("perf: tool ratio, prose", T, f"{TOOL}.ratio_agent_r1_over_trl", med(2),
           "s per iteration, ratio @@; generation"),
    Figure("perf: tool generation tokens/s", T, f"{TOOL}.*.generation_tokens_per_s.median", seq(0, " vs "),
           "; generation @@ tokens/s, update", lambda d: tool_pair(d, "generation_tokens_per_s", "median")),
    Figure("perf: tool update tokens/s", T, f"{TOOL}.*.update_tokens_per_s.median", seq(0, " vs ", comma=True),
           "tokens/s, update @@. TRL's loop", lambda d: tool_pair(d, "update_tokens_per_s", "median")),
    Figure("perf: floor seconds per iteration", T, f"{EQ}.128x256.floor.seconds_per_iteration.median", num(2),
           "both sides in the same run: @@ s per iteration"),
    Figure("perf: floor generate + update", T, f"{EQ}.128x256.floor.{{generate_s,update_s}}.median",
           seq(2, " generate + "), "s per iteration (@@ update)",
           lambda d: [dig_floor(d)[k]["median"] for k in ("generate_s", "update_s")]),
    Figure("perf: floor / TRL", T, f"{EQ}.128x256.floor.ratio_over_trl", med(2), "floor / TRL @@ and"),
    Figure("perf: agent-r1 / floor", T, f"{EQ}.128x256.floor.ratio_agent_r1_over_floor", med(2),
           "agent-r1 / floor @@. agent-r1 spends"),
    Figure("perf: agent-r1 over the floor, %", T, f"{EQ}.128x256.floor.ratio_agent_r1_over_floor.median - 1",
           num(0, scale=100), "agent-r1 spends @@% over the kernels",
           lambda d: dig_floor(d)["ratio_agent_r1_over_floor"]["median"] - 1),
    Figure("perf: TRL version", T, "trl", str, "(trl @@, the `bench` extra"),
    Figure("perf: TRL comparison peak RSS", T, "peak_rss_mb", num(0, comma=True), "TRL comparison @@ MiB"),
] + [trl_row(c) for c in ("32x64", "32x256", "128x64", "128x256")]
