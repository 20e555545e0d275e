"""The NeuCodec family: a Qwen3 LM emitting NeuCodec speech tokens (vLLM over HTTP or in-process), decoded
in windows by the NeuCodec codec."""

from app.core.family import FamilySpec
from app.families.neucodec.settings import NeuCodecSettings

SPEC = FamilySpec(
    name="neucodec",
    settings=NeuCodecSettings,
    family="app.families.neucodec.family:NeuCodecFamily",
    fixtures="app.families.neucodec.fixtures",
    precision="app.families.neucodec.precision",
)
