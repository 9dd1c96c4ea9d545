"""Every measured figure README.md and the docs/ pages quote, tied to the result file (benchmarks/results/)
it comes from.

The pages' numbers are copied by hand from JSON files that benchmarks rewrite, and nothing else notices
when one drifts from the other. Each `Figure` below names the file, where in it the value is (or how it
is computed from the raw data there), how the page rounds it, the page text around it and the page
(`doc`: README.md by default; `at(page, [...])` moves a list of entries to a docs/ page);
tests/project/test_readme_figures.py formats each value the way the page does and asserts the page holds it there.
`make run`'s own figures ("Two commands": wall time, lift over seeds) are in tests/readme_figures_make_run.py.

Where they are quoted: README.md keeps the headline (`make run`, `make test`, the one-paragraph summary
of the learning benchmark and the paper table: the "two commands" entries); docs/results.md the learning
benchmark, the paper's Tables 3 and 4, the seed sweep's discussion, reliability and the failure
diagnosis; docs/performance.md the perf, profile and retrieval figures; docs/scaling.md the Ray and vLLM
figures; docs/real-models.md the memory figures.

Adding an entry
---------------
Append a `Figure` to the list of its section (PERF is in tests/readme_figures_perf.py; a new section:
a new list, added to REGISTRY at the end):

    Figure("make run: held-out EM after RL, mean of 5 seeds",   # name: the figure, in words (unique)
           "make_run_seeds.json",                              # file: under benchmarks/results/
           "summary.final_em_mean",                            # path: dotted keys, list indexes as numbers
           num(1),                                             # fmt: README's rounding (helpers below)
           "lifted held-out greedy EM from ~ to @@")           # context: README text around the figure

- `context` is literal README text after `normalise` (whitespace runs become one space and `**` bold
  marks are dropped, so line wraps and bold do not matter). `@@` marks the figure, once per context;
  `~` stands for up to 160 characters that are not a table pipe (a skipped cell, a few words).
- Formats (tests/readme_figures_lib.py) round half-up from the value's decimal text, as a person reads
  0.5175 as 0.518 or 3292.5 as 3,293: `num(d, comma=, sign=, scale=)` one number, `seq(d, sep)` a
  list, `span(d)` a list's "min-max", `ci(d)` an interval dict as "82.7 [72.7, 93.7]", `med(d)` a
  repeats dict as "1.10 (0.97-1.17)"; any `Callable[[value], str]` will do.
- A figure computed from the file rather than stored in it (a paired difference, a span, a sum) gets
  `get=` (a function of the loaded JSON) and a `path` that says what it is computed from.
- `after=` is page text the match must follow, for a context that occurs twice (Tables 3 and 4 share
  row labels).
"""

from __future__ import annotations

from tests.readme_figures_lib import (
    PAPER_DS,
    Figure,
    at,
    async_waits,
    ci,
    gpu_learner_gib,
    learning_diff,
    learning_seeds,
    median,
    num,
    paper_cell,
    paper_diff,
    paper_seeds,
    profile_row,
    seq,
    span,
)
from tests.readme_figures_endpoint import ENDPOINT
from tests.readme_figures_make_run import MAKE_RUN
from tests.readme_figures_objectives import OBJECTIVES
from tests.readme_figures_perf import PERF
from tests.readme_figures_vllm import VLLM_PERF

# the docs/ pages that quote figures (README.md is the default page of an entry)
RESULTS_MD, PERFORMANCE_MD = "docs/results.md", "docs/performance.md"
SCALING_MD, REAL_MODELS_MD = "docs/scaling.md", "docs/real-models.md"


L, P = "learning.json", "paper_table_np12k/paper_table.json"
LEARNING_ROWS = (("SFT warm start", "warm_start"), ("GRPO", "grpo"), ("PPO (GAE + critic)", "ppo"),
                 ("GRPO, rewards shuffled across the batch (control)", "grpo_shuffled_rewards"),
                 ("GRPO, asynchronous (`train.max_staleness: 1`, Ray)", "grpo_async1"))
AFTER_LEARNING = "| variant | greedy EM, mean of 3 seeds [95% CI] |"
LEARNING: list[Figure] = at(RESULTS_MD, [
    f for label, v in LEARNING_ROWS for f in (
        Figure(f"learning table, {v}: greedy EM mean [95% CI]", L, f"summary.{v}.greedy_em_ci95", ci(1),
               f"| {label} | @@ |", after=AFTER_LEARNING),
        Figure(f"learning table, {v}: greedy EM per seed", L, f"per_seed.*.{v}.greedy.em",
               seq(0), f"| {label} | ~ | @@ |", learning_seeds(v, "greedy.em"), AFTER_LEARNING),
        Figure(f"learning table, {v}: sampled EM per seed", L, f"per_seed.*.{v}.sampled.em",
               seq(0), f"| {label} | ~ | ~ | @@ |", learning_seeds(v, "sampled.em"), AFTER_LEARNING))
] + [
    Figure(f"learning table, {v}: RL wall time per seed", L, f"per_seed.*.runs.{v}.rl_seconds", span(0),
           f"| {label} | ~ | ~ | ~ | @@ s |", learning_seeds(v, "rl_seconds"), AFTER_LEARNING)
    for label, v in LEARNING_ROWS[1:4]
] + [
    Figure("learning table: SFT seconds, seeds 1 and 2", L, "per_seed.{1,2}.warm_start.sft_seconds",
           seq(0, " s and "), "| SFT warm start | ~ | ~ | ~ | SFT @@ s (seeds 1, 2) |",
           lambda doc: [doc["per_seed"][s]["warm_start"]["sft_seconds"] for s in ("1", "2")]),
    Figure("learning: seed 0 SFT seconds", L, "per_seed.0.warm_start.sft_seconds", num(0, comma=True),
           "shared cores (@@ s); its RL runs here"),
    Figure("learning: GRPO - warm start", L, "paired bootstrap of per_seed em_per_question",
           ci(1, sign=True), "(GRPO - warm start @@, PPO", learning_diff("grpo", "warm_start")),
    Figure("learning: PPO - warm start", L, "paired bootstrap of per_seed em_per_question",
           ci(1, sign=True), "PPO - warm start @@) within", learning_diff("ppo", "warm_start")),
    Figure("learning: lift over the warm start, points", L, "GRPO and PPO - warm start, means",
           span(0), "lift held-out greedy EM by @@ points",
           lambda doc: [learning_diff(v, "warm_start")(doc)["mean"] for v in ("grpo", "ppo")]),
    Figure("learning: GRPO - PPO", L, "paired bootstrap of per_seed em_per_question", ci(1, sign=True),
           "GRPO - PPO is @@: the intervals", learning_diff("grpo", "ppo")),
    Figure("results: GRPO - PPO at 80 iterations", L, "paired bootstrap of per_seed em_per_question",
           ci(1, sign=True), "finds GRPO and PPO level (@@)", learning_diff("grpo", "ppo")),
    Figure("learning: shuffled control - warm start", L, "paired bootstrap of per_seed em_per_question",
           ci(1, sign=True), "(control - warm start @@)", learning_diff("grpo_shuffled_rewards", "warm_start")),
    Figure("learning: async GRPO mean [CI]", L, "summary.grpo_async1.greedy_em_ci95", ci(1),
           "train.max_staleness: 1`, the same seeds and recipe) reaches @@ ("),
    Figure("learning: async GRPO per seed", L, "per_seed.*.runs.grpo_async1.greedy.em", seq(0),
           "reaches ~ (@@ per seed) against", learning_seeds("grpo_async1", "greedy.em")),
    Figure("learning: synchronous GRPO beside async", L, "summary.grpo.greedy_em_mean", num(1),
           "per seed) against @@ synchronous"),
    Figure("learning: async - sync GRPO", L, "paired bootstrap of per_seed em_per_question", ci(1),
           "paired difference @@ at equal iterations", learning_diff("grpo_async1", "grpo")),
    Figure("learning: async RL wall times", L, "per_seed.*.runs.grpo_async1.rl_seconds", span(0),
           "its RL wall times, @@ s, ran beside", learning_seeds("grpo_async1", "rl_seconds")),
    Figure("learning: model parameters", P, "model_params (the same warm starts)", num(2, scale=1e-6),
           "a Llama of @@M parameters", lambda doc: doc["model_params"]),
    Figure("learning: cosine-150 probe, final held-out EM", "learning_probe_cos150.json",
           "per_seed.1.runs.grpo.greedy.em", num(0), "and @@ at 150 on a cosine over 150"),
]) + [
    # README's "Two commands" summary of the same benchmark (the make-run figures there are not covered here)
    Figure("two commands: GRPO held-out EM", L, "summary.grpo.greedy_em_mean", num(1),
           "80 iterations: GRPO @@ and PPO"),
    Figure("two commands: PPO held-out EM", L, "summary.ppo.greedy_em_mean", num(1), "and PPO @@ held-out,"),
    Figure("two commands: warm start EM", L, "summary.warm_start.greedy_em_mean", num(0),
           "held-out, from a warm start of @@, in"),
    Figure("two commands: minutes of RL, GRPO and PPO", L, "summary.{grpo,ppo}.rl_seconds_mean / 60",
           seq(0, " and ", scale=1 / 60), "warm start of ~, in @@ minutes of RL",
           lambda doc: [doc["summary"][v]["rl_seconds_mean"] for v in ("grpo", "ppo")]),
    Figure("two commands: shuffled rewards EM", L, "summary.grpo_shuffled_rewards.greedy_em_mean", num(0),
           "with shuffled rewards the policy stays at @@ (recorded"),
]

T3 = (("Direct answer (no retrieval)", "baselines", "direct"),
      ("Naive RAG (top-3 documents in the prompt, one turn)", "baselines", "rag"),
      ("Agent, SFT warm start (no RL)", "baselines", "agent"), ("PPO (GAE + critic)", "methods", "ppo"),
      ("GRPO", "methods", "grpo"), ("REINFORCE++", "methods", "reinforce_pp"),
      ("REINFORCE++-baseline", "methods", "reinforce_pp_baseline"), ("RLOO", "methods", "rloo"))
T4 = (("PPO", "ppo"), ("PPO, advantage mask off", "ppo_adv_mask_off"),
      ("PPO, advantage and loss masks off", "ppo_masks_off"), ("GRPO", "grpo"),
      ("GRPO, loss mask off", "grpo_loss_mask_off"))
AFTER_T4 = "| Table 4 (held-out EM, %) |"
PAPER: list[Figure] = at(RESULTS_MD, [
    f for table, after, rows in (("3", "| Table 3 (held-out EM, %) |", T3),
                                 ("4", AFTER_T4, tuple((a, "methods", n) for a, n in T4)))
    for label, kind, n in rows for f in (
        Figure(f"paper table {table}, {n}: EM mean [95% CI]", P, f"per_seed.*.{kind}.{n}.em_per_question",
               ci(1), f"| {label} | @@ |", paper_cell(kind, n), after),
        Figure(f"paper table {table}, {n}: EM per seed", P, f"per_seed.*.{kind}.{n}.metrics.{PAPER_DS}.em",
               seq(0), f"| {label} | ~ | @@ |", paper_seeds(kind, n), after))
] + [
    Figure("paper: PPO - warm start", P, "paired bootstrap", ci(1, sign=True), "its warm start: @@ (PPO) to",
           paper_diff("ppo", "agent", "baselines")),
    Figure("paper: RLOO - warm start", P, "paired bootstrap", ci(1, sign=True), "(PPO) to @@ (RLOO)",
           paper_diff("rloo", "agent", "baselines")),
    Figure("paper: GRPO - PPO", P, "paired bootstrap", ci(1, sign=True), "GRPO - PPO @@; RLOO and",
           paper_diff("grpo", "ppo")),
    Figure("paper: RLOO and REINFORCE++-baseline - PPO", P, "paired bootstrap, means", seq(1, sign=True),
           "REINFORCE++-baseline likewise (@@, both intervals",
           lambda doc: [paper_diff(m, "ppo")(doc)["mean"] for m in ("rloo", "reinforce_pp_baseline")]),
    Figure("paper: GRPO - REINFORCE++", P, "paired bootstrap", ci(1), "trails the group baselines: @@ below GRPO",
           paper_diff("grpo", "reinforce_pp")),
    Figure("paper: RLOO - REINFORCE++", P, "paired bootstrap, mean", num(1), "below GRPO, @@ below RLOO",
           lambda doc: paper_diff("rloo", "reinforce_pp")(doc)["mean"]),
    Figure("paper: REINFORCE++-baseline - REINFORCE++", P, "paired bootstrap, mean", num(1),
           "below RLOO, @@ below REINFORCE++-baseline",
           lambda doc: paper_diff("reinforce_pp_baseline", "reinforce_pp")(doc)["mean"]),
    Figure("paper: PPO masks off - PPO", P, "paired bootstrap", ci(1, sign=True), "than PPO, @@. In this world",
           paper_diff("ppo_masks_off", "ppo")),
    Figure("paper: PPO advantage mask off - PPO", P, "paired bootstrap", ci(1),
           "mask alone is not separated (@@: one seed", paper_diff("ppo_adv_mask_off", "ppo")),
    Figure("paper: the collapsed seed, advantage mask off", P, "min per_seed.*.methods.ppo_adv_mask_off EM",
           num(0), "one seed of three collapsed to @@)",
           lambda doc: min(paper_seeds("methods", "ppo_adv_mask_off")(doc))),
    Figure("paper: GRPO loss mask off - GRPO", P, "paired bootstrap", ci(1), "nor is GRPO's loss mask (@@)",
           paper_diff("grpo_loss_mask_off", "grpo")),
    Figure("paper: naive RAG supporting-fact recall", P, "per_seed.*.baselines.rag.metrics...support_recall",
           span(0), "hold the supporting facts for @@% of the questions",
           paper_seeds("baselines", "rag", "support_recall")),
    Figure("paper: wall time of the paper's rows, minutes", P, "wall_seconds_per_call.0 (the call that ran them)",
           num(0, scale=1 / 60), "same questions). @@ min on 2 idle cores",
           lambda doc: doc.get("wall_seconds_per_call", [doc["wall_seconds"]])[0]),
    Figure("results: model parameters", P, "model_params", num(2, scale=1e-6), "the @@M-parameter model scores 0"),
]) + [
    # README's "Two commands" summary of the paper table
    Figure("two commands: GRPO, RLOO, REINFORCE++-baseline", P, "their EM means, rounded", span(0),
           "REINFORCE++-baseline at @@ after 40 iterations",
           lambda doc: [round(paper_cell("methods", m)(doc)["mean"])
                        for m in ("grpo", "rloo", "reinforce_pp_baseline")]),
    Figure("two commands: paper PPO", P, "PPO EM mean", num(0), "after 40 iterations, PPO at @@ and",
           lambda doc: paper_cell("methods", "ppo")(doc)["mean"]),
    Figure("two commands: paper REINFORCE++", P, "REINFORCE++ EM mean", num(0), "and REINFORCE++ at @@.",
           lambda doc: paper_cell("methods", "reinforce_pp")(doc)["mean"]),
]

M = "memory.json"
GPU_ROWS = (("Qwen2.5-1.5B", "GRPO / RLOO / REINFORCE++(-baseline)", "grpo"),
            ("Qwen2.5-1.5B", "PPO (critic) and its ablations", "ppo"),
            ("Qwen2.5-3B", "GRPO / RLOO / REINFORCE++(-baseline)", "grpo"),
            ("Qwen2.5-3B", "PPO (critic) and its ablations", "ppo"))
MEMORY: list[Figure] = at(REAL_MODELS_MD, [
    Figure("memory: update peak, 64 rows, micro-batch 4", M, "results.update/rows64_micro4_fp32.peak_rss_mib",
           num(2, scale=1 / 1024), "2 layers) peaks at @@ GiB at `train.micro_batch_size: 4`"),
    Figure("memory: spread over 8-64 rows", M, "derived.rows_spread_mib", num(0), "to 64 rows (within @@ MiB)"),
    Figure("memory: agent-r1 train peak, 32 trajectories", M, "results.train/e2e.peak_rss_mib",
           num(2, scale=1 / 1024), "32 trajectories per iteration peaks at @@ GiB"),
    Figure("memory: output-head chunk", M, "derived.head_bytes_per_chunk_position_fp32 x 1,024",
           num(0, scale=1024 / 2**30), "(about @@ GiB per 1,024 positions",
           lambda d: d["derived"]["head_bytes_per_chunk_position_fp32"]),
] + [
    Figure(f"memory: GPU learner, {model} {preset}", M, f"memory_table.learner_gib over derived, {preset}.yaml",
           seq(0, " GiB | "), f"| {model}, {label} | @@ GiB |", gpu_learner_gib(model, preset))
    for model, label, preset in GPU_ROWS
])

RT, RS, RL = "retrieval.json", "retrieval_scale.json", "retriever_load.json"
RETRIEVAL_ROWS = (("BM25 (tantivy)", "tantivy"), ("dense, MiniLM-L6, faiss flat", "dense"),
                  ("dense, MiniLM-L6, faiss HNSW", "dense_hnsw"),
                  ("hybrid (BM25 + dense, reciprocal rank fusion k=60)", "hybrid"))
RETRIEVAL: list[Figure] = at(PERFORMANCE_MD, [
    Figure("retrieval: tantivy, all 400 queries, seconds", RT, "tantivy.search_all_s_median", num(2),
           "tantivy answers all 400 queries in @@ s"),
    Figure("retrieval: tantivy queries/s", RT, "tantivy.queries_per_s", num(0, comma=True), "(about @@ queries/s, 2"),
    Figure("retrieval: tantivy recall@5", RT, "tantivy.recall@5_{any,all}", seq(3, " / all "),
           "recall@5 any @@; the", lambda d: [d["tantivy"]["recall@5_any"], d["tantivy"]["recall@5_all"]]),
    Figure("retrieval: Elasticsearch recall@5", RT, "elasticsearch.recall@5_{any,all}", seq(2, " / "),
           "stand-in) reaches recall@5 @@ and agrees",
           lambda d: [d["elasticsearch"]["recall@5_any"], d["elasticsearch"]["recall@5_all"]]),
    Figure("retrieval: top-1 agreement", RT, "top1_agreement.top1", num(1, scale=100),
           "top-1 paragraph for @@% of the questions"),
    Figure("retrieval: hybrid - BM25, recall all", RT, "hybrid_minus_bm25_recall_all", num(3),
           "on \"all\" recall by @@;"),
] + [
    Figure(f"retrieval table: {key}", RT, f"{key}.{{recall@5_any,recall@5_all,queries_per_s}}",
           lambda v: f"{num(3)(v[0])} | {num(3)(v[1])} | {num(0, comma=True)(v[2])}", f"| {label} | @@ |",
           lambda d, k=key: [d[k]["recall@5_any"], d[k]["recall@5_all"], d[k]["queries_per_s"]])
    for label, key in RETRIEVAL_ROWS
] + [
    Figure("retrieval scale: 1M index MiB", RS, "builds.2.index_mib", num(0), "1M passages into a @@ MiB index"),
    Figure("retrieval scale: 1M build seconds", RS, "builds.2.build_s", num(0), "MiB index in @@ s ("),
    Figure("retrieval scale: 1M generation seconds", RS, "builds.2.generation_s", num(0), "(@@ s of it generating"),
    Figure("retrieval scale: recall@5 at every size", RS, "min quality.*.recall@5", num(1),
           "queried title is @@ at every size", lambda d: min(q["recall@5"] for q in d["quality"])),
    Figure("retrieval scale: entity queries/s", RS, "search_entity_queries[processes=1].qps",
           seq(0, " / ", comma=True), "one process: @@ queries/s",
           lambda d: [q["qps"] for q in d["search_entity_queries"] if q["processes"] == 1]),
    Figure("retrieval scale: 1M entity latency", RS, "quality[1M, entity].latency_ms.{p50,p99}",
           seq((2, 1), " ms, p99 "), "queries/s (p50 @@ ms per one-query call at 1M",
           lambda d: [next(q for q in d["quality"] if q["passages"] == 1_000_000 and q["form"] == "entity")
                      ["latency_ms"][k] for k in ("p50", "p99")]),
    Figure("retrieval scale: target", RS, "target_qps_1_process_1M", num(0, comma=True), "the @@ queries/s target"),
    Figure("retrieval scale: question queries/s", RS, "search_question_queries[processes=1].qps",
           seq(0, " / ", comma=True), "born?\") do @@ queries/s",
           lambda d: [q["qps"] for q in d["search_question_queries"] if q["processes"] == 1]),
    Figure("retrieval scale: passages with \"was\"", RS, "profile_at_largest...was.doc_freq_text / passages",
           num(0, scale=100), "\"was\" (in @@% of passages)",
           lambda d: d["profile_at_largest"]["question_words_alone"]["was"]["doc_freq_text"] / 1_000_000),
    Figure("retrieval scale: passages with \"born\"", RS, "profile_at_largest...born.doc_freq_text / passages",
           num(0, scale=100), "\"born\" (@@%)",
           lambda d: d["profile_at_largest"]["question_words_alone"]["born"]["doc_freq_text"] / 1_000_000),
    Figure("retrieval scale: Elasticsearch bulk docs/s", RS, "elasticsearch_bulk.docs_per_s", num(0, comma=True),
           "10k passages at @@ docs/s"),
    Figure("retriever load: queries/s", RL, "qps", num(0, comma=True), "paragraphs: @@ queries/s"),
    Figure("retriever load: batch latency p50 / p99", RL, "batch_latency_ms.{p50,p99}", seq(0, " ms / p99 "),
           "batch latency p50 @@ ms,", lambda d: [d["batch_latency_ms"]["p50"], d["batch_latency_ms"]["p99"]]),
    Figure("retriever load: errors, lost, differing", RL, "errors, lost_results, results_differing_from_single_process",
           lambda v: "{} errors, {} lost results, {} results differing".format(*v), "ms, @@ from a single process",
           lambda d: [d["errors"], d["lost_results"], d["results_differing_from_single_process"]]),
    Figure("ES workers: server connections", RL, "elasticsearch_workers.runs.*.server_connections_peak",
           seq(0, " / "), "the server held at most @@ connections",
           lambda d: [r["server_connections_peak"] for r in d["elasticsearch_workers"]["runs"]]),
    Figure("ES workers: queries/s", RL, "elasticsearch_workers.runs.*.qps", seq(1, " / "),
           "(workers x pool). @@ queries/s",
           lambda d: [r["qps"] for r in d["elasticsearch_workers"]["runs"]]),
    Figure("ES workers: batch p50 seconds", RL, "elasticsearch_workers.runs.*.batch_latency_ms.p50 / 1000",
           seq(1, " / ", scale=1e-3), "batch-of-8 p50 @@ s,",
           lambda d: [r["batch_latency_ms"]["p50"] for r in d["elasticsearch_workers"]["runs"]]),
])

S = "scale.json"
A = "async_speed"
SCALE: list[Figure] = at(SCALING_MD, [
    Figure("async: one worker speed-up", S, f"{A}.speedup_paired_median.async_1_one_worker", num(2),
           "one process per core, run @@x faster"),
    Figure("async: one worker s per iteration", S, f"{A}.iteration_s_median.{{async_1_one_worker,sync_one_worker}}",
           seq(2, " s against "), "asynchronously (@@ s per iteration",
           lambda d: [d[A]["iteration_s_median"][k] for k in ("async_1_one_worker", "sync_one_worker")]),
    Figure("async: earlier 3-repeat run, one worker", S, f"{A}.earlier_runs.3.speedup_sync_over_async_one_worker",
           num(2), "iteration; @@x by medians in a 3-repeat run"),
    Figure("async: target", S, f"{A}.target_speedup", num(1), "which meets the @@x target"),
    Figure("async: two workers speed-up", S, f"{A}.speedup_paired_median.async_1", num(2), "two cores, only @@x ("),
    Figure("async: earlier 3-repeat run, two workers", S, f"{A}.earlier_runs.3.speedup_sync_over_async", num(2),
           "only ~ (@@x by medians in the 3-repeat run)"),
    Figure("async: learner wait, asynchronous", S, f"median of {A}.runs.async_*.rollout_wait_s", num(2),
           "(the learner waits @@ s instead",
           lambda d: median(async_waits(d, ("async_1", "async_1_one_worker")))),
    Figure("async: learner wait, synchronous", S, f"min-max of {A}.runs.sync*.rollout_wait_s", span(1),
           "s instead of @@ s for its batch", lambda d: async_waits(d, ("sync", "sync_one_worker"))),
    Figure("async: earlier session on a shared machine", S, f"{A}.earlier_runs.0-2.speedup_sync_over_async",
           span(2, sep="x-"), "the same script gave @@x in an earlier session",
           lambda d: [r["speedup_sync_over_async"] for r in d[A]["earlier_runs"][:3]]),
    Figure("scale grid: medians", S, "scale_grid.iteration_s_median.*", span(2), "medians @@ s per iteration, 1x1",
           lambda d: list(d["scale_grid"]["iteration_s_median"].values())),
    Figure("scale grid: 1x1", S, "scale_grid.iteration_s_median.1w_1l", num(2), "iteration, 1x1 @@ s)"),
])

REL, DG, DW = "reliability.json", "diagnosis_copying_grpo60.json", "diagnosis_grpo100.json"
RELIABILITY: list[Figure] = at(RESULTS_MD, [
    Figure("reliability: hostile inputs", REL, "inputs_tried", num(0, comma=True), "reliability.json`): @@ hostile"),
    Figure("reliability: fuzzed model outputs", REL, "model_outputs_tried", num(0, comma=True),
           "none raised. @@ fuzzed"),
    Figure("reliability: parser inputs", REL, "parse_inputs_tried", num(0, comma=True),
           "`max_calls_per_turn` tools. @@ tool calls built"),
    Figure("reliability: faults handled", REL, "faults_handled", num(0), "brackets) each ~. @@ injected faults"),
    Figure("reliability: fault tests and cases", REL, "fault_tests.handled, fault_test_cases",
           seq(0, " fault tests with "),
           "all handled (@@ cases, plus", lambda d: [d["fault_tests"]["handled"], d["fault_test_cases"]]),
    Figure("reliability: SIGKILLs", REL, "sigkill_trials", num(0), "cases, plus @@ SIGKILLs"),
    Figure("reliability: killed and resumed", REL, "killed_and_resumed_cleanly", num(0),
           "its first log line): @@ of 10 resumed cleanly"),
    Figure("diagnosis: EM of the 60-iteration run", DG, "em", num(0), "constant-rate run, EM @@ there"),
    Figure("diagnosis: misspelled-search failures", DG, "share_of_failures.misspelled_query", num(0),
           "there): @@% of its failures"),
    Figure("diagnosis: searches that misspell", DG, "searched_episodes_misspelled / searched_episodes",
           num(0, scale=100),
           "(@@% of its searches misspell", lambda d: d["searched_episodes_misspelled"] / d["searched_episodes"]),
    Figure("diagnosis: 450-person world, searches that misspell", DW,
           "searched_episodes_misspelled / searched_episodes", num(0, scale=100), "against @@% for GRPO",
           lambda d: d["searched_episodes_misspelled"] / d["searched_episodes"]),
    Figure("diagnosis: 450-person world, failure split", DW,
           "share_of_failures.{misspelled_query,never_answered,no_search}",
           lambda v: "{}% misspelled search, {}% never answered, {}% no search".format(*map(num(0), v)),
           "the failures split @@)", lambda d: [d["share_of_failures"][k]
                                                for k in ("misspelled_query", "never_answered", "no_search")]),
])

PF = "profile.json"
PROFILE: list[Figure] = at(PERFORMANCE_MD, [
    Figure("profile: seconds per iteration", PF, "totals.iteration.seconds.median", num(1),
           "): @@ s per iteration. Only"),
    Figure("profile: retrieval seconds", PF, "sections[retrieval].seconds.median", num(3), "retrieval @@ s of it",
           lambda d: profile_row(d, "retrieval")[0]),
] + [
    Figure(f"profile row: {label}", PF, f"sections[{', '.join(keys)}]: seconds median, share",
           lambda v: f"{num(2)(v[0])} | {num(1)(v[1])}%", f"| {phase} | {label} | @@ |",
           lambda d, ks=keys: profile_row(d, *ks))
    for phase, label, keys in (
        ("rollout", "generate", ("generate",)),
        ("rollout", "env step (tool calls; retrieval 0.003 s of it)", ("env_step",)),
        ("rollout", "prompts, observation tokens, rewards / masks (collate)", ("rest:rollout", "collate")),
        ("update", "log-prob pass (old/ref)", ("logprob_pass",)),
        ("update", "forward", ("forward",)), ("update", "backward", ("backward",)),
        ("update", "grad clip, optimizer step, advantages, other",
         ("grad_clip", "optimizer_step", "rest:prepare", "rest:learn")))
])

VC = "vllm_cpu.json"
VLLM_CPU: list[Figure] = at(SCALING_MD, [
    Figure("vllm cpu: vLLM tokens/s", VC, "vllm_tokens_per_s", num(1), "batch: vLLM sampled @@ tokens/s"),
    Figure("vllm cpu: transformers tokens/s", VC, "transformers_tokens_per_s", num(1),
           "against the transformers engine's @@; a weight"),
    Figure("vllm cpu: weight sync seconds", VC, "weight_sync_s_median", num(3), "a weight sync took @@ s (median"),
    Figure("vllm cpu: engine start seconds", VC, "vllm_start_s", num(1), "the engine started in @@ s"),
    Figure("vllm cpu: parameters", VC, "model.parameters", num(1, scale=1e-6), "folder of @@M parameters"),
    Figure("vllm cpu: log-prob gap at T 0.7", VC, "logprob_gap_max_t07", lambda v: f"{v:.1e}",
           "log-prob of a sampled token was @@."),
    Figure("vllm cpu, core as processes: start", "vllm_cpu_process.json", "vllm_start_s", num(1),
           "start took @@ s and it sampled"),
    Figure("vllm cpu, core as processes: tokens/s", "vllm_cpu_process.json", "vllm_tokens_per_s", num(1),
           "s and it sampled @@ tokens/s against"),
    Figure("vllm cpu, core as processes: transformers tokens/s", "vllm_cpu_process.json",
           "transformers_tokens_per_s", num(1), "engine's @@ in that run."),
])

VR = "vllm_rollout.json"
VLLM_ROLLOUT: list[Figure] = at(SCALING_MD, [
    Figure("vllm rollout: vLLM tokens/s", VR, "engines.vllm.tokens_per_s_median", num(1),
           "and vLLM sampled @@ tokens/s against"),
    Figure("vllm rollout: transformers tokens/s", VR, "engines.transformers.tokens_per_s_median", num(1),
           "engine's @@ (median of 3; ratio"),
    Figure("vllm rollout: ratio", VR, "vllm_over_transformers", num(2), "(median of 3; ratio @@)"),
    Figure("vllm rollout: equal work", VR, "equal_work", lambda v: "The work was equal" if v else "NOT EQUAL",
           "@@ (a random policy filled every turn"),
    Figure("vllm rollout: sampled tokens", VR, "engines.vllm.runs", lambda v: str(v[0]["sampled_tokens"]),
           "filled every turn: @@ sampled tokens"),
    Figure("vllm rollout: engine start", VR, "engines.vllm.start_s", num(1), "The engine started in @@ s here."),
])

REGISTRY: list[Figure] = (LEARNING + PAPER + at(PERFORMANCE_MD, PERF) + MEMORY + RETRIEVAL + SCALE + RELIABILITY + PROFILE + MAKE_RUN
                          + VLLM_CPU + VLLM_ROLLOUT + OBJECTIVES + VLLM_PERF + ENDPOINT)
