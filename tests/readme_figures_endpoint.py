"""docs/results.md's "Issue 34" section (and its sentence in docs/agents.md): the QA task through the
OpenAI endpoint against the built-in env, from learning_endpoint.json (`python benchmarks/learning.py
--params params.yaml --chat ...`, seeds 0, 1 and 2), and the warm starts tried on seed 0, one file per
recipe. See tests/readme_figures.py for how an entry reads."""

from __future__ import annotations

from tests.readme_figures_lib import Figure, at, ci, learning_seeds, num, seq

E = "learning_endpoint.json"
AFTER = "| row | held-out greedy EM, seeds 0, 1, 2 |"
ROWS = (("SFT warm start (chat demos)", "warm_start"), ("GRPO, built-in env (hermes)", "grpo_hermes"),
        ("GRPO through the endpoint (`openai` agent)", "grpo_endpoint"))
END = "summary.grpo_endpoint"
OVERHEAD = f"{END}.overhead_s_per_iteration_over_grpo_hermes"
CURVES = "per_seed.*.runs.grpo_endpoint.train_curve"
# the warm starts table, seed 0: (its first cell, its SFT steps as written, its result file)
TRIED = (("Qwen2.5's template", "500", "learning_endpoint_qwen_tools.json"),
         ("Qwen2.5's template", "1,000", "learning_endpoint_qwen_tools_sft1000.json"),
         ("`qwen2.5-brief`", "1,000", "learning_endpoint_brief_sft1000.json"),
         ("`qwen2.5-brief`", "2,000", E))
TRIED_AFTER = "| warm start, seed 0 | SFT steps |"
SAMPLED = (("search_first_rate", "searched first"), ("support_recall", "support recall"), ("em", "EM"))


def _tried(template: str, steps: str, file: str) -> list[Figure]:
    label = f"{template} | {steps}"
    cells = [Figure(f"warm starts tried, {label}: sampled {name}", file, f"per_seed.0.warm_start.sampled.{key}",
                    num(0), f"| {label} | {'~ | ' * i}@@ |", after=TRIED_AFTER)
             for i, (key, name) in enumerate(SAMPLED)]
    return cells + [Figure(f"warm starts tried, {label}: GRPO greedy EM", file,
                           "per_seed.0.runs.grpo_hermes.greedy.em", num(0), f"| {label} | ~ | ~ | ~ | @@ |",
                           after=TRIED_AFTER),
                    Figure(f"warm starts tried, {file}: SFT steps", file, "config.sft.steps", num(0, comma=True),
                           f"| {template} | @@ |", _steps, TRIED_AFTER)]


def _iterations(doc) -> list[dict]:
    """The endpoint row's training curve, every seed's iterations one after the other."""
    return [c for curve in learning_seeds("grpo_endpoint", "train_curve")(doc) for c in curve]


def _steps(doc) -> int:
    """The run's SFT steps: set over the params file's (learning.py --set / --chat), or the file's own."""
    return doc["config"].get("sft.steps", doc["recipe"]["sft"]["steps"])


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
           "paired over the 3 seeds and the 100 questions of each, @@ greedy EM"),
    Figure("endpoint: seeds in the paired difference", E, f"{END}.minus_grpo_hermes_ci95.seeds", num(0),
           "paired over the @@ seeds"),
    Figure("endpoint: mean over seeds", E, f"{END}.greedy_em_mean", num(1), "(mean over seeds @@ against"),
    Figure("built-in: mean over seeds", E, "summary.grpo_hermes.greedy_em_mean", num(1),
           "(mean over seeds ~ against @@)"),
    Figure("endpoint: SFT seconds, seed 0", E, "per_seed.0.warm_start.sft_seconds", num(0, comma=True),
           "took @@ s on seed 0"),
    Figure("endpoint: SFT seconds, seeds 1 and 2", E, "per_seed.*.warm_start.sft_seconds",
           seq(0, sep=" and ", comma=True), "other jobs: @@ s)",
           lambda doc: learning_seeds("warm_start", "sft_seconds")(doc)[1:]),
    Figure("endpoint: greedy EM through its agent", E, "per_seed.*.grpo_endpoint.greedy_agent.em", seq(0),
           "through its own agent the endpoint row scores @@.", learning_seeds("grpo_endpoint", "greedy_agent.em")),
    Figure("endpoint: overhead per iteration", E, OVERHEAD, ci(2, sign=True),
           "The endpoint's overhead is @@ s per iteration"),
    Figure("endpoint: drift-free iterations", E, f"{CURVES}.*.agent/drift", str,
           "`agent/drift` was 0 in @@ of 120 iterations",
           lambda doc: sum(c["agent/drift"] == 0 for c in _iterations(doc))),
    Figure("endpoint: most split sessions", E, f"{CURVES}.*.agent/drift", num(0),
           "at most @@ split sessions of 128",
           lambda doc: max(c["agent/drift"] for c in _iterations(doc))),
    Figure("endpoint: no agent errors", E, f"{CURVES}.*.agent/errors", num(0), "`agent/errors` was @@ in all.",
           lambda doc: sum(c["agent/errors"] for c in _iterations(doc))),
] + [f for row in TRIED for f in _tried(*row)]) + at("docs/agents.md", [
    Figure("agents page: endpoint greedy EM", E, "per_seed.*.grpo_endpoint.greedy.em", seq(0),
           "held-out greedy EM @@ against", learning_seeds("grpo_endpoint", "greedy.em")),
    Figure("agents page: built-in greedy EM", E, "per_seed.*.grpo_hermes.greedy.em", seq(0),
           "against @@ in the built-in env, from", learning_seeds("grpo_hermes", "greedy.em")),
    Figure("agents page: warm start greedy EM", E, "per_seed.*.warm_start.greedy.em", seq(0),
           "from a warm start at @@", learning_seeds("warm_start", "greedy.em")),
    Figure("agents page: paired difference", E, f"{END}.minus_grpo_hermes_ci95", ci(1, sign=True),
           "(paired @@, an interval that includes 0)"),
    Figure("agents page: overhead", E, OVERHEAD, ci(2, sign=True), "at @@ s per iteration"),
])
