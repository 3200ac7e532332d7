// The compiled addon (node-gyp puts it in build/Release). Loaded by
// host/dataplane/nfqueue-batch.ts, which falls back to the `nfqueue` binding
// when this file or the library is missing.
module.exports = require('./build/Release/nfqueue_batch.node');
