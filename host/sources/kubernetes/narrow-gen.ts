// What client-node's KubeConfig takes from its generated API (dist/config.js
// imports exactly these two names from './gen/index.js', for makeApiClient):
// the same modules of the installed package, without the rest of the index,
// which loads every generated API class and model (about 35 MiB of RSS the
// agent never uses). narrow-client.ts points config.js's import here.
export { createConfiguration } from '@kubernetes/client-node/dist/gen/configuration.js';
export { ServerConfiguration } from '@kubernetes/client-node/dist/gen/servers.js';
