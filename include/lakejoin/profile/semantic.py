"""Semantic-type hints: what a column's values denote, where the pattern is clear.

Like ``lakejoin.profile.types``, a hint is decided from per-value match counts (patterns over
the normalized value, or membership in a code list), so Spark and the Python oracle share the
decision. A hint needs ``MIN_SHARE`` of the non-null values to match (real columns carry some
junk) and, where values alone are ambiguous, the column name or the numeric range:

- ``email``, ``url``, ``phone`` (formatted: separators or a leading "+"), ``iso_date``,
  ``iso_datetime``: by pattern.
- ``country_code``: ISO 3166-1 alpha-2 (the list in tzdata's ``iso3166.tab``, public domain).
- ``us_state``: USPS codes of the 50 states, DC and the inhabited territories. A column of
  codes that are both ("ca", "de", "ga") is reported as the type with the larger share, and
  ``us_state`` on a tie, since US open data dominates the portals we crawl.
- ``postal_code`` / ``fips_code``: 5-digit (ZIP+4 allowed) or 2/5-digit codes whose column
  name says zip/postal or fips/geoid; ``numeric_code``: other fixed-width zero-padded digit
  codes (type ``identifier`` and all digits), which ZIP and FIPS codes are when unnamed.
- ``latitude`` / ``longitude``: numeric columns named lat/latitude or lon/lng/long/longitude
  whose range fits [-90, 90] / [-180, 180].
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MIN_SHARE = 0.9

COUNTRY_CODES = frozenset(
    """
    ad ae af ag ai al am ao aq ar as at au aw ax az ba bb bd be bf bg bh bi bj bl bm bn bo bq
    br bs bt bv bw by bz ca cc cd cf cg ch ci ck cl cm cn co cr cu cv cw cx cy cz de dj dk dm
    do dz ec ee eg eh er es et fi fj fk fm fo fr ga gb gd ge gf gg gh gi gl gm gn gp gq gr gs
    gt gu gw gy hk hm hn hr ht hu id ie il im in io iq ir is it je jm jo jp ke kg kh ki km kn
    kp kr kw ky kz la lb lc li lk lr ls lt lu lv ly ma mc md me mf mg mh mk ml mm mn mo mp mq
    mr ms mt mu mv mw mx my mz na nc ne nf ng ni nl no np nr nu nz om pa pe pf pg ph pk pl pm
    pn pr ps pt pw py qa re ro rs ru rw sa sb sc sd se sg sh si sj sk sl sm sn so sr ss st sv
    sx sy sz tc td tf tg th tj tk tl tm tn to tr tt tv tw tz ua ug um us uy uz va vc ve vg vi
    vn vu wf ws ye yt za zm zw
    """.split()
)
US_STATES = frozenset(
    """
    al ak az ar ca co ct de fl ga hi id il in ia ks ky la me md ma mi mn ms mo mt ne nv nh nj
    nm ny nc nd oh ok or pa ri sc sd tn tx ut vt va wa wv wi wy dc pr gu vi as mp
    """.split()
)

# Tested on the normalized value (lower case).
VALUE_PATTERNS: dict[str, str] = {
    "email": r"^[^@ ]+@[^@ ]+\.[a-z]{2,}$",
    "url": r"^((https?|ftp)://|www\.)[^ ]+$",
    "phone": r"^(\+[0-9]{1,3}[ .-]?)?(\([0-9]{3}\) ?|[0-9]{3}[ .-])[0-9]{3}[ .-][0-9]{4}$|^\+[0-9][0-9 .-]{7,18}[0-9]$",
    "iso_date": r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$",
    "iso_datetime": r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[t ][0-9]{2}:[0-9]{2}",
    "zip5": r"^[0-9]{5}(-[0-9]{4})?$",
    "fips": r"^([0-9]{2}|[0-9]{5})$",
    "digits": r"^[0-9]+$",
}
VALUE_SETS: dict[str, frozenset[str]] = {"country_code": COUNTRY_CODES, "us_state": US_STATES}

_NAME_HINTS = {
    "postal_code": re.compile(r"zip|postal|postcode"),
    "fips_code": re.compile(r"fips|geoid"),
    "latitude": re.compile(r"(^|[^a-z])lat(itude)?([^a-z]|$)"),
    "longitude": re.compile(r"(^|[^a-z])(lon|lng|long|longitude)([^a-z]|$)"),
}
_BY_PATTERN = ("email", "url", "phone", "iso_date", "iso_datetime")
_BY_VALUE_SET = ("us_state", "country_code")  # tie order: us_state first
_COORDINATE_RANGE = {"latitude": 90.0, "longitude": 180.0}


def infer_semantic_type(profile: Mapping, matches: Mapping[str, int]) -> str | None:
    """A semantic hint for a profiled column, or None.

    ``profile`` needs name, type, count and (for coordinates) numeric_min/numeric_max;
    ``matches`` maps each key of ``VALUE_PATTERNS`` and ``VALUE_SETS`` to its match count.
    """
    count = profile["count"]
    if not count:
        return None
    share = {key: matches.get(key, 0) / count for key in (*VALUE_PATTERNS, *VALUE_SETS)}
    name = (profile.get("name") or "").lower()
    for hint in _BY_PATTERN:
        if share[hint] >= MIN_SHARE:
            return hint
    codes = [c for c in _BY_VALUE_SET if share[c] >= MIN_SHARE]
    if codes:
        return max(codes, key=lambda c: share[c])
    if share["zip5"] >= MIN_SHARE and _NAME_HINTS["postal_code"].search(name):
        return "postal_code"
    if share["fips"] >= MIN_SHARE and _NAME_HINTS["fips_code"].search(name):
        return "fips_code"
    if profile["type"] == "identifier" and share["digits"] >= MIN_SHARE:
        return "numeric_code"
    return _coordinate(profile, name)


def _coordinate(profile: Mapping, name: str) -> str | None:
    low, high = profile.get("numeric_min"), profile.get("numeric_max")
    if low is None or high is None:
        return None
    for hint, bound in _COORDINATE_RANGE.items():
        if _NAME_HINTS[hint].search(name) and -bound <= low and high <= bound:
            return hint
    return None
