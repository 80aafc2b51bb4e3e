package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/setpoint-dev/setpoint/engine/apiserver"
	"github.com/setpoint-dev/setpoint/store"
)

// apiHandler is what `setpoint server` serves: the API and its background
// loops.
type apiHandler interface {
	http.Handler
	Run(ctx context.Context) error
}

var _ apiHandler = (*apiserver.Server)(nil)

// newAPI builds the Kubernetes-compatible API over st.
func newAPI(st store.Store, log *slog.Logger) (apiHandler, error) {
	return apiserver.New(apiserver.Options{Store: st, Logger: log.With("component", "apiserver")})
}
