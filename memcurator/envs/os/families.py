"""Recurring OS task families and their re-instantiation with fresh literals (issue 23, item 2).

* :func:`families` clusters the instructions with their literals masked (quoted strings,
  paths, numbers): TF-IDF vectors of the masked words, cosine distance, average linkage cut at
  0.6, as the data's README measured them (294 tasks in 88 clusters there).
* :func:`reinstantiate` renames a task's named literals (quoted user, group and file names and
  absolute paths of its instruction) consistently across instruction, init, check and
  reference. :func:`fresh_variant` keeps a variant only if it passes the generator's own
  validity rule in the sandbox: the check fails after init and passes after the reference.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from memcurator.envs.os.data import OSTask

if TYPE_CHECKING:
    from memcurator.envs.os.validity_cache import VerdictCache

_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")
_PATH = re.compile(r"(?<![\w.~])/[\w.\-/]+")
_NUM = re.compile(r"\b\d+\b")
_WORD = re.compile(r"[a-z]+")

#: Names never renamed: system accounts and groups, shells, commands and words the scripts use.
_KEEP = frozenset(
    "root sudo wheel admin adm users nogroup nobody staff daemon bin sys bash sh zsh dash "
    "ERROR WARNING INFO DEBUG error warning info test exit true false yes no".split()
)
#: Paths that belong to the system, never renamed (a variant of /bin/bash is no shell).
_SYSTEM_PATHS = ("/bin", "/sbin", "/usr", "/etc", "/dev", "/proc", "/lib", "/sys", "/tmp")
#: Standard directories kept as themselves (what lies under them is still renamed): renaming
#: ``/var/log`` to ``/var/vault`` makes a log task no log task, and the ``log-dir`` drift could
#: no longer apply to its variants.
_SYSTEM_DIRS = frozenset(
    "/var /var/log /var/lib /var/tmp /var/spool /var/mail /var/cache /var/run /var/www /home "
    "/opt /srv /root /mnt /media /run /boot".split()
)
_NAMES = (
    "opsteam qagroup builders auditors webdev dataeng platform infra sre secops mlteam "
    "frontend backend analysts devops2 release"
).split()
_USERS = "kara liam mona nico olga pavel quinn rosa sven tara ugo vera wren xena yuri zane".split()
_DIRS = "workspace shared collab projects archive staging reports assets vault depot".split()


def mask(instruction: str) -> str:
    """The instruction with literals replaced by ``Q`` (quoted), ``P`` (path) and ``N``.

    Examples
    --------
    >>> mask("Create group 'devteam' and directory /srv/x with mode 770")
    'create group Q and directory P with mode N'
    """
    t = _QUOTED.sub(" Q ", instruction)
    t = _PATH.sub(" P ", t)
    t = _NUM.sub(" N ", t)
    return " ".join(w if w in ("Q", "P", "N") else w.lower() for w in re.findall(r"[A-Za-z]+", t))


def families(tasks: list[OSTask], cut: float = 0.6) -> list[list[int]]:
    """Clusters of task indices (size ≥ 2, largest first) of masked-instruction TF-IDF vectors.

    Parameters
    ----------
    tasks : list of OSTask
    cut : float, default 0.6
        Average-linkage cosine distance at which clusters stop merging.

    Returns
    -------
    list of list of int
    """
    words = [mask(t.instruction).split() for t in tasks]
    # unigrams and bigrams: "add users Q to group" is not "add Q to file"
    docs = [w + [f"{a}_{b}" for a, b in zip(w, w[1:], strict=False)] for w in words]
    vocab = sorted({w for d in docs for w in d})
    col = {w: i for i, w in enumerate(vocab)}
    tf = np.zeros((len(docs), len(vocab)))
    for r, d in enumerate(docs):
        for w, c in Counter(d).items():
            tf[r, col[w]] = c
    df = (tf > 0).sum(axis=0)
    x = tf * (np.log((1 + len(docs)) / (1 + df)) + 1)
    x /= np.linalg.norm(x, axis=1, keepdims=True).clip(min=1e-12)
    dist = 1.0 - x @ x.T
    clusters: dict[int, list[int]] = {i: [i] for i in range(len(docs))}
    link: dict[tuple[int, int], float] = {
        (i, j): float(dist[i, j]) for i in clusters for j in clusters if i < j
    }
    while link:
        (a, b), best = min(link.items(), key=lambda kv: kv[1])
        if best > cut:
            break
        na, nb = len(clusters[a]), len(clusters[b])
        clusters[a] += clusters.pop(b)
        for k in list(clusters):
            if k == a:
                continue
            dak = link.pop((min(a, k), max(a, k)))
            dbk = link.pop((min(b, k), max(b, k)))
            link[(min(a, k), max(a, k))] = (na * dak + nb * dbk) / (na + nb)
        link.pop((a, b), None)
    out = [sorted(tasks[i].index for i in c) for c in clusters.values() if len(c) > 1]
    return sorted(out, key=lambda c: (-len(c), c))


def named_literals(task: OSTask) -> list[str]:
    """The literals of ``task`` a variant renames: quoted names and absolute paths."""
    found: list[str] = []
    for m in _QUOTED.finditer(task.instruction):
        lit = m.group(1) or m.group(2)
        if re.fullmatch(r"[A-Za-z_][\w-]{1,30}", lit) and lit not in _KEEP:
            found.append(lit)
        elif re.fullmatch(r"/[\w.\-/]+", lit) and not lit.startswith(_SYSTEM_PATHS):
            found.append(lit.rstrip("/"))
    for p in _PATH.findall(task.instruction):
        p = p.rstrip("/.")
        if p.count("/") >= 1 and not p.startswith(_SYSTEM_PATHS):
            found.append(p)
    seen: list[str] = []
    for lit in found:
        if lit not in seen and lit not in _SYSTEM_DIRS:
            seen.append(lit)
    return seen


def _sub(text: str, old: str, new: str) -> str:
    """Rename ``old`` where it stands as itself: a path up to a separator or the end of a
    sentence (``/reports/x.log,`` and ``/backup.`` included), a name as a whole word or a path
    component (``/home/alice``); a name ending in ``_`` or ``-`` is a prefix (``data_001``)."""
    if old.startswith("/"):
        return re.sub(
            rf"(?<![\w.~\-]){re.escape(old)}(?=[/\s'\":;,)|&<>]|\.(?![\w.])|$)", new, text
        )
    tail = "" if old.endswith(("_", "-")) else r"(?![\w\-])"
    return re.sub(rf"(?<![\w\-.]){re.escape(old)}{tail}", new, text)


_MODE = re.compile(r"\b(?:permissions?|mode|chmod)\b[^.\n]{0,25}?\b([0-7]{3,4})\b", re.I)
#: What the last (others) digit of a renamed permission mode may become.
_OTHER_DIGITS = "045"


def _word_in(lit: str, text: str) -> bool:
    return re.search(rf"(?<![\w\-.]){re.escape(lit)}(?![\w\-])", text) is not None


def mode_literals(task: OSTask) -> list[str]:
    """The permission modes of ``task``'s instruction a variant may change: an octal number
    after *permission(s)*, *mode* or *chmod* that occurs as a word of its own in both the
    check and the reference and never glued into a longer number in any script (``770`` in
    ``2770``), so that changing it everywhere keeps the instruction and the scripts agreeing.

    Examples
    --------
    >>> t = OSTask(0, "Make /srv/x with permissions 750.", "", "stat -c %a /srv/x | grep -qx 750",
    ...            "mkdir /srv/x && chmod 750 /srv/x")
    >>> mode_literals(t)
    ['750']
    >>> mode_literals(OSTask(0, "Set mode 770 and setgid.", "", "test $(stat -c %a d) = 2770",
    ...                      "chmod 2770 d"))
    []
    """
    scripts = "\n".join((task.init, task.check, task.reference))
    out: list[str] = []
    for m in _MODE.findall(task.instruction):
        if m in out or re.search(rf"\d{m}|{m}\d", scripts):
            continue
        if _word_in(m, task.check) and _word_in(m, task.reference):
            out.append(m)
    return out


def reinstantiate(task: OSTask, rng: np.random.Generator, *, modes: bool = True) -> OSTask | None:
    """``task`` with every named literal renamed consistently; None when it names none.

    Names are drawn from pools of user, group and directory words that no task of the data
    uses as a literal; a path keeps its parent and gets a fresh last part. A permission mode
    (:func:`mode_literals`) gets another *others* digit (0, 4 or 5; ``750`` may become
    ``754``): the owner's and group's rights, which the tasks are about, stay; whether the
    changed mode still satisfies the task is the validity rule's to decide. ``modes=False``
    renames names and paths only.
    """
    lits = named_literals(task)
    mode_lits = mode_literals(task) if modes else []
    if not lits and not mode_lits:
        return None
    text = "\n".join((task.instruction, task.init, task.check, task.reference))
    mapping: dict[str, str] = {}
    users = [u for u in _USERS if u not in text]
    groups = [g for g in _NAMES if g not in text]
    dirs = [d for d in _DIRS if d not in text]
    rng.shuffle(users)
    rng.shuffle(groups)
    rng.shuffle(dirs)
    for lit in lits:
        if lit.startswith("/"):
            parent, _, last = lit.rpartition("/")
            parent = mapping.get(parent, parent)
            suffix = last[last.index(".") :] if "." in last else ""
            if not dirs:
                return None
            mapping[lit] = f"{parent}/{dirs.pop()}{suffix}"
        else:
            is_user = bool(re.search(rf"\buser\w*\s+'{re.escape(lit)}'", task.instruction)) or (
                re.search(rf"useradd[^&;]*\b{re.escape(lit)}\b", task.init + task.reference)
                is not None
            )
            pool = users if is_user else groups
            if not pool:
                return None
            mapping[lit] = pool.pop()
    for m in mode_lits:
        digits = [d for d in _OTHER_DIGITS if d != m[-1]]
        new = m[:-1] + digits[int(rng.integers(len(digits)))]
        if not _word_in(new, text) and new not in mapping.values():
            mapping[m] = new
    if not mapping:
        return None
    # longest first, so /a/b is renamed before /a
    order = sorted(mapping, key=len, reverse=True)

    def apply(s: str) -> str:
        for old in order:
            s = _sub(s, old, mapping[old])
        return s

    return OSTask(
        task.index,
        apply(task.instruction),
        apply(task.init),
        apply(task.check),
        apply(task.reference),
        task.skills,
    )


def fresh_variant(
    task: OSTask,
    rng: np.random.Generator,
    *,
    tries: int = 3,
    config: object = None,
    cache: VerdictCache | None = None,
    modes: bool = True,
) -> OSTask | None:
    """A re-instantiated ``task`` that passes the validity rule in the sandbox, or None.

    Parameters
    ----------
    cache : VerdictCache, optional
        Where verdicts are looked up and stored
        (:class:`~memcurator.envs.os.validity_cache.VerdictCache`); by default every candidate
        is run in the sandbox.
    modes : bool, default True
        Change permission modes too (:func:`reinstantiate`).

    Raises
    ------
    SandboxUnavailable
        No sandbox on this host (and the verdict is not cached).
    """
    from memcurator.envs.os.validity_cache import VerdictCache

    verdicts = cache if cache is not None else VerdictCache(None)
    for _ in range(tries):
        v = reinstantiate(task, rng, modes=modes)
        if v is None:
            return None
        if verdicts.valid(v, config):
            return v
    return None


__all__ = ["families", "fresh_variant", "mask", "mode_literals", "named_literals", "reinstantiate"]
