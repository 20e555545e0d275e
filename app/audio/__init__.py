"""PCM stages after the codec: stitching, encoding to pcm/wav."""
