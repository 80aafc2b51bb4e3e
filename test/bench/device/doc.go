// Package device runs the scaling benchmarks on a many-core machine that
// has neither a Go toolchain nor a network: the 2-core figures these
// benchmarks were written against, pinned, beside the whole machine's.
//
// It holds two scripts and a check of them. bundle.sh (`make bench-bundle`)
// builds, where Go is, bench-bundle/setpoint-bench.tar.xz: stripped test
// binaries of test/bench/{reconcile,api,peer,watch}, the stripped server,
// the widget plugin, the CRDs the benchmarks read, and the peer benchmark's
// etcd and kube-apiserver (build-peer.sh), under 64 MiB. run.sh, run from
// the repository root on the machine with bench-bundle carried there,
// unpacks it, points the test binaries at it (SETPOINT_ROOT, SETPOINT_BIN,
// ETCD_BIN, KUBE_APISERVER_BIN: test/testserver then needs no go tool),
// runs each benchmark pinned to two cores and then on all of them within a
// time budget, and writes the logs and a summary with each figure's ratio
// to $OUT. The header of run.sh is the procedure and lists the knobs.
package device
