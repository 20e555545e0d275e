"""Our implementation of the NeuCodec decode path, loadable from the official checkpoint."""
