// Package httpprobe is how the scheduler's http and tcp checks reach a service: a plain
// HTTP/1.1 client on kept connections (Client: TLS included, the exchange written and read
// by the probe's own goroutine, redirects followed like http.Client's), the dialer both
// kinds use (Dialer, dialling through a shared/netmap name map), and the TLS roots an
// https check trusts (LoadCAFile).
//
// Nothing here resolves a name: the dialer maps names through the name map and refuses
// non-loopback addresses unless told otherwise, so reachability never depends on a resolver
// and a lab never reaches a public name. What a status, a body or an error means for a
// check's health is the runner's (checkrun) to decide.
package httpprobe
