"""Print throughput, latency percentiles and error rate from locust's --csv stats file."""

import csv
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
print(f"{'request':40} {'count':>7} {'fail':>5} {'req/s':>7} {'p50':>6} {'p95':>6} {'p99':>6}")
for row in rows:
    name = row["Name"] if row["Name"] != "Aggregated" else "ALL"
    print(
        f"{(row['Type'] + ' ' + name)[:40]:40} {row['Request Count']:>7} {row['Failure Count']:>5}"
        f" {float(row['Requests/s']):7.1f} {row['50%']:>6} {row['95%']:>6} {row['99%']:>6}"
    )
total = next(r for r in rows if r["Name"] == "Aggregated")
errors = int(total["Failure Count"]) / max(1, int(total["Request Count"]))
print(f"error rate: {100 * errors:.2f}%  (latencies in ms)")
