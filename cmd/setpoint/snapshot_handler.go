package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/setpoint-dev/setpoint/engine/plugins"
	"github.com/setpoint-dev/setpoint/store"
	"github.com/setpoint-dev/setpoint/store/snapshot"
)

// snapshotPath serves `setpoint snapshot save`: GET streams a snapshot of
// every store key at one revision (store/snapshot's format). It sits
// behind the server's authentication, as the module upload does: only the
// admin reaches it. ?secrets=true includes the security keys.
const snapshotPath = "/apis/" + plugins.Group + "/" + plugins.Version + "/snapshot"

// snapshotHandler serves snapshotPath from st.
type snapshotHandler struct {
	st  store.Store
	log *slog.Logger
}

func (h snapshotHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeSnapshotStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "take a snapshot with GET "+snapshotPath)
		return
	}
	secrets := false
	if v := r.URL.Query().Get("secrets"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeSnapshotStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "secrets must be true or false")
			return
		}
		secrets = b
	}
	started := false
	hdr, err := snapshot.Save(r.Context(), h.st, w, snapshot.SaveOptions{
		Secrets: secrets,
		Started: func(hdr snapshot.Header) error {
			started = true
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("X-Setpoint-Snapshot-Revision", strconv.FormatInt(hdr.Revision, 10))
			w.WriteHeader(http.StatusOK)
			return nil
		},
	})
	if err != nil {
		h.log.Warn("snapshot failed", "rev", hdr.Revision, "err", err)
		if !started {
			code, reason := http.StatusInternalServerError, metav1.StatusReasonInternalError
			if errors.Is(err, store.ErrCompacted) {
				code, reason = http.StatusGone, metav1.StatusReasonExpired
			}
			writeSnapshotStatus(w, code, reason, err.Error())
			return
		}
		// The client tells a cut stream by its missing trailer; abort
		// the connection so that it does not wait.
		panic(http.ErrAbortHandler)
	}
	h.log.Info("snapshot taken", "rev", hdr.Revision, "keys", hdr.Keys, "secrets", secrets)
}

func writeSnapshotStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	})
}
