// asc transform: embeds the module's metadata (module.json beside the entry
// file) as the `kwp.meta` custom section, so the host can read name, kinds
// and failure policy without running any of the module's code.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export function validateMetadata(meta, file) {
  const problems = [];
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) problems.push('must be a JSON object');
  else {
    if (typeof meta.name !== 'string' || !NAME.test(meta.name)) problems.push('"name" must be lower-case letters, digits and dashes, 1-63 characters');
    if (typeof meta.version !== 'string' || meta.version === '') problems.push('"version" must be a non-empty string');
    if (!Array.isArray(meta.kinds) || meta.kinds.some((k) => typeof k !== 'string' || !/^[^/]+(\/[^/]+)?\/[A-Z][A-Za-z0-9]*$/.test(k)))
      problems.push('"kinds" must be a list of "apiVersion/Kind" strings, e.g. "networking.k8s.io/v1/NetworkPolicy"');
    if (meta.failurePolicy !== 'fail-open' && meta.failurePolicy !== 'fail-closed') problems.push('"failurePolicy" must be "fail-open" or "fail-closed"');
  }
  if (problems.length) throw new Error(`${file}: ${problems.join('; ')}`);
  return meta;
}

export default class KwpMetadataTransform {
  afterParse(parser) {
    // The runtime is parsed as an entry too; it lives under ~lib/.
    const entries = parser.sources.filter((s) => s.sourceKind === 1 /* UserEntry */ && !s.normalizedPath.startsWith('~lib/'));
    if (entries.length !== 1) throw new Error(`kwp transform: expected exactly one entry file, got ${entries.length}`);
    const entryDir = dirname(resolve(this.baseDir ?? '.', entries[0].normalizedPath));
    const file = join(entryDir, 'module.json');
    if (!existsSync(file)) throw new Error(`kwp transform: ${file} is missing; it names the module, its kinds and its failure policy (see sdk/ABI.md)`);
    let meta;
    try { meta = JSON.parse(readFileSync(file, 'utf8')); } catch (e) { throw new Error(`${file}: not valid JSON: ${e.message}`); }
    this.meta = validateMetadata(meta, file);
  }
  afterCompile(module) {
    module.addCustomSection('kwp.meta', new TextEncoder().encode(JSON.stringify(this.meta)));
  }
}
