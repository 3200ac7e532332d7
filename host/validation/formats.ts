// The string formats the schemas name, as the Kubernetes API server's
// validation defines them (k8s.io/apimachinery/pkg/util/validation and
// net.ParseCIDR): Ajv calls these, and messages.ts says what a valid value
// looks like.
import { isIP } from 'node:net';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

function isDnsLabel(s: string): boolean {
  return s.length <= 63 && DNS_LABEL.test(s);
}

function isDnsSubdomain(s: string): boolean {
  return s.length <= 253 && s.split('.').every((part) => part.length > 0 && DNS_LABEL.test(part));
}

function isCidr(s: string): boolean {
  const slash = s.indexOf('/');
  if (slash < 0) return false;
  const family = isIP(s.slice(0, slash));
  const prefix = s.slice(slash + 1);
  if (family === 0 || !/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

function isLabelKey(s: string): boolean {
  const slash = s.lastIndexOf('/');
  const name = slash < 0 ? s : s.slice(slash + 1);
  if (slash >= 0 && !isDnsSubdomain(s.slice(0, slash))) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}

/** IANA_SVC_NAME: 1-15 lower-case letters, digits and single dashes, at least one letter. */
function isPortName(s: string): boolean {
  return s.length <= 15 && DNS_LABEL.test(s) && /[a-z]/.test(s) && !s.includes('--');
}

export const FORMATS: Record<string, (s: string) => boolean> = {
  ip: (s) => isIP(s) !== 0,
  cidr: isCidr,
  'dns-label': isDnsLabel,
  'dns-subdomain': isDnsSubdomain,
  'label-key': isLabelKey,
  'label-value': (s) => s === '' || (s.length <= 63 && LABEL_NAME.test(s)),
  'port-name': isPortName,
};

/** What to write instead, per format. */
export const FORMAT_HINTS: Record<string, string> = {
  ip: 'write an IPv4 or IPv6 address such as 10.0.0.1 or fd00::1',
  cidr: 'write an address and a prefix length such as 10.0.0.0/24 or fd00::/64 (prefix 0-32 for IPv4, 0-128 for IPv6)',
  'dns-label': 'use at most 63 lower-case letters, digits and "-", starting and ending with a letter or digit',
  'dns-subdomain': 'use lower-case letters, digits, "-" and ".", at most 253 characters, each part starting and ending with a letter or digit',
  'label-key': 'write an optional DNS prefix and "/", then at most 63 letters, digits, "-", "_" or ".", e.g. app.kubernetes.io/name',
  'label-value': 'use at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit (or leave it empty)',
  'port-name': 'write a port number 1-65535, or a port name of at most 15 lower-case letters, digits and "-" with at least one letter, e.g. http',
};
