/**
 * How every bench measures: the reference and Gantry run interleaved, a warm-up round first
 * (not counted), then `rounds` rounds; each round alternates which side goes first, so drift of
 * the machine (a warming cache, a neighbour's load) falls on both sides alike. Each check is a
 * number computed from one round's pair of samples (a ratio, an added latency); it is reported as
 * the median, min and max over the rounds, next to its target, and a median that misses its
 * target sets the exit code to 1, so a regression is visible. The last line on stdout is the
 * bench's result as JSON (bench/all.ts collects them into its table).
 */

export type Sample = Record<string, number>;

export interface Check<R extends Sample, G extends Sample> {
  /** What is judged, e.g. `drain, Gantry / reference`. */
  name: string;
  value: (reference: R, gantry: G) => number;
  /** The target the median must meet. */
  atLeast?: number;
  atMost?: number;
  unit?: string;
  /**
   * Printed beside the judged checks and never judged: a bench judges Gantry against the leanest
   * equivalent in the same language in the same run (the leanest Node front or proxy); nginx, bare
   * PostgreSQL or a direct call are shown for information.
   */
  informational?: boolean;
}

export interface CheckResult {
  name: string;
  median: number;
  min: number;
  max: number;
  /** The target, or `information` for a check that is shown and not judged. */
  target: string;
  met: boolean;
  judged: boolean;
}

export interface BenchResult {
  bench: string;
  rounds: number;
  /** Every metric of each side, median/min/max over the rounds. */
  sides: Record<'reference' | 'gantry', Record<string, { median: number; min: number; max: number }>>;
  checks: CheckResult[];
}

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** The `p`th percentile (nearest rank) of `xs`. */
export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

const round3 = (x: number) => Number(x.toPrecision(4));
const spread = (xs: number[]) => ({
  median: round3(median(xs)),
  min: round3(Math.min(...xs)),
  max: round3(Math.max(...xs)),
});

function targetText(c: { atLeast?: number; atMost?: number; unit?: string }): string {
  const unit = c.unit ? ` ${c.unit}` : '';
  return [c.atLeast !== undefined ? `≥ ${c.atLeast}${unit}` : '', c.atMost !== undefined ? `≤ ${c.atMost}${unit}` : '']
    .filter(Boolean)
    .join(' and ');
}

export async function compareInRounds<R extends Sample, G extends Sample>(opts: {
  bench: string;
  reference: () => Promise<R>;
  gantry: () => Promise<G>;
  checks: Array<Check<R, G>>;
  rounds?: number;
  warmupRounds?: number;
}): Promise<BenchResult> {
  const rounds = opts.rounds ?? Number(process.env.GANTRY_BENCH_ROUNDS ?? 5);
  const warmup = opts.warmupRounds ?? 1;
  const refs: R[] = [];
  const gantries: G[] = [];
  for (let i = 0; i < warmup + rounds; i++) {
    const label = i < warmup ? `warm-up ${i + 1}` : `round ${i - warmup + 1}/${rounds}`;
    let r: R;
    let g: G;
    if (i % 2 === 0) {
      r = await opts.reference();
      g = await opts.gantry();
    } else {
      g = await opts.gantry();
      r = await opts.reference();
    }
    say(`${label}: reference ${JSON.stringify(r)}; gantry ${JSON.stringify(g)}`);
    if (i >= warmup) {
      refs.push(r);
      gantries.push(g);
    }
  }
  const sideSpread = <S extends Sample>(xs: S[]) =>
    Object.fromEntries(Object.keys(xs[0]).map((k) => [k, spread(xs.map((x) => x[k]))]));
  const checks = opts.checks.map((c): CheckResult => {
    const values = refs.map((r, i) => c.value(r, gantries[i]));
    const s = spread(values);
    if (c.informational) return { name: c.name, ...s, target: 'information', met: true, judged: false };
    const met = (c.atLeast === undefined || s.median >= c.atLeast) && (c.atMost === undefined || s.median <= c.atMost);
    return { name: c.name, ...s, target: targetText(c), met, judged: true };
  });
  const result: BenchResult = {
    bench: opts.bench,
    rounds,
    sides: { reference: sideSpread(refs), gantry: sideSpread(gantries) },
    checks,
  };
  report(result);
  return result;
}

/** Prints a result for people (stderr) and as the JSON last line (stdout); a missed target sets exit code 1. */
export function report(result: BenchResult): void {
  say(`${result.bench}: ${result.rounds} rounds, median (min–max)`);
  for (const side of ['reference', 'gantry'] as const) {
    for (const [k, v] of Object.entries(result.sides[side]))
      say(`  ${side.padEnd(9)} ${k}: ${v.median} (${v.min}–${v.max})`);
  }
  for (const c of result.checks) {
    if (!c.judged) say(`  info   ${c.name}: ${c.median} (${c.min}–${c.max}), not judged`);
    else say(`  ${c.met ? 'met   ' : 'MISSED'} ${c.name}: ${c.median} (${c.min}–${c.max}), target ${c.target}`);
  }
  if (result.checks.some((c) => !c.met)) process.exitCode = 1;
  process.stdout.write(JSON.stringify(result) + '\n');
}
