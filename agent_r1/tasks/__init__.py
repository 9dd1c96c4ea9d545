"""Tasks whose data is generated offline, keyed by `data.source` (see registry.py).

- `synthetic`: the invented multi-hop world (agent_r1/data/synthetic.py), searched with `search`;
- `arithmetic`: word problems solved with the `calculator` tool (arithmetic.py).
"""
