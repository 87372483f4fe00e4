"""Checkpoints: a Hugging Face folder (``save_pretrained``: model + tokenizer) that the torch backend
serves as ``local/torch:<dir>``, plus ``harnessevolve-train.json`` saying how it was made.

LoRA adapters are merged into the weights on save (``merge_and_unload``), so a checkpoint is always a
plain model: the backend needs no peft, and the next generation can train on top of it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harnessevolve import __version__
from harnessevolve.core.errors import SchemaError
from harnessevolve.core.files import atomic_write_json, read_json
from harnessevolve.core.schema import check
from harnessevolve.train.config import TrainConfig
from harnessevolve.train.policy import Policy, quiet_progress

METADATA_FILE = "harnessevolve-train.json"
CHECKPOINT_VERSION = 1


@dataclass(frozen=True)
class Provenance:
    """Where the training data came from."""

    run_id: str | None = None
    harness_rev: str | None = None
    """The harness revision (git sha) current when the data was collected."""
    harness_hashes: tuple[str, ...] = ()
    """Content hashes of the harness versions whose rollouts are in the data."""
    source: str = ""
    """The run folder or trajectory folder read."""


def save_checkpoint(
    policy: Policy,
    out_dir: Path,
    *,
    config: TrainConfig,
    provenance: Provenance,
    data: dict[str, Any],
    fit: dict[str, Any],
) -> Path:
    """Write the model, tokenizer and metadata to ``out_dir`` (replaced whole, never half-written)."""
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    try:
        model = policy.model.merge_and_unload() if policy.lora else policy.model
        with quiet_progress():
            model.save_pretrained(staging)
            policy.tokenizer.save_pretrained(staging)
        metadata = {
            "version": CHECKPOINT_VERSION,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "harnessevolve": __version__,
            "base_model": policy.base_model,
            "config": config.to_dict(),
            "lora_merged": policy.lora,
            "run_id": provenance.run_id,
            "harness_rev": provenance.harness_rev,
            "harness_hashes": list(provenance.harness_hashes),
            "source": provenance.source,
            "data": data,
            "fit": fit,
        }
        check(metadata, "train_checkpoint", file=str(out_dir / METADATA_FILE))
        atomic_write_json(staging / METADATA_FILE, metadata)
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out_dir, old)
            os.replace(staging, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def read_metadata(checkpoint: Path) -> dict[str, Any]:
    """The checkpoint's ``harnessevolve-train.json``, schema-checked; newer versions are refused."""
    path = checkpoint / METADATA_FILE
    doc = read_json(path)
    check(doc, "train_checkpoint", file=str(path))
    if doc["version"] > CHECKPOINT_VERSION:
        raise SchemaError(
            f"version {doc['version']} is newer than the supported {CHECKPOINT_VERSION}",
            file=str(path),
            field="version",
            hint="upgrade harnessevolve",
        )
    return doc
