"""One registry style (agent_r1/registry.py) for estimators, losses, KL estimators, formats, LR
schedules, answer metrics and environments: registration by decorator with typed traits, lookups whose errors list
the known names and say how to add one, validation that asks the registry (never names estimators),
`env.kind` choosing a registered environment from the config, and installed packages adding entries
through entry points."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
from pathlib import Path

import pytest
import torch

from agent_r1.algos import ADV_ESTIMATORS, KL_PENALTIES, POLICY_LOSSES, AdvantageInputs, AdvantageOutputs
from agent_r1.algos.advantages import DYNAMIC_SAMPLING_METRICS as DYNAMIC_METRICS
from agent_r1.algos.advantages import EstimatorTraits
from agent_r1.algos.schedules import LR_SCHEDULES
from agent_r1.config import load_config
from agent_r1.data.loaders import LOADERS
from agent_r1.envs.base import StepOutput
from agent_r1.envs.factory import ENVS, make_env_factory
from agent_r1.envs.formats import FORMATS, get_format
from agent_r1.models.build import ARCHS
from agent_r1.models.chat_template import CHAT_TEMPLATES
from agent_r1.models.qwen_like import FAMILIES
from agent_r1.models.tokenizer import PRE_TOKENIZERS
from agent_r1.registry import Registry, UnknownName
from agent_r1.retrieval.base import RETRIEVERS
from agent_r1.retrieval.encoders import ENCODERS
from agent_r1.rewards.scoring import ANSWER_METRICS
from agent_r1.sampling import ENGINES

REPO = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Colour:
    warm: bool = False


@pytest.fixture
def colours() -> Registry:
    return Registry("colour", key="paint.colour", where="my_pkg.paints.COLOURS", traits=Colour)


@pytest.fixture
def scratch():
    """Whatever a test registers in the project's registries is gone afterwards."""
    with contextlib.ExitStack() as stack:
        for registry in (ADV_ESTIMATORS, POLICY_LOSSES, KL_PENALTIES, ENVS, FORMATS, LR_SCHEDULES, ANSWER_METRICS):
            stack.enter_context(registry.scratch())
        yield


# ------------------------------------------------------------------ the Registry class

def test_register_by_decorator_with_typed_traits(colours):
    @colours.register("red", warm=True)
    def red() -> str:
        return "#f00"

    colours.register("blue", lambda: "#00f")
    assert colours["red"] is red and colours["red"]() == "#f00"  # the decorator returns the thing unchanged
    assert colours.traits("red") == Colour(warm=True) and colours.traits("blue") == Colour(warm=False)
    assert colours.names() == ["blue", "red"] and sorted(colours) == ["blue", "red"] and len(colours) == 2
    assert "red" in colours and "green" not in colours and ["unhashable"] not in colours


def test_unknown_name_lists_the_known_ones_and_says_how_to_add_one(colours):
    colours.register("red", "#f00")
    with pytest.raises(ValueError) as err:
        colours["green"]
    message = str(err.value)
    assert message.startswith("unknown colour 'green'; known: ['red']")
    assert 'from my_pkg.paints import COLOURS' in message and '@COLOURS.register("name")' in message
    assert isinstance(err.value, KeyError)  # Mapping code (`.get`, `in`) keeps working
    assert colours.get("green") is None
    with pytest.raises(UnknownName, match=r"^paint.colour='green'; choose one of \['red'\]"):
        colours.check("green")
    with pytest.raises(ValueError, match=r"^my.key='green'; choose one of"):
        colours.check("green", "my.key")
    with pytest.raises(ValueError, match="unknown colour"):
        colours.traits("green")


def test_registration_errors_are_caught_when_registering(colours):
    colours.register("red", "#f00")
    colours.register("red", "#f00")  # the same object again (a re-imported module): a no-op
    with pytest.raises(ValueError, match="colour 'red' is already registered"):
        colours.register("red", "#e00")
    colours.register("red", "#e00", replace=True)
    assert colours["red"] == "#e00"
    with pytest.raises(TypeError, match=r"colour 'pink'.*\['warm'\]"):  # a misspelt trait fails here, not later
        colours.register("pink", warmth=True)
    with pytest.raises(ValueError, match="non-empty string name"):
        colours.register("", "#000")
    assert colours.unregister("red") == "#e00" and "red" not in colours and colours.unregister("red") is None
    colours.register("red", "#f00", warm=True)
    with colours.scratch():
        colours.register("red", "#e00", replace=True)
        colours.register("blue", "#00f")
        colours.unregister("red")
    assert dict(colours) == {"red": "#f00"} and colours.traits("red").warm  # the block is undone


LAZY: Registry = Registry("lazy colour", builtins={"teal": "ar1_lazy_colours"})


def test_builtin_modules_are_imported_on_first_lookup(tmp_path, monkeypatch):
    """Heavy backends (retrievers) register when first asked for: using one never imports the others."""
    import sys

    module = "from tests.algos.test_registry import LAZY\nLAZY.register('teal', '#088')\n"
    (tmp_path / "ar1_lazy_colours.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert LAZY.names() == ["teal"] and "teal" not in LAZY and "ar1_lazy_colours" not in sys.modules
        LAZY.check("teal")  # a built-in name is valid config without importing its module
        assert "ar1_lazy_colours" not in sys.modules
        assert LAZY["teal"] == "#088" and "ar1_lazy_colours" in sys.modules
    finally:
        LAZY.unregister("teal")
        sys.modules.pop("ar1_lazy_colours", None)


def test_every_name_chosen_registry_is_one_registry_type():
    for registry, key in ((ADV_ESTIMATORS, "algo.adv_estimator"), (POLICY_LOSSES, "algo.policy_loss"),
                          (KL_PENALTIES, "algo.kl_kind"), (ENVS, "env.kind"), (FORMATS, "env.format"),
                          (LR_SCHEDULES, "train.lr_schedule"), (ANSWER_METRICS, "reward.metric"),
                          (RETRIEVERS, "search.backend"), (ENGINES, "rollout.engine"),
                          (DYNAMIC_METRICS, "algo.dynamic_sampling.metric"), (ARCHS, "model.arch"),
                          (CHAT_TEMPLATES, "model.chat_template"), (PRE_TOKENIZERS, "model.tokenizer")):
        assert isinstance(registry, Registry) and registry.key == key
        with pytest.raises(ValueError, match=rf"(^|: ){key}='nope'; choose one of .*\.register\(\"name\"\)"):
            load_config(overrides={key: "nope"})


def test_tables_chosen_outside_the_config_are_registries_too():
    # a dataset name (`agent-r1 prepare`), an encoder spec, a `build-model --like` family
    for registry, known in ((LOADERS, "hotpotqa"), (ENCODERS, "minilm"), (FAMILIES, "qwen2.5")):
        assert isinstance(registry, Registry) and known in registry
        with pytest.raises(ValueError, match=r"\.register\(\"name\"\)"):
            registry.check("nope")


# ------------------------------------------------------------------ estimators carry their traits

def test_builtin_estimators_declare_what_validation_used_to_hard_code():
    # the group-based set, which config.validate reads from these traits instead of naming it
    assert {n for n in ADV_ESTIMATORS if ADV_ESTIMATORS.traits(n).group} == {
        "grpo", "grpo_no_std", "dr_grpo", "rloo", "reinforce_pp_baseline", "gigpo"}
    assert {n for n in ADV_ESTIMATORS if ADV_ESTIMATORS.traits(n).critic} == {"gae"}
    assert set(KL_PENALTIES) == {"k1", "kl", "k2", "mse", "k3", "low_var_kl", "abs"}
    assert KL_PENALTIES["kl"] is KL_PENALTIES["k1"] and KL_PENALTIES["low_var_kl"] is KL_PENALTIES["k3"]
    assert set(POLICY_LOSSES) == {"ppo", "vanilla", "gspo", "cispo"} and set(FORMATS) == {"tag", "hermes"}
    assert set(ENVS) >= {"tool"} and load_config().env.kind == "tool"
    from agent_r1.evaluation.modes import EVAL_MODES

    from agent_r1.evaluation.modes import needs_retriever

    # rag searches itself; agent rolls out the env, which searches when env.tools has search (not MCP-only)
    assert {n for n in EVAL_MODES if EVAL_MODES.traits(n).needs_retriever} == {"rag"}
    assert {n for n in EVAL_MODES if needs_retriever(n, load_config())} == {"agent", "rag"}  # was NEEDS_RETRIEVER
    assert {n for n in EVAL_MODES if needs_retriever(n, load_config(overrides={"env.tools": ["calculator"]}))} == {"rag"}
    assert {n for n in EVAL_MODES if EVAL_MODES.traits(n).tools} == {"agent"}  # was harness.TOOL_MODES


def test_validation_asks_the_registry_for_group_estimators(scratch):
    @ADV_ESTIMATORS.register("_test_group_sign", group=True)
    def _sign(x: AdvantageInputs) -> AdvantageOutputs:
        return AdvantageOutputs(torch.sign(x.scores - x.scores.mean())[:, None] * x.action_mask)

    ADV_ESTIMATORS.register("_test_single", lambda x: AdvantageOutputs(x.token_rewards * x.action_mask))
    with pytest.raises(ValueError, match=r"algo.adv_estimator='_test_group_sign' compares samples of one prompt"):
        load_config(overrides={"algo.adv_estimator": "_test_group_sign", "rollout.n_samples": 1})
    assert load_config(overrides={"algo.adv_estimator": "_test_single", "rollout.n_samples": 1}).rollout.n_samples == 1
    assert ADV_ESTIMATORS.traits("_test_single") == EstimatorTraits()


def test_no_estimator_name_is_compared_outside_its_registration():
    """`x == "grpo"`, `x in {"grpo", ...}`: a property of an estimator is a trait, read from the registry."""
    names = set(ADV_ESTIMATORS) | set(POLICY_LOSSES)
    found = []
    for path in sorted((REPO / "agent_r1").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                hits = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and c.value in names}
                found += [f"{path.relative_to(REPO)}:{node.lineno} compares with {sorted(hits)}"] if hits else []
    assert not found, "\n".join(found)


# ------------------------------------------------------------------ env.kind

class EchoEnv:
    """A tiny env of its own kind: no tools; each action is echoed back until the model answers."""

    def __init__(self, fmt):
        self.fmt = fmt  # the run's format: the rollout stops generation on its tags

    def reset(self, sample: dict) -> list[dict]:
        return [{"role": "system", "content": "Repeat after me."}, {"role": "user", "content": sample["question"]}]

    def step(self, action_text: str) -> StepOutput:
        if "<answer>" in action_text:
            answer = action_text.split("<answer>", 1)[1].split("</answer>", 1)[0].strip()
            return StepOutput(observation=None, reward=0.0, done=True, answer=answer)
        return StepOutput(observation=f"echo: {action_text.strip()}", reward=0.25, done=False)

    def close(self) -> None:
        pass


def _register_echo():
    @ENVS.register("_test_echo")
    def echo_envs(cfg, retriever):
        fmt = get_format(cfg.env.format)
        return lambda sample: EchoEnv(fmt)


class ScriptedEngine:
    """Plays the same list of actions in every trajectory, one per turn."""

    def __init__(self, tokenizer, actions):
        from agent_r1.rollout.engine import GenerationOutput

        self.out, self.tokenizer, self.actions, self.turn = GenerationOutput, tokenizer, actions, 0

    def generate(self, prompts, params):
        ids = self.tokenizer.encode(self.actions[self.turn], add_special_tokens=False)
        self.turn += 1
        return [self.out(list(ids), [0.0] * len(ids), "stop") for _ in prompts]


def test_env_kind_from_the_config_runs_a_registered_env_in_a_rollout(scratch):
    from agent_r1.models.tokenizer import train_tokenizer
    from agent_r1.rollout.chat import ChatCodec
    from agent_r1.rollout.loop import run_rollout

    _register_echo()
    cfg = load_config(overrides={"env.kind": "_test_echo", "env.tools": [], "rollout.max_turns": 3})
    tok = train_tokenizer(["Repeat after me. hello <answer>hello</answer> echo"] * 20, vocab_size=300)
    sample = {"id": "e1", "question": "Say hello.", "answers": ["hello"]}
    engine = ScriptedEngine(tok, ["hello", "<answer>hello</answer>"])
    (traj,) = run_rollout(engine, ChatCodec(tok), make_env_factory(cfg, retriever=None), [sample],
                          dataclasses.replace(cfg.rollout, n_samples=1), cfg.reward)
    assert traj.turns[0].observation_text == "echo: hello" and traj.turns[0].process_reward == 0.25
    assert traj.answer == "hello" and traj.outcome_reward == 1.0 and traj.stop_reason == "answer"
    assert "Repeat after me." in tok.decode(traj.prompt_ids)


def test_unknown_env_kind_fails_at_config_load_naming_the_key_and_the_kinds(scratch):
    _register_echo()
    with pytest.raises(ValueError, match=r"^env.kind='echoo'; choose one of \['_test_echo', 'openai_agent', 'tool'\]") as err:
        load_config(overrides={"env.kind": "echoo"})
    assert "from agent_r1.envs.factory import ENVS" in str(err.value)


def test_a_registered_env_and_estimator_train_an_iteration(scratch, tiny_model, tmp_path):
    """A new env kind and a new estimator, chosen from config overrides: nothing else changes."""
    import copy

    from agent_r1.training.trainer import RLTrainer
    from tests.rollout_helpers import QA_SAMPLES, trainer_config

    _register_echo()

    @ADV_ESTIMATORS.register("_test_group_sign", group=True)
    def _sign(x: AdvantageInputs) -> AdvantageOutputs:
        return AdvantageOutputs(torch.sign(x.scores - x.scores.mean())[:, None] * x.action_mask)

    cfg = trainer_config(tmp_path, **{"env.kind": "_test_echo", "env.tools": [],
                                      "algo.adv_estimator": "_test_group_sign", "train.iterations": 1})
    model, tok = copy.deepcopy(tiny_model[0]), tiny_model[1]
    trainer = RLTrainer(cfg, model, tok, make_env_factory(cfg, retriever=None), QA_SAMPLES)
    metrics = trainer.train_step()
    assert trainer.critic is None and trainer.iteration == 1 and metrics["turns_per_trajectory"] >= 1


# ------------------------------------------------------------------ entry-point plugins

PLUGIN_CODE = '''
import torch

from agent_r1.algos import ADV_ESTIMATORS, AdvantageOutputs
from agent_r1.envs.factory import ENVS
from agent_r1.envs.formats import get_format


@ENVS.register("plug_echo")
def plug_echo(cfg, retriever):
    from tests.algos.test_registry import EchoEnv

    fmt = get_format(cfg.env.format)
    return lambda sample: EchoEnv(fmt)


@ADV_ESTIMATORS.register("plug_sign", group=True)
def plug_sign(x):
    return AdvantageOutputs(torch.sign(x.scores - x.scores.mean())[:, None] * x.action_mask)


def plug_kl(log_probs, ref_log_probs):  # not registered by its module: the entry point names it
    return (log_probs - ref_log_probs).abs()
'''


@pytest.fixture
def plugin_package(tmp_path, monkeypatch, scratch):
    """A package laid out as pip installs one: the module plus a *.dist-info declaring entry points."""
    import sys
    import textwrap

    site = tmp_path / "site"
    (site / "ar1_registry_plugin").mkdir(parents=True)
    (site / "ar1_registry_plugin" / "__init__.py").write_text(PLUGIN_CODE)
    info = site / "ar1_registry_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ar1-registry-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [agent_r1.envs]
        plug_echo = ar1_registry_plugin:plug_echo
        plug_broken = ar1_no_such_module:envs
        [agent_r1.adv_estimators]
        plug_sign = ar1_registry_plugin:plug_sign
        [agent_r1.kl_estimators]
        plug_kl = ar1_registry_plugin:plug_kl
        """))
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("ar1_registry_plugin", None)


def test_installed_plugins_are_chosen_from_the_config_and_imported_lazily(plugin_package):
    import sys

    assert "plug_echo" in ENVS.names() and "plug_echo" not in ENVS  # listed from metadata, not imported
    assert "ar1_registry_plugin" not in sys.modules
    cfg = load_config(overrides={"env.kind": "plug_echo", "env.tools": [], "algo.adv_estimator": "plug_sign",
                                 "algo.kl_kind": "plug_kl"})
    assert "ar1_registry_plugin" in sys.modules
    assert ADV_ESTIMATORS.traits("plug_sign").group  # registered by its module, with its traits
    assert KL_PENALTIES["plug_kl"](torch.zeros(1, 2), torch.ones(1, 2)).tolist() == [[1.0, 1.0]]
    env = make_env_factory(cfg, retriever=None)({"id": "p", "question": "q", "answers": ["a"]})
    assert env.step("hi").observation == "echo: hi"
    with pytest.raises(ImportError, match=r"environment plugin 'plug_broken' \(plug_broken = ar1_no_such_module:envs "
                                          r"in ar1-registry-plugin 0.1\) failed to load"):
        load_config(overrides={"env.kind": "plug_broken"})
    with pytest.raises(ValueError, match=r"an entry point in the 'agent_r1.envs' group"):
        load_config(overrides={"env.kind": "plug_nothing"})
