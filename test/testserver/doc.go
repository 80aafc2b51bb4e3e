// Package testserver is the end-to-end harness: it builds bin/setpoint once
// per test binary, starts it as a real process on a loopback port with a
// fresh data directory, and hands tests what they need to talk to it: the URL,
// the admin token, the kubeconfig, an HTTP client that trusts the server's CA,
// and runners for /usr/bin/kubectl and the setpoint CLI with that kubeconfig.
//
// The server's stdout and stderr are kept and attached to the test's output
// when the test fails. Every server is stopped with SIGTERM in t.Cleanup.
//
// Set SETPOINT_BIN to test a prebuilt binary instead of building one, and
// SETPOINT_ROOT to name the directory that holds examples/ and bin/ where the
// test binary runs outside the checkout: with both set, no go tool is needed
// (test/bench/device runs the benchmarks so).
package testserver
