package lockward

import "context"

// Semaphore lets up to a number of holders (of permits) in at once, across
// every instance.
type Semaphore struct {
	client  *Client
	name    string
	permits uint32
}

// Semaphore is the semaphore name with permits permits. Every holder must
// agree on the number.
func (c *Client) Semaphore(name string, permits uint32) *Semaphore {
	return &Semaphore{client: c, name: name, permits: permits}
}

// Acquire takes n permits, waiting until they are free (as Lock waits).
func (s *Semaphore) Acquire(ctx context.Context, n uint32, opts ...LockOption) (*Lease, error) {
	return s.client.Lock(ctx, s.name, append(opts, Permits(s.permits, n))...)
}

// TryAcquire takes n permits if they are free now, else fails at once
// with ErrNoPermits.
func (s *Semaphore) TryAcquire(ctx context.Context, n uint32, opts ...LockOption) (*Lease, error) {
	return s.client.TryLock(ctx, s.name, append(opts, Permits(s.permits, n))...)
}
