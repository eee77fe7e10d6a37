package lockward

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"lockward.dev/go/lockwardpb"
)

// Error is an error of lockward's, as the daemon reported it: its Kind is
// the name of the kind in lockward's own error type ("Busy", "TimedOut",
// "Lost", "NotOwner", "InvalidArgument", "Unavailable", …).
//
// Compare with the sentinel errors using errors.Is:
//
//	if errors.Is(err, lockward.ErrBusy) { ... }
type Error struct {
	Kind    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "lockward: " + e.Kind
	}
	return "lockward: " + e.Message
}

// Is reports whether target is a sentinel of the same kind.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Message == "" && t.Kind == e.Kind
}

// The kinds of lockward's errors, for errors.Is.
var (
	// ErrBusy: a try found the lock held.
	ErrBusy = &Error{Kind: "Busy"}
	// ErrNoPermits: a semaphore's try found too few permits free.
	ErrNoPermits = &Error{Kind: "NoPermits"}
	// ErrTimedOut: a wait ran out of its time limit.
	ErrTimedOut = &Error{Kind: "TimedOut"}
	// ErrLost: a lease is no longer held; work done under it must stop.
	ErrLost = &Error{Kind: "Lost"}
	// ErrNotOwner: the store records another holder.
	ErrNotOwner = &Error{Kind: "NotOwner"}
	// ErrInvalidArgument: a name, TTL or option was refused.
	ErrInvalidArgument = &Error{Kind: "InvalidArgument"}
	// ErrUnavailable: the store (or the daemon) could not be reached.
	ErrUnavailable = &Error{Kind: "Unavailable"}
	// ErrDenied: the store refused the daemon's credentials or
	// permissions; retrying does not help until they are changed.
	ErrDenied = &Error{Kind: "Denied"}
	// ErrContended: a compare-and-set met a conflicting write on every
	// one of its tries (an optimistic update, a rate limit); retry later.
	ErrContended = &Error{Kind: "Contended"}
	// ErrProtocol: the store answered something lockward did not expect
	// (keys it did not write, a server it does not speak to).
	ErrProtocol = &Error{Kind: "Protocol"}
	// ErrStale: a fenced resource refused a write whose fence is older
	// than one it already accepted.
	ErrStale = &Error{Kind: "Stale"}
	// ErrNotSupported: the store cannot do what was asked.
	ErrNotSupported = &Error{Kind: "NotSupported"}
	// ErrNotBuilt: the daemon was built without the store the URL names.
	ErrNotBuilt = &Error{Kind: "NotBuilt"}
	// ErrUnauthenticated: the daemon requires a token (WithToken) and the
	// call carried none, or another.
	ErrUnauthenticated = &Error{Kind: "Unauthenticated"}
	// ErrTooManyLeases: the daemon already holds the most leases it takes
	// (its --max-leases); one is free again once another is released.
	ErrTooManyLeases = &Error{Kind: "TooManyLeases"}
)

// errorKindKey is the metadata entry in which the daemon names the kind.
const errorKindKey = "lockward-error-kind"

// fromStatus turns a gRPC error into lockward's error; a transport error
// (no daemon) is ErrUnavailable's kind.
func fromStatus(err error, trailer metadata.MD) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	kind := ""
	for _, detail := range st.Details() {
		if info, ok := detail.(*lockwardpb.ErrorInfo); ok {
			kind = info.GetKind()
		}
	}
	if values := trailer[errorKindKey]; kind == "" && len(values) > 0 {
		kind = values[0]
	}
	if kind == "" {
		switch st.Code() {
		case codes.Unavailable:
			kind = "Unavailable"
		case codes.DeadlineExceeded:
			kind = "TimedOut"
		case codes.InvalidArgument:
			kind = "InvalidArgument"
		case codes.ResourceExhausted:
			kind = "TooManyLeases"
		case codes.Canceled:
			return err
		default:
			return fmt.Errorf("lockward: %w", err)
		}
	}
	return &Error{Kind: kind, Message: st.Message()}
}
