"""The NeuCodec family's parts for the precision tool (``python -m app.tools.precision``): its LM and its
decoder (importing this loads torch: the tool's, never the server's)."""

from app.families.neucodec.precision.decoder import NeuCodecDecoderPart
from app.families.neucodec.precision.lm import NeuCodecLMPart

PARTS = (NeuCodecLMPart(), NeuCodecDecoderPart())
