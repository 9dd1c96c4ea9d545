"""README's `make run` figures ("Two commands"): the wall time of a fresh clone's run
(make_run_wall.json) and the lift over seeds 0-4 of make run's recipe and of the recipe before it
(make_run_seeds.json, make_run_seeds_groups4.json). See tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from typing import Any

from tests.readme_figures_lib import Figure, ci, num, seq

W, S, G4, OLD = ("make_run_wall.json", "make_run_seeds.json", "make_run_seeds_groups4.json",
                 "make_run_seeds_before.json")
SEEDS = ("0", "1", "2", "3", "4")
TABLE = "| seed | 0 | 1 | 2 | 3 | 4 | mean [95% t-interval] |"


def minutes_seconds(v: float) -> str:
    """README's "6 min 55 s" for 415.4 seconds."""
    whole = int(v + 0.5)
    return f"{whole // 60} min {whole % 60} s"


def per_seed(key: str) -> Any:
    return lambda doc: [doc["per_seed"][s][key] for s in SEEDS]


def start_to_final(doc: Any) -> str:
    return " | ".join(f"{doc['per_seed'][s]['start_em']:.0f} -> {doc['per_seed'][s]['final_em']:.0f}" for s in SEEDS)


def lift_ci(doc: Any) -> dict[str, float]:
    return {"mean": doc["summary"]["lift_mean"], **doc["summary"]["lift_ci95"]}


def phase(*tasks: str) -> Any:
    return lambda doc: sum(doc["phases_s"][t] for t in tasks)


MAKE_RUN: list[Figure] = [
    Figure("make run: wall time on a fresh clone", W, "wall_s", minutes_seconds, "2 idle cores `make run` took @@ end"),
    Figure("make run: data and index seconds", W, "phases_s.prepare_data + build_index", num(0),
           "Prefect start, data and index @@ s;", phase("prepare_data", "build_index")),
    Figure("make run: SFT minutes", W, "phases_s.sft / 60", num(1, scale=1 / 60), "500 steps, @@ min;",
           phase("sft")),
    Figure("make run: RL and evaluation minutes", W, "phases_s.train + evaluate / 60", num(1, scale=1 / 60),
           "both held-out evaluations, @@ min)", phase("train", "evaluate")),
    Figure("make run: warm start EM", W, "start_em", num(0), "held-out greedy EM from @@ (warm start)"),
    Figure("make run: EM after RL", W, "final_em", num(0), "(warm start) to @@."),
    Figure("make run seeds: EM before and after, per seed", S, "per_seed.*.start_em, final_em", str,
           "| held-out greedy EM, warm start -> after RL | @@ |", start_to_final),
    Figure("make run seeds: mean EM before and after", S, "summary.start_em_mean, final_em_mean",
           seq(1, " -> "), "after RL | ~ | @@ |",
           lambda doc: [doc["summary"]["start_em_mean"], doc["summary"]["final_em_mean"]]),
    Figure("make run seeds: lift per seed", S, "per_seed.*.lift", seq(0, " | ", sign=True),
           "| lift, `params.yaml` (groups of 8) | @@ |", per_seed("lift")),
    Figure("make run seeds: lift mean and interval", S, "summary.lift_mean, lift_ci95", ci(1, sign=True),
           "(groups of 8) | ~ | @@ |", lift_ci),
    Figure("make run seeds: groups of 4, lift per seed", G4, "per_seed.*.lift", seq(0, " | ", sign=True),
           "groups of 4 (the recipe before), same warm starts | @@ |", per_seed("lift")),
    Figure("make run seeds: groups of 4, lift mean and interval", G4, "summary.lift_mean, lift_ci95",
           ci(1, sign=True), "same warm starts | ~ | @@ |", lift_ci),
    Figure("make run seeds: least lift", S, "summary.lift_min", num(0, sign=True), "the least lift is @@"),
    Figure("make run seeds: iteration 1 reward", S, "per_seed.*.curve.0.reward_mean (mean)", num(0, scale=100),
           "answers @@% of its samples right",
           lambda doc: sum(doc["per_seed"][s]["curve"][0]["reward_mean"] for s in SEEDS) / len(SEEDS)),
    Figure("make run seeds: seeds 0 and 1 without the skip", "probes/make_run_g8_noskip.json",
           "per_seed.{0,1}.final_em", seq(0, " and "), "moved seeds 0 and 1 from @@ to",
           lambda doc: [doc["per_seed"][s]["final_em"] for s in ("0", "1")]),
    Figure("make run seeds: seeds 0 and 1 with the skip", S, "per_seed.{0,1}.final_em", seq(0, " and "),
           "moved seeds 0 and 1 from ~ to @@ (", lambda doc: [doc["per_seed"][s]["final_em"] for s in ("0", "1")]),
    Figure("make run seeds: groups of 4, seed 1 at 80 iterations", "probes/make_run_it80.json",
           "per_seed.1.lift", num(0, sign=True), "(@@ with 80 iterations"),
    Figure("make run seeds: before, another session", OLD, "per_seed.*.lift", seq(0, ", ", sign=True),
           "groups of 4 lifted seeds 0-4 by @@ there", per_seed("lift")),
]
