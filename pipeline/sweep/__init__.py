"""The sweep: a Hydra-configured grid run on Dask into a resumable zarr store.

    python -m pipeline.sweep                                  # default experiment, local cluster
    python -m pipeline.sweep experiment=smoke                 # seconds
    python -m pipeline.sweep grid.methods='{topp:[0.9],topk:[5]}' store=outputs/mine.zarr
    python -m pipeline.sweep cluster=address cluster.address=tcp://host:8786

The layers, one module each: ``config`` (schema, Hydra registration,
validation) -> ``grid`` (cells and coordinates) -> ``plan`` (the tasks, run
through a Dask client or in-process) with ``tasks`` (what workers run) ->
``store`` (the zarr store) -> ``pipeline.analysis``. ``main`` makes the Dask
client (``cluster``) and passes it down; ``progress`` and ``provenance`` report.
This package is the only place Dask appears.
"""
