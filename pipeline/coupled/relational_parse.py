"""Reading the YAML spec of a weakly coupled relational HMM into a checked ``Program``.

The format and the semantics are in ``pipeline.coupled.relational``. Here every constant
becomes its index in its type's domain (-1 for a constant of the spec that a reduced domain
leaves out: it then matches nothing), every variable gets the type of the argument it fills,
and the background relations become lists of index tuples. Every problem is a one-line
``ValueError`` that names the rule.

This module is longer than most (about 450 lines) because it is one parser read top to
bottom in the order of the spec's sections (types, relations, rules, observations), each
section's checks beside its reading, so that the message a bad spec gets sits where the
field is read.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import NoReturn

import numpy as np

from pipeline.coupled.model import OBSERVE

TOLERANCE = 1e-9
"""How far a rule's probabilities may sum from 1."""

ENDS = ("none", "clamp", "wrap")
"""What a ``counter`` relation does past either end: no tuple, stay at the end, wrap around."""

KEYS = {
    "spec": {"types", "chain", "state", "symbol", "background", "mu", "prior", "eps", "observe"}
    | {"abstract_states", "observations"},
    "abstract state": {"name", "body", "guard", "transitions"},
    "observation rule": {"name", "body", "guard", "emissions"},
    "transition": {"p", "head", "where"},
    "emission": {"p", "emit", "where"},
    "prior entry": {"p", "state", "where"},
}
"""The keys each part of the spec may have."""

RULES = {
    "abstract state": ("abstract_states", "transition", "head"),
    "observation rule": ("observations", "emission", "emit"),
}
"""Each kind of rule's section of the spec, its outcomes and the key of an outcome's atom."""

_VAR = re.compile(r"[A-Z_][A-Za-z0-9_]*")
_CONST = re.compile(r"[^\sA-Z_(),=!][^\s(),=!]*")
_ATOM = re.compile(r"([a-z][A-Za-z0-9_]*)\s*\((.*)\)")
_COMPARE = re.compile(r"(\S+?)\s*(!=|==)\s*(\S+)")
_FLOW = "; inside [...] or {...} YAML splits at commas: quote it or use a block list"


@dataclass(frozen=True)
class Var:
    """A variable (capitalised word; ``_`` is a fresh one at each occurrence)."""

    name: str


@dataclass(frozen=True)
class Atom:
    """``pred(args)``, each argument a ``Var`` or a constant's index; ``text`` as written."""

    pred: str
    args: tuple
    text: str


@dataclass(frozen=True)
class Compare:
    """``left == right`` (``equal``) or ``left != right``, sides ``Var`` or constant index."""

    left: object
    equal: bool
    right: object
    text: str


@dataclass(frozen=True)
class Outcome:
    """``p :: body -> atom``: ``atom`` grounded by each solution of ``where`` and ``compares``
    over the variables ``free`` ((name, type) pairs the rule leaves unbound), each solution
    weighted by the product of ``mu`` over ``free``."""

    label: str
    p: float
    atom: Atom
    where: tuple
    compares: tuple
    free: tuple


@dataclass(frozen=True)
class Rule:
    """An abstract state or observation rule: ``body``; a guard split into ``links`` (atoms of
    the state predicate, read on the selected other chain), background ``atoms`` and
    ``compares``; ``outcomes`` (its transitions or emissions); ``key``, the variables the
    body and links bind (what its distribution depends on)."""

    label: str
    body: Atom
    links: tuple
    atoms: tuple
    compares: tuple
    outcomes: tuple
    key: tuple


@dataclass(frozen=True)
class Signature:
    """A predicate's argument types; ``chain``: the argument holding the chain, or None."""

    pred: str
    types: tuple
    chain: int | None


@dataclass(frozen=True)
class Program:
    """A checked spec on its (possibly reduced) domains. ``domains[t]``: type t's constants;
    ``relations[r]``: background relation r as index tuples; ``mu[t]``: selection weights,
    shape (len(domains[t]),); ``prior``: Outcomes, or None for uniform; ``full``: the domains
    are the spec's own."""

    chains: tuple
    domains: dict
    state: Signature
    symbol: Signature
    relations: dict
    mu: dict
    prior: tuple | None
    rules: tuple
    observations: tuple
    eps: float
    observe: str
    full: bool


def fail(message: str) -> NoReturn:
    """Raise the one-line ``ValueError``."""
    raise ValueError(" ".join(str(message).split()))


def _keys(item, kind: str, label: str) -> Mapping:
    if not isinstance(item, Mapping):
        fail(f"{label}: a {kind} must be a mapping, got {item!r}")
    unknown = sorted(set(item) - KEYS[kind])
    if unknown:
        fail(f"{label}: unknown key {unknown[0]!r}; a {kind} has {', '.join(sorted(KEYS[kind]))}")
    return item


def _probability(value, label: str) -> float:
    try:
        p = float(Fraction(value)) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        p = math.nan
    if isinstance(value, bool) or not (math.isfinite(p) and p >= 0):
        fail(f"{label}: p must be a number >= 0 (or a fraction like '1/3'), got {value!r}")
    return p


def _conjuncts(value, label: str) -> list[str]:
    """A guard or where clause (one string, split at top-level commas, or a list) as texts."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if not isinstance(item, str):
            fail(f"{label}: cannot read {item!r} as a literal")
        depth, start = 0, 0
        for k, char in enumerate(item):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if char == "," and depth == 0:
                out.append(item[start:k].strip())
                start = k + 1
        out.append(item[start:].strip())
    return [text for text in out if text]


class _Reader:
    """The spec's types, domains and predicates, and readers of its atoms and rules."""

    # the chain's state and symbol predicates, set by ``compile_spec`` once it has read them
    state: Signature
    symbol: Signature

    def __init__(self, spec: Mapping, domain: Mapping | None):
        types = spec.get("types")
        if not isinstance(types, Mapping) or not types:
            fail("spec: 'types' must map each type to its list of constants")
        self.known, self.domains = {}, {}
        for name, values in types.items():
            if not isinstance(values, list) or not values:
                fail(f"types: type {name!r} must be a non-empty list of constants")
            self.known[name] = [str(v) for v in values]
            if len(set(self.known[name])) < len(values):
                fail(f"types: type {name!r} lists a constant twice")
            self.domains[name] = list(values)
        for name, values in (domain or {}).items():
            if name not in self.known:
                fail(f"domain: unknown type {name!r}; types: {', '.join(self.known)}")
            keep = {str(v) for v in values}
            bad = sorted(keep - set(self.known[name]))
            if bad or not keep:
                fail(f"domain: type {name!r} needs constants of the spec, got {list(values)!r}")
            self.domains[name] = [v for v in types[name] if str(v) in keep]
        self.index = {t: {str(v): k for k, v in enumerate(d)} for t, d in self.domains.items()}
        self.signatures: dict[str, Signature] = {}
        self.fresh = itertools.count()

    def signature(self, key: str, text, chain: object) -> Signature:
        match = _ATOM.fullmatch(text.strip()) if isinstance(text, str) else None
        if not match:
            fail(f"{key}: write it as pred(type, ...), got {text!r}")
        pred, inner = match.groups()
        types = tuple(word.strip() for word in inner.split(","))
        for t in types:
            if t not in self.known:
                fail(f"{key}: unknown type {t!r} in {text}; types: {', '.join(self.known)}")
        if pred in self.signatures:
            fail(f"{key}: predicate {pred!r} is declared twice")
        slots = [k for k, t in enumerate(types) if t == chain]
        if len(slots) > 1 or (key == "state" and not slots):
            fail(f"{key}: {text} must have exactly one argument of the chain type {chain!r}")
        self.signatures[pred] = Signature(pred, types, slots[0] if slots else None)
        return self.signatures[pred]

    def constant(self, word: str, type_: str, label: str) -> int:
        if word not in self.known[type_]:
            fail(f"{label}: unknown constant {word!r} of type {type_!r}")
        return self.index[type_].get(word, -1)

    def atom(self, text, label: str, types: dict, allowed: tuple, where: str) -> Atom:
        match = _ATOM.fullmatch(text.strip()) if isinstance(text, str) else None
        if not match:
            fail(f"{label}: cannot read {text!r} as an atom pred(arg, ...){_FLOW}")
        pred, inner = match.groups()
        if pred not in allowed:
            fail(f"{label}: unknown predicate {pred!r} in {where}; allowed: {', '.join(allowed)}")
        sig = self.signatures[pred].types
        words = [word.strip() for word in inner.split(",")]
        if len(words) != len(sig):
            fail(f"{label}: {text} has {len(words)} arguments; {pred} takes {len(sig)}")
        args: list[Var | int] = []
        for word, type_ in zip(words, sig, strict=True):
            if word == "_":
                word = f"_{next(self.fresh)}"
                types[word] = type_
            if _VAR.fullmatch(word):
                if types.setdefault(word, type_) != type_:
                    fail(f"{label}: variable {word} has types {types[word]} and {type_} in {text}")
                args.append(Var(word))
            elif _CONST.fullmatch(word):
                args.append(self.constant(word, type_, label))
            else:
                fail(f"{label}: cannot read argument {word!r} of {text}{_FLOW}")
        return Atom(pred, tuple(args), text.strip())

    def compare(self, text: str, label: str, types: dict) -> Compare:
        match = _COMPARE.fullmatch(text)
        if not match:
            fail(f"{label}: cannot read {text!r} as X != Y or X == Y{_FLOW}")
        left, op, right = match.groups()
        words = (left, right)
        typed = [types.get(w) for w in words]
        for word in words:
            if _VAR.fullmatch(word) and word not in types:
                fail(f"{label}: unknown variable {word} in {text}: it is in no atom of the rule")
        if typed[0] is None and typed[1] is None:
            fail(f"{label}: {text} compares two constants")
        if None not in typed and typed[0] != typed[1]:
            fail(f"{label}: {text} compares a {typed[0]} with a {typed[1]}")
        type_ = typed[0] or typed[1]
        assert type_ is not None, "two constants failed above"
        sides = [
            Var(w) if t else self.constant(w, type_, label)
            for w, t in zip(words, typed, strict=True)
        ]
        return Compare(sides[0], op == "==", sides[1], text)

    def literals(self, value, label, types, allowed, where) -> tuple[list, list]:
        texts = _conjuncts(value, label)
        atoms = [self.atom(t, label, types, allowed, where) for t in texts if "=" not in t]
        return atoms, [self.compare(t, label, types) for t in texts if "=" in t]

    def outcome(self, item, kind, label, types, bound, allowed, head_key) -> Outcome:
        _keys(item, kind, label)
        if head_key not in item:
            fail(f"{label}: a {kind} needs {head_key!r}")
        types = dict(types)
        head = self.atom(item[head_key], label, types, allowed, head_key)
        background = tuple(self.relations)
        where, compares = self.literals(item.get("where"), label, types, background, "where")
        free = tuple((v, types[v]) for v in _variables([head, *where]) if v not in bound)
        return Outcome(
            label, _probability(item.get("p"), label), head, tuple(where), tuple(compares), free
        )

    def rule(self, item, kind: str, n: int) -> Rule:
        section, outcome, head = RULES[kind]
        name = item.get("name") if isinstance(item, Mapping) else None
        label = f"{kind} {name!r}" if name is not None else f"{section}[{n}]"
        target = self.state.pred if kind == "abstract state" else self.symbol.pred
        _keys(item, kind, label)
        types: dict = {}
        state = self.state.pred
        body = self.atom(item.get("body"), label, types, (state,), "body")
        allowed = (state, *self.relations)
        atoms, compares = self.literals(item.get("guard"), label, types, allowed, "guard")
        links = tuple(a for a in atoms if a.pred == state)
        if links and kind == "observation rule":
            fail(f"{label}: an observation rule sees only its own chain: no {state} in its guard")
        if len({a.args[self.state.chain] for a in links}) > 1:
            fail(f"{label}: its guard reads more than one other chain; it may read only one")
        items = item.get(outcome + "s")
        if not isinstance(items, list) or not items:
            fail(f"{label}: it needs a non-empty list of {outcome}s")
        bound = set(types)
        outcomes = tuple(
            self.outcome(x, outcome, f"{label}, {outcome} {n}", types, bound, (target,), head)
            for n, x in enumerate(items, 1)
        )
        total = sum(o.p for o in outcomes)
        if abs(total - 1) > TOLERANCE:
            fail(f"{label}: its {outcome} probabilities sum to {total:.12g}; they must sum to 1")
        key = tuple(_variables([body, *links]))
        rest = tuple(a for a in atoms if a.pred != state)
        return Rule(label, body, links, rest, tuple(compares), outcomes, key)

    def background(self, spec: Mapping) -> None:
        """Declare and generate the background relations (``self.relations``)."""
        self.relations: dict[str, list] = {}
        for name, item in (spec.get("background") or {}).items():
            label = f"background {name!r}"
            if not isinstance(item, Mapping) or ("counter" in item) == ("tuples" in item):
                fail(f"{label}: give either counter: [types] (with by, ends) or types + tuples")
            if "counter" in item:
                digits = item["counter"]
                if not isinstance(digits, list) or not digits:
                    fail(f"{label}: counter must list its digit types, least significant first")
                self.signature(label, f"{name}({', '.join(digits * 2)})", "")
                self.relations[name] = self._counter(digits, item, label)
            else:
                self.signature(label, f"{name}({', '.join(item.get('types', []))})", "")
                sig = self.signatures[name].types
                rows = set()
                for row in item["tuples"] if isinstance(item["tuples"], list) else [None]:
                    if not isinstance(row, list) or len(row) != len(sig):
                        fail(f"{label}: {row!r} is not a list of {len(sig)} constants")
                    index = [self.constant(str(v), t, label) for v, t in zip(row, sig, strict=True)]
                    if -1 not in index:
                        rows.add(tuple(index))
                self.relations[name] = sorted(rows)

    def _counter(self, digits: list, item: Mapping, label: str) -> list:
        """Tuples ``(a, b)`` of digits (least significant first) with ``b = a + by``."""
        ends = item.get("ends", "none")
        by = item.get("by", 1)
        steps = by if isinstance(by, list) else [by]
        if ends not in ENDS or not all(isinstance(s, int) for s in steps):
            fail(f"{label}: by must be integers and ends one of {', '.join(ENDS)}")
        sizes = [len(self.domains[t]) for t in digits]
        count = math.prod(sizes)
        strides = np.cumprod([1, *sizes[:-1]])

        def split(value):
            return tuple(int(value // s % n) for s, n in zip(strides, sizes, strict=True))

        rows = set()
        for a, step in itertools.product(range(count), steps):
            b = a + step
            if ends == "clamp":
                b = min(max(b, 0), count - 1)
            elif ends == "wrap":
                b %= count
            if 0 <= b < count:
                rows.add(split(a) + split(b))
        return sorted(rows)

    def mu(self, spec: Mapping) -> dict:
        mu = {t: np.ones(len(d)) for t, d in self.domains.items()}
        for type_, weights in (spec.get("mu") or {}).items():
            label = f"mu of type {type_!r}"
            if type_ not in self.known or not isinstance(weights, Mapping):
                fail(f"{label}: mu maps a type of the spec to weights per constant")
            mu[type_] = np.zeros(len(self.domains[type_]))
            for word, weight in weights.items():
                k = self.constant(str(word), type_, label)
                if k >= 0:
                    mu[type_][k] = _probability(weight, label)
        return mu


def _variables(atoms) -> list[str]:
    """The variables of ``atoms`` in order of first occurrence."""
    out = {a.name: None for atom in atoms for a in atom.args if isinstance(a, Var)}
    return list(out)


def compile_spec(spec: Mapping, *, eps=None, domain: Mapping | None = None) -> Program:
    """Check ``spec`` and read it into a ``Program`` on ``domain`` (types it names
    restricted to the constants it lists, in the spec's order)."""
    _keys(spec, "spec", "spec")
    reader = _Reader(spec, domain)
    chain = spec.get("chain")
    if chain not in reader.known:
        fail(f"chain: must name a type (one chain per constant), got {chain!r}")
    reader.background(spec)
    reader.state = reader.signature("state", spec.get("state"), chain)
    reader.symbol = reader.signature("symbol", spec.get("symbol"), chain)
    rules, observations = (
        tuple(reader.rule(x, kind, n) for n, x in enumerate(spec.get(RULES[kind][0]) or []))
        for kind in RULES
    )
    if not rules or not observations:
        fail("spec: it needs abstract_states and observations (non-empty lists)")
    for rule in (*rules, *observations):
        if [r.label for r in (*rules, *observations)].count(rule.label) > 1:
            fail(f"{rule.label}: two rules have this name")
    prior, state = None, reader.state
    if spec.get("prior") is not None:
        entries = spec["prior"]
        if not isinstance(entries, list) or not entries:
            fail("prior: give a list of {p, state, where} entries (or leave it out: uniform)")
        prior = tuple(
            reader.outcome(x, "prior entry", f"prior[{n}]", {}, set(), (state.pred,), "state")
            for n, x in enumerate(entries)
        )
    eps = spec.get("eps") if eps is None else eps
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps <= 1:
        fail(f"eps must be a number in [0, 1] (in the spec or given to ground), got {eps!r}")
    observe = spec.get("observe", "chain")
    if observe not in OBSERVE:
        fail(f"observe={observe!r} is not allowed; allowed: {', '.join(OBSERVE)}")
    return Program(
        chains=tuple(reader.domains[chain]),
        domains=reader.domains,
        state=reader.state,
        symbol=reader.symbol,
        relations=reader.relations,
        mu=reader.mu(spec),
        prior=prior,
        rules=rules,
        observations=observations,
        eps=float(eps),
        observe=observe,
        full=not domain,
    )
