"""Reliability counts for README: inputs tried, faults injected, resumed cleanly, records lost.
Writes benchmarks/results/reliability.json.

- inputs tried: a fixed number of model-output fuzz cases (tests/reliability/test_fuzz_rollout.py's
  generator: random bytes decoded with errors="replace", 1 MB outputs, nested/unclosed tags, JSON of
  the wrong types, thousands of calls in one turn) stepped through the env for both formats, with
  the same invariants as the tests (never raises, <= max_calls_per_turn calls run, bounded
  observation, the observation says what was wrong);
- parse inputs tried (tests/reliability/test_fuzz_parse.py's own checks, run here on fixed inputs):
  every exception type the test injects where a parsed call is built, in both formats, 1-3 calls a
  turn (all 96 combinations), and `--parse-cases` hermes tool calls whose name and arguments are JSON
  of every type (huge and non-finite numbers, 3,000-deep brackets), as objects or strings;
- faults injected: the fault-injection tests of FAULT_TESTS (tool raising/hanging/huge, tantivy index
  missing or corrupt, Elasticsearch stopped mid-call and mid-training then resumed, NaN/inf updates,
  MLflow unreachable then back, crafted/truncated checkpoints, buffer faults, hung tools, index
  overwrite, hostile numbers, rows and config, folders not ours, leaked credentials, poison tracking
  records, lost replies, lone surrogates, loosening rows, huge numbers, escaping tool processes,
  symlinks, colliding indexes) run here under pytest, each a fault handled as specified when all its
  cases pass;
- resumed cleanly: SIGKILL trials from benchmarks/results/kill_resume.json (benchmarks/kill_resume.py);
  a trial killed before its first checkpoint is started over (`--resume` refuses it) and counted as
  restarted, never as resumed;
- records lost: 0 when the tracking tests of TRACKING_TESTS pass (MLflow unreachable then back,
  concurrent writer and flusher, flush killed midway, poison records, a lost reply: each asserts every
  buffered record was flushed and read back from the store, or set aside with its reason).

    python -m benchmarks.reliability --cases 20000 --parse-cases 10000
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmarks.common import ROOT, machine, result_path, shown, write_json

FAULT_TESTS = {  # pytest node id -> the fault it injects; an id without [...] stands for all its parameters
    "tests/envs/test_env.py::test_each_failure_kind_becomes_observation":
        "tool raises / hangs past timeout / bad call (9 kinds)",
    "tests/envs/test_env.py::test_tool_runner_clips_huge_results": "tool returns 100 kB",
    "tests/retrieval/test_tantivy.py::test_missing_and_corrupt_index": "tantivy index missing or corrupt",
    "tests/retrieval/test_elasticsearch.py::test_retries_then_clear_error_when_server_stops": "Elasticsearch stopped mid-call",
    "tests/reliability/test_retriever_faults.py::test_runner_lets_service_outage_through_but_not_tool_bugs":
        "search service down vs tool bug",
    "tests/reliability/test_retriever_faults.py::test_es_stopped_mid_training_fails_clearly_then_resumes":
        "Elasticsearch stopped mid-training, restarted, --resume",
    "tests/training/test_trainer.py::test_non_finite_updates_are_skipped_then_stop": "NaN/inf loss: skipped, then stop",
    "tests/tracking/test_tracking.py::test_unreachable_server_buffers_then_flushes": "MLflow unreachable, then back",
    # checkpoints and resume
    "tests/training/test_checkpoint_safety.py::test_crafted_state_is_refused_naming_the_file_and_never_runs":
        "crafted state.pt (pickle payload, torch.save and raw pickle) refused, payload never runs",
    "tests/training/test_resume.py::test_crafted_checkpoint_is_refused_on_resume":
        "crafted checkpoint on `train --resume`: refused naming the file, payload never runs",
    "tests/training/test_resume.py::test_truncated_newest_checkpoint_resumes_from_the_previous_one":
        "truncated newest state.pt: resume falls back to the previous checkpoint and says so",
    "tests/training/test_resume.py::test_resume_with_nothing_to_resume_names_the_folder":
        "--resume with nothing to resume (missing/empty folder, latest without state.pt): clear error",
    "tests/training/test_resume.py::test_fresh_start_moves_a_previous_run_aside":
        "fresh start over a previous run: its history moved aside, never deleted",
    # the MLflow offline buffer
    "tests/tracking/test_tracking_buffer.py::test_truncated_line_is_skipped_reported_and_set_aside":
        "truncated buffer line (kill mid-append): skipped, reported, set aside",
    "tests/tracking/test_tracking_buffer.py::test_concurrent_writer_and_flusher_lose_nothing":
        "writer and flusher in concurrent processes: nothing lost",
    "tests/tracking/test_tracking_buffer.py::test_flush_killed_midway_replays_without_duplicates":
        "flush killed midway (3 points): replay without duplicate runs",
    "tests/tracking/test_tracking_buffer.py::test_poison_records_are_set_aside_and_the_rest_flushed":
        "poison record MLflow rejects: set aside with the reason, the rest flushed",
    "tests/tracking/test_tracking_redact.py::test_password_never_printed_or_logged":
        "credentials in MLFLOW_TRACKING_URI: never printed or logged",
    # timeouts that stop work
    "tests/tools/test_tool_timeouts.py::test_hung_tool_times_out_and_later_calls_still_succeed":
        "6 hung tool calls: each killed on timeout, later calls still run",
    "tests/tools/test_tool_timeouts.py::test_timed_out_call_is_killed_so_its_side_effect_never_happens":
        "tool with a side effect times out: its process is killed, the side effect never happens",
    "tests/tools/test_tool_timeouts.py::test_hung_elasticsearch_node_fails_the_run_like_a_dead_one":
        "hung Elasticsearch node: the run stops after 3 timeouts in a row",
    "tests/retrieval/test_es_overwrite.py::test_index_not_made_by_agent_r1_is_refused_and_kept":
        "`agent-r1 index` over an Elasticsearch index it did not make: refused, index kept",
    # model output, data and config
    "tests/envs/test_parse_hardening.py::test_parse_exceptions_become_the_calls_error_observation":
        "tool calls with >4,300-digit numbers or 100,000-deep arguments: the call's error, no crash",
    "tests/envs/test_parse_hardening.py::test_non_finite_numbers_are_refused":
        "NaN / Infinity / 1e999 in tool-call arguments refused",
    "tests/envs/test_sample_env.py::test_bad_sample_env_fails_at_load_naming_file_line_and_key":
        "per-sample env of the wrong type or range (NaN, 1e308, unknown keys): refused at load",
    "tests/envs/test_sample_env.py::test_a_sample_may_tighten_never_loosen_the_runs_limits":
        "per-sample env loosening the run's limits (calls, process reward, tools) refused",
    "tests/data/test_loaders.py::test_question_length_is_capped_at_load": "1 MB question: refused at load, skippable",
    "tests/data/test_loaders.py::test_skip_bad_skips_rows_that_used_to_abort_the_load":
        "rows nested 100,000 deep / 5,000-digit numbers: --skip-bad skips them with their line",
    "tests/config/test_config_ranges.py::test_absurd_values_fail_at_load_naming_key_and_range":
        "absurd config values: refused at load naming key and range",
    "tests/config/test_config_ranges.py::test_yaml_alias_bomb_is_refused_at_load": "YAML alias bomb refused at load",
    "tests/envs/test_parse_hardening.py::test_control_tokens_in_a_question_stay_text":
        "chat control tokens inside a question stay text",
    "tests/envs/test_parse_hardening.py::test_control_tokens_in_tool_output_stay_text":
        "chat control tokens inside documents (tool output) stay text",
    # nothing deleted, nothing leaked, nothing stuck (a path without `::` stands for its whole file)
    "tests/runs/test_nothing_deleted.py":
        "folders agent-r1 did not make (data.dir, sft/train out_dir, home, /) refused, never replaced; "
        "keep_checkpoints after a fallback keeps the good checkpoint",
    "tests/tracking/test_buffer_blobs.py": "a buffered artifacts record naming a foreign folder: nothing uploaded or deleted",
    "tests/retrieval/test_es_credentials_scope.py::test_a_manifest_naming_another_host_gets_no_credentials":
        "retriever.json naming another Elasticsearch host: refused before any request, no credentials sent",
    "tests/retrieval/test_es_credentials_scope.py::test_the_search_command_sends_credentials_only_to_the_url_it_is_given":
        "`agent-r1 search` / `retrieval-eval` over a manifest naming another host: credentials only to --url",
    "tests/retrieval/test_es_credentials_scope.py::test_ensure_index_rebuilds_an_index_that_names_another_server":
        "a run's index folder naming another server: rebuilt at the run's own search.url",
    "tests/tracking/test_tracking_poison.py::test_refused_records_are_set_aside_and_never_block_the_buffer":
        "12 buffered records MLflow can never take (lone surrogates, wrong shapes): set aside, the rest flushed",
    "tests/tracking/test_tracking_poison.py::test_a_refused_record_sent_directly_does_not_take_mlflow_offline":
        "the same records sent at once: set aside, MLflow not taken for down, later records sent",
    "tests/tracking/test_tracking_poison.py::test_a_record_whose_reply_was_lost_is_replayed_once":
        "MLflow commits a run and a table, the reply is lost: one run per run key, no doubled rows",
    "tests/data/test_row_text.py::test_a_lone_surrogate_in_a_row_is_refused_naming_file_line_and_field":
        "a lone surrogate in a data row (question, answers, titles, env, id): refused at load, skippable",
    "tests/data/test_row_text.py::test_official_formats_and_the_corpus_refuse_it_too":
        "a lone surrogate in an official JSON array or a corpus document: refused at load",
    "tests/envs/test_sample_tighten.py::test_a_row_cannot_loosen_the_runs_settings":
        "a row turning process rewards on, raising rewards, softening the penalty, a laxer metric, "
        "a 20 MB system prompt: refused at load",
    "tests/envs/test_sample_tighten.py::test_every_other_field_of_a_row_has_a_type_and_a_ceiling":
        "a row's answers, titles, plan, meta or id of the wrong type or over its ceiling: refused at load",
    "tests/tracking/test_tracking_redact.py::test_passwords_sqlalchemy_accepts_are_hidden_whole":
        "tracking URI passwords holding / # ? or spaces: hidden whole",
    "tests/tracking/test_tracking_redact.py::test_credentials_in_the_query_string_are_hidden":
        "credentials in a URI's query string (?password=, token=, api_key=): hidden",
    "tests/config/test_config_ranges.py::test_numbers_past_what_one_machine_holds_are_refused_at_load":
        "search.k=1e12 and other numbers past one machine: refused at load naming the range",
    "tests/config/test_config_ranges.py::test_the_search_command_and_every_backend_refuse_a_huge_k":
        "`agent-r1 search -k 1e12`: a clear error, not a SIGABRT",
    "tests/tools/test_tool_containment.py::test_a_worker_dies_with_a_trainer_killed_during_a_hung_call":
        "trainer SIGKILLed during a hung tool call: its worker dies with it",
    "tests/tools/test_tool_containment.py::test_a_setsid_grandchild_dies_with_its_worker_on_timeout_and_on_close":
        "a tool's setsid child: killed with its worker on a timeout and on close()",
    "tests/tools/test_tool_containment.py::test_a_tools_metadata_is_clipped_like_its_text":
        "a tool returning 200,000 titles and 5 MB of metadata: clipped in the worker",
    "tests/tracking/test_upload_links.py::test_links_in_a_checkpoint_are_not_followed_when_sent_at_once":
        "symlinks (file and folder) in a checkpoint: not followed on upload",
    "tests/tracking/test_upload_links.py::test_links_in_a_checkpoint_are_not_copied_into_the_buffer_nor_uploaded_from_it":
        "symlinks in a checkpoint logged offline: not copied into the buffer, not uploaded from it",
    "tests/tracking/test_upload_links.py::test_a_resumed_run_uploads_only_the_checkpoint_it_resumes_from_and_later_ones":
        "a resume does not upload every earlier checkpoint again",
    "tests/tracking/test_upload_links.py::test_a_checkpoint_uploads_only_the_files_its_manifest_lists":
        "a file dropped into a checkpoint after it was written: not uploaded (only what its manifest lists)",
    "tests/tracking/test_tracking_poison.py::test_a_trace_of_a_call_with_a_lone_surrogate_is_still_sendable":
        "a model's \\udcff inside a hermes call reaches a trace: the trace is sent with U+FFFD",
    "tests/tracking/test_tracking_poison.py::test_a_run_map_of_the_wrong_shape_is_refused_naming_the_file":
        "the buffer's runs.json edited into a list or a string: refused naming the file",
    "tests/tracking/test_tracking_poison.py::test_a_record_that_is_no_mapping_is_set_aside_not_raised":
        "a tracking record that is a string, a list, a number or null: set aside, nothing raised",
    "tests/config/test_cli_ceilings.py::test_a_number_past_its_ceiling_is_a_usage_error":
        "`build-model --hidden-size 1e12`, `rollout --samples 1e9`, `prepare --seed 1e30`: usage errors",
    "tests/retrieval/test_es_projects.py::test_a_second_project_cannot_replace_the_first_ones_index":
        "a second project building the same Elasticsearch index name: refused; replaced anyway: the first told",
    "tests/data/test_prepare_out.py::test_a_users_own_files_are_never_written_over":
        "`prepare <dataset> --out` a folder of the user's own files: refused, nothing written",
    "tests/data/test_prepare_out.py::test_a_folder_another_command_made_is_refused":
        "`prepare <dataset> --out` a run folder, a generated world, another dataset's folder: refused",
    "tests/data/test_prepare_out.py::test_its_own_folder_is_prepared_again_without_stale_files":
        "`prepare` again into its own folder: no stale corpus.jsonl left",
}
TRACKING_TESTS = (  # each asserts every record reached the store (or was set aside with its reason)
    "tests/tracking/test_tracking.py::test_unreachable_server_buffers_then_flushes",
    "tests/tracking/test_tracking_buffer.py::test_concurrent_writer_and_flusher_lose_nothing",
    "tests/tracking/test_tracking_buffer.py::test_flush_killed_midway_replays_without_duplicates",
    "tests/tracking/test_tracking_buffer.py::test_poison_records_are_set_aside_and_the_rest_flushed",
    "tests/tracking/test_tracking_poison.py::test_refused_records_are_set_aside_and_never_block_the_buffer",
    "tests/tracking/test_tracking_poison.py::test_a_refused_record_sent_directly_does_not_take_mlflow_offline",
    "tests/tracking/test_tracking_poison.py::test_a_record_whose_reply_was_lost_is_replayed_once",
)


def run_fuzz(cases: int, seed: int) -> dict:
    from tests.support.fuzz import MAX_CALLS, build_world, check_step, fuzz_cases

    kinds: dict[str, int] = {}
    failures: list[str] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        world = build_world(Path(tmp))
        for kind, fmt, text in fuzz_cases(seed, cases):
            kinds[kind] = kinds.get(kind, 0) + 1
            try:
                check_step(world, fmt, text)
            except Exception as exc:  # AssertionError (a broken invariant) or anything the env raised
                failures.append(f"{kind}/{fmt}: {type(exc).__name__}: {str(exc)[:200]}")
    return {"inputs_tried": sum(kinds.values()), "by_kind": kinds, "failures": len(failures),
            "failure_samples": failures[:5], "max_calls_per_turn": MAX_CALLS,
            "calls_reaching_tools": world.executed(), "seconds": round(time.perf_counter() - start, 1)}


_ODD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "9" * 4400, "-" + "9" * 4400, "[" * 3000 + "]" * 3000]


def _json_text(rng: random.Random, depth: int = 0) -> str:
    """JSON-ish text of every type, as test_fuzz_parse's `_json_text` strategy draws it."""
    roll = rng.random()
    if depth >= 3 or roll < 0.5:
        if rng.random() < 0.3:
            return rng.choice(_ODD_NUMBERS)
        value = rng.choice([None, True, False, rng.randint(-10**30, 10**30), rng.uniform(-1e308, 1e308),
                            float("nan"), float("inf"), rng.randbytes(rng.randint(0, 12)).decode("utf-8", "replace")])
        return json.dumps(value)
    items = [_json_text(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.75:
        return "[" + ", ".join(items) + "]"
    keys = ["query", "name", "arguments", "k"]
    return "{" + ", ".join(f"{json.dumps(rng.choice(keys))}: {v}" for v in items) + "}"


def run_parse_fuzz(cases: int, seed: int) -> dict:
    """test_fuzz_parse's two properties on fixed inputs: every injected exception type (all
    combinations) and `cases` hermes calls of JSON of every type in every position."""
    from tests.support.fuzz import EXCEPTIONS, check_exception_becomes_error, check_hermes_json, parse_envs

    envs = parse_envs()
    kinds = {"parse_exception": 0, "parse_json": 0}
    failures: list[str] = []
    start = time.perf_counter()

    def attempt(kind: str, check, **kwargs) -> None:
        kinds[kind] += 1
        try:
            check(envs, **kwargs)
        except Exception as exc:  # AssertionError (a broken invariant) or anything the env raised
            failures.append(f"{kind}: {type(exc).__name__}: {str(exc)[:200]}")

    try:
        for exc_type in EXCEPTIONS:
            for fmt in ("tag", "hermes"):
                for n in (1, 2, 3):
                    attempt("parse_exception", check_exception_becomes_error, exc_type=exc_type, fmt=fmt, n=n)
        rng = random.Random(seed)
        for _ in range(cases):
            name = '"search"' if rng.random() < 0.2 else _json_text(rng)
            attempt("parse_json", check_hermes_json, name=name, args=_json_text(rng), as_string=rng.random() < 0.5,
                    pad=rng.choice(["", "\n", " \n\t"]))
    finally:
        for env in envs.values():  # the envs fork tool workers: stop them
            env.runner.close()
    return {"inputs_tried": sum(kinds.values()), "by_kind": kinds, "failures": len(failures),
            "failure_samples": failures[:5], "seconds": round(time.perf_counter() - start, 1)}


def _outcome(statuses: list[str]) -> str:
    """One fault's outcome over its cases (a parametrized test has several)."""
    if not statuses:
        return "not run"
    for worst in ("failed", "skipped"):
        if worst in statuses:
            return worst
    return "passed"


def _covers(test: str, node: str) -> bool:
    """Whether FAULT_TESTS' `test` stands for the pytest node `node`: itself, all the parametrized cases
    of an id without [...] ("test[a]", "test[b]", ...), every test of a file named without `::`."""
    if "::" not in test:
        return node.startswith(test + "::")
    return node == test or ("[" not in test and node.startswith(test + "["))


def run_fault_tests(tests: dict[str, str] = FAULT_TESTS) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                               *tests], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        outcome: dict[str, str] = {}
        if xml.exists():
            for case in ET.parse(xml).getroot().iter("testcase"):
                node = f"{case.get('file') or case.get('classname', '').replace('.', '/') + '.py'}::{case.get('name')}"
                status = "passed"
                for child in case:
                    if child.tag in ("failure", "error"):
                        status = "failed"
                    elif child.tag == "skipped":
                        status = "skipped"
                outcome[node] = status
    rows = []
    for test, fault in tests.items():
        cases = [st for node, st in outcome.items() if _covers(test, node)]
        rows.append({"test": test, "fault": fault, "cases": len(cases), "cases_passed": cases.count("passed"),
                     "outcome": _outcome(cases)})
    return {"faults": rows, "handled": sum(r["outcome"] == "passed" for r in rows), "injected": len(rows),
            "cases_run": sum(r["cases"] for r in rows), "cases_passed": sum(r["cases_passed"] for r in rows),
            "pytest_returncode": proc.returncode, "seconds": round(seconds, 1),
            "pytest_tail": proc.stdout[-1500:] if proc.returncode else ""}


def kill_counts(kill: dict) -> dict:
    """SIGKILL trials split by how they ended. A kill before the first checkpoint leaves nothing to
    resume: that trial is started over (`restarted`) and never counted as resumed."""
    details = kill.get("details", [])
    if any("restarted" not in t for t in details):
        raise SystemExit("benchmarks/results/kill_resume.json predates restart accounting (no `restarted` per "
                         "trial): rerun `python -m benchmarks.kill_resume --trials 10` first")
    killed = [t for t in details if t["killed"]]
    return {"sigkill_trials": len(details), "sigkill_killed": len(killed),
            "killed_and_resumed_cleanly": sum(t["resumed_ok"] and not t["restarted"] for t in killed),
            "killed_and_restarted_cleanly": sum(t["resumed_ok"] and t["restarted"] for t in killed),
            "killed_and_completed_cleanly": sum(bool(t["resumed_ok"]) for t in killed),
            "trials_completed_cleanly": sum(bool(t["resumed_ok"]) for t in details)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=20000, help="model outputs stepped through the env")
    ap.add_argument("--parse-cases", type=int, default=10000, help="hermes calls of JSON of every type")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fault-tests", default=None, help="comma list of FAULT_TESTS ids to run (default: all)")
    ap.add_argument("--out", default=str(result_path("reliability")))
    args = ap.parse_args(argv)
    tests = {t: FAULT_TESTS[t] for t in args.fault_tests.split(",")} if args.fault_tests else FAULT_TESTS

    fuzz = run_fuzz(args.cases, args.seed)
    print(f"fuzz: {fuzz['inputs_tried']} inputs, {fuzz['failures']} failures, {fuzz['seconds']} s", flush=True)
    parse = run_parse_fuzz(args.parse_cases, args.seed)
    print(f"parse fuzz: {parse['inputs_tried']} inputs, {parse['failures']} failures, {parse['seconds']} s", flush=True)
    faults = run_fault_tests(tests)
    print(f"faults: {faults['handled']}/{faults['injected']} handled ({faults['cases_passed']}/"
          f"{faults['cases_run']} cases), {faults['seconds']} s", flush=True)
    kill_path = result_path("kill_resume")
    kill = kill_counts(json.loads(kill_path.read_text())) if kill_path.exists() else {}
    passed = {r["test"] for r in faults.get("faults", []) if r["outcome"] == "passed"}
    tracking_ok = set(TRACKING_TESTS) <= passed
    report = {
        "machine": machine(),
        "inputs_tried": fuzz["inputs_tried"] + parse["inputs_tried"],
        "inputs_failed": fuzz["failures"] + parse["failures"],
        "model_outputs_tried": fuzz["inputs_tried"],
        "parse_inputs_tried": parse["inputs_tried"],
        # a kill is a fault handled when the run then ends cleanly, resumed or (before any checkpoint) restarted
        "faults_injected": faults.get("injected", 0) + kill.get("sigkill_killed", 0),
        "faults_handled": faults.get("handled", 0) + kill.get("killed_and_completed_cleanly", 0),
        "fault_test_cases": faults.get("cases_run"),
        **(kill or {"sigkill_trials": None}),
        "records_lost": 0 if tracking_ok else None,  # None: a tracking test did not pass (or did not run) here
        "fuzz": fuzz,
        "parse_fuzz": parse,
        "fault_tests": faults,
        "kill_resume_source": shown(kill_path) if kill else None,
    }
    write_json(Path(args.out), report)
    print(json.dumps({k: v for k, v in report.items() if k not in ("fuzz", "parse_fuzz", "fault_tests")}, indent=1))
    ok = report["inputs_failed"] == 0 and faults["handled"] == faults["injected"]
    return 0 if ok and (not kill or kill["trials_completed_cleanly"] == kill["sigkill_trials"]) else 1


if __name__ == "__main__":
    sys.exit(main())
