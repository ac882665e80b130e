"""Transformation joins: learn string programs that make two columns equi-joinable.

- :mod:`.units`: the unit language (Literal, Substr, Split, SplitSubstr, TwoCharSplitSubstr,
  Chars, Auto-Join's Substring family, and Number and Date from :mod:`.formats`), programs, their
  text form and the simplicity tie-break order;
- :mod:`.reformat`: learning Number, Date and Chars programs from rows paired by value;
- :mod:`.matching`: CST's inverse-row-frequency row matcher;
- :mod:`.cst`: CST (Dargahi Nobari & Rafiei, ICDE 2022): skeletons, candidate units, coverage
  with the failing-unit cache, greedy cover;
- :mod:`.autojoin`: Auto-Join (Zhu et al., PVLDB 2017), the baseline;
- :mod:`.join`: ``learn_and_join`` and ``apply_transformation`` for the query layer.
"""

from lakejoin.transform.join import DEFAULT_METHOD, LEARN, METHODS, apply_transformation, learn_and_join
from lakejoin.transform.units import parse_program, program_text

__all__ = [
    "DEFAULT_METHOD",
    "LEARN",
    "METHODS",
    "apply_transformation",
    "learn_and_join",
    "parse_program",
    "program_text",
]
