"""Load a NeuCodecDecoder from a local directory or a Hugging Face repo in the official file layout.

A source directory holds ``model.safetensors`` or ``pytorch_model.bin`` (the official
``neuphonic/neucodec`` ships the latter, with the encoder and its 600M-parameter semantic model in
the same file) and optionally ``neucodec_config.json`` for non-official sizes. Only decoder tensors
are read; every other key (``semantic_model.*``, ``CodecEnc.*``, ``fc_prior.*``, ...) is ignored
without building the modules it belongs to.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from app.codec.neucodec.config import CONFIG_FILENAME, read_config
from app.codec.neucodec.decoder import NeuCodecDecoder

SAFETENSORS_FILE = "model.safetensors"
PICKLE_FILE = "pytorch_model.bin"
HUB_FILES = (SAFETENSORS_FILE, PICKLE_FILE, CONFIG_FILENAME)
DECODER_PREFIXES = (
    "fc_post_a.",
    "generator.quantizer.project_in.",
    "generator.quantizer.project_out.",
    "generator.backbone.",
    "generator.head.",
)
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_SHOWN_KEYS = 8


class CheckpointError(ValueError):
    """The checkpoint is missing, unreadable or does not match the decoder's layout."""


def is_decoder_key(key: str) -> bool:
    """True for checkpoint keys that belong to the decode path."""
    return key.startswith(DECODER_PREFIXES)


def _resolve_source(source: str) -> Path:
    """A local directory as is; a Hugging Face repo id downloaded (only the files we read)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(f"codec source {source!r} is a file; pass the directory that holds it")
    if _REPO_ID_RE.match(source):
        import huggingface_hub

        return Path(huggingface_hub.snapshot_download(repo_id=source, allow_patterns=list(HUB_FILES)))
    raise CheckpointError(f"codec source {source!r} is neither a directory nor a Hugging Face repo id")


def _read_decoder_state(directory: Path) -> dict[str, torch.Tensor]:
    """Decoder tensors of the checkpoint in ``directory`` (safetensors preferred), on cpu."""
    safetensors_path = directory / SAFETENSORS_FILE
    if safetensors_path.is_file():
        from safetensors import safe_open

        with safe_open(str(safetensors_path), framework="pt", device="cpu") as handle:
            return {key: handle.get_tensor(key) for key in handle.keys() if is_decoder_key(key)}  # noqa: SIM118
    pickle_path = directory / PICKLE_FILE
    if not pickle_path.is_file():
        raise CheckpointError(f"no {SAFETENSORS_FILE} or {PICKLE_FILE} in {directory}")
    state = torch.load(pickle_path, map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(state, dict):
        raise CheckpointError(f"{pickle_path} does not hold a state dict (got {type(state).__name__})")
    return {key: value for key, value in state.items() if is_decoder_key(key)}


def _listing(keys: list[str]) -> str:
    shown = ", ".join(keys[:_SHOWN_KEYS])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > _SHOWN_KEYS else "")


def _check_layout(model: NeuCodecDecoder, state: dict[str, torch.Tensor], directory: Path) -> None:
    """Raise CheckpointError naming missing, unexpected or mis-shaped decoder keys."""
    expected = model.state_dict()
    problems = []
    missing = sorted(set(expected) - set(state))
    if missing:
        problems.append(f"missing decoder keys: {_listing(missing)}")
    unexpected = sorted(set(state) - set(expected))
    if unexpected:
        problems.append(f"unexpected decoder keys: {_listing(unexpected)}")
    mismatched = [
        f"{key} {tuple(state[key].shape)} != {tuple(expected[key].shape)}"
        for key in sorted(set(state) & set(expected))
        if state[key].shape != expected[key].shape
    ]
    if mismatched:
        problems.append(f"wrong shapes (checkpoint != config): {_listing(mismatched)}")
    if problems:
        raise CheckpointError(
            f"NeuCodec checkpoint in {directory} does not fit the decoder: " + "; ".join(problems)
        )


def load_decoder(source: str, device: torch.device | str = "cpu") -> NeuCodecDecoder:
    """Build the decoder for ``source`` (directory or HF repo id), load its weights strictly, eval mode."""
    directory = _resolve_source(source)
    config = read_config(directory)
    state = _read_decoder_state(directory)
    with torch.device(device):
        model = NeuCodecDecoder(config)
    _check_layout(model, state, directory)
    model.load_state_dict(state, strict=True)
    return model.eval()
