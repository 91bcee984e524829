/**
 * `npm start`: bin/local.ts, bundled (bin/bundle.mjs says why), with its stack traces mapped back
 * to the TypeScript.
 */
import { pathToFileURL } from 'node:url';
import { bundled } from './bundle.mjs';

process.setSourceMapsEnabled(true);
await import(pathToFileURL(await bundled('bin/local.ts')).href);
