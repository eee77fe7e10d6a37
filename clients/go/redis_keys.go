package lockward

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"lockward.dev/go/lockwardpb"
)

// The idempotency keys' defaults, as the Rust recipe has them
// (recipe/idempotency.rs) and the daemon keeps a run-once record.
const (
	defaultKeyNamespace = "idem"
	defaultRetention    = 24 * time.Hour
	longestRetention    = 10 * 365 * 24 * time.Hour
	maxRetention        = 100 * 365 * 24 * time.Hour
)

// keyName is the lock, and the record, of claim's key: NAMESPACE/KEY.
func keyName(claim *lockwardpb.Claim) string {
	namespace := claim.GetNamespace()
	if namespace == "" {
		namespace = defaultKeyNamespace
	}
	return namespace + "/" + claim.GetKey()
}

// retention is how long claim's result is kept; Redis keeps records in
// memory, so it cannot keep one forever.
func (s *redisStore) retention(claim *lockwardpb.Claim) (time.Duration, error) {
	keep := defaultRetention
	switch claim.GetKeep() {
	case lockwardpb.Keep_KEEP_FOR:
		if claim.GetKeepMs() > 0 {
			keep = time.Duration(claim.GetKeepMs()) * time.Millisecond
		}
	case lockwardpb.Keep_KEEP_FOREVER:
		return 0, &Error{Kind: "NotSupported", Message: s.address + ": keeping a record forever: this store keeps records in memory; use SQLite or PostgreSQL for permanent records, or keep them for a retention"}
	case lockwardpb.Keep_KEEP_LONGEST:
		keep = longestRetention
	}
	switch {
	case keep < time.Millisecond:
		return 0, &Error{Kind: "InvalidArgument", Message: "retention: a record kept for less than 1 ms would be gone at once"}
	case keep > maxRetention:
		return 0, &Error{Kind: "InvalidArgument", Message: fmt.Sprintf("retention: %v is longer than the maximum of 100 years", keep)}
	}
	return keep, nil
}

func (s *redisStore) recordKey(name string) string { return s.keys(name).lock + ":record" }

// storedResult is the result stored for name, if any.
func (s *redisStore) storedResult(ctx context.Context, name string) (string, bool, error) {
	if err := checkRequest([]string{name}, minTTL); err != nil {
		return "", false, err
	}
	result, err := s.rdb.Get(ctx, s.recordKey(name)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, s.failed(err)
	}
	return result, true, nil
}

// idempotent runs fn once for claim's key, as the Rust recipe does: a
// stored result is returned as is; otherwise fn runs under the key's
// lock, and its result is stored while the lock is still held, so no
// duplicate slips in between. An error from fn, or a lock lost while it
// ran, stores nothing.
func (s *redisStore) idempotent(ctx context.Context, claim *lockwardpb.Claim, fn func(ctx context.Context, lease *Lease) (string, error)) (string, bool, error) {
	name := keyName(claim)
	keep, err := s.retention(claim)
	if err != nil {
		return "", false, err
	}
	if stored, found, err := s.storedResult(ctx, name); err != nil || found {
		return stored, false, err
	}
	o := &lockOptions{renew: true}
	o.acquire.Names = []string{name}
	o.acquire.TtlMs = claim.GetTtlMs()
	o.acquire.Label = claim.GetLabel()
	if !claim.GetWait() {
		now := uint64(0)
		o.acquire.WaitMs = &now
	}
	lease, err := s.lock(ctx, o)
	switch {
	case errors.Is(err, ErrBusy):
		return "", false, &Error{Kind: "InProgress", Message: fmt.Sprintf("%s runs elsewhere right now", claim.GetKey())}
	case err != nil:
		return "", false, err
	}
	release := func() { _ = lease.Release(context.WithoutCancel(ctx)) }
	// It may have finished between the look and the lock.
	if stored, found, err := s.storedResult(ctx, name); err != nil || found {
		release()
		return stored, false, err
	}
	result, err := fn(lease.Context(ctx), lease)
	if err != nil {
		release()
		return "", false, err
	}
	if err := lease.Err(); err != nil {
		// Another caller may be running it by now: nothing is stored.
		release()
		return "", false, err
	}
	if err := s.rdb.Set(context.WithoutCancel(ctx), s.recordKey(name), result, keep).Err(); err != nil {
		release()
		return "", false, s.failed(err)
	}
	release()
	return result, true, nil
}
