// The compiled addon (node-gyp puts it in build/Release). Loaded by
// host/dataplane/conntrack-netlink.ts, which falls back to one `conntrack`
// process per connection when this file or the library is missing.
module.exports = require('./build/Release/conntrack_netlink.node');
