// Package httpstore is the client side of HTTP API v1 of `amduat serve`
// (SPECS.md §18): Client is an asl.Store over the network, interchangeable
// with the embedded store, proven so by the shared backend suite
// (asl/storetest).
//
// wire.go holds what client and server share: routes, headers, error
// codes, JSON bodies and the batch frames (§18.4). The client verifies
// everything it can (SPECS.md §6.2): it re-hashes every byte it reads and
// every reference the server acknowledges, so a faulty or hostile server
// can refuse service but cannot hand out wrong bytes.
package httpstore
