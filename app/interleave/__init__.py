"""Interleaved generation: requests that share an interleave id are prompted with their previous turns.

``turns`` holds the turn record and the retention rules, ``fit`` the prompt and its fit to the caps and
the LM window, ``ids`` what an id maps to, ``tokenizer`` how prompt tokens are counted, ``store`` the
store protocol and factory (``shm``, ``redis_store``, ``memory``), ``service`` the glue the speech route
uses. Design and settings: ``docs/interleave.md``.
"""
