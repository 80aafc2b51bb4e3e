package election

import "errors"

// ErrLost is the cause (context.Cause) of a Lead context that ended because
// the lease was not renewed within the renew deadline.
var ErrLost = errors.New("election: lease not renewed within the renew deadline")
