#!/usr/bin/env python3
"""Joins the rounds of scripts/compare.sh: DIR/lazycl-R.json, DIR/jax-R.json, DIR/numpy-R.json
(the schema of lazycl-bench models --json) into one table. Each side's figure is its median over
rounds; "x JAX" / "x numpy" is the median over rounds of that round's speed ratio
(peer ms / lazycl ms: above 1 means lazycl is faster).

usage: join.py DIR [--json FILE]
"""
import glob
import json
import os
import statistics
import sys


def load(directory, side):
    rounds = []
    for path in sorted(glob.glob(os.path.join(directory, f"{side}-*.json"))):
        with open(path) as f:
            doc = json.load(f)
        rounds.append((doc, {r["name"]: r for r in doc["results"]}))
    return rounds


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--json"):
        sys.exit(__doc__)
    directory = sys.argv[1]
    sides = {s: load(directory, s) for s in ("lazycl", "jax", "numpy")}
    if not sides["lazycl"]:
        sys.exit(f"join.py: no lazycl-*.json in {directory}")
    first = sides["lazycl"][0][0]
    print(f"device: {first['device']}")
    print(f"cpu flags: {first['cpu_flags']}; rounds: lazycl {len(sides['lazycl'])}, "
          f"jax {len(sides['jax'])}, numpy {len(sides['numpy'])}")
    for s in ("jax", "numpy"):
        if sides[s]:
            print(f"{s}: {sides[s][0][0]['device']}")
    names = list(first and [r["name"] for r in first["results"]])
    header = (f"{'row':30s} {'unit':8s} {'lazycl':>9s} {'JAX':>9s} {'numpy':>9s} "
              f"{'x JAX':>7s} {'x numpy':>7s} {'kernels':>7s}")
    print(header)
    print("-" * len(header))
    table = []

    def median_value(side, name):
        vals = [rows[name]["value"] for _, rows in sides[side] if name in rows]
        return statistics.median(vals) if vals else None

    def median_ratio(side, name):
        # Round i of lazycl against round i of the peer (the rounds alternate).
        ratios = [peer[1][name]["ms"] / ours[1][name]["ms"]
                  for ours, peer in zip(sides["lazycl"], sides[side])
                  if name in ours[1] and name in peer[1] and ours[1][name]["ms"] > 0]
        return statistics.median(ratios) if ratios else None

    fmt = lambda v, f: "-" if v is None else format(v, f)
    for name in names:
        unit = first["results"][[r["name"] for r in first["results"]].index(name)]["unit"]
        kernels = sides["lazycl"][0][1][name]["kernels"]
        entry = {"name": name, "unit": unit, "lazycl": median_value("lazycl", name),
                 "jax": median_value("jax", name), "numpy": median_value("numpy", name),
                 "x_jax": median_ratio("jax", name), "x_numpy": median_ratio("numpy", name),
                 "kernels": kernels}
        table.append(entry)
        print(f"{name:30s} {unit:8s} {fmt(entry['lazycl'], '9.4g')} {fmt(entry['jax'], '9.4g')} "
              f"{fmt(entry['numpy'], '9.4g')} {fmt(entry['x_jax'], '7.2f')} "
              f"{fmt(entry['x_numpy'], '7.2f')} {kernels:7d}")
    if len(sys.argv) == 4:
        with open(sys.argv[3], "w") as f:
            json.dump({"device": first["device"], "cpu_flags": first["cpu_flags"],
                       "rows": table}, f, indent=1)


if __name__ == "__main__":
    main()
