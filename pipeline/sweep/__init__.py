"""The sweep: a Hydra-configured grid run on Dask into a resumable zarr store.

    python -m pipeline.sweep                                  # default experiment, local cluster
    python -m pipeline.sweep experiment=smoke                 # seconds
    python -m pipeline.sweep grid.methods='{topp:[0.9],topk:[5]}' store=outputs/mine.zarr
    python -m pipeline.sweep cluster=address cluster.address=tcp://host:8786

From Python, with a client you already have: ``pipeline.sweep.run([...], client=client)``
returns the results ``Dataset``.

The layers, one module each: ``config`` (schema, clusters, validation, Hydra's
composition) -> ``kinds`` (one module per sweep kind: its grid, its checks, its tasks;
``methods`` has its plan and tasks beside it) -> ``store`` (the zarr store) ->
``pipeline.results`` (what a store holds, for any reader). ``engine`` runs any kind;
``main`` is the command line; ``cluster`` makes the Dask client, which is passed down;
``progress`` and ``provenance`` report. This package is the only place Dask appears.
"""

from pipeline.sweep.engine import run

__all__ = ["run"]
