package main

import (
	"context"
	"net/http"

	"github.com/setpoint-dev/setpoint/engine/apiserver"
)

// apiHandler is what `setpoint server` serves: the API and its background
// loops.
type apiHandler interface {
	http.Handler
	Run(ctx context.Context) error
}

var _ apiHandler = (*apiserver.Server)(nil)
