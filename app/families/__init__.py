"""Model families: one package each (``neucodec/``, ``moss/``) holding all that is that family's, the shared
part they build on (``shared/``) and the registry that lists them (``registry.py``)."""
