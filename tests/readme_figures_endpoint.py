"""docs/results.md's "Issue 34" section (and its sentence in docs/agents.md): the QA task through the
OpenAI endpoint against the built-in env, from learning_endpoint.json (`python benchmarks/learning.py
--params params.yaml --chat ...`; seeds 0 and 1 so far). See tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from tests.readme_figures_lib import Figure, at, ci, learning_seeds, num, seq

E = "learning_endpoint.json"
AFTER = "| row | held-out greedy EM, seeds 0, 1 |"
ROWS = (("SFT warm start (chat demos)", "warm_start"), ("GRPO, built-in env (hermes)", "grpo_hermes"),
        ("GRPO through the endpoint (`openai` agent)", "grpo_endpoint"))
S0 = "per_seed.0"
END = "summary.grpo_endpoint"
OVERHEAD = f"{END}.overhead_s_per_iteration_over_grpo_hermes"


ENDPOINT: list[Figure] = at("docs/results.md", [
    f for label, v in ROWS for f in (
        Figure(f"endpoint table, {v}: greedy EM per seed", E, f"per_seed.*.{v}.greedy.em", seq(0),
               f"| {label} | @@ |", learning_seeds(v, "greedy.em"), AFTER),
        Figure(f"endpoint table, {v}: sampled EM per seed", E, f"per_seed.*.{v}.sampled.em", seq(0),
               f"| {label} | ~ | @@ |", learning_seeds(v, "sampled.em"), AFTER))
] + [
    Figure(f"endpoint table, {v}: seconds per iteration", E, f"summary.{v}.seconds_per_iteration", ci(2),
           f"| {label} | ~ | ~ | @@ |", after=AFTER) for label, v in ROWS[1:]
] + [
    Figure("endpoint: minus built-in, paired", E, f"{END}.minus_grpo_hermes_ci95", ci(1, sign=True),
           "paired over seeds and the 100 questions: @@ greedy EM points"),
    Figure("endpoint: greedy EM through its agent", E, "per_seed.*.grpo_endpoint.greedy_agent.em", seq(0),
           "through its own agent the endpoint row scores @@", learning_seeds("grpo_endpoint", "greedy_agent.em")),
    Figure("endpoint: warm start sampled search-first", E, f"{S0}.warm_start.sampled.search_first_rate", num(0),
           "sampled, searched first in @@% of episodes"),
    Figure("endpoint: warm start sampled EM", E, f"{S0}.warm_start.sampled.em", num(0), "and answered @@% right"),
    Figure("endpoint: overhead per iteration", E, OVERHEAD, ci(2, sign=True),
           "The endpoint's overhead is @@ s per iteration"),
    Figure("endpoint: SFT seconds", E, f"{S0}.warm_start.sft_seconds", num(0, comma=True),
           "seed 0's 500 steps took @@ s"),
    Figure("endpoint: drift-free iterations", E, f"{S0}.runs.grpo_endpoint.train_curve.*.agent/drift", str,
           "`agent/drift` was 0 in @@ of 40 iterations on seed 0",
           lambda doc: sum(c["agent/drift"] == 0 for c in doc["per_seed"]["0"]["runs"]["grpo_endpoint"]["train_curve"])),
]) + at("docs/agents.md", [
    Figure("agents page: endpoint greedy EM", E, "per_seed.*.grpo_endpoint.greedy.em", seq(0),
           "held-out greedy EM @@ against", learning_seeds("grpo_endpoint", "greedy.em")),
    Figure("agents page: built-in greedy EM", E, "per_seed.*.grpo_hermes.greedy.em", seq(0),
           "against @@ in the built-in env", learning_seeds("grpo_hermes", "greedy.em")),
    Figure("agents page: paired difference", E, f"{END}.minus_grpo_hermes_ci95", ci(1, sign=True),
           "(paired @@)"),
    Figure("agents page: overhead", E, OVERHEAD, ci(2, sign=True), "at @@ s per iteration"),
])
