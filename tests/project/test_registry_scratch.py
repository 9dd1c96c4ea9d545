"""`Registry.scratch()` undoes what its block changed, and only that: a built-in whose module is
first imported inside the block stays registered after it (the module is imported once per process,
so an entry dropped at the block's end would never come back)."""

from __future__ import annotations

import sys

import pytest

from agent_r1.registry import Registry, UnknownName


@pytest.fixture
def lazy_module(tmp_path, monkeypatch):
    """A module that registers 'blue' into the registry it finds in `sys.modules['_scratch_reg']`."""
    (tmp_path / "_scratch_colours.py").write_text(
        "import sys\nsys.modules['_scratch_reg'].REG.register('blue', 'the builtin blue')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    holder = type(sys)("_scratch_reg")
    holder.REG = Registry("colour", key="test.colour", where="tests", builtins={"blue": "_scratch_colours"})
    monkeypatch.setitem(sys.modules, "_scratch_reg", holder)
    yield holder.REG
    sys.modules.pop("_scratch_colours", None)


def test_a_builtin_first_imported_inside_scratch_survives_the_block(lazy_module):
    reg = lazy_module
    with reg.scratch():
        reg.register("red", "a test's red")
        assert reg["blue"] == "the builtin blue"  # its module is imported here, inside the block
    assert "_scratch_colours" in sys.modules
    assert reg["blue"] == "the builtin blue"  # still there: the module will not register it again
    with pytest.raises(UnknownName):
        reg["red"]  # what the block added is gone


def test_scratch_undoes_a_replaced_builtin(lazy_module):
    reg = lazy_module
    with reg.scratch():
        reg.register("blue", "a fake", replace=True)
        assert reg["blue"] == "a fake"
    assert reg["blue"] == "the builtin blue"
