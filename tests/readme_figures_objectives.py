"""docs/results.md's "Beyond the paper" table: issue 33's objectives against GRPO on `make run`'s recipe
(learning_objectives.json: `python benchmarks/learning.py --params params.yaml ...`; seed 0 so far). See
tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from tests.readme_figures_lib import Figure, at, ci, learning_seeds, num, seq, span

O = "learning_objectives.json"
ROWS = (("SFT warm start", "warm_start"), ("GRPO", "grpo"), ("GSPO", "gspo"), ("CISPO", "cispo"),
        ("Dr. GRPO", "dr_grpo"), ("DAPO", "dapo"), ("GiGPO", "gigpo"))
AFTER = "| objective | held-out greedy EM, seed 0 |"


OBJECTIVES: list[Figure] = at("docs/results.md", [
    f for label, v in ROWS for f in (
        Figure(f"objectives table, {v}: greedy EM", O, f"per_seed.0.{v}.greedy.em", num(0),
               f"| {label} | @@ |", lambda doc, v=v: learning_seeds(v, "greedy.em")(doc)[0], AFTER),
        Figure(f"objectives table, {v}: sampled EM", O, f"per_seed.0.{v}.sampled.em", num(0),
               f"| {label} | ~ | @@ |", lambda doc, v=v: learning_seeds(v, "sampled.em")(doc)[0], AFTER))
] + [
    Figure(f"objectives table, {v}: minus GRPO, paired", O, f"summary.{v}.minus_grpo_ci95", ci(1, sign=True),
           f"| {label} | ~ | ~ | @@ |", after=AFTER)
    for label, v in ROWS[2:]
])

# the probe at a quarter of the iterations (--set train.iterations=10): it saturates too
IT10 = "probes/objectives_it10.json"
OBJECTIVES += at("docs/results.md", [
    Figure("objectives, 10 iterations: greedy EM per objective", IT10, "per_seed.0.runs.*.greedy.em", seq(0),
           "greedy EM @@ in the table's order",
           lambda doc: [doc["per_seed"]["0"]["runs"][v]["greedy"]["em"] for _, v in ROWS[1:]]),
    Figure("objectives, 10 iterations: sampled EM span", IT10, "per_seed.0.runs.*.sampled.em (min-max)", span(0),
           "sampled EM @@),", lambda doc: [r["sampled"]["em"] for r in doc["per_seed"]["0"]["runs"].values()]),
])
