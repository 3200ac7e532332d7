// The API definitions the project validates objects read from files against,
// kept as JSON Schema data in ./schemas (each file names its upstream source),
// and the kinds they make known.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';

/** host/validation/schemas of the package this code runs from (a checkout or an installed package). */
function schemaDirectory(): string {
  return join(packageRoot(), 'host', 'validation', 'schemas');
}

export interface SchemaFile {
  /** `apiVersion/Kind`, undefined for shared definitions (meta.json). */
  kindKey?: string;
  schema: Record<string, unknown>;
}

let cache: SchemaFile[] | undefined;

/** Every schema file; a kind's file is named `group-version-Kind.json` (core kinds: `v1-Kind.json`). */
export function schemaFiles(): SchemaFile[] {
  if (cache) return cache;
  const dir = schemaDirectory();
  cache = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => {
      const schema = JSON.parse(readFileSync(join(dir, file), 'utf8'));
      const parts = file.slice(0, -'.json'.length).split('-');
      const kindKey = parts.length === 3 ? `${parts[0]}/${parts[1]}/${parts[2]}` : parts.length === 2 ? `${parts[0]}/${parts[1]}` : undefined;
      return { kindKey, schema };
    });
  return cache;
}

/** `networking.k8s.io` for `networking.k8s.io/v1`, `` for `v1`. */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}
