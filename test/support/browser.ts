import chromium from '@sparticuz/chromium';
import { chromium as playwright, type Browser, type Page } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/**
 * A real headless Chromium from npm alone: the binary `@sparticuz/chromium` ships, driven by
 * `playwright-core` (pinned together: 153.0.0 with 1.64.1 launches here; 143–149 crash at launch).
 * Its Lambda flags are kept but for three: `--single-process` (closing a context would end the
 * browser), and the two that would turn off the web's security, which the console's tests rely on.
 */
const DROPPED = new Set(['--single-process', '--disable-web-security', '--allow-running-insecure-content']);

export async function launchBrowser(): Promise<Browser> {
  return playwright.launch({ executablePath: await chromium.executablePath(), args: chromium.args.filter((arg) => !DROPPED.has(arg)), headless: true });
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface Violation {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/** axe-core's serious and critical violations on the page as it stands (evaluated, so the page's own CSP does not stop it). */
export async function seriousViolations(page: Page): Promise<Violation[]> {
  await page.evaluate(AXE);
  return page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[] }[] }[] }> } }).axe;
    const { violations } = await axe.run(document, { resultTypes: ['violations'] });
    return violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map((violation) => ({ id: violation.id, impact: violation.impact, help: violation.help, targets: violation.nodes.map((node) => node.target.join(' ')) }));
  });
}
