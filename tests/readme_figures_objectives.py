"""docs/results.md's "Beyond the paper" table: issue 33's objectives against GRPO on `make run`'s recipe
(learning_objectives.json: `python benchmarks/learning.py --params params.yaml ...`, 3 seeds). See
tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from tests.readme_figures_lib import (
    PAPER_DS,
    Figure,
    Getter,
    at,
    ci,
    learning_seeds,
    load,
    num,
    paper_cell,
    paper_diff,
    paper_seeds,
    seq,
    span,
)

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

# the same objectives on the paper table's recipe (4 samples per prompt, the 500-step warm starts), today's code,
# GRPO rerun beside them: benchmarks/results/paper_table_objectives (paper_table.py --methods grpo,gspo,...)
PO = "paper_table_objectives/paper_table.json"
AFTER_PO = "| on the paper table's recipe (held-out EM, %) |"
OBJECTIVES += at("docs/results.md", [
    f for label, v in ROWS[1:] for f in (
        Figure(f"paper-recipe objectives, {v}: EM mean [CI]", PO, f"per_seed.*.methods.{v}.em_per_question", ci(1),
               f"| {label} | @@ |", paper_cell("methods", v), AFTER_PO),
        Figure(f"paper-recipe objectives, {v}: EM per seed", PO, f"per_seed.*.methods.{v}.metrics...em", seq(0),
               f"| {label} | ~ | @@ |", paper_seeds("methods", v), AFTER_PO))
] + [
    Figure(f"paper-recipe objectives, {v}: minus GRPO", PO, "paired bootstrap", ci(1, sign=True),
           f"| {label} | ~ | ~ | @@ |", paper_diff(v, "grpo"), AFTER_PO)
    for label, v in ROWS[2:]
] + [
    Figure("paper-recipe objectives: warm start (agent) per seed", PO, "per_seed.*.baselines.agent...em", seq(0),
           "| SFT warm start (agent, no RL) | ~ | @@ |", paper_seeds("baselines", "agent"), AFTER_PO),
    Figure("paper-recipe objectives: warm start (agent) mean [CI]", PO, "per_seed.*.baselines.agent", ci(1),
           "| SFT warm start (agent, no RL) | @@ |", paper_cell("baselines", "agent"), AFTER_PO),
])


OLD = "paper_table_np12k/paper_table.json"  # the recorded paper table, by the code of commit b018462


def _em(seed: str, kind: str, name: str) -> Getter:
    """One seed's in-domain held-out EM of a row (a baseline or a method) in a paper_table.py file."""
    return lambda doc: doc["per_seed"][seed][kind][name]["metrics"][PAPER_DS]["em"]


def _first_right(seed: str) -> Getter:
    """How many answers of GRPO's first rollout were right (its mean reward x prompts x samples)."""
    return lambda doc: (doc["per_seed"][seed]["methods"]["grpo"]["train_curve"][0]["reward_mean"]
                        * doc["budget"]["prompts_per_iter"] * doc["budget"]["n_samples"])


def _same_baselines(doc) -> int:
    """How many of seed 0's baselines score every question as the recorded paper table's do."""
    old = load(OLD)["per_seed"]["0"]["baselines"]
    new = doc["per_seed"]["0"]["baselines"]
    return sum(new[b]["em_per_question"] == old[b]["em_per_question"] for b in old)


OBJECTIVES += at("docs/results.md", [
    Figure("paper table vs today's code: seed 0 baselines equal", PO, "seed 0 baselines' em_per_question", num(0),
           "question for question (all @@ on seed 0)", _same_baselines),
    Figure("paper table vs today's code: GRPO seed 0 today", PO, "per_seed.0.methods.grpo EM", num(0),
           "GRPO reached @@ on seed 0 instead", _em("0", "methods", "grpo")),
    Figure("paper table vs today's code: GRPO seed 0 recorded", OLD, "per_seed.0.methods.grpo EM", num(0),
           "on seed 0 instead of @@ (its first", _em("0", "methods", "grpo")),
    Figure("paper table vs today's code: right answers in the first rollout, today", PO,
           "per_seed.0.methods.grpo.train_curve.0.reward_mean x 64", num(0), "first rollout had @@ of 64 answers",
           _first_right("0")),
    Figure("paper table vs today's code: right answers in the first rollout, recorded", OLD,
           "per_seed.0.methods.grpo.train_curve.0.reward_mean x 64", num(0), "the recorded run's @@) and",
           _first_right("0")),
    Figure("paper table vs today's code: rollouts per iteration", PO, "budget prompts_per_iter x n_samples", num(0),
           "had ~ of @@ answers right", lambda doc: doc["budget"]["prompts_per_iter"] * doc["budget"]["n_samples"]),
    Figure("paper table vs today's code: GRPO seed 2 today", PO, "per_seed.2.methods.grpo EM", num(0),
           "and @@ on seed 2 instead", _em("2", "methods", "grpo")),
    Figure("paper-recipe objectives: seed 1's new warm start, agent EM", PO, "per_seed.1.baselines.agent EM", num(0),
           "its agent scores @@ greedy", _em("1", "baselines", "agent")),
    Figure("paper table: seed 1's warm start, agent EM", OLD, "per_seed.1.baselines.agent EM", num(0),
           "greedy against @@):", _em("1", "baselines", "agent")),
    Figure("paper-recipe objectives: seed 2's naive RAG", PO, "per_seed.2.baselines.rag EM", num(0),
           "naive RAG: @@ against", _em("2", "baselines", "rag")),
    Figure("paper table: seed 2's naive RAG", OLD, "per_seed.2.baselines.rag EM", num(0),
           "RAG: ~ against @@), seed 1's", _em("2", "baselines", "rag")),
    Figure("paper table vs today's code: GRPO seed 2 recorded", OLD, "per_seed.2.methods.grpo EM", num(0),
           "on seed 2 instead of @@. So", _em("2", "methods", "grpo")),
])


def _ems(doc, seeds: tuple[str, ...]) -> list[float]:
    """Every objective's EM (GRPO included) on these seeds of the paper-recipe file."""
    return [_em(s, "methods", v)(doc) for s in seeds for _, v in ROWS[1:]]


OBJECTIVES += at("docs/results.md", [
    Figure("paper-recipe objectives: warm start mean", PO, "per_seed.*.baselines.agent (mean)", num(1),
           "GRPO lifts held-out EM from @@ to", lambda doc: paper_cell("baselines", "agent")(doc)["mean"]),
    Figure("paper-recipe objectives: GRPO mean", PO, "per_seed.*.methods.grpo (mean)", num(1),
           "held-out EM from ~ to @@ and", lambda doc: paper_cell("methods", "grpo")(doc)["mean"]),
    Figure("paper-recipe objectives: seed 0 span", PO, "per_seed.0.methods.* EM (min-max)", span(0),
           "takes off (@@: the warm", lambda doc: _ems(doc, ("0",))),
    Figure("paper-recipe objectives: seed 1 span", PO, "per_seed.1.methods.* EM (min-max)", span(0),
           "all stop at @@, on seeds", lambda doc: _ems(doc, ("1",))),
    Figure("paper-recipe objectives: seeds 2-4 span", PO, "per_seed.{2,3,4}.methods.* EM (min-max)", span(0),
           "all reach @@. A look", lambda doc: _ems(doc, ("2", "3", "4"))),
    Figure("paper-recipe objectives: wall minutes", PO, "wall_seconds", num(0, scale=1 / 60),
           "its wall time, @@ min on 2 cores"),
    Figure("paper-recipe objectives: calls", PO, "len(wall_seconds_per_call)", num(0),
           "on 2 cores over @@ calls", lambda doc: len(doc["wall_seconds_per_call"])),
])

OBJECTIVES += [  # README's sentence
    Figure("README: paper-recipe GRPO mean", PO, "per_seed.*.methods.grpo (mean)", num(1),
           "where GRPO reaches @@ over 5 seeds", lambda doc: paper_cell("methods", "grpo")(doc)["mean"]),
    Figure("README: paper-recipe seeds", PO, "len(seeds)", num(0), "reaches ~ over @@ seeds: every",
           lambda doc: len(doc["seeds"])),
]
