package lockward

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"lockward.dev/go/lockwardpb"
)

// An ElectOption configures a campaign.
type ElectOption func(*lockwardpb.Campaign)

// WithElectionTiming sets client-go's three durations: the store keeps a
// leader's lease for leaseDuration without renewal (15 s by default); the
// leader renews every retryPeriod (2 s) and stops leading when it has not
// renewed for renewDeadline (10 s). retryPeriod < renewDeadline <
// leaseDuration, or the campaign fails with ErrInvalidArgument.
func WithElectionTiming(leaseDuration, renewDeadline, retryPeriod time.Duration) ElectOption {
	return func(c *lockwardpb.Campaign) {
		c.LeaseMs = uint64(leaseDuration.Milliseconds())
		c.RenewDeadlineMs = uint64(renewDeadline.Milliseconds())
		c.RetryMs = uint64(retryPeriod.Milliseconds())
	}
}

func newCampaign(election, identity string, opts []ElectOption) *lockwardpb.Campaign {
	c := &lockwardpb.Campaign{
		Election:        election,
		Identity:        identity,
		LeaseMs:         uint64((15 * time.Second).Milliseconds()),
		RenewDeadlineMs: uint64((10 * time.Second).Milliseconds()),
		RetryMs:         uint64((2 * time.Second).Milliseconds()),
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Leadership is this candidate's term as leader, until it resigns or
// Revoked is closed.
type Leadership struct {
	lease *Lease
	// leaseDuration - renewDeadline: how long before the lease's deadline
	// the leader stops.
	margin  time.Duration
	revoked chan struct{}
}

// Elect campaigns in election as identity (the name observers see) and
// returns when this candidate leads. Cancelling ctx ends the campaign and
// leaves no leader behind.
func (c *Client) Elect(ctx context.Context, election, identity string, opts ...ElectOption) (*Leadership, error) {
	return c.elect(ctx, newCampaign(election, identity, opts))
}

// TryElect leads election only if nobody leads it now; else it fails at
// once with ErrBusy.
func (c *Client) TryElect(ctx context.Context, election, identity string, opts ...ElectOption) (*Leadership, error) {
	campaign := newCampaign(election, identity, opts)
	now := uint64(0)
	campaign.WaitMs = &now
	return c.elect(ctx, campaign)
}

func (c *Client) elect(ctx context.Context, campaign *lockwardpb.Campaign) (*Leadership, error) {
	var lease *Lease
	var err error
	if c.native != nil {
		lease, err = directCampaign(ctx, c.native, campaign)
	} else {
		lease, _, err = c.open(ctx, opening{
			name:    campaign.GetElection(),
			request: &lockwardpb.LeaseRequest{Request: &lockwardpb.LeaseRequest_Campaign{Campaign: campaign}},
			call:    c.elections.Campaign,
			renew:   time.Duration(campaign.GetRetryMs()) * time.Millisecond,
		})
	}
	if err != nil {
		return nil, err
	}
	l := &Leadership{
		lease:   lease,
		margin:  time.Duration(campaign.GetLeaseMs()-campaign.GetRenewDeadlineMs()) * time.Millisecond,
		revoked: make(chan struct{}),
	}
	go l.watch()
	return l, nil
}

// watch closes revoked when the lease is lost, or when the renewals have
// failed for the renew deadline: at the lease's deadline minus the margin,
// before the store can give the lease to another candidate.
func (l *Leadership) watch() {
	defer close(l.revoked)
	for {
		stopAt := l.lease.Deadline().Add(-l.margin)
		timer := time.NewTimer(time.Until(stopAt))
		select {
		case <-l.lease.Lost():
			timer.Stop()
			return
		case <-l.lease.ended:
			timer.Stop()
			return
		case <-timer.C:
			// A renewal may have moved the deadline meanwhile.
			if !time.Now().Add(l.margin).Before(l.lease.Deadline()) {
				return
			}
		}
	}
}

// Epoch is the fencing token of this leadership: send it with the
// leader's writes, and a deposed leader's late writes are refused.
func (l *Leadership) Epoch() uint64 { return l.lease.Fence() }

// Revoked is closed when this leadership ends without a resign: renewals
// failed for the renew deadline, the store said the lease is gone, or the
// daemon went away. Stop leading at once.
func (l *Leadership) Revoked() <-chan struct{} { return l.revoked }

// Context returns a context derived from ctx that is cancelled when the
// leadership is revoked.
func (l *Leadership) Context(ctx context.Context) context.Context {
	derived, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.revoked:
			cause := l.lease.Err()
			if cause == nil {
				cause = &Error{Kind: "Lost", Message: fmt.Sprintf("election %q: renewals failed for the renew deadline", l.lease.Name())}
			}
			cancel(cause)
		case <-derived.Done():
		}
	}()
	return derived
}

// Resign gives the leadership up at once; a waiting candidate is elected
// without waiting for the lease to lapse.
func (l *Leadership) Resign(ctx context.Context) error {
	return l.lease.Release(ctx)
}

// Leader returns the identity of election's leader, or "" when nobody
// leads.
func (c *Client) Leader(ctx context.Context, election string) (string, error) {
	if c.native != nil {
		return directLeader(ctx, c.native, election)
	}
	var trailer metadata.MD
	resp, err := c.elections.Leader(ctx, &lockwardpb.LeaderRequest{Election: election}, grpc.Trailer(&trailer))
	if err != nil {
		return "", fromStatus(err, trailer)
	}
	return resp.GetIdentity(), nil
}

// Observe sends election's leader now, then each new leader ("" while
// nobody leads), until ctx is done or the daemon goes away; then it closes
// the channel. An observer never campaigns.
func (c *Client) Observe(ctx context.Context, election string) (<-chan string, error) {
	if c.native != nil {
		return directObserve(ctx, c.native, election)
	}
	stream, err := c.elections.Observe(ctx, &lockwardpb.LeaderRequest{Election: election})
	if err != nil {
		return nil, fromStatus(err, nil)
	}
	leaders := make(chan string)
	go func() {
		defer close(leaders)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			select {
			case leaders <- resp.GetIdentity():
			case <-ctx.Done():
				return
			}
		}
	}()
	return leaders, nil
}
