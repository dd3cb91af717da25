"""An example plug-in of ``pipeline``: the ``ring`` family and the ``threshold`` method."""
