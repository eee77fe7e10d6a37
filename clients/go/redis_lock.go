package lockward

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode"

	"lockward.dev/go/lockwardpb"
)

// The bounds of the Rust store's checks (crates/lockward/src/name.rs,
// duration.rs), so both refuse the same requests.
const (
	maxNameBytes = 256
	minTTL       = 10 * time.Millisecond
	maxTTL       = 7 * 24 * time.Hour
)

// The lease of a place in a name's line: how long a waiter that died
// holds up the line at most (backend/store_line.rs).
const (
	minPlace = 300 * time.Millisecond
	maxPlace = 3 * time.Second
)

// scriptTimeout bounds one script's round trip when the caller's context
// may end mid-call: the call runs to its answer, so a grant it made is
// known and given back.
const scriptTimeout = 5 * time.Second

// leaveBound is how long a wait that ends without the lock waits for its
// place to leave the line.
const leaveBound = 250 * time.Millisecond

// lock takes o's names on Redis, in an order that cannot deadlock with
// another LockAll of the same names, and returns their Lease.
func (s *redisStore) lock(ctx context.Context, o *lockOptions) (*Lease, error) {
	a := &o.acquire
	ttl := time.Duration(a.TtlMs) * time.Millisecond
	if err := checkRequest(a.Names, ttl); err != nil {
		return nil, err
	}
	delay := time.Duration(a.LockDelayMs) * time.Millisecond
	label := a.Label
	if label == "" {
		label = s.label
	}
	if a.Kind == lockwardpb.Kind_KIND_PERMITS {
		return s.takePermits(ctx, o, label)
	}
	var deadline time.Time
	try := a.WaitMs != nil && *a.WaitMs == 0
	if a.WaitMs != nil {
		deadline = time.Now().Add(time.Duration(*a.WaitMs) * time.Millisecond)
	}
	h := &redisHold{store: s, owner: newOwner(delay > 0), shared: a.Kind == lockwardpb.Kind_KIND_SHARED, ttl: ttl, delay: delay}
	order := slices.Clone(a.Names)
	slices.Sort(order)
	order = slices.Compact(order)
	fenceOf := make(map[string]uint64, len(order))
	var earliest time.Time
	for _, name := range order {
		fence, started, err := h.acquire(ctx, name, label, deadline, try)
		if err != nil {
			h.giveBack()
			return nil, err
		}
		h.names = append(h.names, name)
		fenceOf[name] = fence
		if earliest.IsZero() {
			earliest = started
		}
	}
	deadline = localDeadline(earliest, ttl, delay)
	// The first names' leases ran while the wait went on for the others:
	// renewed together, the lease's deadline counts from the renewal.
	if len(order) > 1 && time.Since(earliest) > ttl/3 {
		renewed := time.Now()
		if err := h.renew(ctx, ttl); err != nil {
			h.giveBack()
			return nil, err
		}
		deadline = localDeadline(renewed, ttl, delay)
	}
	fences := make([]uint64, len(a.Names))
	for i, name := range a.Names {
		fences[i] = fenceOf[name]
	}
	return newDirectLease(a.Names[0], fences, deadline, h, ttl, o.renewInterval()), nil
}

// checkRequest refuses what the Rust store refuses, with its words.
func checkRequest(names []string, ttl time.Duration) error {
	if len(names) == 0 {
		return &Error{Kind: "InvalidArgument", Message: "name: no lock name given"}
	}
	for _, name := range names {
		switch {
		case name == "":
			return &Error{Kind: "InvalidArgument", Message: "name: a lock name cannot be empty"}
		case len(name) > maxNameBytes:
			return &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("name: a lock name is at most %d bytes, this one has %d", maxNameBytes, len(name))}
		}
		for at, c := range name {
			if unicode.IsControl(c) {
				return &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("name: control character %q at byte %d is not allowed in a lock name", c, at)}
			}
		}
	}
	switch {
	case ttl < minTTL:
		return &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("ttl: %v is shorter than the minimum %v", ttl, minTTL)}
	case ttl > maxTTL:
		return &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("ttl: %v is longer than the maximum %v", ttl, maxTTL)}
	}
	return nil
}

// redisHold is what a Lease holds on Redis directly: one owner id on
// each of its names.
type redisHold struct {
	store  *redisStore
	owner  string
	shared bool
	ttl    time.Duration
	// The store keeps each name this much longer than ttl, for a holder
	// that stops without a release (WithLockDelay).
	delay time.Duration
	names []string // held, in the order taken
}

func (h *redisHold) deadline(sent time.Time, ttl time.Duration) time.Time {
	return localDeadline(sent, ttl, h.delay)
}

// acquire takes name for h's owner: at once when it is free, else in the
// name's line, woken by the release that makes it this waiter's turn.
// try fails at once with ErrBusy's kind when it is held; deadline zero
// waits until ctx ends. Returns the fence and when the
// granting attempt was sent (the lease's deadline counts from it).
//
// A wait that ends without the lock (ctx, deadline, an error) leaves the
// line; a grant that arrives after ctx ended is given back.
func (h *redisHold) acquire(ctx context.Context, name, label string, deadline time.Time, try bool) (uint64, time.Time, error) {
	s := h.store
	k := s.keys(name)
	fence, _, started, err := h.attempt(ctx, k, name, label, 0)
	if err != nil || fence > 0 {
		return fence, started, err
	}
	if try {
		return 0, started, &Error{Kind: "Busy", Message: fmt.Sprintf("lock %q is held by another owner", name)}
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return 0, started, timedOut(name)
	}
	// Listening before joining the line, so the turn cannot pass unheard.
	wake := make(chan struct{}, 1)
	stop, err := s.wakeups.listen(ctx, k.turnChannel(h.owner), wake)
	if err != nil {
		return 0, started, s.failed(err)
	}
	defer stop()
	granted := false
	defer func() {
		if !granted {
			h.leaveLine(k)
		}
	}()
	place := min(max(h.ttl, minPlace), maxPlace)
	fence, started, err = waitTurns(ctx, name, deadline, place, wake, func() (uint64, time.Duration, time.Time, error) {
		return h.attempt(ctx, k, name, label, place)
	})
	granted = err == nil
	return fence, started, err
}

// waitTurns makes attempt again, as store_line.rs's waiters do, until it
// grants (its fence, and when the granting attempt was sent): after each
// wake-up, at the holder's expiry (the attempt's time left, -1 for the
// next turn), and at least every third of a place's lease; a store that
// drops meanwhile is waited out with a growing pause. It ends with
// ErrTimedOut's kind at deadline (zero: none) and with ctx's error.
func waitTurns(ctx context.Context, name string, deadline time.Time, place time.Duration, wake <-chan struct{}, attempt func() (uint64, time.Duration, time.Time, error)) (uint64, time.Time, error) {
	outage := 20 * time.Millisecond
	for {
		fence, left, started, err := attempt()
		pause := place / 3
		switch {
		case err == nil && fence > 0:
			return fence, started, nil
		case err == nil:
			outage = 20 * time.Millisecond
			if left >= 0 {
				pause = min(pause, left+time.Millisecond)
			}
		case isKind(err, "Unavailable"):
			// The store dropped while we wait (a restart, a failover):
			// waited out, up to the deadline.
			pause, outage = outage, min(outage*2, time.Second)
		default:
			return 0, started, err
		}
		if !deadline.IsZero() {
			if !time.Now().Before(deadline) {
				return 0, started, timedOut(name)
			}
			pause = min(pause, time.Until(deadline))
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return 0, started, ctx.Err()
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

func timedOut(name string) error {
	return &Error{Kind: "TimedOut", Message: fmt.Sprintf("lock %q: the wait ran out before it was free", name)}
}

// attempt runs one acquire (a reader's read when shared); place > 0 joins
// the line or renews this waiter's place in it. Returns the fence when
// granted, else when to look again (-1: at the next turn). A grant that
// arrives after ctx ended is given back, and ctx's error returned.
func (h *redisHold) attempt(ctx context.Context, k redisKeys, name, label string, place time.Duration) (fence uint64, left time.Duration, started time.Time, err error) {
	script := "acquire"
	if h.shared {
		script = "reader_read"
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, time.Now(), err
	}
	call, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptTimeout)
	defer cancel()
	started = time.Now()
	reply, err := h.store.runConfirmed(call, fmt.Sprintf("the grant of %q", name), script,
		[]string{k.lock, k.fence, k.holder, k.queue, k.places, k.channel, k.readers},
		h.owner, (h.ttl + h.delay).Milliseconds(), label, place.Milliseconds())
	var unconfirmed *notConfirmed
	if errors.As(err, &unconfirmed) {
		// Undone, so nobody holds what the caller is told it lacks.
		h.releaseName(k)
		return 0, 0, started, unconfirmed.err
	}
	if err != nil {
		return 0, 0, started, err
	}
	fence, left, err = acquireReply(reply, k)
	if err != nil {
		return 0, 0, started, h.store.protocol(err.Error())
	}
	if fence > 0 && ctx.Err() != nil {
		h.releaseName(k)
		return 0, 0, started, ctx.Err()
	}
	return fence, left, started, nil
}

// acquireReply reads what lua/acquire.lua answered.
func acquireReply(reply []any, k redisKeys) (fence uint64, left time.Duration, err error) {
	if len(reply) < 2 {
		return 0, 0, fmt.Errorf("unexpected acquire reply %v", reply)
	}
	code, _ := reply[0].(int64)
	detail := reply[1]
	switch code {
	case 1:
		f, ok := asInt(detail)
		if !ok || f <= 0 {
			return 0, 0, fmt.Errorf("bad fence in %v", reply)
		}
		return uint64(f), 0, nil
	case 0:
		ms, _ := asInt(detail)
		if ms < 0 {
			return 0, -1, nil
		}
		return 0, time.Duration(ms) * time.Millisecond, nil
	case -1:
		return 0, 0, fmt.Errorf("key %s holds a %v that lockward did not write; it was left untouched", k.lock, detail)
	case -2:
		return 0, 0, fmt.Errorf("key %s holds a value without expiry that lockward did not write; it was left untouched", k.lock)
	case -3:
		return 0, 0, fmt.Errorf("fence counter %s is not a number; it was left untouched", k.fence)
	case -4:
		return 0, 0, fmt.Errorf("the line of waiters %s or %s holds values that lockward did not write; they were left untouched", k.queue, k.places)
	}
	return 0, 0, fmt.Errorf("unexpected acquire reply %v", reply)
}

// asInt reads an integer reply, or a number in a string reply.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// leaveLine takes the waiter's place out of the line before returning, so
// a try made right after the wait ended does not find the place there; a
// store slower than leaveBound to answer (a cancelled wait should end at
// once) finishes it in the background, and a place left behind lapses
// with its lease.
func (h *redisHold) leaveLine(k redisKeys) {
	left := make(chan struct{})
	go func() {
		defer close(left)
		ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
		defer cancel()
		_, _ = h.store.run(ctx, "leave", []string{k.lock, k.channel, k.queue, k.places}, h.owner)
	}()
	select {
	case <-left:
	case <-time.After(leaveBound):
	}
}

// renew extends every name for ttl; ErrLost's kind when the store no
// longer names this holder on one of them.
func (h *redisHold) renew(ctx context.Context, ttl time.Duration) error {
	for _, name := range h.names {
		k := h.store.keys(name)
		reply, err := h.store.runConfirmed(ctx, fmt.Sprintf("the renewal of %q", name), "reader_extend", []string{k.lock, k.holder, k.readers}, h.owner, (ttl + h.delay).Milliseconds())
		var unconfirmed *notConfirmed
		if errors.As(err, &unconfirmed) {
			// Not lost: the deadline stays where the last confirmed renewal put it.
			return unconfirmed.err
		}
		if err != nil {
			return err
		}
		if done, _ := asInt(reply[0]); done != 1 {
			return &Error{Kind: "Lost", Message: fmt.Sprintf("lock %q was lost: the store no longer names this holder (its lease ran out, or it was taken)", name)}
		}
	}
	return nil
}

// release gives every name back, each script run to its answer (within
// scriptTimeout) whatever ctx does, so a release never stops half way;
// ErrLost's kind when one was no longer
// held (work done meanwhile may have overlapped with another holder).
func (h *redisHold) release() error {
	var lost error
	for _, name := range h.names {
		done, err := h.releaseName(h.store.keys(name))
		if err != nil {
			return err
		}
		if !done && lost == nil {
			lost = &Error{Kind: "Lost", Message: fmt.Sprintf("lock %q had been lost before its release", name)}
		}
	}
	return lost
}

func (h *redisHold) releaseName(k redisKeys) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	reply, err := h.store.run(ctx, "reader_release", []string{k.lock, k.channel, k.holder, k.queue, k.places, k.readers}, h.owner)
	if err != nil {
		return false, err
	}
	done, _ := asInt(reply[0])
	return done == 1, nil
}

// giveBack releases what a LockAll took before one of its names failed.
func (h *redisHold) giveBack() {
	for _, name := range h.names {
		_, _ = h.releaseName(h.store.keys(name))
	}
	h.names = nil
}

// isKind says whether err is, or wraps, lockward's error of kind.
func isKind(err error, kind string) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == kind
}
