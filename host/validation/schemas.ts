// The API definitions the project validates objects read from files against,
// kept as JSON Schema data in ./schemas (each file names its upstream source),
// and the kinds they make known.
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** host/validation/schemas, from the sources (vitest) or from dist/host/validation. */
function schemaDirectory(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const candidate of [join(here, 'schemas'), join(here, '..', '..', '..', 'host', 'validation', 'schemas')]) {
    if (existsSync(join(candidate, 'meta.json'))) return candidate;
  }
  throw new Error(`the API schemas are missing next to ${here}; reinstall kube-wasm-policies`);
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
