// Builds the console into dist/ (or the directory given): one minified
// script, one stylesheet, one page. Deterministic: the same sources and
// lock file give the same bytes (a Go test compares with the committed dist).
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2] || 'dist';
mkdirSync(out, { recursive: true });
await esbuild.build({
  entryPoints: ['src/main.tsx'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: 'es2020',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  outfile: join(out, 'app.js'),
  logLevel: 'warning',
});
copyFileSync('src/app.css', join(out, 'app.css'));
copyFileSync('src/index.html', join(out, 'index.html'));
