package lockward

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"lockward.dev/go/lockwardpb"
)

// ErrInProgress: another client runs the key's operation right now (an API
// would answer "409, in progress").
var ErrInProgress = &Error{Kind: "InProgress"}

// A KeyOption configures an idempotency key.
type KeyOption func(*lockwardpb.Claim)

// WithRetention keeps the result for d (one day by default).
func WithRetention(d time.Duration) KeyOption {
	return func(c *lockwardpb.Claim) {
		c.Keep = lockwardpb.Keep_KEEP_FOR
		c.KeepMs = uint64(d.Milliseconds())
	}
}

// WithPermanentResult keeps the result forever, as a payment's outcome
// must be kept: on stores that can (SQLite, PostgreSQL, MySQL); the others
// refuse with ErrNotSupported before anything runs.
func WithPermanentResult() KeyOption {
	return func(c *lockwardpb.Claim) { c.Keep = lockwardpb.Keep_KEEP_FOREVER }
}

// WithNamespace keeps the keys apart from other sets on the same store
// ("idem" by default).
func WithNamespace(namespace string) KeyOption {
	return func(c *lockwardpb.Claim) { c.Namespace = namespace }
}

// WaitForRunning makes a duplicate that arrives while the operation runs
// wait for its result (or run it, if that run fails) instead of failing
// with ErrInProgress. The wait honours ctx.
func WaitForRunning() KeyOption {
	return func(c *lockwardpb.Claim) { c.Wait = true }
}

// WithClaimTTL sets the TTL of the lock held while the operation runs (30
// s by default); it renews itself every third of it.
func WithClaimTTL(ttl time.Duration) KeyOption {
	return func(c *lockwardpb.Claim) { c.TtlMs = uint64(ttl.Milliseconds()) }
}

func newClaim(key string, opts []KeyOption) *lockwardpb.Claim {
	c := &lockwardpb.Claim{Key: key, TtlMs: uint64((30 * time.Second).Milliseconds())}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Idempotent runs fn at most once for key, across every instance: the
// first call runs fn under the key's lock (fn's ctx is cancelled if the
// lock is lost; lease.Fence() fences its writes) and stores its result;
// a later call gets the stored result without running fn (ran is false).
// A duplicate that arrives while fn runs fails with ErrInProgress, or
// waits WaitForRunning. An error from fn stores nothing and is returned:
// the key stays free for a retry.
func (c *Client) Idempotent(ctx context.Context, key string, fn func(ctx context.Context, lease *Lease) (string, error), opts ...KeyOption) (result string, ran bool, err error) {
	claim := newClaim(key, opts)
	if c.native != nil {
		return c.native.idempotent(ctx, claim, fn)
	}
	lease, answer, err := c.open(ctx, opening{
		name:    key,
		request: &lockwardpb.LeaseRequest{Request: &lockwardpb.LeaseRequest_Claim{Claim: claim}},
		call:    c.keys.Claim,
		renew:   time.Duration(claim.GetTtlMs()) * time.Millisecond / 3,
	})
	switch {
	case err != nil:
		return "", false, err
	case answer.GetStored() != nil:
		return answer.GetStored().GetResult(), false, nil
	case answer.GetInProgress() != nil:
		return "", false, &Error{Kind: "InProgress", Message: fmt.Sprintf("%s runs elsewhere right now", key)}
	case lease == nil:
		return "", false, fmt.Errorf("lockward: expected a claim's answer, the daemon sent %v", answer)
	}
	result, err = fn(lease.Context(ctx), lease)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		return "", false, err
	}
	complete := &lockwardpb.LeaseRequest{Request: &lockwardpb.LeaseRequest_Complete{Complete: &lockwardpb.Complete{Result: result}}}
	if err := lease.end(context.WithoutCancel(ctx), complete, "stored result"); err != nil {
		return "", false, err
	}
	return result, true, nil
}

// Once runs fn to success at most once for key, across every instance and
// all time (a migration, a backfill): the same keys as `lockward once`. An
// instance that finds fn running elsewhere waits for it; one that finds a
// success recorded returns ran == false without running fn. A failed run
// records nothing, so the next instance retries.
func (c *Client) Once(ctx context.Context, key string, fn func(ctx context.Context, lease *Lease) error) (ran bool, err error) {
	run := func(ctx context.Context, lease *Lease) (string, error) {
		if err := fn(ctx, lease); err != nil {
			return "", err
		}
		host, _ := os.Hostname()
		at := time.Now().UTC().Format(time.RFC3339)
		return fmt.Sprintf("by %s:%d at %s with fence %d", host, os.Getpid(), at, lease.Fence()), nil
	}
	_, ran, err = c.Idempotent(ctx, key, run, WithNamespace("once"), WaitForRunning(), keepLongest)
	return ran, err
}

// keepLongest keeps a result forever where the store can, else ten years.
func keepLongest(c *lockwardpb.Claim) { c.Keep = lockwardpb.Keep_KEEP_LONGEST }

// StoredResult returns the stored result of key (found is false when its
// operation has not run, or its result expired). Give the namespace the
// key was run in, if not the default.
func (c *Client) StoredResult(ctx context.Context, key string, opts ...KeyOption) (result string, found bool, err error) {
	claim := newClaim(key, opts)
	if c.native != nil {
		return c.native.storedResult(ctx, keyName(claim))
	}
	var trailer metadata.MD
	request := &lockwardpb.ResultRequest{Key: key, Namespace: claim.GetNamespace()}
	resp, err := c.keys.Result(ctx, request, grpc.Trailer(&trailer))
	if err != nil {
		return "", false, fromStatus(err, trailer)
	}
	return resp.GetResult(), resp.Result != nil, nil
}
