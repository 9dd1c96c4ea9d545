"""Numbers on the command line have the config's ceilings too: `build-model --hidden-size 1e12` would ask
for terabytes; `rollout --samples`, `prepare synthetic --seed` the same way.
Each is a usage error naming the range, before anything is built."""

from __future__ import annotations

import pytest

from agent_r1.cli import main as cli_main


@pytest.mark.parametrize("argv, said", [
    (["build-model", "--like", "qwen2.5", "--out", "{tmp}/m", "--hidden-size", str(10**12)], "[1, 65536]"),
    (["build-model", "--like", "qwen2.5", "--out", "{tmp}/m", "--num-kv-heads", "0"], "[1, 1024]"),
    (["rollout", "--samples", str(10**9)], "[1, 4096]"),
    (["prepare", "synthetic", "--out", "{tmp}/w", "--seed", str(10**30)], "[0, 4294967295]"),
])
def test_a_number_past_its_ceiling_is_a_usage_error(tmp_path, capsys, argv, said):
    with pytest.raises(SystemExit) as info:
        cli_main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert said in err, err
    assert not (tmp_path / "m").exists() and not (tmp_path / "w").exists()


@pytest.mark.parametrize("argv, said", [
    (["eval", "--model", "{tmp}/m", "--questions", "{tmp}/q.jsonl", "--batch-size", "0"], "--batch-size"),
    (["eval", "--model", "{tmp}/m", "--questions", "{tmp}/q.jsonl", "--batch-size", "-1"], "--batch-size"),
    (["eval", "--model", "{tmp}/m", "--questions", "{tmp}/q.jsonl", "-n", "-2"], "-n/--limit"),
    (["eval", "--model", "{tmp}/m", "--questions", "{tmp}/q.jsonl", "-n", "0"], "-n/--limit"),
])
def test_counts_below_one_are_a_usage_error(tmp_path, capsys, argv, said):
    """`eval --batch-size 0` would evaluate nothing and `-1`, `-n -2` would drop questions, all exiting 0:
    each is a usage error naming the option, before a model is loaded."""
    with pytest.raises(SystemExit) as info:
        cli_main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert said in err, err
