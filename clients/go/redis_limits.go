package lockward

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"lockward.dev/go/lockwardpb"
)

// The bounds and the tries of the Rust recipe (recipe/rate_limit.rs).
const (
	maxRateLimit     = 1_000_000_000
	maxRatePeriod    = 10 * 365 * 24 * time.Hour
	rateLimitTries   = 32
	versionedSuffix  = ":versioned"
	versionedScript  = "write_versioned"
	rateLimitPrefix  = "ratelimit/"
	minRecordKeepFor = time.Millisecond
)

// allow counts one request of r's subject as the Rust recipe does, on
// the same versioned record (ratelimit/NAME/SUBJECT) with the same
// values, so Go, Rust and the daemon's checks share one budget: a fixed
// window keeps "START COUNT", GCRA the theoretical arrival time in µs.
// Each check is an optimistic update: read, decide, write if the record's
// version is still the one read, else try again (32 tries, then
// ErrContended's kind). Cancelling ctx ends the tries; the request may or
// may not have been counted.
func (s *redisStore) allow(ctx context.Context, r *lockwardpb.CheckRequest) (Decision, error) {
	limit, period := r.GetLimit(), time.Duration(r.GetPeriodMs())*time.Millisecond
	switch {
	case limit == 0 || limit > maxRateLimit:
		return Decision{}, &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("limit: a rate limit allows from 1 to %d requests, not %d", maxRateLimit, limit)}
	case period < time.Millisecond || period > maxRatePeriod:
		return Decision{}, &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("period: a rate limit's period is from 1ms to 10 years, not %v", period)}
	case r.GetAlgorithm() == lockwardpb.Algorithm_ALGORITHM_GCRA && r.GetBurst() > maxRateLimit:
		return Decision{}, &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("burst: a burst is at most %d requests, not %d", maxRateLimit, r.GetBurst())}
	}
	name := rateLimitPrefix + r.GetName() + "/" + r.GetSubject()
	if err := checkRequest([]string{name}, minTTL); err != nil {
		return Decision{}, err
	}
	step := fixedWindow(limit, period)
	if r.GetAlgorithm() == lockwardpb.Algorithm_ALGORITHM_GCRA {
		step = gcra(limit, period, r.GetBurst())
	}
	key := s.keys(name).lock + versionedSuffix
	for attempt := range rateLimitTries {
		if attempt > 0 {
			// Up to 2^attempt ms, at most 100 ms, drawn at random.
			ceiling := min(int64(1)<<min(attempt, 7), 100) * int64(time.Millisecond)
			timer := time.NewTimer(time.Duration(rand.Int64N(ceiling + 1)))
			select {
			case <-ctx.Done():
				timer.Stop()
				return Decision{}, ctx.Err()
			case <-timer.C:
			}
		}
		stored, err := s.rdb.HMGet(ctx, key, "v", "d").Result()
		if err != nil {
			return Decision{}, s.failed(err)
		}
		var value *string
		expected := "0"
		if v, ok := stored[0].(string); ok {
			if d, ok := stored[1].(string); ok {
				expected, value = v, &d
			}
		}
		write, keepFor, decision := step(value, time.Now().UnixMilli())
		if write == nil {
			return decision, nil
		}
		keepFor = max(keepFor, minRecordKeepFor)
		reply, err := s.run(ctx, versionedScript, []string{key}, expected, *write, keepFor.Milliseconds(), newOwner(false))
		if err != nil {
			return Decision{}, err
		}
		if version, _ := asInt(reply[0]); version > 0 {
			return decision, nil
		}
	}
	return Decision{}, &Error{Kind: "Contended", Message: fmt.Sprintf("record %q: %d tries met a conflicting write each", name, rateLimitTries)}
}

// A rate limit's step: from the stored value (nil: none) and the time in
// ms, the value to write (nil: none), for how long, and the decision.
type limitStep func(stored *string, nowMs int64) (write *string, keepFor time.Duration, decision Decision)

// fixedWindow: at most limit requests in each window of period, aligned to
// the Unix epoch.
func fixedWindow(limit uint64, period time.Duration) limitStep {
	windowMs := max(period.Milliseconds(), 1)
	return func(stored *string, now int64) (*string, time.Duration, Decision) {
		start := now - now%windowMs
		count := uint64(0)
		if stored != nil {
			if s, c, ok := strings.Cut(*stored, " "); ok && s == strconv.FormatInt(start, 10) {
				count, _ = strconv.ParseUint(c, 10, 64)
			}
		}
		left := time.Duration(start+windowMs-now) * time.Millisecond
		if count >= limit {
			return nil, 0, Decision{RetryAfter: left}
		}
		value := fmt.Sprintf("%d %d", start, count+1)
		return &value, left, Decision{Allowed: true, Remaining: limit - count - 1}
	}
}

// gcra: limit requests per period, evenly spaced, with bursts of up to
// burst (at least 1).
func gcra(limit uint64, period time.Duration, burst uint64) limitStep {
	interval := max(uint64(period.Microseconds())/limit, 1)
	tolerance := interval * max(burst, 1)
	return func(stored *string, nowMs int64) (*string, time.Duration, Decision) {
		now := uint64(nowMs) * 1000
		tat := uint64(0)
		if stored != nil {
			tat, _ = strconv.ParseUint(*stored, 10, 64)
		}
		tat = max(tat, now)
		next := tat + interval
		if next-now > tolerance {
			return nil, 0, Decision{RetryAfter: time.Duration(next-now-tolerance) * time.Microsecond}
		}
		value := strconv.FormatUint(next, 10)
		return &value, time.Duration(next-now) * time.Microsecond, Decision{Allowed: true, Remaining: (tolerance - (next - now)) / interval}
	}
}
