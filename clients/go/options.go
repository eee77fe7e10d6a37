package lockward

import (
	"time"

	"lockward.dev/go/lockwardpb"
)

// A LockOption configures a lock request.
type LockOption func(*lockOptions)

type lockOptions struct {
	acquire lockwardpb.Acquire
	renew   bool
	every   time.Duration // how often to renew, when not a third of the TTL
}

func newOptions(names []string, opts []LockOption) *lockOptions {
	o := &lockOptions{renew: true}
	o.acquire.Names = names
	o.acquire.TtlMs = uint64((30 * time.Second).Milliseconds())
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// renewInterval is how often the lease renews itself: every third of its
// TTL, or never (0) when taken WithoutRenewal.
func (o *lockOptions) renewInterval() time.Duration {
	if !o.renew {
		return 0
	}
	if o.every > 0 {
		return o.every
	}
	return time.Duration(o.acquire.TtlMs) * time.Millisecond / 3
}

// WithTTL sets the lease's time to live (30 s by default).
func WithTTL(ttl time.Duration) LockOption {
	return func(o *lockOptions) { o.acquire.TtlMs = uint64(ttl.Milliseconds()) }
}

// WithWait bounds the wait: past it, Lock fails with ErrTimedOut. Without
// it, Lock waits until its context is done.
func WithWait(wait time.Duration) LockOption {
	return func(o *lockOptions) {
		ms := uint64(wait.Milliseconds())
		o.acquire.WaitMs = &ms
	}
}

// WithLockDelay keeps the name held for delay after a lease lapses
// without a release (for resources that cannot check fences).
func WithLockDelay(delay time.Duration) LockOption {
	return func(o *lockOptions) { o.acquire.LockDelayMs = uint64(delay.Milliseconds()) }
}

// WithLabel names the holder in `lockward status` (host:pid by default).
func WithLabel(label string) LockOption {
	return func(o *lockOptions) { o.acquire.Label = label }
}

// Shared takes a reader's share of a read-write lock: readers hold
// together, a writer (Writer, or RWLock.Lock) alone.
func Shared() LockOption {
	return func(o *lockOptions) { o.acquire.Kind = lockwardpb.Kind_KIND_SHARED }
}

// Writer takes the writer's side of a read-write lock: it waits for the
// readers to leave, and holds alone. (A plain lock of the same name does
// not exclude the readers.)
func Writer() LockOption {
	return func(o *lockOptions) { o.acquire.Kind = lockwardpb.Kind_KIND_WRITER }
}

// Permits takes take of the permits of the semaphore of that name.
func Permits(permits, take uint32) LockOption {
	return func(o *lockOptions) {
		o.acquire.Kind = lockwardpb.Kind_KIND_PERMITS
		o.acquire.Permits = permits
		o.acquire.Take = take
	}
}

// WithoutRenewal leaves renewing to the caller (Lease.Renew): the lease
// then lapses at its TTL unless renewed.
func WithoutRenewal() LockOption {
	return func(o *lockOptions) { o.renew = false }
}
