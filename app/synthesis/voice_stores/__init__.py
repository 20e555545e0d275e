"""Where registered voices live: files on one host, or Redis for every replica (``factory``)."""
