"""The bash aligner: adapt a remembered OS trajectory's literals to the current task, or decline.

Registered as ``"bash"`` in :data:`memcurator.curate.aligners.ALIGNERS`, so JitMem's extractive
``align`` operator (and every curator that reads through it: ``curator/align``, MemPilot's
``align`` strategy) runs it on OS tasks without the core importing this environment.

An OS task names its literals in the instruction: quoted names (users, groups, files, text),
absolute paths, and bare numbers (counts, modes). A fresh-literal variant of a task
(:func:`memcurator.envs.os.families.reinstantiate`) renames them consistently across the
instruction and the scripts; the aligner inverts that for an exemplar: it pairs the exemplar
task's literals with the current task's in order of appearance, kind by kind, and rewrites the
exemplar's scripts with the pairing, in one pass on shell-word boundaries. It rewrites **only
when the mapping is complete and consistent**; otherwise :attr:`Alignment.problem` says why and
the caller shows the exemplar with its own task (``closest``), never a guess labelled as the
current task's. It declines when

* the two instructions are different requests (word overlap of the literal-masked
  instructions below :data:`MIN_SAME_REQUEST`), or a word the exemplar's task has and the
  current task lacks appears in the exemplar's script (an unquoted name: ``user developer``);
* a kind of literal differs in count, one exemplar literal would become two values, or two
  exemplar literals would become one;
* a literal that changes does not occur in the scripts (the change cannot be expressed), a
  changed number occurs in the scripts more often than in the task (which occurrence is the
  task's is ambiguous), or a changed name occurs inside a longer word or a system path;
* a new value already occurs in the scripts with another meaning, or it needs shell quoting
  where the exemplar's occurrence is not quoted.

References
----------
JitMem, Sec. 3 ("Memory Curator": extract what worked and give specific guidance for the
current task); the SQL counterpart is :func:`memcurator.curate.extractive.align`, whose
fallback rule this follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memcurator.curate.extractive import Alignment, ParsedTrajectory, parse_raw
from memcurator.envs.os.families import mask
from memcurator.retrieve.bm25 import tokenize

MIN_SAME_REQUEST = 0.8
"""Least word overlap (Jaccard) of the two literal-masked instructions for which ``align``
rewrites an exemplar (the SQL aligner's threshold, :data:`memcurator.curate.extractive.
MIN_SAME_REQUEST`)."""

_LIT = re.compile(
    r"'(?P<sq>[^'\n]+)'|\"(?P<dq>[^\"\n]+)\"|(?P<path>(?<![\w.~])/[\w.\-/]+)|(?P<num>\b\d+\b)"
)
_PATHLIKE = re.compile(r"/[\w.\-/]+")
_SAFE = re.compile(r"[\w./+@%:,=-]+")
#: Parents whose components are the system's, never a task's name (``/var/log`` is no group).
_SYSTEM = re.compile(r"(?<![\w.-])/(?:bin|sbin|usr|etc|dev|proc|lib|sys|var|run|tmp)(?:/[\w.-]+)*")


@dataclass(frozen=True)
class Literal:
    """One literal of an instruction: ``kind`` is ``"name"`` (a quoted word), ``"text"`` (a
    quoted phrase), ``"path"`` or ``"number"``."""

    kind: str
    value: str


def task_literals(instruction: str) -> list[Literal]:
    """The literals of an OS instruction in order of appearance.

    Examples
    --------
    >>> [(x.kind, x.value) for x in task_literals(
    ...     "Add user 'al' to group 'dev', chmod /srv/x to 770 and write 'hi there'")]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('name', 'al'), ('name', 'dev'), ('path', '/srv/x'), ('number', '770'),
     ('text', 'hi there')]
    """
    out: list[Literal] = []
    for m in _LIT.finditer(instruction):
        quoted = m.group("sq") or m.group("dq")
        if quoted is not None:
            if _PATHLIKE.fullmatch(quoted):
                out.append(Literal("path", quoted.rstrip("/") or "/"))
            elif _SAFE.fullmatch(quoted) and not quoted.isdigit():
                out.append(Literal("name", quoted))
            elif quoted.isdigit():
                out.append(Literal("number", quoted))
            else:
                out.append(Literal("text", quoted))
        elif m.group("path"):
            p = m.group("path").rstrip("/.")
            if p:
                out.append(Literal("path", p))
        else:
            out.append(Literal("number", m.group("num")))
    return out


def same_request(past_task: str, task: str) -> float:
    """Jaccard overlap of the word sets of the two literal-masked instructions, in [0, 1].

    Examples
    --------
    >>> same_request("Create group 'a' and add user 'b'", "Create group 'x' and add user 'y'")
    1.0
    """
    a, b = set(mask(past_task).split()), set(mask(task).split())
    return len(a & b) / max(1, len(a | b))


def literal_pairing(past_task: str, task: str) -> tuple[dict[str, str], dict[str, str], str]:
    """``(map, kinds, problem)``: exemplar literal → current literal, each exemplar literal's
    kind, and why the pairing is not complete and consistent ("" when it is).

    Examples
    --------
    >>> literal_pairing("group 'a', user 'b', /srv/x", "group 'c', user 'd', /srv/q")[0]
    {'a': 'c', 'b': 'd', '/srv/x': '/srv/q'}
    >>> literal_pairing("users 'a' and 'b'", "user 'c'")[2]
    'quoted literals differ in count (exemplar 2, task 1)'
    >>> literal_pairing("users 'a' and 'b'", "users 'c' and 'c'")[2]
    "exemplar literals 'a' and 'b' would both become 'c'"
    """
    old, new = task_literals(past_task), task_literals(task)
    pairs: dict[str, str] = {}
    kinds: dict[str, str] = {}
    # a quoted word may become a quoted phrase ('hello' -> 'good bye'): one group
    for group, members in (("quoted", ("name", "text")), ("path", ("path",)),
                           ("number", ("number",))):  # fmt: skip
        a = [x for x in old if x.kind in members]
        b = [x.value for x in new if x.kind in members]
        if len(a) != len(b):
            return {}, {}, f"{group} literals differ in count (exemplar {len(a)}, task {len(b)})"
        for lit, y in zip(a, b, strict=True):
            x = lit.value
            if pairs.get(x, y) != y:
                return {}, {}, f"exemplar literal {x!r} would become both {pairs[x]!r} and {y!r}"
            pairs[x], kinds[x] = y, lit.kind
    back: dict[str, str] = {}
    for x, y in pairs.items():
        if y in back and back[y] != x:
            return {}, {}, f"exemplar literals {back[y]!r} and {x!r} would both become {y!r}"
        back[y] = x
    for x, y in pairs.items():  # a literal holding another (a path and its parent, a name)
        for z, w in pairs.items():
            if z in (x, w) or not re.search(_pattern(z, kinds[z]), x):
                continue
            if not re.search(_pattern(w, kinds[z]), y):
                return (
                    {},
                    {},
                    (
                        f"exemplar literal {x!r} holds {z!r}, which becomes {w!r}, but {x!r} "
                        f"becomes {y!r}"
                    ),
                )
    return pairs, kinds, ""


def _pattern(value: str, kind: str) -> str:
    """Where ``value`` stands as itself in a script (not inside a longer word or path); a name
    ending in ``_`` or ``-`` is a prefix (``data_`` in ``data_001``)."""
    v = re.escape(value)
    if kind == "path":
        return rf"(?<![\w.\-/]){v}(?=[/\s'\"`:;,)|&<>*]|\.(?![\w.])|$)"
    if kind == "number":
        return rf"(?<![\w.\-/]){v}(?![\w.])"
    tail = "" if value.endswith(("_", "-")) else r"(?![\w-])"
    return rf"(?<![\w-]){v}{tail}"


def _substitute(text: str, lmap: dict[str, str], kinds: dict[str, str]) -> str:
    """``text`` with every literal of ``lmap`` replaced in one pass, longest first."""
    if not lmap:
        return text
    order = sorted(lmap, key=len, reverse=True)
    rx = re.compile("|".join(f"(?P<g{i}>{_pattern(x, kinds[x])})" for i, x in enumerate(order)))

    def repl(m: re.Match[str]) -> str:
        i = int(next(k for k, v in m.groupdict().items() if v is not None)[1:])
        return lmap[order[i]]

    return rx.sub(repl, text)


def adapt_scripts(
    scripts: list[str], lmap: dict[str, str], kinds: dict[str, str], counts: dict[str, int]
) -> tuple[list[str], str]:
    """Rewrite ``scripts`` with ``lmap`` in one pass, or say why it cannot be done.

    Parameters
    ----------
    scripts : list of str
        The exemplar's bash scripts, one per round.
    lmap : dict of str to str
        Exemplar literal → current literal, every literal of the exemplar's task (an unchanged
        one maps to itself: it is matched, so a name inside it is not rewritten).
    kinds : dict of str to str
        Each literal's kind (:class:`Literal`).
    counts : dict of str to int
        How often each literal occurs in the exemplar's task (a changed number may occur in the
        scripts at most that often).

    Returns
    -------
    (list of str, str)
        The rewritten scripts and ``""``, or the scripts unchanged and the problem.

    Examples
    --------
    >>> adapt_scripts(["groupadd dev && usermod -aG dev ann && chmod 770 /srv/dev"],
    ...               {"dev": "ops", "ann": "bo", "/srv/dev": "/srv/x"},
    ...               {"dev": "name", "ann": "name", "/srv/dev": "path"}, {})
    (['groupadd ops && usermod -aG ops bo && chmod 770 /srv/x'], '')
    >>> adapt_scripts(["useradd ann; touch /home/ann_x"], {"ann": "bo"}, {"ann": "name"}, {})[1]
    "exemplar literal 'ann' also occurs inside a longer name"
    >>> adapt_scripts(["chmod 5 f; head -n 5 g"], {"5": "7"}, {"5": "number"}, {"5": 1})[1]
    "number '5' occurs 2 times in the exemplar's scripts, 1 in its task: ambiguous"
    >>> adapt_scripts(["mkdir /proj; chgrp proj /proj"], {"proj": "team", "/proj": "/proj"},
    ...               {"proj": "name", "/proj": "path"}, {})[0]
    ['mkdir /proj; chgrp team /proj']
    """
    changed = {x: y for x, y in lmap.items() if x != y}
    if not changed:
        return scripts, ""
    whole = "\n".join(scripts)
    for x, y in changed.items():
        kind = kinds[x]
        found = list(re.finditer(_pattern(x, kind), whole))
        if not found:
            return (
                scripts,
                f"task literal {y!r} has no counterpart ({x!r}) in the exemplar's scripts",
            )
        if kind == "number" and len(found) > counts.get(x, 1):
            return scripts, (
                f"number {x!r} occurs {len(found)} times in the exemplar's scripts, "
                f"{counts.get(x, 1)} in its task: ambiguous"
            )
        if kind in ("name", "text"):
            # glued to digits, ``_`` or ``-`` (``alice2``, ``alice_home``): a derived name
            # that may or may not have to follow; letters around it make another word
            glued = re.findall(rf"(?<![A-Za-z]){re.escape(x)}(?![A-Za-z])", whole)
            if len(glued) > len(found):
                return scripts, f"exemplar literal {x!r} also occurs inside a longer name"
            for sm in _SYSTEM.finditer(whole):
                if re.search(_pattern(x, kind), sm.group(0)) and not any(
                    kinds[p] == "path" and sm.group(0).startswith(p) for p in lmap
                ):
                    return scripts, f"exemplar literal {x!r} is part of system path {sm.group(0)!r}"
        if y not in lmap and re.search(_pattern(y, kind), whole):
            return scripts, f"new literal {y!r} already occurs in the exemplar's scripts"
        if not _SAFE.fullmatch(y):
            for m in found:
                before, after = whole[m.start() - 1 : m.start()], whole[m.end() : m.end() + 1]
                quote = before if before in ("'", '"') and after == before else ""
                if not quote or quote in y or (quote == '"' and re.search(r"[$`\\]", y)):
                    return scripts, f"new literal {y!r} needs shell quoting the exemplar lacks"
    return [_substitute(s, lmap, kinds) for s in scripts], ""


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][\w-]*", text))


class BashAligner:
    """The ``"bash"`` aligner (see the module doc); the exemplar is the whole trajectory."""

    name = "bash"
    whole_trajectory = True

    def parse(self, text: str) -> ParsedTrajectory | None:
        """A stored OS trajectory: multi-line scripts and outputs kept whole."""
        return parse_raw(text, multiline=True)

    def align(
        self, parsed: ParsedTrajectory, index: int, task: str, observation: str = ""
    ) -> Alignment:
        """Score and adapt one remembered trajectory to ``task`` (``observation`` is unused:
        an OS task shows nothing before the first round).

        Examples
        --------
        >>> p = BashAligner().parse("Task: Create group 'dev' and add user 'ann' to it\\n"
        ...     "Observation: \\nAction: groupadd dev\\nusermod -aG dev ann\\nOutcome: success")
        >>> a = BashAligner().align(p, 0, "Create group 'ops' and add user 'bo' to it")
        >>> a.problem, a.actions
        ('', ['groupadd ops\\nusermod -aG ops bo'])
        >>> BashAligner().align(p, 0, "Delete user 'bo' and its home").problem[:32]
        'the exemplar answers another req'
        """
        scripts = list(parsed.actions)
        lmap, kinds, problem = literal_pairing(parsed.task, task)
        overlap_req = same_request(parsed.task, task)
        if overlap_req < MIN_SAME_REQUEST:
            problem = (
                f"the exemplar answers another request (word overlap {overlap_req:.2f} "
                f"< {MIN_SAME_REQUEST})"
            )
        if not problem:
            then, now = set(mask(parsed.task).split()), set(mask(task).split())
            in_script = {w.lower() for w in _words("\n".join(scripts))}
            lost = sorted(w for w in then - now if w in in_script and w not in now)
            if lost:
                problem = f"exemplar word {lost[0]!r} is in its scripts but not in the task"
        changed = {x: y for x, y in lmap.items() if x != y}
        adapted = scripts
        if not problem:
            said = [x.value for x in task_literals(parsed.task)]
            counts = {v: said.count(v) for v in said}
            adapted, problem = adapt_scripts(scripts, lmap, kinds, counts)
        if problem:
            adapted = scripts
        words_now, words_then = set(tokenize(task)), set(tokenize(parsed.task))
        overlap = len(words_now & words_then) / max(1, len(words_now | words_then))
        n_lits = len(task_literals(task))
        lit_fit = len(changed) / n_lits if n_lits else 0.0
        score = 2.0 * overlap + overlap_req + lit_fit
        final = adapted[-1] if adapted else ""
        return Alignment(index, float(score), changed, {}, final, problem, list(adapted))


__all__ = [
    "MIN_SAME_REQUEST",
    "BashAligner",
    "Literal",
    "adapt_scripts",
    "literal_pairing",
    "same_request",
    "task_literals",
]
