import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const README = join(import.meta.dirname, '../../README.md');

/** A fenced code block of the README, with where it is: its first line and the section it is in. */
export interface CodeBlock {
  lang: string;
  text: string;
  line: number;
  section: string;
}

/** The README's fenced code blocks, in order (the README is the user's manual: its examples must run). */
export function readmeBlocks(): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  let section = '';
  let open: { lang: string; line: number; lines: string[]; indent: number } | undefined;
  readFileSync(README, 'utf8')
    .split('\n')
    .forEach((line, index) => {
      const fence = /^(\s*)```(\w*)\s*$/.exec(line);
      if (open) {
        if (fence) {
          blocks.push({ lang: open.lang, text: open.lines.join('\n'), line: open.line, section });
          open = undefined;
        } else {
          open.lines.push(line.slice(open.indent));
        }
        return;
      }
      if (fence) open = { lang: fence[2], line: index + 1, lines: [], indent: fence[1].length };
      else if (line.startsWith('#')) section = line.replace(/^#+\s*/, '');
    });
  return blocks;
}
