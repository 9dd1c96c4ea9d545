"""Extending: docs/extending.md runs as written; @tool schemas, plugins, tools per env, the arithmetic task."""

from __future__ import annotations

import contextlib
import re
import sys
import textwrap
from pathlib import Path

import pytest

from agent_r1.algos import ADV_ESTIMATORS, KL_PENALTIES, POLICY_LOSSES
from agent_r1.config import load_config
from agent_r1.envs.factory import ENVS, make_env_factory
from agent_r1.envs.formats import TagFormat, get_format
from agent_r1.envs.tool_env import EnvConfig, ToolEnv, sample_env_config
from agent_r1.rewards.scoring import ANSWER_METRICS, RewardConfig
from agent_r1.rollout.chat import ChatCodec
from agent_r1.rollout.engine import GenerationOutput
from agent_r1.rollout.loop import run_rollout
from agent_r1.runs.assembly import ensure_data
from agent_r1.runs.run import Run
from agent_r1.sampling import RolloutConfig
from agent_r1.tasks.registry import DATA_GENERATORS, get_data_generator
from agent_r1.tools.registry import TOOL_FACTORIES, available_tools, create_tool, load_builtin_tools
from agent_r1.tools.runner import ToolRunner, tool_metrics

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def registries():
    """Whatever a test registers (tools, metrics, data generators, envs, algorithms) is gone afterwards."""
    load_builtin_tools()
    get_data_generator("synthetic")
    with contextlib.ExitStack() as stack:
        for registry in (TOOL_FACTORIES, ANSWER_METRICS, DATA_GENERATORS, ENVS, ADV_ESTIMATORS, POLICY_LOSSES,
                         KL_PENALTIES):
            stack.enter_context(registry.scratch())
        yield


class ScriptedEngine:
    """Plays the same list of actions in every trajectory, one per turn (tokenised as given)."""

    def __init__(self, tokenizer, actions):
        self.tokenizer, self.actions, self.turn = tokenizer, actions, 0

    def generate(self, prompts, params):
        ids = self.tokenizer.encode(self.actions[self.turn], add_special_tokens=False)
        self.turn += 1
        return [GenerationOutput(list(ids), [0.0] * len(ids), "stop") for _ in prompts]


# ------------------------------------------------------------------ the document runs as written

def test_extending_md_examples_run(tmp_path, monkeypatch):
    text = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert len(blocks) >= 8, "docs/extending.md lost its examples"
    monkeypatch.chdir(tmp_path)  # section 7 writes data/distances here
    namespace: dict = {"__name__": "extending_md"}
    for i, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"docs/extending.md python block {i}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"docs/extending.md python block {i} failed: {exc!r}\n{block}") from exc


# ------------------------------------------------------------------ @tool

def test_tool_decorator_schema_from_hints_and_docstring():
    import enum
    from typing import Annotated, Optional

    from agent_r1.tools.function_tool import tool

    class Color(enum.Enum):
        RED = "red"
        BLUE = "blue"

    @tool(name="paint", register=False)
    def paint_things(items: list[str], color: Color = Color.RED, coats: Annotated[int, "how many coats"] = 1,
                     note: Optional[str] = None, sizes: dict[str, float] | None = None) -> dict:
        """Paint things.

        Second paragraph of the description.

        :param items: what to paint,
            one name each
        :param color: the colour
        """
        return {"painted": items, "color": color.value, "coats": coats}

    assert paint_things.name == "paint" and "paint" not in TOOL_FACTORIES
    assert paint_things.description == "Paint things. Second paragraph of the description."
    props = paint_things.parameters["properties"]
    assert props["items"] == {"type": "array", "items": {"type": "string"}, "description": "what to paint, one name each"}
    assert props["color"] == {"enum": ["red", "blue"], "description": "the colour", "default": "red"}
    assert props["coats"] == {"type": "integer", "description": "how many coats", "default": 1}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["sizes"]["anyOf"][0] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert paint_things.parameters["required"] == ["items"]
    out = paint_things.call({"items": ["door"], "coats": 2, "color": "blue"})
    assert out.success and out.text == '{"painted": ["door"], "color": "blue", "coats": 2}'
    assert paint_things(["x"])["painted"] == ["x"]  # still a plain function


def test_tool_decorator_errors_are_actionable():
    from agent_r1.tools.function_tool import tool

    with pytest.raises(TypeError, match="no type hint"):
        @tool(register=False)
        def untyped(x):
            """Doc."""

    with pytest.raises(ValueError, match="docstring"):
        @tool(register=False)
        def undocumented(x: int):
            pass

    with pytest.raises(TypeError, match=r"\*args"):
        @tool(register=False)
        def star(*xs: int):
            """Doc."""

    with pytest.raises(TypeError, match="no JSON schema"):
        @tool(register=False)
        def odd(x: complex):
            """Doc."""


def test_tool_registration_replaces_itself_but_not_others():
    from agent_r1.tools.function_tool import tool

    def define():
        @tool
        def shout(text: str) -> str:
            """Upper-case the text."""
            return text.upper()

        return shout

    define()
    again = define()  # a re-run cell / re-import replaces its own registration
    assert create_tool("shout") is again and create_tool("shout").call({"text": "hi"}).text == "HI"
    with pytest.raises(TypeError, match="takes no options"):
        create_tool("shout", loud=True)
    with pytest.raises(ValueError, match="already registered"):
        @tool(name="shout")
        def other(text: str) -> str:
            """Something else."""
    with pytest.raises(ValueError, match="already registered"):
        @tool(name="search")
        def my_search(query: str) -> str:
            """Not the built-in."""


def test_unknown_tool_lists_what_exists():
    with pytest.raises(ValueError, match=r"unknown tool 'nope'; registered tools: .*calculator.*search"):
        create_tool("nope")


# ------------------------------------------------------------------ entry-point plugins

PLUGIN_CODE = '''
from agent_r1.tools.base import ToolResult
from agent_r1.tools.function_tool import tool


@tool(register=False)
def reverse(text: str) -> str:
    """Reverse a piece of text."""
    return text[::-1]


class Greeter:
    name = "greet"
    description = "Greet someone by name."
    parameters = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}

    def __init__(self, greeting="Hello"):
        self.greeting = greeting

    def call(self, arguments):
        return ToolResult(f"{self.greeting}, {arguments['who']}!")
'''


@pytest.fixture
def plugin_package(tmp_path, monkeypatch):
    """A package installed the way pip lays one out: the module plus a *.dist-info with entry points."""
    site = tmp_path / "site"
    (site / "ar1_demo_plugin").mkdir(parents=True)
    (site / "ar1_demo_plugin" / "__init__.py").write_text(PLUGIN_CODE)
    info = site / "ar1_demo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ar1-demo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [agent_r1.tools]
        reverse = ar1_demo_plugin:reverse
        greet = ar1_demo_plugin:Greeter
        broken = ar1_no_such_module:thing
        search = ar1_demo_plugin:reverse
        """))
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("ar1_demo_plugin", None)


@pytest.mark.filterwarnings("ignore:tool plugin 'search'")
def test_entry_point_tools_are_discovered_lazily(plugin_package):
    from agent_r1.tools.plugins import discover_tool_plugins

    found = discover_tool_plugins()
    assert {"reverse", "greet", "broken"} <= set(found)
    assert "ar1_demo_plugin" not in sys.modules  # discovery reads metadata only
    assert {"reverse", "greet", "calculator", "search"} <= set(available_tools())
    assert create_tool("reverse").call({"text": "abc"}).text == "cba"
    assert create_tool("greet", greeting="Hi").call({"who": "Ada"}).text == "Hi, Ada!"
    with pytest.raises(ImportError, match=r"tool plugin 'broken' \(broken = ar1_no_such_module:thing in "
                                          r"ar1-demo-plugin 0.1\) failed to load"):
        create_tool("broken")
    from agent_r1.tools.plugins import register_tool_plugins
    from agent_r1.tools.search import SearchTool

    with pytest.warns(UserWarning, match=r"tool plugin 'search' from .* is ignored: the name is already registered"):
        register_tool_plugins(TOOL_FACTORIES)
    assert TOOL_FACTORIES["search"] is SearchTool  # a plugin cannot take a built-in's name


@pytest.mark.filterwarnings("ignore:tool plugin 'search'")
def test_entry_point_tool_called_through_the_env(plugin_package):
    cfg = load_config(overrides={"env.format": "hermes", "env.tools": ["calculator", "reverse"]})
    env = make_env_factory(cfg, retriever=None)({"id": "p", "question": "Reverse 'stressed'.", "answers": ["desserts"]})
    step = env.step('<tool_call>{"name": "reverse", "arguments": {"text": "stressed"}}</tool_call>')
    assert step.observation == "<tool_response>\ndesserts\n</tool_response>"
    assert step.info["tools"]["reverse"]["calls"] == 1 and step.info["valid_tool_calls"] == 1


@pytest.mark.filterwarnings("ignore:tool plugin 'search'")
def test_entry_point_tool_in_a_rollout_with_the_tiny_model(plugin_package, tiny_model):
    """The plugin is listed in the prompt by the chat template, called, and its output observed."""
    from agent_r1.rollout.engine import TransformersEngine

    model, tok = tiny_model
    cfg = load_config(overrides={"env.format": "hermes", "env.tools": ["reverse"]})
    make_env = make_env_factory(cfg, retriever=None)
    sample = {"id": "p1", "question": "Reverse the word stressed.", "answers": ["desserts"]}
    call = '<tool_call>{"name": "reverse", "arguments": {"text": "stressed"}}</tool_call>'
    engine = ScriptedEngine(tok, [call, "<answer>desserts</answer>"])
    rollout = RolloutConfig(max_turns=3, max_tokens_per_turn=40, max_observation_tokens=30, max_total_tokens=600)
    (traj,) = run_rollout(engine, ChatCodec(tok), make_env, [sample], rollout, cfg.reward)
    prompt = tok.decode(traj.prompt_ids)
    assert '"name": "reverse"' in prompt and "Reverse a piece of text." in prompt
    assert "desserts" in traj.turns[0].observation_text and traj.turns[0].valid_tool_calls == 1
    assert traj.answer == "desserts" and traj.outcome_reward == 1.0
    # the real (random) tiny model rolls out against the same plugin env without error
    trajs = run_rollout(TransformersEngine(model, tok), ChatCodec(tok), make_env, [sample],
                        RolloutConfig(max_turns=2, max_tokens_per_turn=16, max_observation_tokens=20,
                                      max_total_tokens=600, n_samples=2), cfg.reward, seed=0)
    assert len(trajs) == 2 and all(t.stop_reason for t in trajs)


# ------------------------------------------------------------------ several tools, formats, per-sample env

def test_tag_format_gives_each_single_string_tool_a_tag():
    from agent_r1.tools.calculator import CalculatorTool
    from tests.rollout_helpers import EchoSearch

    fmt = get_format("tag", [EchoSearch(), CalculatorTool()])
    assert fmt.stop_strings == ("</search>", "</calculator>", "</answer>")
    parsed = fmt.parse("<calculator>2+3</calculator> then <search>Karivo</search><calculator> </calculator>", 5)
    assert [(c.name, c.arguments, c.error) for c in parsed.calls] == [
        ("calculator", {"expression": "2+3"}, None), ("search", {"query": "Karivo"}, None),
        ("calculator", {}, "empty calculator expression")]
    assert "<calculator>expression</calculator>" in fmt.parse("hello", 4).error
    assert "<calculator>expression</calculator>" in fmt.instructions(["search", "calculator"])
    assert TagFormat().stop_strings == ("</search>", "</answer>")  # the default stays Search-R1


def test_tag_format_refuses_tools_it_cannot_write():
    from agent_r1.tools.function_tool import tool

    @tool(register=False)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    with pytest.raises(ValueError, match="(?i)use env.format=hermes"):
        get_format("tag", [add])
    assert get_format("hermes", [add]).stop_strings == ("</tool_call>", "</answer>")


def test_several_tools_several_calls_each_validated_and_counted():
    from agent_r1.tools.calculator import CalculatorTool
    from tests.rollout_helpers import EchoSearch

    runner = ToolRunner([EchoSearch("found"), CalculatorTool()])
    env = ToolEnv(runner, get_format("tag", list(runner.tools.values())), EnvConfig(max_calls_per_turn=3),
                  RewardConfig(valid_call_reward=0.1))
    env.reset({"id": "m", "question": "q", "answers": ["a"]})
    step = env.step("<search>x</search><calculator>6*7</calculator><calculator>1/0</calculator>"
                    "<calculator>1+1</calculator>")
    assert step.observation == ("<information>found</information><information>42</information>"
                                "<information>Error: division by zero</information>"
                                "<information>Error: 1 extra call(s) ignored</information>")
    assert step.info["tools"]["calculator"]["calls"] == 2 and step.info["tools"]["calculator"]["failures"] == 1
    assert step.reward == pytest.approx(0.2)
    assert runner.stats["calculator"]["calls"] == 2 and runner.stats["calculator"]["max_seconds"] >= 0
    metrics = tool_metrics([step.info, step.info])
    assert metrics["tools/calculator/calls"] == 4 and metrics["tools/calculator/failure_rate"] == 0.5
    assert metrics["tools/search/latency_ms"] >= 0


def test_sample_env_config_is_applied_and_checked():
    env, reward = EnvConfig(tools=["search", "calculator"]), RewardConfig()
    row = {"id": "r", "env": {"tools": ["calculator"], "max_calls_per_turn": 1, "reward": {"metric": "numeric"}}}
    e, r = sample_env_config(row, env, reward)
    assert e.tools == ["calculator"] and e.max_calls_per_turn == 1 and r.metric == "numeric"
    assert env.tools == ["search", "calculator"] and reward.metric == "em"  # the run's configs are untouched
    assert sample_env_config({"id": "r"}, env, reward) == (env, reward)
    for bad, message in [({"format": "hermes"}, "fixed per run|set per run"), ({"tools": ["weather"]}, "does not provide"),
                         ({"reward": {"metric": "bogus"}}, "reward.metric='bogus'"), ({"budget": 3}, "unknown key"),
                         ({"tools": "calculator"}, "list of tool names")]:
        with pytest.raises(ValueError, match=message):
            sample_env_config({"id": "r", "env": bad}, env, reward)


def test_env_factory_shares_runners_per_tool_set_and_checks_config():
    cfg = load_config(overrides={"env.tools": ["calculator"]})
    make_env = make_env_factory(cfg, retriever=None)
    a, b = make_env({"id": "a"}), make_env({"id": "b", "env": {"tools": ["calculator"]}})
    assert a.runner is b.runner  # one runner per tool set: the rollout batches their calls
    with pytest.raises(ValueError, match="no retriever"):
        make_env_factory(load_config(), retriever=None)
    with pytest.raises(ValueError, match="unknown tool 'nope'"):
        make_env_factory(load_config(overrides={"env.tools": ["nope"]}), retriever=None)
    with pytest.raises(ValueError, match="tool_args"):
        make_env_factory(load_config(overrides={"env.tools": ["calculator"], "env.tool_args": {"x": {}}}), None)


# ------------------------------------------------------------------ the arithmetic task

def test_arithmetic_data_is_deterministic_disjoint_and_solvable():
    from agent_r1.tasks.arithmetic import ArithmeticConfig, generate_arithmetic
    from agent_r1.tools.calculator import evaluate

    config = ArithmeticConfig(seed=3, n_train=300, n_test=60)
    a, b = generate_arithmetic(config), generate_arithmetic(config)
    assert [s.to_dict() for s in a["train"]] == [s.to_dict() for s in b["train"]]
    assert generate_arithmetic(ArithmeticConfig(seed=4, n_train=300, n_test=60))["test"][0].question != a["test"][0].question
    assert len(a["train"]) == 300 and len(a["test"]) == 60
    assert not {s.question for s in a["train"]} & {s.question for s in a["test"]}
    assert {s.type for s in a["train"]} == set(config.types)
    for s in a["train"] + a["test"]:
        values = [evaluate(step) for step in s.plan]
        assert s.answers == [str(int(values[-1]))] and int(s.answers[0]) >= 0
        assert s.env == {"tools": ["calculator"], "reward": {"metric": "numeric"}}


def test_ensure_data_generates_arithmetic_and_reuses_it(tmp_path):
    cfg = load_config(REPO / "params-arithmetic.yaml", {"data.dir": str(tmp_path / "arith")})
    d = ensure_data(cfg)
    assert len(train := Run(cfg).samples("train")) == 2000 and len(Run(cfg).samples("eval")) == 200
    assert train[0]["env"]["tools"] == ["calculator"] and (d / "corpus.jsonl").exists()
    stamp = (d / "train.jsonl").stat().st_mtime_ns
    ensure_data(cfg)
    assert (d / "train.jsonl").stat().st_mtime_ns == stamp  # same seed and settings: reused
    ensure_data(seed1 := load_config(REPO / "params-arithmetic.yaml", {"data.dir": str(tmp_path / "arith"), "seed": 1}))
    assert Run(seed1).samples("train")[0]["question"] != train[0]["question"]
    with pytest.raises(FileNotFoundError, match="arithmetic, synthetic"):
        ensure_data(load_config(overrides={"data.source": "hotpotqa", "data.dir": str(tmp_path / "none")}))


def test_arithmetic_demos_run_the_calculator(tmp_path):
    from agent_r1.models.tokenizer import train_tokenizer
    from agent_r1.tasks.arithmetic import ArithmeticConfig, generate_arithmetic
    from agent_r1.training.demos import build_demos

    samples = [s.to_dict() for s in generate_arithmetic(ArithmeticConfig(n_train=20, n_test=1))["train"]]
    for fmt in ("tag", "hermes"):
        cfg = load_config(REPO / "params-arithmetic.yaml", {"env.format": fmt})
        tok = train_tokenizer([s["question"] for s in samples] * 3, vocab_size=300)
        demos = build_demos(samples, make_env_factory(cfg, None), ChatCodec(tok), fmt, 0.0, 0, 64)
        for demo, s in zip(demos, samples):
            assert demo.answer == s["answers"][0] and len(demo.turns) == len(s["plan"]) + 1
            last_obs = tok.decode(demo.turns[-2].observation_ids)
            assert s["answers"][0] in last_obs and "Error" not in last_obs


def test_params_arithmetic_sets_up_the_task():
    cfg = load_config(REPO / "params-arithmetic.yaml")
    base = load_config(REPO / "params.yaml")
    assert (cfg.data.source, cfg.env.tools, cfg.reward.metric) == ("arithmetic", ["calculator"], "numeric")
    # its data, index and runs never overwrite the multi-hop QA run's (runs: their own experiment)
    for key in ("data.dir", "search.index_dir", "train.experiment"):
        section, name = key.split(".")
        assert getattr(getattr(cfg, section), name) != getattr(getattr(base, section), name), key
    assert cfg.train.init_from == base.train.init_from == "sft"  # each its own warm start, keyed by hash
