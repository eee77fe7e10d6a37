package lockward

import (
	"context"
	"time"

	"lockward.dev/go/lockwardpb"
)

// directStore is a store a Client from Open holds its locks on itself,
// speaking the Rust store's protocol: one Redis (redisStore) or Redlock's
// masters (redlockStore). The recipes built on locks (elections) are
// written once over it.
type directStore interface {
	lock(ctx context.Context, o *lockOptions) (*Lease, error)
	inspect(ctx context.Context, name string) (*Holder, error)
	list(ctx context.Context, prefix string) ([]*Holder, error)
	// listenReleases wakes wake at each release of name, until stop.
	listenReleases(ctx context.Context, name string, wake chan struct{}) (stop func(), err error)
	// listElection lists election for `lockward status`, best effort.
	listElection(ctx context.Context, election string, lease time.Duration)
	idempotent(ctx context.Context, claim *lockwardpb.Claim, fn func(ctx context.Context, lease *Lease) (string, error)) (string, bool, error)
	storedResult(ctx context.Context, name string) (string, bool, error)
	allow(ctx context.Context, r *lockwardpb.CheckRequest) (Decision, error)
	close() error
}
