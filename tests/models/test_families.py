"""The contract every model family passes (``pipeline.testing.families``), run on every
built-in family, those that read a file given one: the interface, models of the size asked
for built deterministically from the seed, and inference on a sequence the model draws.

A new family adds its parameters to ``PARAMETERS``."""

from types import SimpleNamespace

import pytest

from pipeline.hmmlm import saved
from pipeline.hmmlm.parameters import initial
from pipeline.models import BUILTIN, build_model, weather
from pipeline.models import file as file_family
from pipeline.models.family import Members
from pipeline.testing import families

PARAMETERS = {
    "weather": {},
    "uniform": {},
    "bell": {},
    "lm": {"alpha": 0.05},
    "lm_smoothed": {},
    "dirichlet": {"alpha": 0.2},
    "peaked": {"support": 4},
    "kernel": {"n_features": 6},
    "banded_kernel": {"n_features": 6},
    "hmmlm": {},
    "file": {},
}
"""Each built-in family's parameters beyond the files ``files`` makes."""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The parameters that name a file: a corpus (``lm``, ``lm_smoothed``), a saved HMM LM of
    4 states (``hmmlm``) and an ``.npz`` of the 6-state weather model (``file``)."""
    folder = tmp_path_factory.mktemp("families")
    corpus = folder / "corpus.txt"
    words = [f"{chr(97 + i % 26)}{chr(97 + i // 26)}x" for i in range(30)]
    corpus.write_text(" ".join(words[(7 * i + i // 30) % 30] for i in range(600)))
    lm = folder / "lm.npz"
    saved.save(lm, initial("softmax", 4, 3), ("a", "b", "<unk>"))
    weather = build_model("weather", 6)
    npz = folder / "weather.npz"
    file_family.save(npz, weather.prior, weather.transition, weather.emission)
    return {
        "lm": {"corpus": str(corpus)},
        "lm_smoothed": {"corpus": str(corpus)},
        "hmmlm": {"path": str(lm)},
        "file": {"path": str(npz)},
    }


def test_every_family_is_tested():
    assert set(PARAMETERS) == set(BUILTIN)


@pytest.mark.parametrize("check", families.CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("family", sorted(BUILTIN))
def test_every_family_passes_the_contract(family, check, files):
    n_states = {"weather": 6, "hmmlm": 4, "file": 6}.get(family, 12)
    check(family, n_states, **PARAMETERS[family], **files.get(family, {}))


def test_the_contract_names_a_parameter_the_family_lacks():
    with pytest.raises(AssertionError, match=r"^bell has no parameters \['nope'\]$"):
        families.check_interface("bell", 12, nope=1)


def test_a_family_that_gives_only_build_gets_every_default():
    """``Members.of`` reads a family's optional members once: a module with ``build`` alone
    checks nothing more, fixes no size, is seeded, and has no limit on the exact gamma."""
    bare = Members.of(SimpleNamespace(build=weather.build))
    assert bare.check(6) is None and bare.verify(6) is None
    assert bare.size is None and bare.model_bytes is None and bare.fingerprint is None
    assert bare.seeded and bare.gamma_exact_max_states == float("inf")
    read = Members.of(file_family)  # a family that gives them: its own
    assert read.seeded is False and read.size is file_family.size
    assert read.verify is file_family.verify
