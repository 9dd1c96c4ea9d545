"""Export a training checkpoint as a plain model folder that transformers and vLLM load.

A checkpoint is an `iter_NNNNNN/` folder (training/checkpoint.py) or the run's checkpoint root,
whose `latest` file names the newest one. A LoRA checkpoint holds adapters only: `merge=True`
folds them into the base weights; without it the adapter folder is copied (for engines that
take adapters, e.g. vLLM's LoRA requests). A full fine-tuning checkpoint is written as it is.
The optimiser and RNG state (`state.pt`) never leave the checkpoint.
"""

from __future__ import annotations

from pathlib import Path


def resolve_checkpoint(path: str | Path) -> Path:
    """An iteration folder, following the `latest` pointer of a checkpoint root."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist; pass an iter_NNNNNN folder or the "
                                "run's checkpoint folder that holds `latest`")
    pointer = path / "latest"
    if pointer.is_file():
        target = path / pointer.read_text().strip()
        if not target.is_dir():
            raise FileNotFoundError(f"{pointer} names {target.name!r}, which is not in {str(path)!r}")
        return target
    if not (path / "config.json").exists() and not (path / "adapter_config.json").exists():
        raise FileNotFoundError(f"{str(path)!r} holds neither a model (config.json) nor a LoRA adapter "
                                "(adapter_config.json) nor a `latest` pointer")
    return path


def export_model(checkpoint: str | Path, out_dir: str | Path, merge: bool = False,
                 base: str | Path | None = None, dtype: str = "float32") -> Path:
    from agent_r1.data.owned import claim_folder
    from agent_r1.models.build import load_adapter_model, load_model, save_model
    from agent_r1.models.lora import is_adapter_folder, merged, save_adapter

    src = resolve_checkpoint(checkpoint)
    out = Path(out_dir)
    if out.resolve() == src.resolve():
        raise ValueError(f"--out {str(out)!r} is the checkpoint itself; choose another folder")
    # files are written over by name (config.json, the weights): only into a folder this command made
    claim_folder(out, "--out", "pass a new or empty folder as --out (or one an earlier export made)", "agent-r1 export")
    if is_adapter_folder(src):
        model, tokenizer = load_adapter_model(src, base=base, dtype=dtype, trainable=False)
        return save_model(merged(model), tokenizer, out) if merge else save_adapter(model, tokenizer, out)
    model, tokenizer = load_model(src, dtype)
    return save_model(model, tokenizer, out)
