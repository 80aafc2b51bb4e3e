package plugin

import (
	"errors"

	"github.com/setpoint-dev/setpoint/sdk/abi"
)

// Host is what a plugin may ask of the server during a call. Every call is
// checked against the plugin's permissions; a denial comes back as an error.
type Host interface {
	// Log writes to the server's structured log, tagged with the plugin and
	// the object of the call. attrs are key, value pairs.
	Log(level, msg string, attrs ...string)
	// Get reads one object; found is false when it does not exist.
	Get(req abi.GetRequest) (obj abi.RawJSON, found bool, err error)
	// List reads the objects of a kind.
	List(req abi.ListRequest) ([]abi.RawJSON, error)
	// EmitEvent records an event, by default about the object of the call.
	EmitEvent(ev abi.EmitEventRequest) error
}

// ReconcileFunc computes the desired state of one object.
type ReconcileFunc func(h Host, req *abi.ReconcileRequest) (*abi.ReconcileResponse, error)

// AdmitFunc admits (and may mutate) one request.
type AdmitFunc func(h Host, req *abi.AdmissionRequest) (*abi.AdmissionResponse, error)

// FinalizeFunc cleans up before an object is deleted.
type FinalizeFunc func(h Host, req *abi.FinalizeRequest) (*abi.FinalizeResponse, error)

// Handlers are a plugin's handlers; a nil one is not provided.
type Handlers struct {
	Reconcile ReconcileFunc
	Admit     AdmitFunc
	Finalize  FinalizeFunc

	// scratch holds the requests Dispatch decodes into, reused across calls
	// so that a call allocates as little as possible inside the guest.
	scratch struct {
		reconcile abi.ReconcileRequest
		admit     abi.AdmissionRequest
		finalize  abi.FinalizeRequest
	}
}

// Bits reports which handlers are set, as abi.Has* bits.
func (hs *Handlers) Bits() int32 {
	var b int32
	if hs.Reconcile != nil {
		b |= abi.HasReconcile
	}
	if hs.Admit != nil {
		b |= abi.HasAdmit
	}
	if hs.Finalize != nil {
		b |= abi.HasFinalize
	}
	return b
}

// ErrTerminal marks an error as not worth retrying until the object
// changes; wrap it with Terminal.
var ErrTerminal = errors.New("terminal")

type terminalError struct{ err error }

func (e terminalError) Error() string        { return e.err.Error() }
func (e terminalError) Is(target error) bool { return target == ErrTerminal }
func (e terminalError) Unwrap() error        { return e.err }

// Terminal wraps err so the engine does not retry it until the object
// changes.
func Terminal(err error) error { return terminalError{err} }
