"""The figures of `make bench`, from measurements taken round by round (bench/run.sh).

Every figure is a median over rounds with a bootstrap 95 % interval (rounds resampled with
replacement, 2 000 times, a fixed seed so that a rerun on the same numbers prints the same).
A figure whose interval does not resolve it is printed as "within noise", with why; no
negative cost and no ratio against a yardstick the run could not measure is ever printed.

  stats.py cost LABEL FILE [PER [YARDSTICK]]  FILE: "untraced yardstick traced" per round,
                                   ns per iteration; PER: traced calls per iteration (default
                                   1); YARDSTICK: its name (default "bare": the bare probe).
                                   The cost the yardstick adds, the cost tokenscope adds,
                                   their ratio.
  stats.py paired LABEL UNIT FILE [A B]  FILE: "untraced traced" per round (a rate or a
                                   time); traced over untraced, per round and then the
                                   median. A and B name the two columns (untraced, traced).
  stats.py cpu LABEL FILE          FILE: "cpu_ns records bytes" per round: the tracer's CPU
                                   per record and per MB captured.
"""
import random
import statistics
import sys

RESAMPLES = 2000


def num(v):
    return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def median(v):
    return statistics.median(v)


def interval(rows, fn):
    """Bootstrap 95 % interval of fn over resampled rounds."""
    rng = random.Random(20261201)
    est = []
    for _ in range(RESAMPLES):
        sample = [rows[rng.randrange(len(rows))] for _ in rows]
        v = fn(sample)
        if v is not None:
            est.append(v)
    if len(est) < RESAMPLES // 2:
        return None
    est.sort()
    return est[int(0.025 * len(est))], est[int(0.975 * len(est)) - 1]


def read_rows(path, width):
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) >= width:
            rows.append([float(x) for x in f[:width]])
    if len(rows) < 3:
        raise SystemExit(f"stats.py: {path}: {len(rows)} rounds; 3 at least are needed")
    return rows


def cost(label, path, per=1.0, yard="bare"):
    rows = read_rows(path, 3)
    bare = lambda s: median([r[1] - r[0] for r in s])
    traced = lambda s: median([r[2] - r[0] for r in s]) / per

    def ratio(s):
        b = bare(s)
        return traced(s) / b if b > 0 else None

    u, b, t = median([r[0] for r in rows]), bare(rows), traced(rows)
    bi, ti = interval(rows, bare), interval(rows, traced)
    head = f"  {label:<36} {u:8.0f} ns untraced"
    if bi is None or bi[0] <= 0:
        # the yardstick itself is not resolved: no ratio against it
        tt = f"+{t:.0f} ns ({ti[0]:.0f} to {ti[1]:.0f})" if ti and ti[0] > 0 else "within noise"
        print(f"{head}; {yard} +{b:.0f} ns: within noise (its 95 % interval reaches 0 or "
              f"below over {len(rows)} rounds: untraced runs vary more than it costs); "
              f"tokenscope {tt}")
        return
    ri = interval(rows, ratio)
    r = t / b
    if ti[0] <= 0:
        print(f"{head}; {yard} +{b:.0f} ns ({bi[0]:.0f} to {bi[1]:.0f}); tokenscope: within "
              f"noise (its added cost's 95 % interval, {ti[0]:.0f} to {ti[1]:.0f} ns, "
              f"reaches 0)")
        return
    print(f"{head}; {yard} +{b:.0f} ns ({bi[0]:.0f} to {bi[1]:.0f}); tokenscope "
          f"+{t:.0f} ns ({ti[0]:.0f} to {ti[1]:.0f}): {r:.2f}x {yard} (95 %: "
          f"{ri[0]:.2f} to {ri[1]:.2f}x, {len(rows)} rounds)")


def paired(label, unit, path, a="untraced", b="traced"):
    rows = read_rows(path, 2)
    per_round = [r[1] / r[0] for r in rows if r[0] > 0]
    rel = lambda s: median([r[1] / r[0] for r in s if r[0] > 0])
    m, ri = rel(rows), interval(rows, rel)
    u, t = median([r[0] for r in rows]), median([r[1] for r in rows])
    verdict = ""
    if ri[0] <= 1 <= ri[1]:
        verdict = ": within noise (the 95 % interval holds 1: no difference this run resolves)"
    print(f"  {label:<36} {num(u)} {unit} {a}, {num(t)} {b}: {m:.3f}x (95 %: "
          f"{ri[0]:.3f} to {ri[1]:.3f}x; per round {min(per_round):.3f} to "
          f"{max(per_round):.3f}; {len(rows)} rounds){verdict}")


def cpu(label, path):
    rows = read_rows(path, 3)
    us_per_record = lambda s: median([r[0] / 1e3 / r[1] for r in s if r[1] > 0])
    ms_per_mb = lambda s: median([r[0] / 1e6 / (r[2] / 1e6) for r in s if r[2] > 0])
    a, ai = us_per_record(rows), interval(rows, us_per_record)
    b, bi = ms_per_mb(rows), interval(rows, ms_per_mb)
    print(f"  {label}: {a:.2f} us per record (95 %: {ai[0]:.2f} to {ai[1]:.2f}), {b:.1f} ms "
          f"per MB captured ({bi[0]:.1f} to {bi[1]:.1f}); CPU time from "
          f"/proc/PID/task/*/schedstat (ns), {len(rows)} rounds")


def main(argv):
    if len(argv) >= 4 and argv[1] == "cost":
        cost(argv[2], argv[3], float(argv[4]) if len(argv) > 4 else 1.0,
             argv[5] if len(argv) > 5 else "bare")
    elif len(argv) in (5, 7) and argv[1] == "paired":
        paired(*argv[2:])
    elif len(argv) == 4 and argv[1] == "cpu":
        cpu(argv[2], argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
