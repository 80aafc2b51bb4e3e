package guest

// hostError is an error the host returned for a host call (a denied
// permission, an exhausted budget, a failed read).
type hostError string

func (e hostError) Error() string { return string(e) }
