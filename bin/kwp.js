#!/usr/bin/env node
// The installed entry point; the CLI itself is compiled TypeScript.
import('../dist/host/cli/main.js').then((m) => m.main(process.argv.slice(2))).then(
  (code) => { if (typeof code === 'number') process.exitCode = code; },
  (err) => { console.error(err?.stack ?? String(err)); process.exitCode = 1; },
);
