package lockward

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// semKeys are where Redis keeps semaphore N, beside N's lock key
// (crates/lockward/src/backend/redis/permits.rs).
type semKeys struct {
	holders, permits, taken, fence string
}

func (s *redisStore) semKeys(name string) semKeys {
	lock := s.keys(name).lock
	return semKeys{
		holders: lock + ":sem:holders",
		permits: lock + ":sem:permits",
		taken:   lock + ":sem:taken",
		fence:   lock + ":sem:fence",
	}
}

// takePermits takes take of the permits of semaphore name, as the Rust
// recipe does (recipe/semaphore): one atomic take; when they do not fit,
// the waiter waits for its turn in the line of lock "NAME#line", then,
// first in line, tries again with a growing pause (2 to 100 ms) until
// they fit, its wait runs out or ctx ends. A wait that ends without the
// permits holds nothing, and leaves the line.
func (s *redisStore) takePermits(ctx context.Context, o *lockOptions, label string) (*Lease, error) {
	a := &o.acquire
	name := a.Names[0]
	if len(a.Names) != 1 {
		return nil, &Error{Kind: "InvalidArgument", Message: "permits: a semaphore is one name"}
	}
	if a.Permits == 0 || a.Take == 0 || a.Take > a.Permits {
		return nil, &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("permits: take 1 to %d permits of %q, not %d", a.Permits, name, a.Take)}
	}
	ttl := time.Duration(a.TtlMs) * time.Millisecond
	if a.LockDelayMs > 0 {
		return nil, &Error{Kind: "InvalidArgument", Message: "lock_delay: a semaphore's permits are freed when their lease lapses; a lock-delay is for locks"}
	}
	h := &permitHold{store: s, name: name, owner: newOwner(false), keys: s.semKeys(name), ttl: ttl}
	began := time.Now()
	fence, free, err := h.take(ctx, a.Permits, a.Take)
	if err != nil || fence > 0 {
		return h.lease(fence, began, o), err
	}
	noPermits := func(free int64) error {
		return &Error{Kind: "NoPermits", Message: fmt.Sprintf("semaphore %q cannot grant that now: %d wanted, %d of %d free", name, a.Take, free, a.Permits)}
	}
	if a.WaitMs != nil && *a.WaitMs == 0 {
		return nil, noPermits(free)
	}
	var deadline time.Time
	if a.WaitMs != nil {
		deadline = began.Add(time.Duration(*a.WaitMs) * time.Millisecond)
	}
	// First in line: only this waiter tries until its permits fit.
	line := &redisHold{store: s, owner: newOwner(false), ttl: ttl}
	if _, _, err := line.acquire(ctx, name+"#line", label, deadline, false); err != nil {
		return nil, err
	}
	line.names = []string{name + "#line"}
	defer line.giveBack()
	pause := 2 * time.Millisecond
	renewed := time.Now()
	for {
		// The turn is kept for as long as the wait goes on, as the Rust
		// recipe's guard of the line renews itself.
		if time.Since(renewed) > ttl/3 {
			renewed = time.Now()
			_ = line.renew(ctx, ttl)
		}
		tried := time.Now()
		fence, _, err := h.take(ctx, a.Permits, a.Take)
		if err != nil || fence > 0 {
			return h.lease(fence, tried, o), err
		}
		// Drawn from the upper half of a doubling range, so waiters on
		// other machines spread out.
		wait := pause/2 + time.Duration(rand.Int64N(int64(pause/2)+1))
		pause = min(pause*2, 100*time.Millisecond)
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return nil, &Error{Kind: "TimedOut", Message: fmt.Sprintf("semaphore %q: the wait ran out before %d permits were free", name, a.Take)}
			}
			wait = min(wait, left)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// permitHold is what a Lease holds of a semaphore on Redis directly.
type permitHold struct {
	store *redisStore
	name  string
	owner string
	keys  semKeys
	ttl   time.Duration
}

// lease is the Lease of permits taken with fence by an attempt sent at
// sent; nil when nothing was taken.
func (h *permitHold) lease(fence uint64, sent time.Time, o *lockOptions) *Lease {
	if fence == 0 {
		return nil
	}
	return newDirectLease(h.name, []uint64{fence}, h.deadline(sent, h.ttl), h, h.ttl, o.renewInterval())
}

func (h *permitHold) deadline(sent time.Time, ttl time.Duration) time.Time {
	return localDeadline(sent, ttl, 0)
}

// take runs one take: the fence when taken, else how many are free. A
// take that arrives after ctx ended is given back.
func (h *permitHold) take(ctx context.Context, of, take uint32) (fence uint64, free int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	call, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptTimeout)
	defer cancel()
	k := h.keys
	reply, err := h.store.runConfirmed(call, fmt.Sprintf("the permits of %q", h.name), "permit_take", []string{k.holders, k.permits, k.taken, k.fence}, h.owner, of, take, h.ttl.Milliseconds())
	var unconfirmed *notConfirmed
	if errors.As(err, &unconfirmed) {
		// Given back, so nobody holds what the caller lacks.
		_ = h.release()
		return 0, 0, unconfirmed.err
	}
	if err != nil {
		return 0, 0, err
	}
	code, _ := asInt(reply[0])
	var detail int64
	if len(reply) > 1 {
		detail, _ = asInt(reply[1])
	}
	switch {
	case code == 1 && detail > 0:
		if ctx.Err() != nil {
			_ = h.release()
			return 0, 0, ctx.Err()
		}
		return uint64(detail), 0, nil
	case code == 0:
		return 0, detail, nil
	case code == -3:
		return 0, 0, h.store.protocol(fmt.Sprintf("the fence counter %s is not a number; it was left untouched", k.fence))
	}
	return 0, 0, h.store.protocol(fmt.Sprintf("the keys of semaphore %q (%s…) hold values that lockward did not write; they were left untouched", h.name, k.holders))
}

func (h *permitHold) renew(ctx context.Context, ttl time.Duration) error {
	k := h.keys
	reply, err := h.store.runConfirmed(ctx, fmt.Sprintf("the renewal of the permits of %q", h.name), "permit_extend", []string{k.holders, k.permits, k.taken}, h.owner, ttl.Milliseconds())
	var unconfirmed *notConfirmed
	if errors.As(err, &unconfirmed) {
		return unconfirmed.err
	}
	if err != nil {
		return err
	}
	if done, _ := asInt(reply[0]); done != 1 {
		return &Error{Kind: "Lost", Message: fmt.Sprintf("the permits of %q were lost: the store no longer lists this holder (its lease ran out)", h.name)}
	}
	return nil
}

// release gives the permits back, run to its answer (within
// scriptTimeout) whatever the caller's context does.
func (h *permitHold) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	k := h.keys
	reply, err := h.store.run(ctx, "permit_release", []string{k.holders, k.permits, k.taken}, h.owner)
	if err != nil {
		return err
	}
	if done, _ := asInt(reply[0]); done != 1 {
		return &Error{Kind: "Lost", Message: fmt.Sprintf("the permits of %q had been lost before their release", h.name)}
	}
	return nil
}
