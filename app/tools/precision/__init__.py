"""Precision across devices and dtypes: the same fixed inputs through a model's parts on two or more
configurations (device, dtype, attention implementation), in one process or from runs saved on
other machines, compared tensor by tensor; ``python -m app.tools.precision --help``."""
