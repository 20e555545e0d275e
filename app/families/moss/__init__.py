"""The MOSS-TTS-Realtime family: the batched frame engine (``lm/``) and the MOSS codec stream (``codec/``)."""

from app.core.family import FamilySpec
from app.families.moss.settings import MossSettings

SPEC = FamilySpec(
    name="moss",
    settings=MossSettings,
    family="app.families.moss.family:MossFamily",
    fixtures="app.families.moss.fixtures",
    precision="app.families.moss.precision",
)
