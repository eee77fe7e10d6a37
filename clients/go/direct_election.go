package lockward

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"lockward.dev/go/lockwardpb"
)

// electionListedFor is how long an election stays listed for `lockward
// status` after a candidate last campaigned in it (recipe/election.rs).
const electionListedFor = 30 * 24 * time.Hour

// directCampaign is an election on a store the client holds itself, as
// the Rust recipe runs it (recipe/election.rs): the lock of the
// election's name, with the candidate's identity as its holder's label, a
// TTL of the lease duration, renewed every retry period; its fence is
// the epoch.
func directCampaign(ctx context.Context, s directStore, c *lockwardpb.Campaign) (*Lease, error) {
	lease := time.Duration(c.GetLeaseMs()) * time.Millisecond
	deadline := time.Duration(c.GetRenewDeadlineMs()) * time.Millisecond
	retry := time.Duration(c.GetRetryMs()) * time.Millisecond
	switch {
	case deadline >= lease:
		return nil, &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("renew_deadline: the renew deadline %v must be shorter than the lease duration %v, or a deposed leader could still act when the next one starts", deadline, lease)}
	case retry <= 0 || retry >= deadline:
		return nil, &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("retry_period: the retry period %v must be above zero and shorter than the renew deadline %v", retry, deadline)}
	case c.GetIdentity() == "":
		return nil, &Error{Kind: "InvalidArgument", Message: "identity: a candidate needs an identity (the name observers see)"}
	}
	o := &lockOptions{renew: true, every: retry}
	o.acquire.Names = []string{c.GetElection()}
	o.acquire.TtlMs = c.GetLeaseMs()
	o.acquire.WaitMs = c.WaitMs
	o.acquire.Label = c.GetIdentity()
	if c.WaitMs == nil || *c.WaitMs > 0 {
		s.listElection(ctx, c.GetElection(), lease)
	}
	l, err := s.lock(ctx, o)
	if err == nil && c.WaitMs != nil && *c.WaitMs == 0 {
		// Only when elected: candidates may try often.
		s.listElection(ctx, c.GetElection(), lease)
	}
	return l, err
}

// electionListing is the record that lists election for `lockward
// status`, and its value.
func electionListing(election string, lease time.Duration) (key, value string) {
	return "election/" + election, strconv.FormatInt(lease.Milliseconds(), 10)
}

// directLeader is the identity of election's leader: its holder's label
// (or owner), "" when nobody leads.
func directLeader(ctx context.Context, s directStore, election string) (string, error) {
	row, err := s.inspect(ctx, election)
	if err != nil || row == nil {
		return "", err
	}
	if row.Label != nil {
		return *row.Label, nil
	}
	return row.GetOwner(), nil
}

// directObserve sends election's leader now and each change after it:
// woken by the releases published on the name's channel, and looking
// again every second for an expiry or an election nothing announces.
func directObserve(ctx context.Context, s directStore, election string) (<-chan string, error) {
	if err := checkRequest([]string{election}, minTTL); err != nil {
		return nil, err
	}
	wake := make(chan struct{}, 1)
	stop, err := s.listenReleases(ctx, election, wake)
	if err != nil {
		return nil, err
	}
	first, err := directLeader(ctx, s, election)
	if err != nil {
		stop()
		return nil, err
	}
	leaders := make(chan string)
	go func() {
		defer close(leaders)
		defer stop()
		last, send := first, true
		for {
			if send {
				select {
				case leaders <- last:
				case <-ctx.Done():
					return
				}
			}
			timer := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-wake:
			case <-timer.C:
			}
			timer.Stop()
			now, err := directLeader(ctx, s, election)
			if err != nil {
				// The store is away: the observer looks again later.
				send = false
				continue
			}
			send, last = now != last, now
		}
	}()
	return leaders, nil
}
