"""``python -m pipeline.sweep``: see ``pipeline.sweep``."""

from pipeline.sweep.main import main

main()
