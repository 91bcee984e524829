import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR } from './bench.js';

export interface FunctionShape {
  memoryMb: number;
  architecture: 'arm64' | 'x86_64';
  /** Where the figure came from: a file of lib/, or "assumed". */
  source: string;
}

const LIB = join(BENCH_DIR, '..', 'lib');

function read(file: string): string | undefined {
  const path = join(LIB, file);
  return existsSync(path) ? readFileSync(path, 'utf8') : undefined;
}

/** The props object of `new GatewayFunction(this, '<id>', { … })`, as text. */
function propsOf(source: string, id: string): string | undefined {
  const start = source.indexOf(`new GatewayFunction(this, '${id}'`);
  if (start < 0) return undefined;
  let depth = 0;
  for (let i = source.indexOf('{', start); i < source.length; i++) {
    if (source[i] === '{') depth++;
    else if (source[i] === '}' && --depth === 0) return source.slice(start, i + 1);
  }
  return undefined;
}

/**
 * The memory and architecture of a gateway function, read from the stack in lib/ (the
 * GatewayFunction construct's default unless the function's props set one); 1024 MB arm64,
 * stated as assumed, when the stack is not there.
 */
export function functionShape(file: string, id: string): FunctionShape {
  const construct = read('gateway-function.ts');
  const props = propsOf(read(file) ?? '', id);
  if (!construct || !props) return { memoryMb: 1024, architecture: 'arm64', source: 'assumed (no stack in lib/)' };
  const own = /memorySize:\s*(\d+)/.exec(props);
  const fallback = /memorySize:\s*props\.memorySize\s*\?\?\s*(\d+)/.exec(construct);
  const architecture = /Architecture\.ARM_64/.test(construct) ? 'arm64' : 'x86_64';
  if (own) return { memoryMb: Number(own[1]), architecture, source: `lib/${file} (${id})` };
  if (fallback) return { memoryMb: Number(fallback[1]), architecture, source: `lib/gateway-function.ts default (${id} sets none)` };
  return { memoryMb: 1024, architecture, source: 'assumed (no memorySize found in lib/)' };
}
