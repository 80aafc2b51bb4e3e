package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/setpoint-dev/setpoint/store/badger"
)

// addStoreFlags registers the embedded store's flags.
func (o *serverOptions) addStoreFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&o.storeCloseTimeout, "store-close-timeout", defaultStoreCloseTimeout, "how long shutdown waits for the store to close (for Badger, the write in progress and the memtable's flush); past it the server exits with an error without a clean close, and the next start replays the store's log; the audit log's close waits as long at most")
	f.StringVar(&o.storeFreeSpaceReserve, "store-free-space-reserve", "256Mi",
		"free space (a quantity: 256Mi, 1Gi) the store's filesystem keeps: below it writes fail with 507 Insufficient Storage "+
			"while reads and watches go on, the server starts read-only, and writes resume by themselves once space is freed; 0 disables the check")
}

// storeFreeSpaceReserve parses --store-free-space-reserve into bytes for
// badger.Options (negative disables the check there).
func (o *serverOptions) storeFreeSpaceReserveBytes() (int64, error) {
	q, err := apiresource.ParseQuantity(o.storeFreeSpaceReserve)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--store-free-space-reserve %q: want a size such as 256Mi or 1Gi, or 0", o.storeFreeSpaceReserve)
	}
	if q.IsZero() {
		return -1, nil
	}
	return q.Value(), nil
}

// registerStoreMetrics exports the store's health and free space.
func registerStoreMetrics(reg prometheus.Registerer, st *badger.DB) {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "setpoint_store_damaged",
			Help: "1 when the store found damaged data and refuses reads and writes (the log names the file), else 0.",
		}, func() float64 { return b2f(st.Damaged()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "setpoint_store_writes_refused_no_space",
			Help: "1 while the store refuses writes because its filesystem has less free space than --store-free-space-reserve, else 0.",
		}, func() float64 { _, low := st.FreeSpace(); return b2f(low) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "setpoint_store_free_bytes",
			Help: "Free bytes on the store's filesystem (-1 when --store-free-space-reserve is 0).",
		}, func() float64 { free, _ := st.FreeSpace(); return float64(free) }),
	)
}
