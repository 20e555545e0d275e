"""What every family uses and no family owns (imports no family): the batched row scheduler and the
thread hand-off of the in-process engines, start/close order, long inputs' parts, the decode trace, the
precision tool's part contract."""
