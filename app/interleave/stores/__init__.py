"""Turn stores: ``base`` (the contract), ``shm``, ``redis``, ``memory``, and ``factory``."""
