"""README's `make run` figures ("Results"): the lift over seeds 0-4 of make run's recipe (make_run_seeds.json)
and one seed's time; docs/results.md's: the recipe before it (500 SFT steps: make_run_seeds_sft500.json, its
groups of 4, float-level noise rows in probes/, a fresh clone's wall time in make_run_wall.json) and the
AVX2 machine it failed on (make_run_seeds_avx2.json). See tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from typing import Any

from tests.readme_figures_lib import Figure, at, ci, num, seq, span

W, S, G4 = "make_run_wall.json", "make_run_seeds.json", "make_run_seeds_groups4.json"
S500 = "make_run_seeds_sft500.json"  # the recipe before (500 SFT steps), on an earlier session's machine
AVX2 = "make_run_seeds_avx2.json"  # the same recipe on an AVX2-only EPYC, seeds 0-2
RESULTS_MD = "docs/results.md"
# the same recipes with algo.skip_zero_advantage flipped: float-level noise (README's rows 2 and 4)
NS, G4S = "probes/make_run_g8_noskip.json", "probes/make_run_groups4_skip.json"
OLD = "make_run_seeds_before.json"  # groups of 4 in an earlier session, on another machine
SEEDS = ("0", "1", "2", "3", "4")
# the rows of README's seed table: a row's mean cell is found after its label (`~` never crosses a |)
ROW_EM = "| held-out greedy EM, warm start -> after RL |"
ROW_G8 = "| lift, `params.yaml` (groups of 8) |"
ROW_NS = "| the same with `algo.skip_zero_advantage: false` |"
ROW_G4 = "| lift, groups of 4 (the recipe before), same warm starts |"
ROW_G4S = "| groups of 4 with `algo.skip_zero_advantage: true` |"


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


def start_to_final_of(seeds: tuple[str, ...]) -> Any:
    return lambda doc: ", ".join(f"{doc['per_seed'][s]['start_em']:.0f} -> {doc['per_seed'][s]['final_em']:.0f}"
                                 for s in seeds)


def first_iteration_reward(seed: str) -> Any:
    return lambda doc: doc["per_seed"][seed]["curve"][0]["reward_mean"]


def seeds_table(file: str) -> list[Figure]:
    """A seed table's first two rows (README's for make_run_seeds.json; results.md's for the recipe before)."""
    tag = "" if file == S else f" ({file})"
    return [
        Figure("make run seeds: EM before and after, per seed" + tag, file, "per_seed.*.start_em, final_em", str,
               ROW_EM + " @@ |", start_to_final),
        Figure("make run seeds: mean EM before and after" + tag, file, "summary.start_em_mean, final_em_mean",
               seq(1, " -> "), "| @@ |",
               lambda doc: [doc["summary"]["start_em_mean"], doc["summary"]["final_em_mean"]], after=ROW_EM),
        Figure("make run seeds: lift per seed" + tag, file, "per_seed.*.lift", seq(0, " | ", sign=True),
               ROW_G8 + " @@ |", per_seed("lift")),
        Figure("make run seeds: lift mean and interval" + tag, file, "summary.lift_mean, lift_ci95", ci(1, sign=True),
               "| @@ |", lift_ci, after=ROW_G8),
    ]


MAKE_RUN: list[Figure] = seeds_table(S) + [
    Figure("make run seeds: least lift", S, "summary.lift_min", num(0, sign=True), "the least lift is @@"),
    Figure("make run seeds: one seed's flow, minutes", S, "per_seed.1-4.wall_s (min-max)", span(0, scale=1 / 60),
           "one seed's flow took @@ min", lambda doc: [doc["per_seed"][s]["wall_s"] for s in SEEDS[1:]]),
    Figure("make run seeds, AVX2: lifts (README)", AVX2, "per_seed.0-2.lift", seq(0, ", ", sign=True),
           "this machine lifted seeds 0-2 by only @@, while",
           lambda doc: [doc["per_seed"][s]["lift"] for s in ("0", "1", "2")]),
    Figure("make run seeds: the recipe before, least and most lift", S500, "summary.lift_min, lift_max",
           lambda v: f"+{v[0]:.0f} to +{v[1]:.0f}", "lifted all five by @@.",
           lambda doc: [doc["summary"]["lift_min"], doc["summary"]["lift_max"]]),
] + at(RESULTS_MD, seeds_table(S500) + [
    Figure("make run: wall time on a fresh clone", W, "wall_s", minutes_seconds, "2 idle cores `make run` with that recipe took @@ end"),
    Figure("make run: data and index seconds", W, "phases_s.prepare_data + build_index", num(0),
           "(data and index @@ s;", phase("prepare_data", "build_index")),
    Figure("make run: SFT minutes", W, "phases_s.sft / 60", num(1, scale=1 / 60), "500 steps, @@ min;",
           phase("sft")),
    Figure("make run: RL and evaluation minutes", W, "phases_s.train + evaluate / 60", num(1, scale=1 / 60),
           "both held-out evaluations, @@ min;", phase("train", "evaluate")),
    Figure("make run: warm start EM", W, "start_em", num(0), "held-out greedy EM from @@ (warm start)"),
    Figure("make run: EM after RL", W, "final_em", num(0), "(warm start) to @@ (`python"),
    Figure("make run seeds: groups of 4, lift per seed", G4, "per_seed.*.lift", seq(0, " | ", sign=True),
           ROW_G4 + " @@ |", per_seed("lift")),
    Figure("make run seeds: groups of 4, lift mean and interval", G4, "summary.lift_mean, lift_ci95",
           ci(1, sign=True), "| @@ |", lift_ci, after=ROW_G4),
    Figure("make run seeds: skip off, lift per seed", NS, "per_seed.*.lift", seq(0, " | ", sign=True),
           ROW_NS + " @@ |", per_seed("lift")),
    Figure("make run seeds: skip off, lift mean and interval", NS, "summary.lift_mean, lift_ci95",
           ci(1, sign=True), "| @@ |", lift_ci, after=ROW_NS),
    Figure("make run seeds: groups of 4 with skip, lift per seed", G4S, "per_seed.*.lift", seq(0, " | ", sign=True),
           ROW_G4S + " @@ |", per_seed("lift")),
    Figure("make run seeds: groups of 4 with skip, lift mean and interval", G4S, "summary.lift_mean, lift_ci95",
           ci(1, sign=True), "| @@ |", lift_ci, after=ROW_G4S),
    # why groups of 8: the discussion of the recipe before
    Figure("make run seeds: iteration 1 reward", S500, "per_seed.*.curve.0.reward_mean (mean)", num(0, scale=100),
           "answers @@% of its samples right",
           lambda doc: sum(doc["per_seed"][s]["curve"][0]["reward_mean"] for s in SEEDS) / len(SEEDS)),
    Figure("make run seeds: groups of 4, seed 1 at 80 iterations", "probes/make_run_it80.json",
           "per_seed.1.lift", num(0, sign=True), "by only ~ (@@ with 80 iterations"),
    Figure("make run seeds: seed 1 warm start, earlier machine", OLD, "per_seed.1.start_em", num(0),
           "trained seed 1 a warm start scoring @@ instead of"),
    Figure("make run seeds: seed 1 warm start, the recipe before", S500, "per_seed.1.start_em", num(0),
           "a warm start scoring ~ instead of @@, from which"),
    Figure("make run seeds: seed 1 lift, earlier machine", OLD, "per_seed.1.lift", num(0, sign=True),
           "lifted it by only @@ ("),
    # the warm start to its plateau: the AVX2 machine, seed 0 before and after
    Figure("make run seeds, AVX2: EM before and after, seeds 0-2", AVX2, "per_seed.0-2.start_em, final_em", str,
           "on seeds 0-2 ~ gave @@ (lifts", start_to_final_of(("0", "1", "2"))),
    Figure("make run seeds, AVX2: lifts", AVX2, "per_seed.0-2.lift", seq(0, ", ", sign=True), "(lifts @@).",
           lambda doc: [doc["per_seed"][s]["lift"] for s in ("0", "1", "2")]),
    Figure("make run seeds, AVX2: seed 0 iteration 1 reward", AVX2, "per_seed.0.curve.0.reward_mean", num(0, scale=100),
           "iteration answered @@% of its samples right", first_iteration_reward("0")),
    Figure("make run seeds: seed 0 iteration 1 reward, the recipe before", S500, "per_seed.0.curve.0.reward_mean",
           num(0, scale=100), "(@@% in the recorded curve)", first_iteration_reward("0")),
    Figure("make run seeds: seed 0 before and after, 1,000 SFT steps", S, "per_seed.0.start_em, final_em", str,
           "the same seed went @@", start_to_final_of(("0",))),
    Figure("make run seeds: seed 0 iteration 1 reward, 1,000 SFT steps", S, "per_seed.0.curve.0.reward_mean",
           num(0, scale=100), "(first iteration: @@% of its samples right)", first_iteration_reward("0")),
])

# `make test` on a fresh clone (benchmarks/suite_time.py): its wall time, and how many tests each
# of its two sessions (the main suite, the vLLM tests beside it) passed
T = "suite_time.json"
MAKE_RUN += [
    Figure("make test: wall time on a fresh clone", T, "wall_s", minutes_seconds, "`make test` took @@ ("),
    Figure("make test: main suite tests passed", T, "sessions.0.passed", num(0, comma=True), "(@@ tests in the main suite"),
    Figure("make test: vLLM tests passed", T, "sessions.1.passed", num(0), "and the @@ vLLM tests beside them"),
    Figure("make test: wall time with a third worker", "suite_time_workers3.json", "wall_s", minutes_seconds,
           "a third xdist worker took @@, `--workers 3`"),
]
