// Package test holds Setpoint's end-to-end suites: they start the built binary
// and drive it with real clients (kubectl, client-go, WebSocket, a browser), and
// the checks that hold the repository to its architecture.
package test
