"""KV-cache reuse across turns changes nothing but speed: the same tokens, the same log-probs.

Compared on a real (tiny, random) transformers model, with and without reuse: engine calls whose
rows finish at different steps (dropped mid-batch), rows with and without a cached prefix in one
batch, a prefix that no longer matches, and whole multi-turn rollouts (greedy and seeded sampling).
"""

from __future__ import annotations

import pytest
import torch

from agent_r1.rewards.scoring import RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import SamplingParams, TransformersEngine
from agent_r1.rollout.loop import run_rollout
from agent_r1.sampling import RolloutConfig
from tests.rollout_helpers import EchoSearch, make_env_factory

SAMPLES = [
    {"id": "q1", "question": "Where was Karivo born?", "answers": ["Telumas"]},
    {"id": "q2", "question": "In which country was Bamena born?", "answers": ["Orvania"]},
    # a much longer prompt: the total-token budget cuts its first action short (see _rollouts)
    {"id": "q3", "question": "Who founded the city of Telumas? " * 6, "answers": ["Karivo"]},
]
ATOL = 1e-4


def _prompts(tok, n=5):
    texts = ["Where was Karivo born?", "In which country", "Doc 1 (Title): No results.",
             "Answer the question. To search, write", "Bamena"]
    return [tok.encode(texts[i % len(texts)] * (1 + i % 3), add_special_tokens=False) for i in range(n)]


def _assert_same(outs_a, outs_b):
    for a, b in zip(outs_a, outs_b, strict=True):
        assert a.token_ids == b.token_ids
        assert a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=ATOL)


def test_engine_second_call_identical_with_cached_prefixes(tiny_model):
    model, tok = tiny_model
    prompts = _prompts(tok)
    # different budgets and a common stop id: rows finish at different steps and leave the batch
    stop = tok.encode("<", add_special_tokens=False)[:1]
    params = SamplingParams(max_new_tokens=[3, 9, 1, 6, 12], temperature=0.0, stop_token_ids=tuple(stop))
    reuse, plain = TransformersEngine(model, tok), TransformersEngine(model, tok)
    keys = [("r", i) for i in range(len(prompts))]
    first_r = reuse.generate(prompts, params, prefix_keys=keys)
    first_p = plain.generate(prompts, params)
    _assert_same(first_r, first_p)
    assert len({len(o.token_ids) for o in first_r}) > 1, "rows should finish at different steps"
    assert set(reuse._prefixes) == set(keys)
    for i, o in enumerate(first_r):  # the cache holds the prompt and every sampled id but the last
        assert reuse._prefixes[keys[i]].ids == prompts[i] + o.token_ids[:-1]

    obs = [tok.encode(" Doc 1 (Title): x" * (i + 1), add_special_tokens=False) for i in range(len(prompts))]
    second = [p + o.token_ids + ob for p, o, ob in zip(prompts, first_r, obs)]
    params2 = SamplingParams(max_new_tokens=[5, 2, 8, 8, 4], temperature=0.0, stop_token_ids=tuple(stop))
    before = dict(reuse.stats)
    _assert_same(reuse.generate(second, params2, prefix_keys=keys), plain.generate(second, params2))
    encoded = reuse.stats["encoded_prompt_tokens"] - before["encoded_prompt_tokens"]
    total = reuse.stats["prompt_tokens"] - before["prompt_tokens"]
    assert encoded < total, "the second call should encode only the new tokens (plus batch alignment)"


def test_engine_mixed_batch_new_rows_and_stale_prefixes(tiny_model):
    model, tok = tiny_model
    prompts = _prompts(tok, 4)
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    reuse, plain = TransformersEngine(model, tok), TransformersEngine(model, tok)
    first = reuse.generate(prompts[:3], params, prefix_keys=["a", "b", "c"])
    nxt = [p + o.token_ids + [5, 6, 7] for p, o in zip(prompts[:3], first)]
    nxt[1] = [9] + nxt[1][1:]  # no longer extends its cached prefix: encoded from scratch
    nxt.append(prompts[3])  # a row with no cached prefix at all
    keys = ["a", "b", "c", "d"]
    _assert_same(reuse.generate(nxt, params, prefix_keys=keys, keep_prefixes=False), plain.generate(nxt, params))
    assert reuse._prefixes == {}  # consumed, and nothing kept
    reuse.generate(prompts, params, prefix_keys=keys)
    reuse.drop_prefixes(["a"])
    assert set(reuse._prefixes) == {"b", "c", "d"}
    reuse.drop_prefixes()
    assert reuse._prefixes == {}


def test_engine_sampled_with_seed_identical(tiny_model):
    model, tok = tiny_model
    prompts = _prompts(tok)
    params = SamplingParams(max_new_tokens=[4, 7, 2, 7, 5], temperature=1.0, top_k=50, seed=11)
    reuse, plain = TransformersEngine(model, tok), TransformersEngine(model, tok)
    keys = list(range(len(prompts)))
    first = reuse.generate(prompts, params, prefix_keys=keys)
    _assert_same(first, plain.generate(prompts, params))
    second = [p + o.token_ids + [3, 4] for p, o in zip(prompts, first)]
    _assert_same(reuse.generate(second, params, prefix_keys=keys), plain.generate(second, params))


class UnevenCounter(TransformersEngine):
    """Counts generate calls whose rows finished at different steps (left the batch mid-call)."""

    uneven_calls = 0

    def generate(self, prompts, params, **kwargs):
        outs = super().generate(prompts, params, **kwargs)
        self.uneven_calls += len({len(o.token_ids) for o in outs}) > 1
        return outs


def _rollouts(tiny_model, fmt, greedy, seed=0):
    """Plain and reused rollouts. A random model seldom writes a stop, so rows leave the batch by
    budget: the total budget ends the longest prompt's first action early (8 tokens, not 12), while
    the shorter prompts go on for more turns (observations cut to 4 tokens)."""
    model, tok = tiny_model
    codec = ChatCodec(tok)
    env_factory = make_env_factory(fmt, EchoSearch("Doc 1 (Telumas): found."))
    envs = [env_factory(s) for s in SAMPLES]
    longest = max(len(codec.prompt_ids(e.reset(s), tools=None if e.fmt.inline_observations else e.tool_schemas))
                  for e, s in zip(envs, SAMPLES))
    out = {}
    for reuse in (False, True):
        engine = UnevenCounter(model, tok)
        cfg = RolloutConfig(max_turns=4, max_tokens_per_turn=12, max_observation_tokens=4,
                            max_total_tokens=longest + 8, n_samples=2, kv_reuse=reuse)
        trajs = run_rollout(engine, codec, env_factory, SAMPLES, cfg, RewardConfig(), seed=seed, greedy=greedy)
        out[reuse] = (engine, trajs)
    return out


@pytest.mark.parametrize("fmt", ["tag", "hermes"])
@pytest.mark.parametrize("greedy", [True, False])
def test_rollout_identical_with_and_without_reuse(tiny_model, fmt, greedy):
    out = _rollouts(tiny_model, fmt, greedy)
    (plain_engine, plain), (reuse_engine, reused) = out[False], out[True]
    assert any(len(t.turns) > 2 for t in plain), "expected multi-turn episodes"
    assert plain_engine.uneven_calls > 0 and reuse_engine.uneven_calls > 0, "rows should leave the batch mid-call"
    for a, b in zip(plain, reused, strict=True):
        assert a.token_ids == b.token_ids
        assert a.action_mask == b.action_mask
        assert a.stop_reason == b.stop_reason
        assert a.sampled_logprobs == pytest.approx(b.sampled_logprobs, abs=ATOL)
    assert reuse_engine.stats["encoded_prompt_tokens"] < plain_engine.stats["encoded_prompt_tokens"]
    assert plain_engine.stats["encoded_prompt_tokens"] == plain_engine.stats["prompt_tokens"]
    assert reuse_engine._prefixes == {}, "a rollout must free every cached prefix"


def test_rollout_logprobs_match_a_full_forward(tiny_model):
    # the reused-cache log-probs equal a fresh forward pass over the whole trajectory
    model, tok = tiny_model
    _, trajs = _rollouts(tiny_model, "tag", greedy=True)[True]
    for traj in trajs[:3]:
        ids = torch.tensor([traj.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        full = logp.gather(-1, ids[0, 1:, None]).squeeze(-1).tolist()
        mask = traj.action_mask
        got = [lp for lp, m in zip(traj.sampled_logprobs, mask) if m]
        want = [full[t - 1] for t, m in enumerate(mask) if m]
        assert got == pytest.approx(want, abs=ATOL)


def test_kv_reuse_is_a_config_key():
    from agent_r1.config import load_config, parse_overrides

    assert load_config().rollout.kv_reuse is True
    assert load_config(overrides=parse_overrides(["rollout.kv_reuse=false"])).rollout.kv_reuse is False


@pytest.fixture
def fresh_cache_keyword():
    from agent_r1.rollout import engine as engine_mod

    engine_mod.cache_keyword.cache_clear()
    yield engine_mod
    engine_mod.cache_keyword.cache_clear()  # the next test asks the real version again


@pytest.mark.parametrize("version, name", [("5.17.0", "past_key_values"), ("5.23.2", "past_key_values"),
                                           ("5.24.0", "cache"), ("5.24.0.dev0", "cache"), ("5.30.1", "cache")])
def test_cache_keyword_follows_the_installed_transformers(fresh_cache_keyword, monkeypatch, version, name):
    import transformers

    monkeypatch.setattr(transformers, "__version__", version)
    assert fresh_cache_keyword.cache_keyword() == name


class _PreRenameModel(torch.nn.Module):
    """The tiny model as transformers < 5.24 presents it: `past_key_values` in and out (over the
    installed version's own name). Like those releases, it would swallow an unknown `cache=`
    silently, so it refuses one here instead."""

    def __init__(self, inner, installed_kw):
        super().__init__()
        self.inner, self.installed_kw = inner, installed_kw
        self.config = inner.config

    def forward(self, past_key_values=None, **kwargs):
        assert "cache" not in kwargs, "transformers < 5.24 has no `cache` argument"
        out = self.inner(**{self.installed_kw: past_key_values}, **kwargs)
        return type("Out", (), {"logits": out.logits, "past_key_values": getattr(out, self.installed_kw)})()


def test_engine_uses_the_old_cache_names_before_5_24(tiny_model, fresh_cache_keyword, monkeypatch):
    import transformers

    model, tok = tiny_model
    old_model = _PreRenameModel(model, fresh_cache_keyword.cache_keyword())
    prompts = _prompts(tok, 3)
    params = SamplingParams(max_new_tokens=[4, 7, 2], temperature=0.0)
    reference = TransformersEngine(model, tok).generate(prompts, params)
    fresh_cache_keyword.cache_keyword.cache_clear()
    monkeypatch.setattr(transformers, "__version__", "5.17.0")
    old = TransformersEngine(old_model, tok)
    keys = ["a", "b", "c"]
    _assert_same(old.generate(prompts, params, prefix_keys=keys), reference)
    assert set(old._prefixes) == set(keys)  # the cache came back under the old name and was kept
