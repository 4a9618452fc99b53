"""The offline model's reading of a prompt: its words, and how well a name or a line matches them.

    words("Which planets have the most moons?")   # ['which', 'planets', 'have', 'most', 'moons']
    keywords("Which planets have the most moons?")  # ['planets', 'moons']
    matches("moons", "moon")                        # True: a plural is its singular

Everything is plain string work, in a fixed order, so the same prompt reads the same way every time.
"""

from __future__ import annotations

import re

__all__ = ["words", "keywords", "matches", "overlap", "name_words", "proper_nouns", "quoted", "numbers",
           "file_names", "first_line"]

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*|\d+(?:\.\d+)?")
_STOP = frozenset("""
a an the and or but if then so of in on at to for from by with about into over under as is are was were be been
being do does did done have has had having what which who whom whose when where why how this that these those it
its it's there here their they them i me my we our you your he she his her can could would should will shall may
might must not no any some all each every much many more most less least very just only also than too up down out
please tell show give find me list get let lets what's which's one two please kindly use using want need know see
""".split())
# Words that ask for a kind of work rather than name a thing: no evidence that a file or row is meant.
_GENERIC = frozenset("""
file files folder folders directory data dataset read look contents content see inside say says said answer question
thing things something anything stuff info information
""".split())


def words(text: str) -> list[str]:
    """The prompt's words, lower case, in order."""
    return [w.lower().strip("'") for w in _WORD.findall(text)]


def _singular(word: str) -> str:
    for ending, replacement in (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"), ("xes", "x")):
        if word.endswith(ending) and len(word) > len(ending) + 2:
            return word[: -len(ending)] + replacement
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def keywords(text: str) -> list[str]:
    """The words that name things: no stop words, no words for the kind of work, each once."""
    seen: list[str] = []
    for word in words(text):
        if len(word) > 2 and word not in _STOP and word not in _GENERIC and word not in seen:
            seen.append(word)
    return seen


def matches(word: str, name: str) -> bool:
    """``word`` (from a prompt) names ``name`` (a column, file stem or tool word), plurals included."""
    word, name = word.lower(), name.lower()
    return word == name or _singular(word) == _singular(name)


def name_words(name: str) -> list[str]:
    """The words of an identifier or file name: ``launch_year`` -> launch, year; ``getWeather`` -> get, weather."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def overlap(prompt_words: list[str], text: str) -> int:
    """How many of ``prompt_words`` ``text`` names (each counted once)."""
    names = name_words(text)
    return sum(1 for w in prompt_words if any(matches(w, n) for n in names))


def proper_nouns(text: str) -> list[str]:
    """Capitalised words that do not start a sentence (``Saturn``, ``NASA``), in order, each once:
    the values a prompt names."""
    found: list[str] = []
    for sentence in re.split(r"(?<=[.?!])\s+|\n+", text):
        for i, match in enumerate(re.finditer(r"[A-Za-z][A-Za-z0-9'-]*", sentence)):
            word = match.group().strip("'")
            capital = word[0].isupper() and (i > 0 or word.isupper() and len(word) > 1)
            if capital and word.lower() not in _STOP and word not in found:
                found.append(word)
    return found


def quoted(text: str) -> list[str]:
    """Text the prompt puts in quotes or backticks."""
    return [a or b or c for a, b, c in re.findall(r'"([^"\n]+)"|`([^`\n]+)`|(?<![A-Za-z])\'([^\'\n]+)\'', text)]


def numbers(text: str) -> list[str]:
    """The numbers a prompt writes, as written."""
    return re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", text)


def file_names(text: str) -> list[str]:
    """What looks like a file name or path in the prompt (``moons.csv``, ``sales/2024.parquet``)."""
    return [m.rstrip(".,;:!?)") for m in re.findall(r"[\w./*-]*\w\.[A-Za-z][A-Za-z0-9]{0,7}\b", text)
            if not re.fullmatch(r"[\d.]+|[a-z]\.[a-z]", m.lower())]  # not 3.5, not e.g or i.e


def first_line(text: str, limit: int = 200) -> str:
    """The first non-blank line of ``text``, at most ``limit`` characters."""
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
