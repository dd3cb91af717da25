"""Weakly coupled relational HMMs (Thon and Kersting), grounded from a spec into a ``CoupledHMM``.

A spec (``conf/relational/string_quartet.yaml`` is a documented example) has

- ``types``: each type's constants, e.g. ``voice: [basso, tenor, alto, soprano]``;
- ``chain``: the type with one chain per constant;
- ``state``: the ground-state predicate with its argument types, e.g.
  ``note(voice, note, octave)``, exactly one argument of the chain type. Chain c's states are
  its groundings ``note(c, N, O)``, numbered in ``itertools.product`` order of the other
  arguments (the first one most significant);
- ``symbol``: the observation predicate, e.g. ``hear(voice, note)``; each chain's symbols
  are its groundings, numbered alike (with no argument of the chain type every chain has
  them all);
- ``background`` (optional): named relations, either ``{types: [...], tuples: [[...], ...]}``
  or ``{counter: [t1, t2, ...], by: d or [d, ...], ends: none|clamp|wrap}``: the tuples
  ``(a, b)`` of values of ``t1, t2, ...`` read as the digits of a number, ``t1`` least
  significant, with ``b = a + d``, so that ``counter: [note, octave], by: 1`` is a semitone
  up with b carrying into the next octave (the seed's note-12-plus-one example); past
  either end there is no tuple (``none``), the end itself (``clamp``) or a wrap (``wrap``);
- ``mu`` (optional): the selection distribution of a type as weights per constant
  (unlisted ones 0); a type without one is uniform;
- ``prior`` (optional, uniform by default): ``{p, state, where}`` entries, selected as heads
  are (below), for every chain the entries whose chain argument is that chain;
- ``abstract_states``: the totally ordered list of ``{name, body, guard, transitions}``;
  ``body`` an atom of the state predicate; ``guard`` (optional) a conjunction (a list, or
  one comma-separated string) of atoms of the state predicate (another chain's state, all
  with the same chain argument, e.g. ``Other``), atoms of background relations and
  comparisons ``X != Y``, ``X == Y``; ``transitions`` a list of ``{p, head, where}`` whose
  ``p`` sum to 1, ``head`` an atom of the state predicate and ``where`` (optional) a
  conjunction of background atoms and comparisons;
- ``observations``: the totally ordered list of ``{name, body, guard, emissions}``
  rules, emissions ``{p, emit, where}`` with ``emit`` an atom of the symbol predicate; their
  guards may not read another chain;
- ``eps``: the coupling (``ground`` may override it); ``observe`` (optional): ``chain``
  (default) or ``set`` (``pipeline.coupled.model``).

Capitalised words are variables (``_`` a fresh one each time), other words constants of the
argument's type; a variable's type is that of the arguments it fills.

Semantics. Chain i moves from the joint state x as follows. With probability ``1 - eps`` no
other chain is selected ("alone"): abstract states whose guard reads another chain's state
do not match. With probability ``eps`` one other chain j is selected uniformly among the
k - 1 others and the guard's state atoms are read on x_j (``Other`` is bound to j). The
first abstract state, in the spec's order, whose body unifies with x_i and whose guard
holds fires. If its guard has several true groundings, they are selected uniformly (the
seed's rule); each of its transitions ``p :: head`` then puts mass ``p`` on the head,
whose variables left unbound (free) are selected by mu: every assignment of them that makes
``where`` true is weighted by the product of mu over them, normalised. Transitions that
ground to the same successor add up. So every conditional is a mixture of pairwise tables:

- ``own[i][x_i, :]``: the distribution of the first abstract state firing alone;
- ``pairs[i][j][x_i, x_j, :]``: that of the first firing when chain j is selected;
- ``weights[i, i] = 1 - eps``, ``weights[i, j] = eps / (k - 1)`` (``[[1]]`` for one chain;
  ``eps = 0``: independent chains, ``pairs`` None).

How this differs from the seed: there, the first abstract state whose guard holds for some
other chain fires surely, and its true groundings (e.g. ``Other = soprano`` and ``Other =
alto``) are selected uniformly, so chain i's next state depends on all other chains at once
(a table over the whole joint state, n^(k+1) entries per chain). Here the other chain is
selected first (or none), uniformly among all k - 1 whether its state satisfies a guard or
not, and the seed's semantics is applied to what chain i then sees: its own state and at
most that one other chain's. A guard true for t of the other chains thus fires (if no
earlier abstract state does) with probability ``eps * t / (k - 1)`` rather than 1 (the two
coincide for k = 2 and eps = 1). What this buys is that every conditional is a mixture of
pairwise tables (k - 1 tables of n^3 entries per chain), which keeps mean-field inference
polynomial. Emissions are per chain: the first observation rule whose body unifies with
x_i (and whose guard holds) emits, its free variables selected by mu.

On the spec's own domains (no reduced ``domain``) every abstract state and observation rule
must fire somewhere; a reduced domain may leave some dead (e.g. octave rules with one
octave). Every problem is a one-line ``ValueError`` naming its rule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pipeline.coupled.model import CoupledHMM
from pipeline.coupled.relational_parse import TOLERANCE, Program, Signature, Var, compile_spec, fail


@dataclass(frozen=True)
class Grounded:
    """A grounded spec.

    ``model``: the ``CoupledHMM``; ``chains``: the chain constants (chain i is
    ``chains[i]``); ``states[i][x]``: the arguments of chain i's ground state x as constants,
    e.g. ``('basso', 'c', 0)``; ``symbols[i][y]``: those of its symbol y, e.g.
    ``('basso', 'c')``.
    """

    model: CoupledHMM
    chains: tuple
    states: tuple
    symbols: tuple


def ground(
    spec: Mapping, *, eps: float | None = None, domain: Mapping[str, list] | None = None
) -> Grounded:
    """Ground ``spec`` (see the module docstring) into a ``CoupledHMM``.

    ``eps`` overrides the spec's coupling; ``domain`` restricts types to the constants it
    lists (kept in the spec's order), e.g. ``{"voice": ["basso", "alto"], "octave": [1]}``,
    for a smaller model of the same spec: ``tuples`` relations keep the tuples within it,
    ``counter`` relations count on it (a semitone step on notes ``[c, e]`` goes from c to e),
    and mu is restricted to it.
    """
    return _Grounder(compile_spec(spec, eps=eps, domain=domain)).run()


def _unify(args: tuple, row, binding: dict) -> dict | None:
    """``binding`` extended so that ``args`` (Vars and constants) equal ``row``, or None."""
    out = binding
    for term, value in zip(args, row, strict=True):
        if isinstance(term, Var):
            have = out.get(term.name)
            if have is None:
                out = dict(out) if out is binding else out
                out[term.name] = value
            elif have != value:
                return None
        elif term != value:
            return None
    return out


def _value(term, binding: dict) -> int:
    return binding[term.name] if isinstance(term, Var) else term


def _link(links: tuple, binding: dict, states: np.ndarray) -> tuple[np.ndarray, dict]:
    """Which of another chain's ``states`` (n, arity) unify with every atom of ``links``
    given ``binding``, shape (n,), and the column binding each new variable."""
    mask = np.ones(len(states), bool)
    first: dict[str, int] = {}  # variable -> the column that binds it
    for atom in links:
        for k, term in enumerate(atom.args):
            if not isinstance(term, Var):
                mask &= states[:, k] == term
            elif term.name in binding:
                mask &= states[:, k] == binding[term.name]
            elif term.name in first:
                mask &= states[:, k] == states[:, first[term.name]]
            else:
                first[term.name] = k
    return mask, first


class _Grounder:
    """The grounding of one ``Program``: tables built chain by chain, distributions cached."""

    def __init__(self, program: Program):
        self.p = program
        self.k = len(program.chains)
        self.states = [self._atoms(program.state, i) for i in range(self.k)]
        self.symbols = [self._atoms(program.symbol, i) for i in range(self.k)]
        self.cache: dict = {}
        self.indexes: dict = {}
        self.fired: set = set()

    def _atoms(self, sig: Signature, i: int) -> np.ndarray:
        """Chain i's ground atoms of ``sig`` as index rows, shape (count, arity)."""
        ranges = [
            [i] if k == sig.chain else range(len(self.p.domains[t]))
            for k, t in enumerate(sig.types)
        ]
        return np.array(list(itertools.product(*ranges)), np.int64).reshape(-1, len(sig.types))

    def show(self, sig: Signature, values) -> str:
        words = (str(self.p.domains[t][v]) for v, t in zip(values, sig.types, strict=True))
        return f"{sig.pred}({', '.join(words)})"

    def _position(self, sig: Signature, values: list, i: int) -> int | None:
        """The number of ground atom ``values`` among chain i's, None if another chain's."""
        if sig.chain is not None and values[sig.chain] != i:
            return None
        position = 0
        for k, (v, t) in enumerate(zip(values, sig.types, strict=True)):
            if k != sig.chain:
                position = position * len(self.p.domains[t]) + v
        return position

    def _rows(self, atom, binding: dict) -> list:
        """The tuples of ``atom``'s relation agreeing with its constants and bound variables."""
        fixed = tuple(
            k for k, a in enumerate(atom.args) if not isinstance(a, Var) or a.name in binding
        )
        index = self.indexes.get((atom.pred, fixed))
        if index is None:
            index = self.indexes[atom.pred, fixed] = {}
            for row in self.p.relations[atom.pred]:
                index.setdefault(tuple(row[k] for k in fixed), []).append(row)
        return index.get(tuple(_value(atom.args[k], binding) for k in fixed), [])

    def solve(self, atoms: tuple, compares: tuple, binding: dict, free: tuple = ()):
        """Every extension of ``binding`` making ``atoms`` and ``compares`` true, the
        variables ``free`` not bound by an atom ranging over their type's mu support."""
        if atoms:
            for row in self._rows(atoms[0], binding):
                extended = _unify(atoms[0].args, row, binding)
                if extended is not None:
                    yield from self.solve(atoms[1:], compares, extended, free)
            return
        missing = [(v, t) for v, t in free if v not in binding]
        for values in itertools.product(*(np.flatnonzero(self.p.mu[t]) for _, t in missing)):
            full = {**binding, **{v: int(x) for (v, _), x in zip(missing, values, strict=True)}}
            if all((_value(c.left, full) == _value(c.right, full)) == c.equal for c in compares):
                yield full

    def select(self, out, i: int, binding: dict, sig: Signature, context) -> dict:
        """Outcome ``out``'s ground atoms (numbers among chain i's) and their probabilities."""
        weights: dict = {}
        for full in self.solve(out.where, out.compares, binding, out.free):
            values = [_value(a, full) for a in out.atom.args]
            if -1 in values:
                continue
            position = self._position(sig, values, i)
            if position is None:
                fail(
                    f"{out.label}: {out.atom.text} grounds to {self.show(sig, values)}, an "
                    f"atom of another chain ({context()})"
                )
            w = math.prod(self.p.mu[t][full[v]] for v, t in out.free if v not in binding)
            weights[position] = weights.get(position, 0.0) + w
        total = sum(weights.values())
        if total <= 0:
            fail(f"{out.label}: {out.atom.text} has no grounding ({context()})")
        return {position: w / total for position, w in weights.items()}

    def dist(self, rule, i: int, binding: dict, sig: Signature, size: int, context):
        """``rule``'s distribution (size,) over chain i's atoms of ``sig`` given the binding of
        its body and links, or None if its guard does not hold."""
        key = (id(rule), i, *(binding[v] for v in rule.key))
        if key not in self.cache:
            groundings = list(self.solve(rule.atoms, rule.compares, binding))
            out = None
            if groundings:
                out = np.zeros(size)
                for full in groundings:
                    for o in rule.outcomes:
                        for position, q in self.select(o, i, full, sig, context).items():
                            out[position] += o.p * q / len(groundings)
            self.cache[key] = out
        return self.cache[key]

    def tables(self, i: int) -> tuple[np.ndarray, list]:
        """Chain i's ``own`` (n_i, n_i) and ``pairs[j]`` (n_i, n_j, n_i) (None for j = i)."""
        sig, states = self.p.state, self.states[i]
        n = len(states)
        bodies = [[_unify(r.body.args, row, {}) for row in states.tolist()] for r in self.p.rules]
        own = np.zeros((n, n))
        for x in range(n):
            here = self.show(sig, states[x])
            for r, rule in enumerate(self.p.rules):
                theta = bodies[r][x]
                if theta is not None and not rule.links:
                    d = self.dist(rule, i, theta, sig, n, lambda h=here: f"from {h}")
                    if d is not None:
                        own[x] = d
                        self.fired.add(rule.label)
                        break
            else:
                fail(
                    f"no abstract state fires for {here} alone: end abstract_states with a "
                    f"catch-all"
                )
        pairs = [None if j == i else self.pair(i, j, bodies) for j in range(self.k)]
        return own, pairs

    def pair(self, i: int, j: int, bodies: list) -> np.ndarray:
        sig, states, other = self.p.state, self.states[i], self.states[j]
        n = len(states)
        table = np.zeros((n, len(other), n))
        for x in range(n):
            here = self.show(sig, states[x])
            open_ = np.ones(len(other), bool)
            for r, rule in enumerate(self.p.rules):
                theta = bodies[r][x]
                if theta is None:
                    continue
                if not rule.links:
                    d = self.dist(rule, i, theta, sig, n, lambda h=here: f"from {h}")
                    if d is not None:
                        table[x, open_], open_[:] = d, False
                        self.fired.add(rule.label)
                        break
                    continue
                mask, first = _link(rule.links, theta, other)
                for y in np.flatnonzero(mask & open_):
                    binding = {**theta, **{v: int(other[y, k]) for v, k in first.items()}}
                    there = self.show(sig, other[y])
                    d = self.dist(
                        rule, i, binding, sig, n, lambda h=here, t=there: f"from {h} with {t}"
                    )
                    if d is not None:
                        table[x, y], open_[y] = d, False
                        self.fired.add(rule.label)
                if not open_.any():
                    break
            if open_.any():
                there = self.show(sig, other[np.flatnonzero(open_)[0]])
                fail(
                    f"no abstract state fires for {here} with {there}: end abstract_states "
                    f"with a catch-all"
                )
        return table

    def emissions(self, i: int) -> np.ndarray:
        """Chain i's ``P(y_i | x_i)``, shape (n_i, m_i)."""
        states, m = self.states[i], len(self.symbols[i])
        table = np.zeros((len(states), m))
        for x, row in enumerate(states.tolist()):
            here = self.show(self.p.state, row)
            for rule in self.p.observations:
                theta = _unify(rule.body.args, row, {})
                if theta is not None:
                    d = self.dist(rule, i, theta, self.p.symbol, m, lambda h=here: f"at {h}")
                    if d is not None:
                        table[x] = d
                        self.fired.add(rule.label)
                        break
            else:
                fail(f"no observation rule fires for {here}: end observations with a catch-all")
        return table

    def prior(self, i: int) -> np.ndarray:
        """Chain i's ``P(x_{i,0})``, shape (n_i,)."""
        sig, n = self.p.state, len(self.states[i])
        if self.p.prior is None:
            return np.full(n, 1 / n)
        out, total = np.zeros(n), 0.0
        for entry in self.p.prior:
            slot = entry.atom.args[sig.chain]
            if isinstance(slot, Var) or slot == i:
                binding = {slot.name: i} if isinstance(slot, Var) else {}
                context = lambda c=self.p.chains[i]: f"for chain {c}"  # noqa: E731
                for position, q in self.select(entry, i, binding, sig, context).items():
                    out[position] += entry.p * q
                total += entry.p
        if abs(total - 1) > TOLERANCE:
            fail(
                f"prior of chain {self.p.chains[i]!r}: its entries' p sum to {total:.12g}; "
                f"they must sum to 1"
            )
        return out

    def run(self) -> Grounded:
        p, k = self.p, self.k
        tables = [self.tables(i) for i in range(k)]
        emissions = tuple(self.emissions(i) for i in range(k))
        if p.full:
            for rule in (*p.rules, *p.observations):
                if rule.label not in self.fired:
                    fail(f"{rule.label} never fires: {self.why(rule)}")
        weights = np.eye(1)
        if k > 1:
            weights = np.full((k, k), p.eps / (k - 1))
            np.fill_diagonal(weights, 1 - p.eps)
        pairs = tuple(tuple(None if p.eps == 0 else t for t in pair) for _, pair in tables)
        model = CoupledHMM(
            priors=tuple(self.prior(i) for i in range(k)),
            weights=weights,
            own=tuple(own for own, _ in tables),
            pairs=pairs,
            emissions=emissions,
            observe=p.observe,
        )

        def constants(sig, rows):
            return tuple(
                tuple(p.domains[t][v] for v, t in zip(row, sig.types, strict=True))
                for row in rows.tolist()
            )

        return Grounded(
            model=model,
            chains=p.chains,
            states=tuple(constants(p.state, s) for s in self.states),
            symbols=tuple(constants(p.symbol, s) for s in self.symbols),
        )

    def why(self, rule) -> str:
        """Why ``rule`` never fired (only asked when it did not)."""
        found = [
            (i, theta)
            for i in range(self.k)
            for row in self.states[i].tolist()
            if (theta := _unify(rule.body.args, row, {})) is not None
        ]
        if not found:
            return "its body matches no chain state"
        if not rule.links:
            if all(next(self.solve(rule.atoms, rule.compares, t), None) is None for _, t in found):
                return "its guard holds in no chain state"
            return "earlier rules always fire first"
        for (i, theta), j in itertools.product(found, range(self.k)):
            mask, first = _link(rule.links, theta, self.states[j])
            for y in np.flatnonzero(mask) if j != i else ():
                binding = {**theta, **{v: int(self.states[j][y, c]) for v, c in first.items()}}
                if next(self.solve(rule.atoms, rule.compares, binding), None) is not None:
                    return "earlier rules always fire first"
        return "its guard holds for no pair of chain states"
