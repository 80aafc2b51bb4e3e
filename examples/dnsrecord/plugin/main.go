// Command plugin is the DNSRecord plugin: examples/dnsrecord/operator
// registered with the SDK's native-ABI glue. `make plugins` builds it to
// bin/wasm/dnsrecord-plugin.wasm:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o dnsrecord-plugin.wasm .
//
// It reaches the DNS service only through the host's http call, which the
// Plugin's spec.egress grants, and reads its token from the Secret its
// spec.config names, which spec.permissions lets it read.
package main

import (
	"github.com/setpoint-dev/setpoint/examples/dnsrecord/operator"
	"github.com/setpoint-dev/setpoint/sdk/guest"
)

func init() {
	op := &operator.Operator{}
	guest.Register(op.Handlers())
}

func main() {}
