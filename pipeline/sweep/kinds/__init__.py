"""The built-in sweep kinds' sweeps, one module each with the ``SweepKind`` interface
(``pipeline.sweep.kind``): ``methods``, ``training``, ``coupled``, ``kernel_features``."""
