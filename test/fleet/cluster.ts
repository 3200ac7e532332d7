// An emulated cluster that serves the fleet: the default resources plus
// ConfigMaps, Secrets and the three kwp.io/v1alpha1 kinds (Pipeline with the
// status subresource), as `kwp manifests` installs them.
import { customResource, defaultEmulatedResources, type EmulatedResource } from '../apiserver/emulator.js';
import { FLEET_RESOURCES } from '../../host/fleet/objects.js';

export function fleetEmulatedResources(): EmulatedResource[] {
  return [
    ...defaultEmulatedResources(),
    customResource('v1/ConfigMap', true),
    customResource('v1/Secret', true),
    ...FLEET_RESOURCES.map((r) => customResource(r.kind, false, r.plural, { statusSubresource: r.statusSubresource })),
  ];
}
