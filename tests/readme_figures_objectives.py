"""docs/results.md's "Beyond the paper" table: issue 33's objectives against GRPO on `make run`'s recipe
(learning_objectives.json: `python benchmarks/learning.py --params params.yaml ...`, 3 seeds). See
tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from tests.readme_figures_lib import Figure, at, ci, learning_seeds, num, seq, span

O = "learning_objectives.json"
ROWS = (("SFT warm start", "warm_start"), ("GRPO", "grpo"), ("GSPO", "gspo"), ("CISPO", "cispo"),
        ("Dr. GRPO", "dr_grpo"), ("DAPO", "dapo"), ("GiGPO", "gigpo"))
AFTER = "| objective | held-out greedy EM, 3 seeds [95% CI] |"


OBJECTIVES: list[Figure] = at("docs/results.md", [
    f for label, v in ROWS for f in (
        Figure(f"objectives table, {v}: greedy EM mean [CI]", O, f"summary.{v}.greedy_em_ci95", ci(1),
               f"| {label} | @@ |", after=AFTER),
        Figure(f"objectives table, {v}: greedy EM per seed", O, f"per_seed.*.{v}.greedy.em", seq(0),
               f"| {label} | ~ | @@ |", learning_seeds(v, "greedy.em"), AFTER),
        Figure(f"objectives table, {v}: sampled EM per seed", O, f"per_seed.*.{v}.sampled.em", seq(0),
               f"| {label} | ~ | ~ | @@ |", learning_seeds(v, "sampled.em"), AFTER))
] + [
    Figure(f"objectives table, {v}: minus GRPO, paired", O, f"summary.{v}.minus_grpo_ci95", ci(1, sign=True),
           f"| {label} | ~ | ~ | ~ | @@ |", after=AFTER)
    for label, v in ROWS[2:]
] + [
    Figure(f"objectives table, {v}: RL seconds on seed 2", O, f"per_seed.2.runs.{v}.rl_seconds", num(0),
           f"| {label} | ~ | ~ | ~ | ~ | @@ |", after=AFTER)
    for label, v in ROWS[1:]
] + [
    Figure("objectives: sampled EM span over the RL rows", O, "per_seed.*.runs.*.sampled.em (min-max)", span(0),
           "Sampled EM (@@) moves", lambda doc: [r["sampled"]["em"] for one in doc["per_seed"].values()
                                                for r in one["runs"].values()]),
    Figure("objectives: DAPO's prompts rolled out per seed", O, "per_seed.*.runs.dapo.train_curve.*.dynamic/"
           "prompts_sampled (sums)", seq(0, comma=True), "rolled out @@ prompts over the 40",
           lambda doc: [sum(c["dynamic/prompts_sampled"] for c in doc["per_seed"][s]["runs"]["dapo"]["train_curve"])
                        for s in ("0", "1", "2")]),
    Figure("objectives: DAPO's most rounds in an iteration", O, "max per_seed.*.runs.dapo...dynamic/rounds", num(0),
           "up to @@ rounds in an", lambda doc: max(c["dynamic/rounds"] for one in doc["per_seed"].values()
                                                    for c in one["runs"]["dapo"]["train_curve"])),
    Figure("objectives: the other rows' prompts per run", O, "config: train.iterations x train.prompts_per_iter",
           num(0), "where every other row rolls out @@,", lambda doc: doc["recipe"]["train"]["iterations"] * doc["recipe"]["train"]["prompts_per_iter"]),
    Figure("objectives: DAPO and GRPO RL seconds, seed 2", O, "per_seed.2.runs.{dapo,grpo}.rl_seconds",
           seq(0, " s on seed 2 against GRPO's "), "its RL took @@ (the",
           lambda doc: [doc["per_seed"]["2"]["runs"][v]["rl_seconds"] for v in ("dapo", "grpo")]),
    Figure("objectives: the other rows' RL seconds, seed 2", O, "per_seed.2.runs.{gspo,cispo,dr_grpo,gigpo}.rl_seconds",
           span(0), "(the other rows @@;", lambda doc: [doc["per_seed"]["2"]["runs"][v]["rl_seconds"]
                                                       for v in ("gspo", "cispo", "dr_grpo", "gigpo")]),
])

# the probe at a quarter of the iterations (--set train.iterations=10): it saturates too
IT10 = "probes/objectives_it10.json"
OBJECTIVES += at("docs/results.md", [
    Figure("objectives, 10 iterations: greedy EM per objective", IT10, "per_seed.0.runs.*.greedy.em", seq(0),
           "greedy EM @@ in the table's order",
           lambda doc: [doc["per_seed"]["0"]["runs"][v]["greedy"]["em"] for _, v in ROWS[1:]]),
    Figure("objectives, 10 iterations: sampled EM span", IT10, "per_seed.0.runs.*.sampled.em (min-max)", span(0),
           "sampled EM @@). The", lambda doc: [r["sampled"]["em"] for r in doc["per_seed"]["0"]["runs"].values()]),
])
