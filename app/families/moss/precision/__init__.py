"""The MOSS family's parts for the precision tool (``python -m app.tools.precision``): its backbone, its
whole LM and its codec (importing this loads torch: the tool's, never the server's)."""

from app.families.moss.precision.codec import MossCodecPart
from app.families.moss.precision.lm import MossBackbonePart, MossLMPart

PARTS = (MossBackbonePart(), MossLMPart(), MossCodecPart())
