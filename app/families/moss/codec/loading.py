"""Load MOSS-Audio-Tokenizer from a local directory or a Hugging Face repo in the official layout.

A source holds ``config.json`` and the weights: ``model.safetensors``, shards listed by
``model.safetensors.index.json``, or ``pytorch_model.bin``. Tensors are matched by the official names,
strictly: a missing, unexpected or mis-shaped key fails with the list. Older spellings are accepted
(``weight_g``/``weight_v`` of weight norm; ``in_proj_weight``, ``in_proj.weight`` and ``out_proj.weight``
of attention). Without the encoder (``with_encoder=False``: voice prompts disabled) the ``encoder.*``
tensors are neither built nor read. The model is laid out on ``meta``, checked, then materialised on the
device and filled, so a full-size load pays no random initialisation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import torch

from app.codec.state_dicts import layout_problems
from app.families.moss.codec.config import CONFIG_FILENAME, read_config
from app.families.moss.codec.model import MossAudioCodec
from app.hub import REPO_ID_RE, download
from app.observability.startup_errors import ModelSourceError

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_FILE = "pytorch_model.bin"
HUB_PATTERNS = (CONFIG_FILENAME, "*.safetensors", SAFETENSORS_INDEX, "pytorch_model*.bin")
_ALIASES = (
    (re.compile(r"\.weight_g$"), ".parametrizations.weight.original0"),
    (re.compile(r"\.weight_v$"), ".parametrizations.weight.original1"),
    (re.compile(r"\.self_attn\.in_proj_weight$"), ".self_attn.in_projs.0.weight"),
    (re.compile(r"\.self_attn\.in_proj\.weight$"), ".self_attn.in_projs.0.weight"),
    (re.compile(r"\.self_attn\.out_proj\.weight$"), ".self_attn.out_projs.0.weight"),
)


class CheckpointError(ModelSourceError):
    """The checkpoint is missing, unreadable or does not fit the codec's layout."""


def canonical_key(key: str) -> str:
    """The official (current) name of a checkpoint key written with an older spelling."""
    for pattern, replacement in _ALIASES:
        key = pattern.sub(replacement, key)
    return key


def resolve_source(source: str) -> Path:
    """A local directory as is; a Hugging Face repo id downloaded (config and weights only)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(f"codec source {source!r} is a file; pass the directory that holds it")
    if REPO_ID_RE.fullmatch(source):
        return download(source, HUB_PATTERNS)  # with progress, as every model source
    raise CheckpointError(f"codec source {source!r} is neither a directory nor a Hugging Face repo id")


def _safetensors_files(directory: Path) -> list[Path]:
    index = directory / SAFETENSORS_INDEX
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        return [directory / name for name in sorted(set(weight_map.values()))]
    single = directory / SAFETENSORS_FILE
    return [single] if single.is_file() else []


def read_state(directory: Path, keep: Callable[[str], bool]) -> dict[str, torch.Tensor]:
    """Tensors (official names) of the checkpoint in ``directory`` whose name passes ``keep``, on cpu."""
    state: dict[str, torch.Tensor] = {}
    files = _safetensors_files(directory)
    if files:
        from safetensors import safe_open

        for file in files:
            if not file.is_file():
                raise CheckpointError(f"weight shard {file.name} listed in {SAFETENSORS_INDEX} is missing")
            with safe_open(str(file), framework="pt", device="cpu") as handle:
                for key in handle.keys():  # noqa: SIM118 (safe_open is not a dict)
                    name = canonical_key(key)
                    if keep(name):
                        state[name] = handle.get_tensor(key)
        return state
    pickle_path = directory / PICKLE_FILE
    if not pickle_path.is_file():
        raise CheckpointError(f"no {SAFETENSORS_FILE}, {SAFETENSORS_INDEX} or {PICKLE_FILE} in {directory}")
    loaded = torch.load(pickle_path, map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(loaded, dict):
        raise CheckpointError(f"{pickle_path} does not hold a state dict")
    return {canonical_key(k): v for k, v in loaded.items() if keep(canonical_key(k))}


def check_layout(model: torch.nn.Module, state: dict[str, torch.Tensor], where: str) -> None:
    """Raise CheckpointError naming the missing, unexpected and mis-shaped keys."""
    problems = layout_problems(model, state)
    if problems:
        raise CheckpointError(
            f"MOSS codec checkpoint in {where} does not fit its config: " + "; ".join(problems)
        )


def load_codec(
    source: str,
    device: torch.device | str = "cpu",
    *,
    with_encoder: bool = True,
    dtype: torch.dtype = torch.float32,
    encoder_dtype: torch.dtype | None = None,
) -> MossAudioCodec:
    """Build the codec of ``source`` (directory or HF id), load its weights strictly, eval mode.

    ``dtype`` applies to the decoder's transformer stages, ``encoder_dtype`` (default ``dtype``) to the
    encoder's; the quantizer always runs in float32.
    """
    directory = resolve_source(source)
    try:
        config = read_config(directory)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        raise CheckpointError(f"bad MOSS codec config in {directory}: {exc}") from exc
    state = read_state(directory, lambda key: with_encoder or not key.startswith("encoder."))
    with torch.device("meta"):
        model = MossAudioCodec(config, with_encoder=with_encoder)
    check_layout(model, state, str(directory))
    model.to_empty(device=device)
    model.load_state_dict(state, strict=True)
    model.decoder.to(dtype)
    if model.encoder is not None:
        model.encoder.to(dtype if encoder_dtype is None else encoder_dtype)
    return model.eval()
