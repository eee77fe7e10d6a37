package lockward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	"lockward.dev/go/lockwardpb"
)

// Lease is a held lock: its fence, its deadline, and a signal that fires
// when it is lost. Its methods are safe for concurrent use.
type Lease struct {
	name   string
	fences []uint64

	stream leaseStream
	cancel context.CancelFunc
	// direct holds the lease on the store itself (a Client from Open); nil
	// when the daemon holds it for us (Dial).
	direct directHolding
	ttl    time.Duration // direct only: what Renew(ctx, 0) asks for

	sendMu sync.Mutex // one Send at a time on the stream

	mu       sync.Mutex
	deadline time.Time
	lostErr  error
	lost     chan struct{}
	timer    *time.Timer
	released bool
	// The renewals sent and not answered yet, by id: when each was sent,
	// and where its caller waits for the answer.
	renewals map[uint64]pendingRenewal
	nextID   uint64

	confirmed chan struct{} // closed when the daemon confirms the end (Released, Completed)
	ended     chan struct{} // closed when the daemon's stream ends
	stop      chan struct{} // closed by Release: the renewer stops
	stopped   sync.Once
}

// directHolding is a lease held on the store itself, without the
// daemon's stream between: renewing and releasing it.
type directHolding interface {
	renew(ctx context.Context, ttl time.Duration) error
	release() error
	// deadline is until when the holder may act after a grant or renewal
	// for ttl sent at sent.
	deadline(sent time.Time, ttl time.Duration) time.Time
}

// newDirectLease is the Lease of a hold on the store itself, granted with
// deadline (on this process's clock, never later than the store's).
func newDirectLease(name string, fences []uint64, deadline time.Time, hold directHolding, ttl, renew time.Duration) *Lease {
	l := &Lease{
		name:     name,
		fences:   fences,
		cancel:   func() {},
		direct:   hold,
		ttl:      ttl,
		deadline: deadline,
		lost:     make(chan struct{}),
		ended:    make(chan struct{}),
		stop:     make(chan struct{}),
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(deadline), func() {
		l.loseWith(&Error{Kind: "Lost", Message: fmt.Sprintf("lock %q: its deadline passed before it was renewed", l.name)})
	})
	l.mu.Unlock()
	if renew > 0 {
		go l.renewEvery(renew)
	}
	return l
}

type pendingRenewal struct {
	sent   time.Time
	answer chan error // buffered: the receiver never waits on it
}

// Lock takes the lock name, waiting for it until ctx is done or the wait
// given WithWait runs out (ErrTimedOut). Cancelling ctx ends the wait and
// leaves no holder.
func (c *Client) Lock(ctx context.Context, name string, opts ...LockOption) (*Lease, error) {
	return c.lock(ctx, []string{name}, newOptions([]string{name}, opts))
}

// TryLock takes the lock name if it is free, else fails at once with
// ErrBusy (ErrNoPermits for a semaphore).
func (c *Client) TryLock(ctx context.Context, name string, opts ...LockOption) (*Lease, error) {
	return c.Lock(ctx, name, append(opts, WithWait(0))...)
}

// LockAll takes every one of names, all or none, in an order that cannot
// deadlock with another LockAll of the same names.
func (c *Client) LockAll(ctx context.Context, names []string, opts ...LockOption) (*Lease, error) {
	return c.lock(ctx, names, newOptions(names, opts))
}

func (c *Client) lock(ctx context.Context, names []string, o *lockOptions) (*Lease, error) {
	if c.native != nil {
		return c.native.lock(ctx, o)
	}
	lease, _, err := c.open(ctx, opening{
		name:    names[0],
		request: &lockwardpb.LeaseRequest{Request: &lockwardpb.LeaseRequest_Acquire{Acquire: &o.acquire}},
		call:    c.locks.Lease,
		renew:   o.renewInterval(),
	})
	return lease, err
}

// leaseStream is the stream of every lease-like call: Locks.Lease,
// Elections.Campaign and Keys.Claim.
type leaseStream = grpc.BidiStreamingClient[lockwardpb.LeaseRequest, lockwardpb.LeaseEvent]

// opening is how a lease stream starts.
type opening struct {
	name    string // for messages
	request *lockwardpb.LeaseRequest
	call    func(ctx context.Context, opts ...grpc.CallOption) (leaseStream, error)
	renew   time.Duration // how often to renew; 0: the caller renews
}

// open opens a lease stream, sends its first request and waits for the
// daemon's answer: Granted becomes a Lease; any other answer (a key's
// stored result) is returned as is, and the stream is over. Cancelling
// ctx ends the wait and leaves no holder.
func (c *Client) open(ctx context.Context, o opening) (*Lease, *lockwardpb.LeaseEvent, error) {
	// The stream outlives ctx: ctx bounds the wait, not the lease.
	streamCtx, cancel := context.WithCancel(context.Background())
	stream, err := o.call(streamCtx)
	if err != nil {
		cancel()
		return nil, nil, fromStatus(err, nil)
	}
	sent := time.Now()
	if err := stream.Send(o.request); err != nil {
		cancel()
		return nil, nil, streamError(stream, err)
	}
	type first struct {
		event *lockwardpb.LeaseEvent
		err   error
	}
	received := make(chan first, 1)
	go func() {
		event, err := stream.Recv()
		received <- first{event, err}
	}()
	var got first
	select {
	case <-ctx.Done():
		// Ending the stream ends the wait; the daemon leaves no holder.
		cancel()
		return nil, nil, ctx.Err()
	case got = <-received:
	}
	if got.err != nil {
		cancel()
		return nil, nil, streamError(stream, got.err)
	}
	granted := got.event.GetGranted()
	if granted == nil {
		cancel()
		return nil, got.event, nil
	}
	waited := time.Duration(granted.GetWaitedMs()) * time.Millisecond
	remaining := time.Duration(granted.GetRemainingMs()) * time.Millisecond
	l := &Lease{
		name:      o.name,
		fences:    granted.GetFences(),
		stream:    stream,
		cancel:    cancel,
		deadline:  sent.Add(waited + remaining),
		lost:      make(chan struct{}),
		renewals:  make(map[uint64]pendingRenewal),
		confirmed: make(chan struct{}),
		ended:     make(chan struct{}),
		stop:      make(chan struct{}),
	}
	if len(l.fences) == 0 {
		l.fences = []uint64{granted.GetFence()}
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.deadline), func() {
		l.loseWith(&Error{Kind: "Lost", Message: fmt.Sprintf("lock %q: its deadline passed before it was renewed", l.name)})
	})
	l.mu.Unlock()
	go l.receive()
	if o.renew > 0 {
		go l.renewEvery(o.renew)
	}
	return l, nil, nil
}

// streamError is the error that ended a stream, with the kind the daemon
// named in its trailer.
func streamError(stream leaseStream, err error) error {
	return fromStatus(err, stream.Trailer())
}

// Fence is the lease's fencing token: larger than every token issued
// before for the name. Send it with every write; the resource refuses
// older ones.
func (l *Lease) Fence() uint64 { return l.fences[0] }

// Fences are the fences of every name of a LockAll, in the order given.
func (l *Lease) Fences() []uint64 { return append([]uint64(nil), l.fences...) }

// Name is the lock's name (the first, for LockAll).
func (l *Lease) Name() string { return l.name }

// Deadline is when the lease ends unless renewed, on this process's clock:
// never later than the store's.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Lost is closed when the lease is lost: the store said so, its deadline
// passed, or the daemon went away.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is why the lease was lost (an error of kind ErrLost or
// ErrUnavailable), or nil while it is held.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// Context returns a context derived from ctx that is cancelled when the
// lease is lost, with the lease's error as its cause.
func (l *Lease) Context(ctx context.Context) context.Context {
	derived, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.lost:
			cancel(l.Err())
		case <-derived.Done():
		case <-l.ended:
			// Released (or gone): a loss may still have come first.
			if err := l.Err(); err != nil {
				cancel(err)
			}
		}
	}()
	return derived
}

func (l *Lease) loseWith(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil || l.released {
		return
	}
	l.lostErr = err
	close(l.lost)
	l.timer.Stop()
	l.stopRenewing()
}

func (l *Lease) stopRenewing() {
	l.stopped.Do(func() { close(l.stop) })
}

func (l *Lease) send(request *lockwardpb.LeaseRequest) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	return l.stream.Send(request)
}

// receive reads the daemon's events until the stream ends. It never
// blocks on a caller: a renewal's answer moves the deadline here, then is
// handed to its caller if one still waits.
func (l *Lease) receive() {
	defer close(l.ended)
	for {
		event, err := l.stream.Recv()
		if err != nil {
			l.mu.Lock()
			released := l.released
			l.mu.Unlock()
			if !released {
				cause := streamError(l.stream, err)
				l.loseWith(&Error{Kind: "Lost", Message: fmt.Sprintf("lock %q: the daemon went away: %v", l.name, cause)})
			}
			return
		}
		switch e := event.GetEvent().(type) {
		case *lockwardpb.LeaseEvent_Renewed:
			remaining := time.Duration(e.Renewed.GetRemainingMs()) * time.Millisecond
			l.answered(e.Renewed.GetId(), remaining, nil)
		case *lockwardpb.LeaseEvent_RenewFailed:
			failed := &Error{Kind: e.RenewFailed.GetKind(), Message: e.RenewFailed.GetMessage()}
			l.answered(e.RenewFailed.GetId(), 0, failed)
		case *lockwardpb.LeaseEvent_Released, *lockwardpb.LeaseEvent_Completed:
			close(l.confirmed)
			return
		case *lockwardpb.LeaseEvent_Lost:
			l.loseWith(&Error{Kind: "Lost", Message: fmt.Sprintf("lock %q was lost: %s", l.name, e.Lost.GetMessage())})
			return
		}
	}
}

// answered applies the answer to renewal id: the deadline becomes that
// renewal's send time + remaining, if later than it is (each answer is a
// bound on the daemon's deadline, also when it comes late).
func (l *Lease) answered(id uint64, remaining time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pending, ok := l.renewals[id]
	if !ok {
		return
	}
	delete(l.renewals, id)
	if err == nil && l.lostErr == nil {
		if deadline := pending.sent.Add(remaining); deadline.After(l.deadline) {
			l.deadline = deadline
			l.timer.Reset(time.Until(deadline))
		}
	}
	pending.answer <- err
}

// Renew pushes the lease's deadline to now + ttl (0: the lease's TTL).
// Leases renew themselves unless taken WithoutRenewal. A renewal the store
// did not confirm leaves the deadline where it was.
func (l *Lease) Renew(ctx context.Context, ttl time.Duration) error {
	if l.direct != nil {
		return l.renewDirect(ctx, ttl)
	}
	l.mu.Lock()
	if l.lostErr != nil {
		defer l.mu.Unlock()
		return l.lostErr
	}
	l.nextID++
	id := l.nextID
	answer := make(chan error, 1)
	l.renewals[id] = pendingRenewal{sent: time.Now(), answer: answer}
	l.mu.Unlock()
	renew := &lockwardpb.Renew{TtlMs: uint64(ttl.Milliseconds()), Id: id}
	if err := l.send(&lockwardpb.LeaseRequest{Request: &lockwardpb.LeaseRequest_Renew{Renew: renew}}); err != nil {
		return streamError(l.stream, err)
	}
	select {
	case <-ctx.Done():
		// A late answer still moves the deadline.
		return ctx.Err()
	case <-l.lost:
		return l.Err()
	case err := <-answer:
		return err
	}
}

// renewDirect renews a lease held on the store itself: the deadline
// moves to the renewal's send time + ttl once the store confirms it; a
// store that no longer names this holder loses the lease.
func (l *Lease) renewDirect(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.ttl
	}
	if err := l.Err(); err != nil {
		return err
	}
	sent := time.Now()
	err := l.direct.renew(ctx, ttl)
	if errors.Is(err, ErrLost) {
		l.loseWith(err)
		return err
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil {
		return l.lostErr
	}
	if deadline := l.direct.deadline(sent, ttl); deadline.After(l.deadline) && !l.released {
		l.deadline = deadline
		l.timer.Reset(time.Until(deadline))
	}
	return nil
}

// renewEvery renews the lease every interval until it is released or lost;
// a renewal that fails is retried sooner while the deadline allows.
func (l *Lease) renewEvery(interval time.Duration) {
	wait := interval
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithDeadline(context.Background(), l.Deadline())
		err := l.Renew(ctx, 0)
		cancel()
		switch {
		case err == nil:
			wait = interval
		case errors.Is(err, ErrLost):
			return
		default:
			wait = max(time.Until(l.Deadline())/4, time.Millisecond)
		}
	}
}

// Release gives the lock back and ends the lease's stream. It returns
// ErrLost's kind when the lease had been lost already (work done after
// the loss may have overlapped with another holder).
func (l *Lease) Release(ctx context.Context) error {
	release := &lockwardpb.LeaseRequest{Request: &lockwardpb.LeaseRequest_Release{Release: &lockwardpb.Release{}}}
	return l.end(ctx, release, "release")
}

// end sends the request that ends the lease (a Release, a claim's
// Complete) and waits for the daemon to confirm it.
func (l *Lease) end(ctx context.Context, request *lockwardpb.LeaseRequest, what string) error {
	l.mu.Lock()
	lostErr := l.lostErr
	already := l.released
	l.released = true
	l.timer.Stop()
	l.mu.Unlock()
	l.stopRenewing()
	defer l.cancel()
	if already {
		return nil
	}
	if lostErr != nil {
		return lostErr
	}
	if l.direct != nil {
		defer close(l.ended)
		return l.direct.release()
	}
	if err := l.send(request); err != nil {
		return streamError(l.stream, err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-l.confirmed:
		return nil
	case <-l.ended:
		select {
		case <-l.confirmed:
			return nil
		default:
			if err := l.Err(); err != nil {
				return err
			}
			return &Error{Kind: "Unavailable", Message: fmt.Sprintf("lock %q: the daemon went away before it confirmed the %s", l.name, what)}
		}
	}
}

// WithLock runs fn while holding the lock name: fn's context is cancelled
// if the lock is lost, and the lock is released when fn returns. It
// returns fn's error, or ErrLost's kind when the lock was lost meanwhile.
func (c *Client) WithLock(ctx context.Context, name string, fn func(ctx context.Context, lease *Lease) error, opts ...LockOption) error {
	lease, err := c.Lock(ctx, name, opts...)
	if err != nil {
		return err
	}
	work := lease.Context(ctx)
	fnErr := fn(work, lease)
	releaseErr := lease.Release(context.WithoutCancel(ctx))
	if fnErr != nil {
		return fnErr
	}
	return releaseErr
}
