import copy

import numpy as np
import pytest
import yaml

from pipeline.coupled.relational import ground
from pipeline.sweep.config import CONFIG_DIR

QUARTET = CONFIG_DIR / "relational" / "string_quartet.yaml"

# Two voices, notes c and d, octaves 0 and 1: states (c,0), (c,1), (d,0), (d,1) numbered 0-3.
# up counts (note, octave) with the note as the low digit: c0 -> d0 -> c1 -> d1 -> d1 (clamp).
TINY = yaml.safe_load("""
types:
  voice: [lo, hi]
  note: [c, d]
  octave: [0, 1]
chain: voice
state: note(voice, note, octave)
symbol: hear(voice, note)
background:
  up: {counter: [note, octave], by: 1, ends: clamp}
mu:
  note: {c: 3, d: 1}
prior:
  - p: 0.5
    state: note(V, c, O)
  - p: 0.5
    state: note(V, N, 0)
abstract_states:
  - name: top
    body: note(hi, d, 1)
    transitions:
      - p: 1
        head: note(hi, d, 1)
  - name: unison
    body: note(V, N, O)
    guard: note(W, N, O2), W != V, O2 != O
    transitions:
      - p: 0.4
        head: note(V, N, O2)
      - p: 0.6
        head: note(V, N, O)
  - name: move
    body: note(V, N, O)
    transitions:
      - p: 0.5
        head: note(V, N, O)
      - p: 0.3
        head: note(V, N2, O2)
        where: up(N, O, N2, O2)
      - p: 0.2
        head: note(V, N2, O2)
observations:
  - name: heard
    body: note(V, N, O)
    emissions:
      - p: 0.8
        emit: hear(V, N)
      - p: 0.2
        emit: hear(V, H)
eps: 0.3
""")

# By hand. The leap (p 0.2) selects N2 by mu (c 3/4, d 1/4) and O2 uniformly: 0.2 * [3/8, 3/8,
# 1/8, 1/8] = [.075, .075, .025, .025]; hold 0.5; up 0.3 (d1 up is d1 itself: 0.5 + 0.3 add).
OWN = [
    [0.575, 0.075, 0.325, 0.025],  # c0: hold c0, up d0
    [0.075, 0.575, 0.025, 0.325],  # c1: hold c1, up d1
    [0.075, 0.375, 0.525, 0.025],  # d0: hold d0, up c1 (the octave carries)
    [0.075, 0.075, 0.025, 0.825],  # d1: hold d1, up d1
]
TOP = [0, 0, 0, 1]  # hi at d1: 'top' fires before anything else
UNISON = {
    (0, 1): [0.6, 0.4, 0, 0],
    (1, 0): [0.4, 0.6, 0, 0],
    (2, 3): [0, 0, 0.6, 0.4],
    (3, 2): [0, 0, 0.4, 0.6],
}


def spec(**changes):
    out = copy.deepcopy(TINY)
    out.update(changes)
    return out


def state(name, body, *transitions, guard=None):
    rule = {"name": name, "body": body, "transitions": [dict(t) for t in transitions]}
    return rule | ({"guard": guard} if guard else {})


def test_the_tiny_spec_grounds_to_the_tables_computed_by_hand():
    grounded = ground(TINY)
    model = grounded.model
    assert grounded.chains == ("lo", "hi")
    assert grounded.states[1] == (("hi", "c", 0), ("hi", "c", 1), ("hi", "d", 0), ("hi", "d", 1))
    assert grounded.symbols == ((("lo", "c"), ("lo", "d")), (("hi", "c"), ("hi", "d")))
    np.testing.assert_allclose(model.weights, [[0.7, 0.3], [0.3, 0.7]])
    np.testing.assert_allclose(model.own[0], OWN)
    np.testing.assert_allclose(model.own[1], [*OWN[:3], TOP])
    lo, hi = np.array([OWN] * 4).transpose(1, 0, 2), np.array([OWN] * 4).transpose(1, 0, 2)
    for (x, y), row in UNISON.items():
        lo[x, y] = hi[x, y] = row
    hi[3] = TOP
    np.testing.assert_allclose(model.pairs[0][1], lo)
    np.testing.assert_allclose(model.pairs[1][0], hi)
    assert model.pairs[0][0] is None and model.pairs[1][1] is None
    for i in range(2):  # heard right 0.8, else mu: c 0.75, d 0.25
        np.testing.assert_allclose(model.emissions[i], [[0.95, 0.05]] * 2 + [[0.15, 0.85]] * 2)
        # 0.5 on (c, O) with O uniform, 0.5 on (N, 0) with N by mu
        np.testing.assert_allclose(model.priors[i], [0.625, 0.25, 0.125, 0])


def test_the_first_matching_abstract_state_fires():
    rules = TINY["abstract_states"]
    model = ground(spec(abstract_states=[rules[1], rules[0], rules[2]])).model
    np.testing.assert_allclose(model.pairs[1][0][3, 2], UNISON[3, 2])  # unison now beats top
    np.testing.assert_allclose(model.pairs[1][0][3, 3], TOP)  # top beats move
    np.testing.assert_allclose(model.own[1][3], TOP)  # unison never fires alone


def test_mu_selects_free_head_variables_and_where_restricts_them():
    tiny = spec(
        types={"voice": ["lo", "hi"], "note": ["c", "d", "e"], "octave": [0]},
        mu={"note": {"c": 1, "d": 1, "e": 2}},
        prior=None,
    )
    jump = {"p": 1, "head": "note(V, N2, O)", "where": "N2 != N"}
    tiny["abstract_states"] = [state("jump", "note(V, N, O)", jump)]
    model = ground(tiny).model
    np.testing.assert_allclose(model.own[0], [[0, 1 / 3, 2 / 3], [1 / 3, 0, 2 / 3], [0.5, 0.5, 0]])
    np.testing.assert_allclose(model.priors[1], [1 / 3] * 3)  # no prior: uniform, not mu


def test_transitions_grounding_to_the_same_successor_add_up():
    hold = {"p": 0.25, "head": "note(V, N, O)"}
    again = {"p": 0.75, "head": "note(V, N, O)"}
    model = ground(spec(abstract_states=[state("hold", "note(V, N, O)", hold, again)])).model
    np.testing.assert_allclose(model.own[0], np.eye(4))


def test_several_true_groundings_of_a_guard_are_selected_uniformly_not_by_mu():
    tiny = spec(
        types={"voice": ["lo", "hi"], "note": ["c", "d", "e"], "octave": [0]},
        background={"near": {"types": ["note", "note"], "tuples": [["c", "d"], ["c", "e"]]}},
        mu={"note": {"c": 1, "d": 1, "e": 5}},
        prior=None,
    )
    follow = {"p": 1, "head": "note(V, N3, O)"}
    hold = {"p": 1, "head": "note(V, N, O)"}
    tiny["abstract_states"] = [
        state("follow", "note(V, N, O)", follow, guard="note(W, c, _), W != V, near(c, N3)"),
        state("hold", "note(V, N, O)", hold),
    ]
    pairs = ground(tiny).model.pairs[0][1]
    np.testing.assert_allclose(pairs[:, 0], [[0, 0.5, 0.5]] * 3)  # other at c: d or e, 1/2 each
    np.testing.assert_allclose(pairs[:, 1], np.eye(3))


def test_eps_zero_gives_independent_chains_and_one_chain_has_weight_one():
    model = ground(TINY, eps=0).model
    np.testing.assert_array_equal(model.weights, np.eye(2))
    assert model.sources(0) == [] and model.pairs[0][1] is None
    states = np.array([[2, 3]])
    np.testing.assert_allclose(model.conditional(0, states)[0], OWN[2])
    single = ground(TINY, domain={"voice": ["lo"]}).model
    np.testing.assert_array_equal(single.weights, [[1.0]])


def test_symbols_without_a_chain_argument_are_shared_and_may_be_observed_as_a_set():
    tiny = spec(symbol="hear(note)", observe="set")
    tiny["observations"][0]["emissions"] = [
        {"p": 0.8, "emit": "hear(N)"},
        {"p": 0.2, "emit": "hear(H)"},
    ]
    grounded = ground(tiny)
    assert grounded.symbols == ((("c",), ("d",)),) * 2
    assert grounded.model.observe == "set" and grounded.model.n_observations == 4


def errors():
    tiny = TINY["abstract_states"]
    hold = {"p": 1, "head": "note(V, N, O)"}
    never = state("never", "note(V, N, O)", hold, guard="note(W, N, O), W == V")
    nowhere = state("nowhere", "note(V, N, O)", hold, guard="up(N, O, N2, O2), N2 == N, O == 0")
    short = copy.deepcopy(tiny[2])
    short["transitions"][0]["p"] = 0.4
    down = copy.deepcopy(tiny[2])
    down["transitions"][1]["where"] = "down(N, O, N2, O2)"
    unknown = copy.deepcopy(tiny[2])
    unknown["transitions"][1]["where"] = "up(N, O, N2, O2), N3 != N"
    other = copy.deepcopy(tiny[1])
    other["transitions"][0]["head"] = "note(W, N, O2)"
    unnamed = {k: v for k, v in tiny[2].items() if k != "name"}
    split = copy.deepcopy(tiny[1])
    split["guard"] = ["note(W", "N", "O2)", "W != V"]
    heard = copy.deepcopy(TINY["observations"])
    heard[0]["emissions"][1]["p"] = 0.1
    stop = {"up": {"counter": ["note", "octave"], "by": 1}}
    return [
        (
            {"abstract_states": [*tiny[:2], never, tiny[2]]},
            "abstract state 'never' never fires: its guard holds for no pair of chain states",
        ),
        (
            {"abstract_states": [nowhere, *tiny]},
            "abstract state 'nowhere' never fires: its guard holds in no chain state",
        ),
        (
            {"abstract_states": [*tiny, {**tiny[2], "name": "again"}]},
            "abstract state 'again' never fires: earlier rules always fire first",
        ),
        (
            {"abstract_states": [*tiny[:2], short]},
            "abstract state 'move': its transition probabilities sum to 0.9; they must sum to 1",
        ),
        (
            {"abstract_states": [*tiny[:2], down]},
            "abstract state 'move', transition 2: unknown predicate 'down' in where",
        ),
        (
            {"abstract_states": [*tiny[:2], unknown]},
            "abstract state 'move', transition 2: unknown variable N3 in N3 != N",
        ),
        (
            {"abstract_states": [{**tiny[0], "body": "note(hi, e, 1)"}, *tiny[1:]]},
            "abstract state 'top': unknown constant 'e' of type 'note'",
        ),
        ({"abstract_states": tiny[:2]}, "no abstract state fires for note(lo, c, 0) alone"),
        (
            {"background": stop},
            "abstract state 'move', transition 2: note(V, N2, O2) has no grounding (from "
            "note(lo, d, 1))",
        ),
        (
            {"abstract_states": [tiny[0], other, tiny[2]]},
            "abstract state 'unison', transition 1: note(W, N, O2) grounds to note(hi, c, 1), an "
            "atom of another chain",
        ),
        (
            {"abstract_states": [*tiny[:2], {**unnamed, "transitions": short["transitions"]}]},
            "abstract_states[2]: its transition probabilities sum to 0.9",
        ),
        (
            {"abstract_states": [tiny[0], split, tiny[2]]},
            "abstract state 'unison': cannot read 'note(W' as an atom",
        ),
        (
            {"observations": heard},
            "observation rule 'heard': its emission probabilities sum to 0.9",
        ),
        (
            {"prior": [{"p": 0.5, "state": "note(V, c, O)"}]},
            "prior of chain 'lo': its entries' p sum to 0.5",
        ),
        ({"eps": 1.5}, "eps must be a number in [0, 1]"),
        (
            {"abstract_states": [tiny[0], {**tiny[1], "guard": "note(W, N, O2), note(U, N, O)"}]},
            "abstract state 'unison': its guard reads more than one other chain",
        ),
        (
            {"observations": [{**heard[0], "guard": "note(W, N, O)"}]},
            "observation rule 'heard': an observation rule sees only its own chain",
        ),
    ]


@pytest.mark.parametrize(("changes", "message"), errors())
def test_every_problem_is_one_line_naming_its_rule(changes, message):
    with pytest.raises(ValueError) as caught:
        ground(spec(**changes))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_reduced_domain_must_use_the_specs_constants_and_may_leave_rules_dead():
    with pytest.raises(ValueError, match=r"^domain: type 'note' needs constants of the spec"):
        ground(TINY, domain={"note": ["c", "e"]})
    model = ground(TINY, domain={"octave": [0]}).model  # unison never fires: no error here
    np.testing.assert_allclose(model.own[0], [[0.5 + 0.15, 0.3 + 0.05], [0.15, 0.85]])


def test_the_string_quartet_grounds_at_full_size():
    grounded = ground(yaml.safe_load(QUARTET.read_text()))
    model = grounded.model
    assert grounded.chains == ("basso", "tenor", "alto", "soprano")
    assert model.sizes == (48,) * 4 and model.symbols == (12,) * 4
    np.testing.assert_allclose(model.weights[0], [0.8, 0.2 / 3, 0.2 / 3, 0.2 / 3])
    states = grounded.states[0]
    b1, c2, c1 = (states.index(("basso", *s)) for s in (("b", 1), ("c", 2), ("c", 1)))
    # the octave carries: b1 a semitone up is c2 (half of 0.25), plus the leap's 0.05 / 48
    assert model.own[0][b1, c2] == pytest.approx(0.125 + 0.05 / 48)
    # Figure 3: the basso at c1 takes over the octave of the alto at c2
    alto_c2 = grounded.states[2].index(("alto", "c", 2))
    row = model.pairs[0][2][c1, alto_c2]
    assert row[c2] == pytest.approx(0.4) and row[c1] == pytest.approx(0.6)
    np.testing.assert_allclose(model.emissions[3][c1, :2], [0.8 + 0.2 / 12, 0.2 / 12])


@pytest.mark.parametrize(
    ("domain", "n_joint"),
    [
        ({"voice": ["basso", "soprano"], "octave": [1]}, 144),
        ({"voice": ["tenor", "alto"], "note": ["c", "cis", "d"], "octave": [0]}, 9),
        (
            {
                "voice": ["basso", "alto", "soprano"],
                "note": ["c", "cis", "d", "dis"],
                "octave": [2],
            },
            64,
        ),
    ],
)
def test_the_string_quartet_on_a_reduced_domain_builds_its_joint_hmm(domain, n_joint):
    model = ground(yaml.safe_load(QUARTET.read_text()), domain=domain).model
    assert model.n_joint == n_joint
    hmm = model.joint()
    assert hmm.transition.shape == (n_joint, n_joint)
    rng = np.random.default_rng(0)
    states = rng.integers(0, model.sizes[0], (5, model.chains))
    joint = np.ravel_multi_index(states.T, model.sizes)
    row = np.asarray(hmm.transition)[joint[0]].reshape(model.sizes)
    for i in range(model.chains):  # the joint row factorises into the chains' conditionals
        marginal = row.sum(axis=tuple(a for a in range(model.chains) if a != i))
        np.testing.assert_allclose(marginal, model.conditional(i, states[:1])[0])
