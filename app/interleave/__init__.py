"""Interleaved generation: requests that share an interleave id are prompted with their previous turns.

``turns`` holds the turn record and the history rules, ``fit`` the prompt and its fit to the LM window,
``store`` the store protocol and factory (``shm``, ``redis_store``, ``memory``), ``service`` the glue
the speech route uses. Design and settings: ``INTERLEAVE.md`` at the repository root.
"""
