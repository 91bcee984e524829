import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export const ROOT = join(import.meta.dirname, '../..');
export const README = join(ROOT, 'README.md');
export const DOCS = join(ROOT, 'docs');

/** The manual: the README and every page of docs/, as paths. */
export function manualFiles(): string[] {
  const pages = readdirSync(DOCS)
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => join(DOCS, name));
  return [README, ...pages];
}

/** A fenced code block of the manual, with where it is: its file (from the root), its first line and the section it is in. */
export interface CodeBlock {
  file: string;
  lang: string;
  text: string;
  line: number;
  section: string;
}

/** One page's fenced code blocks, in order (the manual is the user's: its examples must run). */
export function readmeBlocks(path = README): CodeBlock[] {
  const file = relative(ROOT, path);
  const blocks: CodeBlock[] = [];
  let section = '';
  let open: { lang: string; line: number; lines: string[]; indent: number } | undefined;
  readFileSync(path, 'utf8')
    .split('\n')
    .forEach((line, index) => {
      const fence = /^(\s*)```(\w*)\s*$/.exec(line);
      if (open) {
        if (fence) {
          blocks.push({ file, lang: open.lang, text: open.lines.join('\n'), line: open.line, section });
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

/** The code blocks of the README and of every docs page. */
export function manualBlocks(): CodeBlock[] {
  return manualFiles().flatMap((path) => readmeBlocks(path));
}
