/** The p-th percentile (0–100) by linear interpolation between closest ranks. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

export const median = (values: readonly number[]) => percentile(values, 50);

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** (max − min) / |median|, in percent: how far the repetitions disagree. */
  spreadPct: number;
  samples: number[];
}

/** Median and spread of one figure across repetitions. */
export function spread(samples: readonly number[]): Spread {
  const finite = samples.filter(Number.isFinite);
  const mid = median(finite);
  const min = Math.min(...finite);
  const max = Math.max(...finite);
  return { median: mid, min, max, spreadPct: mid === 0 ? 0 : ((max - min) / Math.abs(mid)) * 100, samples: [...samples] };
}

export const mean = (values: readonly number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
