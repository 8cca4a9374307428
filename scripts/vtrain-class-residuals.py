#!/usr/bin/env python3
"""Where dtplan's vTrain single-node error sits, by plan class.

Reads `dtplan validate --cases ground_truth_single.csv --json` (a file, or
stdin) and prints, per (hidden, tp, microbatch) class:
  - the number of cases and the mean signed and absolute error;
  - for its pp = 1 cases, the median measured and predicted time of one
    layer and microbatch (iteration time / (layers x microbatches)), which
    shows the host-bound floor and where it is not monotone in the work;
then the MAPE left if every class (and every (hidden, tp, microbatch, pp)
class) had its predictions scaled by one factor: the part of the error that
lies in the cost of one layer and microbatch rather than in how dp, pp,
layer and microbatch counts are priced.

    build/dtplan validate --cases ../shared/validation/vtrain/ground_truth_single.csv \\
        --json > /tmp/single.json
    scripts/vtrain-class-residuals.py /tmp/single.json

Used in docs/validation.md ("What is left of the single-node error").
"""
import collections
import json
import re
import statistics
import sys


def load(path):
    text = open(path).read() if path != "-" else sys.stdin.read()
    cases = json.loads(text)["cases"]
    rows = []
    for c in cases:
        if c.get("invalid") or "predicted_s" not in c:
            continue
        m = re.search(r"-h(\d+)-l(\d+)", c["id"])
        if not m:
            continue
        p = c["plan"]
        rows.append(dict(h=int(m.group(1)), layers=int(m.group(2)), tp=p["tp"], pp=p["pp"], dp=p["dp"],
                         mbs=p["micro_batch"], m=p["num_microbatches"], meas=c["measured_s"],
                         pred=c["predicted_s"]))
    return rows


def scaled_mape(rows, keys):
    groups = collections.defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in keys)].append(r)
    errs = []
    for v in groups.values():
        s = statistics.median(r["meas"] / r["pred"] for r in v)
        errs += [abs(r["pred"] * s / r["meas"] - 1) for r in v]
    return len(groups), 100 * statistics.mean(errs)


def main():
    rows = load(sys.argv[1] if len(sys.argv) > 1 else "-")
    if not rows:
        sys.exit("no vTrain cases in the input (run dtplan validate --json on ground_truth_single.csv)")
    err = lambda r: 100 * (r["pred"] / r["meas"] - 1)
    print("%-18s %5s %8s %7s   %s" % ("(hidden, tp, mbs)", "cases", "signed", "abs", "pp=1 ms per layer-microbatch: measured / predicted"))
    classes = collections.defaultdict(list)
    for r in rows:
        classes[(r["h"], r["tp"], r["mbs"])].append(r)
    for k in sorted(classes):
        v = classes[k]
        one = [r for r in v if r["pp"] == 1]
        per = ""
        if one:
            unit = lambda r, t: 1e3 * r[t] / (r["layers"] * r["m"])
            per = "%.2f / %.2f" % (statistics.median(unit(r, "meas") for r in one),
                                   statistics.median(unit(r, "pred") for r in one))
        print("%-18s %5d %+7.1f%% %6.1f%%   %s" % (str(k), len(v), statistics.mean(map(err, v)),
                                                statistics.mean(abs(err(r)) for r in v), per))
    print("\nMAPE %.2f%% over %d cases" % (statistics.mean(abs(err(r)) for r in rows), len(rows)))
    for keys in (("h", "tp", "mbs"), ("h", "tp", "mbs", "pp")):
        n, mape = scaled_mape(rows, keys)
        print("with one scale factor per %s class (%d classes): MAPE %.2f%%" % ("/".join(keys), n, mape))


if __name__ == "__main__":
    main()
