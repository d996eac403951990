#!/usr/bin/env python3
"""Print the bad-input table (Markdown) from the rows the readiness and fidelity scenarios record in
.cache/reliability/ (one JSON file per case): where each bad input was stopped, after how many seconds,
how many changes it left on the nodes, and the message.
  MOLECULE_SCENARIOS="readiness fidelity" scripts/test.sh molecule && python3 scripts/reliability_table.py"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    rows = [json.loads(p.read_text()) for p in sorted((ROOT / ".cache" / "reliability").glob("*.json"))]
    if not rows:
        sys.exit("no rows in .cache/reliability: run the readiness and fidelity scenarios first")
    print("| case | caught in | seconds | changes on the nodes | message |")
    print("|---|---|---:|---:|---|")
    for r in sorted(rows, key=lambda r: (r["phase"] != "preflight", r["case"])):
        changed = "-" if r["changed"] is None else r["changed"]
        message = " ".join(r["message"].split()).replace("|", "\\|")[:300]
        print(f"| {r['case']} | {r['phase']} | {r['seconds']} | {changed} | {message} |")
    print(f"\n{len(rows)} cases; seconds are the whole ansible-playbook run to its failure (modelled sim nodes).")


if __name__ == "__main__":
    main()
