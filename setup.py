"""The wheel carries the configs the project reads from the repository's top level, ``conf/``
(Hydra's ``config.yaml``, the experiments, the relational specs) and ``dask_cluster.yaml``,
copied into the package's folder as they are there (``pipeline/conf/``,
``pipeline/dask_cluster.yaml``): the tree holds one copy, and an installed package finds
them beside its code (``pipeline.sweep.config.schema.CONFIG_DIR``). Everything else about
the build is in ``pyproject.toml``."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = (*sorted(Path("conf").rglob("*.yaml")), Path("dask_cluster.yaml"))


class BuildWithConfigs(build_py):
    """``build_py`` that also copies ``SHIPPED`` into the built package; an editable install
    reads them where they are."""

    def run(self):
        super().run()
        if self.editable_mode:
            return
        if not Path("conf", "config.yaml").is_file():
            raise FileNotFoundError("conf/config.yaml: the sweep's config is missing")
        for path in SHIPPED:
            target = Path(self.build_lib, "pipeline", path)
            self.mkpath(str(target.parent))
            self.copy_file(str(path), str(target))


setup(cmdclass={"build_py": BuildWithConfigs})
