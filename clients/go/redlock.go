package lockward

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"lockward.dev/go/lockwardpb"
)

// redlockStore is one lock over N independent Redis masters, granted by a
// majority, with the Rust store's two rounds that keep its fences
// monotonic, its line on every master and its scripts
// (crates/lockward/src/backend/redlock, whose module comment argues
// why it is safe), so Go and Rust holders share one Redlock.
type redlockStore struct {
	masters []*redisStore
	quorum  int
	address string
	label   string
}

// redlockNodeTimeout bounds a step on one master that carries no TTL.
const redlockNodeTimeout = 250 * time.Millisecond

// nodeTimeout is a step's bound on one master: short against the TTL, so
// one slow or paused master cannot eat the validity.
func nodeTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 20*time.Millisecond), 250*time.Millisecond)
}

// openRedlock connects to every master of "redlock://h1:p1,h2:p2,h3:p3";
// it opens when a majority answers.
func openRedlock(raw string) (*redlockStore, error) {
	u, err := parseRedisURL(raw)
	if err != nil {
		return nil, err
	}
	if n := len(u.addrs); n < 3 || n%2 == 0 {
		return nil, urlError(fmt.Sprintf("redlock:// needs an odd number of masters, at least 3 (got %d), so that any two majorities share a master", n))
	}
	r := &redlockStore{quorum: len(u.addrs)/2 + 1, address: "redlock://" + strings.Join(u.addrs, ","), label: defaultLabel()}
	for _, addr := range u.addrs {
		one := *u
		one.cluster, one.addrs = false, []string{addr}
		master, err := newRedisStore(&one, "redis://"+addr)
		if err != nil {
			r.close()
			return nil, err
		}
		r.masters = append(r.masters, master)
	}
	pings := onAll(r, redlockNodeTimeout*8, func(ctx context.Context, m *redisStore) (struct{}, error) {
		return struct{}{}, m.rdb.Ping(ctx).Err()
	})
	if failed := failures(pings); len(failed) > len(r.masters)-r.quorum {
		r.close()
		return nil, r.noQuorum(failed)
	}
	return r, nil
}

func (r *redlockStore) close() error {
	for _, m := range r.masters {
		_ = m.close()
	}
	return nil
}

// result is one master's answer to a step, or why it gave none.
type result[T any] struct {
	value T
	err   error
}

// onAll runs step on every master at once, each bounded by timeout and
// run to its answer whatever the caller's context does.
func onAll[T any](r *redlockStore, timeout time.Duration, step func(ctx context.Context, m *redisStore) (T, error)) []result[T] {
	out := make([]result[T], len(r.masters))
	var wg sync.WaitGroup
	for i, m := range r.masters {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			v, err := step(ctx, m)
			if err != nil {
				err = fmt.Errorf("%s: %w", m.address, err)
			}
			out[i] = result[T]{v, err}
		})
	}
	wg.Wait()
	return out
}

func failures[T any](results []result[T]) []string {
	var failed []string
	for _, r := range results {
		if r.err != nil {
			failed = append(failed, r.err.Error())
		}
	}
	return failed
}

func (r *redlockStore) noQuorum(failed []string) error {
	return &Error{Kind: "Unavailable", Message: fmt.Sprintf("%s: %d of %d masters failed, a majority of %d is needed: %s",
		r.address, len(failed), len(r.masters), r.quorum, strings.Join(failed, "; "))}
}

func (r *redlockStore) lock(ctx context.Context, o *lockOptions) (*Lease, error) {
	a := &o.acquire
	ttl := time.Duration(a.TtlMs) * time.Millisecond
	if err := checkRequest(a.Names, ttl); err != nil {
		return nil, err
	}
	switch a.Kind {
	case lockwardpb.Kind_KIND_SHARED:
		return nil, unsupported("a read-write lock's readers on Redlock")
	case lockwardpb.Kind_KIND_PERMITS:
		return nil, unsupported("a semaphore on Redlock")
	}
	delay := time.Duration(a.LockDelayMs) * time.Millisecond
	label := a.Label
	if label == "" {
		label = r.label
	}
	var deadline time.Time
	try := a.WaitMs != nil && *a.WaitMs == 0
	if a.WaitMs != nil {
		deadline = time.Now().Add(time.Duration(*a.WaitMs) * time.Millisecond)
	}
	h := &redlockHold{store: r, owner: newOwner(delay > 0), ttl: ttl, delay: delay}
	order := slices.Clone(a.Names)
	slices.Sort(order)
	order = slices.Compact(order)
	fenceOf := make(map[string]uint64, len(order))
	var earliest time.Time
	for _, name := range order {
		fence, started, err := h.acquire(ctx, name, label, deadline, try)
		if err != nil {
			_ = h.release()
			return nil, err
		}
		h.names = append(h.names, name)
		fenceOf[name] = fence
		if earliest.IsZero() {
			earliest = started
		}
	}
	leaseDeadline := localDeadline(earliest, ttl, delay)
	if len(order) > 1 && time.Since(earliest) > ttl/3 {
		renewed := time.Now()
		if err := h.renew(ctx, ttl); err != nil {
			_ = h.release()
			return nil, err
		}
		leaseDeadline = localDeadline(renewed, ttl, delay)
	}
	fences := make([]uint64, len(a.Names))
	for i, name := range a.Names {
		fences[i] = fenceOf[name]
	}
	return newDirectLease(a.Names[0], fences, leaseDeadline, h, ttl, o.renewInterval()), nil
}

// redlockHold is what a Lease holds on Redlock: one owner id on each of
// its names, on a majority of the masters.
type redlockHold struct {
	store *redlockStore
	owner string
	ttl   time.Duration
	delay time.Duration
	names []string
}

func (h *redlockHold) deadline(sent time.Time, ttl time.Duration) time.Time {
	return localDeadline(sent, ttl, h.delay)
}

// acquire takes name: at once when a majority grants it, else in the
// line every master keeps, under one ticket (this process's clock when
// the wait began), woken by a release on any master.
func (h *redlockHold) acquire(ctx context.Context, name, label string, deadline time.Time, try bool) (uint64, time.Time, error) {
	r := h.store
	k := r.masters[0].keys(name)
	started := time.Now()
	fence, _, err := h.attempt(ctx, k, label, 0, 0)
	if err != nil || fence > 0 {
		return fence, started, err
	}
	if try {
		return 0, started, &Error{Kind: "Busy", Message: fmt.Sprintf("lock %q is held by another owner", name)}
	}
	if !deadline.IsZero() && !time.Now().Before(deadline) {
		return 0, started, timedOut(name)
	}
	wake := make(chan struct{}, 1)
	var stops []func()
	for _, m := range r.masters {
		listenCtx, cancel := context.WithTimeout(ctx, redlockNodeTimeout)
		if stop, err := m.wakeups.listen(listenCtx, k.turnChannel(h.owner), wake); err == nil {
			stops = append(stops, stop)
		}
		cancel()
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	granted := false
	defer func() {
		if !granted {
			h.leaveLine(k)
		}
	}()
	place := min(max(h.ttl, minPlace), maxPlace)
	ticket := time.Now().UnixMicro()
	fence, started, err = waitTurns(ctx, name, deadline, place, wake, func() (uint64, time.Duration, time.Time, error) {
		sent := time.Now()
		fence, left, err := h.attempt(ctx, k, label, place, ticket)
		return fence, left, sent, err
	})
	granted = err == nil
	return fence, started, err
}

// vote is what one master said in round one.
type vote struct {
	granted bool
	reading uint64
	left    time.Duration // held: the holder's time left (-1: unknown)
}

// attempt is one grant (both rounds). place > 0 joins the line on every
// master under ticket, or renews the place. Returns the token when
// granted, else when to look again (-1: at the next turn). Whatever it
// took is undone everywhere when the grant fails, or when ctx ended
// meanwhile.
func (h *redlockHold) attempt(ctx context.Context, k redisKeys, label string, place time.Duration, ticket int64) (uint64, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	r := h.store
	kept := h.ttl + h.delay
	started := time.Now()
	limit := kept - (kept/100 + 2*time.Millisecond)
	timeout := nodeTimeout(kept)
	votes := onAll(r, timeout, func(ctx context.Context, m *redisStore) (vote, error) {
		reply, err := m.run(ctx, "redlock_grant", []string{k.lock, k.fence, k.holder, k.queue, k.places, k.channel},
			h.owner, kept.Milliseconds(), label, place.Milliseconds(), ticket)
		if err != nil {
			return vote{}, err
		}
		fence, left, err := acquireReply(reply, k)
		if err != nil {
			return vote{}, &Error{Kind: "Protocol", Message: err.Error()}
		}
		return vote{granted: fence > 0, reading: fence, left: left}, nil
	})
	var granted []int
	var token uint64
	var lefts []time.Duration
	var failed []string
	for i, v := range votes {
		switch {
		case isKind(v.err, "Protocol"):
			h.releaseName(k)
			return 0, 0, v.err
		case v.err != nil:
			failed = append(failed, v.err.Error())
		case v.value.granted:
			granted = append(granted, i)
			token = max(token, v.value.reading)
		default:
			lefts = append(lefts, v.value.left)
		}
	}
	if len(granted) >= r.quorum && time.Since(started) < limit {
		// Round two: raise the counters to the token where this owner holds.
		token++
		accepted := 0
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, i := range granted {
			wg.Go(func() {
				call, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				reply, err := r.masters[i].run(call, "redlock_raise", []string{k.lock, k.fence, k.queue, k.places}, h.owner, token)
				if done, _ := asInt(firstOf(reply)); err == nil && done == 1 {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if accepted >= r.quorum && time.Since(started) < limit {
			if ctx.Err() != nil {
				h.releaseName(k)
				return 0, 0, ctx.Err()
			}
			return token, 0, nil
		}
	}
	// Not granted: undo what was taken, everywhere (a timed-out step may
	// still have landed).
	h.releaseName(k)
	if len(failed) > len(r.masters)-r.quorum {
		return 0, 0, r.noQuorum(failed)
	}
	// Free once enough holders' keys expire to leave a majority; a split
	// vote is tried again soon, with jitter.
	needed := r.quorum - (len(r.masters) - len(lefts) - len(failed))
	if needed <= 0 {
		return 0, time.Duration(1+rand.IntN(9)) * time.Millisecond, nil
	}
	slices.Sort(lefts)
	return 0, lefts[needed-1], nil
}

func firstOf(reply []any) any {
	if len(reply) == 0 {
		return nil
	}
	return reply[0]
}

// releaseName releases name on every master (owner-checked, so harmless
// where this owner does not hold it); how many released, and the failures.
func (h *redlockHold) releaseName(k redisKeys) (int, []string) {
	results := onAll(h.store, redlockNodeTimeout, func(ctx context.Context, m *redisStore) (int64, error) {
		reply, err := m.run(ctx, "release", []string{k.lock, k.channel, k.holder, k.queue, k.places}, h.owner)
		if err != nil {
			return 0, err
		}
		done, _ := asInt(firstOf(reply))
		return done, nil
	})
	released := 0
	for _, res := range results {
		if res.err == nil && res.value == 1 {
			released++
		}
	}
	return released, failures(results)
}

// leaveLine takes the waiter's place out of every master's line.
func (h *redlockHold) leaveLine(k redisKeys) {
	onAll(h.store, redlockNodeTimeout, func(ctx context.Context, m *redisStore) (struct{}, error) {
		_, err := m.run(ctx, "leave", []string{k.lock, k.channel, k.queue, k.places}, h.owner)
		return struct{}{}, err
	})
}

// renew extends every name on every master: kept while a majority
// accepts; lost when too many refuse for that.
func (h *redlockHold) renew(_ context.Context, ttl time.Duration) error {
	r := h.store
	for _, name := range h.names {
		k := r.masters[0].keys(name)
		results := onAll(r, nodeTimeout(ttl+h.delay), func(ctx context.Context, m *redisStore) (int64, error) {
			reply, err := m.run(ctx, "extend", []string{k.lock, k.holder}, h.owner, (ttl + h.delay).Milliseconds())
			if err != nil {
				return 0, err
			}
			done, _ := asInt(firstOf(reply))
			return done, nil
		})
		done, refused := 0, 0
		for _, res := range results {
			switch {
			case res.err == nil && res.value == 1:
				done++
			case res.err == nil:
				refused++
			}
		}
		switch {
		case done >= r.quorum:
		case refused > len(r.masters)-r.quorum:
			return &Error{Kind: "Lost", Message: fmt.Sprintf("lock %q was lost: a majority of the masters no longer names this holder", name)}
		default:
			return r.noQuorum(failures(results))
		}
	}
	return nil
}

// release gives every name back on every master; ErrLost's kind when no
// master held one any more.
func (h *redlockHold) release() error {
	var lost error
	for _, name := range h.names {
		released, failed := h.releaseName(h.store.masters[0].keys(name))
		switch {
		case released > 0:
		case len(failed) == 0:
			if lost == nil {
				lost = &Error{Kind: "Lost", Message: fmt.Sprintf("lock %q had been lost before its release", name)}
			}
		default:
			return h.store.noQuorum(failed)
		}
	}
	h.names = nil
	return lost
}

// inspect is name's holder as a majority of the masters show it.
func (r *redlockStore) inspect(ctx context.Context, name string) (*Holder, error) {
	rows := onAll(r, redlockNodeTimeout, func(ctx context.Context, m *redisStore) (*Holder, error) {
		return m.inspect(ctx, name)
	})
	count := map[string]int{}
	for _, row := range rows {
		if row.err == nil && row.value != nil {
			count[row.value.GetOwner()]++
		}
	}
	var held []*Holder
	for _, row := range rows {
		if row.err == nil && row.value != nil && count[row.value.GetOwner()] >= r.quorum {
			held = append(held, row.value)
		}
	}
	if len(held) == 0 {
		if failed := failures(rows); len(failed) > len(r.masters)-r.quorum {
			return nil, r.noQuorum(failed)
		}
		return nil, nil
	}
	// Held while a majority of its keys live; the fence is the largest.
	slices.SortFunc(held, func(a, b *Holder) int { return cmp.Compare(b.GetExpiresInMs(), a.GetExpiresInMs()) })
	out := &Holder{Name: name, Owner: held[0].GetOwner(), Holding: lockwardpb.Holding_HOLDING_LOCK}
	expires := held[r.quorum-1].GetExpiresInMs()
	out.ExpiresInMs = &expires
	for _, h := range held {
		if h.Fence != nil && (out.Fence == nil || *h.Fence > *out.Fence) {
			out.Fence = h.Fence
		}
		if out.Label == nil {
			out.Label = h.Label
		}
	}
	return out, nil
}

// list is every lock a majority holds whose name starts with prefix.
func (r *redlockStore) list(ctx context.Context, prefix string) ([]*Holder, error) {
	seen := map[string]bool{}
	for _, m := range r.masters {
		rows, err := m.list(ctx, prefix)
		if err != nil {
			continue
		}
		for _, row := range rows {
			seen[row.GetName()] = true
		}
	}
	var out []*Holder
	for _, name := range slices.Sorted(maps.Keys(seen)) {
		row, err := r.inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		if row != nil {
			out = append(out, row)
		}
	}
	return out, nil
}

// listenReleases wakes wake at a release of name on any master.
func (r *redlockStore) listenReleases(ctx context.Context, name string, wake chan struct{}) (func(), error) {
	var stops []func()
	for _, m := range r.masters {
		listenCtx, cancel := context.WithTimeout(ctx, redlockNodeTimeout)
		if stop, err := m.listenReleases(listenCtx, name, wake); err == nil {
			stops = append(stops, stop)
		}
		cancel()
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}, nil
}

// listElection lists election on every master, best effort.
func (r *redlockStore) listElection(ctx context.Context, election string, lease time.Duration) {
	for _, m := range r.masters {
		m.listElection(ctx, election, lease)
	}
}

func (r *redlockStore) idempotent(context.Context, *lockwardpb.Claim, func(ctx context.Context, lease *Lease) (string, error)) (string, bool, error) {
	return "", false, unsupported("an idempotency key on Redlock")
}

func (r *redlockStore) storedResult(context.Context, string) (string, bool, error) {
	return "", false, unsupported("an idempotency key on Redlock")
}

func (r *redlockStore) allow(context.Context, *lockwardpb.CheckRequest) (Decision, error) {
	return Decision{}, unsupported("a rate limit on Redlock")
}
