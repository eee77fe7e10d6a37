package lockward

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"lockward.dev/go/lockwardpb"
)

// RateLimit is a rate limit shared by every instance that checks it by
// the same name: each subject (a user, an API key) has its own budget.
type RateLimit struct {
	client *Client
	// What every check asks, but the subject (the template is never sent:
	// each check sends a copy).
	template *lockwardpb.CheckRequest
}

// A LimitOption configures a rate limit.
type LimitOption func(*lockwardpb.CheckRequest)

// WithBurst spreads the requests evenly over the period (GCRA) and lets
// bursts of up to burst through at once, instead of counting them in
// fixed windows.
func WithBurst(burst uint64) LimitOption {
	return func(r *lockwardpb.CheckRequest) {
		r.Algorithm = lockwardpb.Algorithm_ALGORITHM_GCRA
		r.Burst = burst
	}
}

// RateLimit allows limit requests per period, counted by default in
// windows of period aligned to the Unix epoch.
func (c *Client) RateLimit(name string, limit uint64, period time.Duration, opts ...LimitOption) *RateLimit {
	r := &RateLimit{client: c, template: &lockwardpb.CheckRequest{
		Name:     name,
		Limit:    limit,
		PeriodMs: uint64(period.Milliseconds()),
	}}
	for _, opt := range opts {
		opt(r.template)
	}
	return r
}

// Decision is the answer to one request.
type Decision struct {
	// Allowed: let it through.
	Allowed bool
	// Remaining is how many more requests fit now (when allowed).
	Remaining uint64
	// RetryAfter is how long until a request fits (when refused).
	RetryAfter time.Duration
}

// Allow counts one request of subject and says whether it may go on. A
// limit or period out of range fails with ErrInvalidArgument.
func (r *RateLimit) Allow(ctx context.Context, subject string) (Decision, error) {
	request := proto.CloneOf(r.template)
	request.Subject = subject
	if r.client.native != nil {
		return r.client.native.allow(ctx, request)
	}
	var trailer metadata.MD
	resp, err := r.client.limits.Check(ctx, request, grpc.Trailer(&trailer))
	if err != nil {
		return Decision{}, fromStatus(err, trailer)
	}
	return Decision{
		Allowed:    resp.GetAllowed(),
		Remaining:  resp.GetRemaining(),
		RetryAfter: time.Duration(resp.GetRetryAfterMs()) * time.Millisecond,
	}, nil
}
