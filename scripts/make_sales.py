"""Write the demo shop dataset: four years of sales as Parquet, products as CSV, regions as JSON.

    python scripts/make_sales.py                 # into notebooks/shop/ (what the repository ships)
    python scripts/make_sales.py --out /tmp/shop --rows-per-year 2000

The same arguments always give the same data (a seeded generator, no clock). Layout:

    sales/2022.parquet ... sales/2025.parquet   order_id, order_date, product_id, region_id,
                                                channel, quantity, unit_price, discount
    products.csv                                product_id, name, category, list_price, launched
    regions.json                                [{"region_id", "name", "country", "manager"}, ...]

Needs pandas, numpy and pyarrow (the ``duckdb`` extra).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["make_sales", "YEARS", "DEFAULT_OUT"]

YEARS = (2022, 2023, 2024, 2025)
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "notebooks" / "shop"
SEED = 20240611

_REGIONS = [
    {"region_id": "NE", "name": "North East", "country": "UK", "manager": "Ada Okafor"},
    {"region_id": "NW", "name": "North West", "country": "UK", "manager": "Bram de Vries"},
    {"region_id": "SE", "name": "South East", "country": "UK", "manager": "Chiara Rossi"},
    {"region_id": "SW", "name": "South West", "country": "UK", "manager": "Dmitri Volkov"},
    {"region_id": "IE", "name": "Ireland", "country": "IE", "manager": "Eimear Byrne"},
    {"region_id": "NL", "name": "Benelux", "country": "NL", "manager": "Femke Jansen"},
]
_CATEGORIES = {  # category: (nouns, price range)
    "Garden": (["Trowel", "Hose", "Planter", "Shears", "Rake", "Seed Kit"], (4, 60)),
    "Kitchen": (["Kettle", "Pan", "Knife Set", "Grinder", "Scale", "Teapot"], (8, 120)),
    "Outdoor": (["Tent", "Lantern", "Backpack", "Stove", "Hammock", "Flask"], (10, 250)),
    "Office": (["Notebook", "Desk Lamp", "Stapler", "Chair Mat", "Pen Set", "Monitor Arm"], (3, 180)),
    "Toys": (["Puzzle", "Kite", "Robot Kit", "Board Game", "Yo-yo", "Blocks"], (5, 90)),
}
_ADJECTIVES = ["Classic", "Compact", "Deluxe", "Eco"]
_CHANNELS = np.array(["online", "store", "partner"])
_CHANNEL_WEIGHTS = [0.55, 0.35, 0.10]


def _products(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for category, (nouns, (low, high)) in _CATEGORIES.items():
        for noun in nouns:
            for adjective in _ADJECTIVES[: int(rng.integers(2, 5))]:
                rows.append({"name": f"{adjective} {noun}", "category": category,
                             "list_price": round(float(rng.uniform(low, high)), 2),
                             "launched": pd.Timestamp(2020, 1, 1) + pd.Timedelta(days=int(rng.integers(0, 1800)))})
    products = pd.DataFrame(rows)
    products.insert(0, "product_id", np.arange(101, 101 + len(products)))
    products["launched"] = products["launched"].dt.date
    return products


def _year(rng: np.random.Generator, year: int, rows: int, products: pd.DataFrame, first_id: int) -> pd.DataFrame:
    start = pd.Timestamp(year, 1, 1)
    days = (pd.Timestamp(year + 1, 1, 1) - start).days
    # More orders late in the year (a December peak), more popular products at the front of the list.
    day = np.sort(np.minimum(days - 1, (rng.beta(1.3, 1.0, rows) * days).astype(int)))
    popularity = 1.0 / np.arange(1, len(products) + 1) ** 0.6
    pick = rng.choice(len(products), size=rows, p=popularity / popularity.sum())
    region_weights = np.array([0.22, 0.2, 0.26, 0.12, 0.1, 0.1])
    price = products["list_price"].to_numpy()[pick] * rng.uniform(0.9, 1.1, rows) * (1 + 0.03 * (year - YEARS[0]))
    return pd.DataFrame({
        "order_id": np.arange(first_id, first_id + rows, dtype="int64"),
        "order_date": (start + pd.to_timedelta(day, unit="D")).date,
        "product_id": products["product_id"].to_numpy()[pick].astype("int32"),
        "region_id": np.array([r["region_id"] for r in _REGIONS])[rng.choice(len(_REGIONS), rows, p=region_weights)],
        "channel": _CHANNELS[rng.choice(len(_CHANNELS), rows, p=_CHANNEL_WEIGHTS)],
        "quantity": rng.geometric(0.45, rows).astype("int32"),
        "unit_price": np.round(price, 2),
        "discount": np.where(rng.random(rows) < 0.2, np.round(rng.choice([0.05, 0.1, 0.15, 0.25], rows), 2), 0.0),
    })


def make_sales(out: Path | str = DEFAULT_OUT, *, rows_per_year: int = 60_000) -> list[Path]:
    """Write the dataset under ``out``; returns the files written. Growth: each year has 15%
    more orders than the one before."""
    out = Path(out)
    rng = np.random.default_rng(SEED)
    products = _products(rng)
    (out / "sales").mkdir(parents=True, exist_ok=True)
    written = []
    next_id = 1
    for index, year in enumerate(YEARS):
        orders = _year(rng, year, int(rows_per_year * 1.15 ** index), products, next_id)
        next_id += len(orders)
        path = out / "sales" / f"{year}.parquet"
        orders.to_parquet(path, index=False, engine="pyarrow", compression="zstd")
        written.append(path)
    products.to_csv(out / "products.csv", index=False)
    (out / "regions.json").write_text(json.dumps(_REGIONS, indent=1) + "\n", encoding="utf-8")
    return [*written, out / "products.csv", out / "regions.json"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder to write (default notebooks/shop)")
    parser.add_argument("--rows-per-year", type=int, default=60_000, help="orders in the first year")
    args = parser.parse_args(argv)
    for path in make_sales(args.out, rows_per_year=args.rows_per_year):
        print(f"{path.stat().st_size:>10,}  {path}")


if __name__ == "__main__":
    main()
