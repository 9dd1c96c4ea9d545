"""`data.source: synthetic`: the invented multi-hop world, as a registered data generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_r1.tasks.registry import register_data_generator


def _same_world(seed: int, out_dir: Path, data_cfg: Any) -> bool:
    """A synthetic folder is reused only if it was generated with the configured knobs."""
    meta = Path(out_dir) / "world.json"
    if not meta.exists():
        return False
    made = json.loads(meta.read_text()).get("config", {})
    return (made.get("seed") == seed and made.get("n_people") == data_cfg.n_people
            and list(made.get("question_types", [])) == list(data_cfg.question_types))


@register_data_generator("synthetic", is_current=_same_world)
def write_synthetic_world(seed: int, out_dir: Path, data_cfg: Any) -> Any:
    from agent_r1.data.synthetic import SyntheticConfig, write_synthetic

    return write_synthetic(seed, Path(out_dir), SyntheticConfig(seed=seed, n_people=data_cfg.n_people,
                                                                question_types=tuple(data_cfg.question_types)))
