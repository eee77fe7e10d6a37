package lockward

import "context"

// RWLock is a read-write lock: readers hold it together, a writer alone.
type RWLock struct {
	client *Client
	name   string
}

// RWLock is the read-write lock name.
func (c *Client) RWLock(name string) *RWLock {
	return &RWLock{client: c, name: name}
}

// RLock takes a reader's share, waiting while a writer holds the lock.
func (l *RWLock) RLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return l.client.Lock(ctx, l.name, append(opts, Shared())...)
}

// TryRLock takes a reader's share if no writer holds the lock, else fails
// at once with ErrBusy.
func (l *RWLock) TryRLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return l.client.TryLock(ctx, l.name, append(opts, Shared())...)
}

// Lock takes the writer's side: it waits for the readers to leave, and
// holds alone.
func (l *RWLock) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return l.client.Lock(ctx, l.name, append(opts, Writer())...)
}

// TryLock takes the writer's side if nobody holds the lock, else fails at
// once with ErrBusy.
func (l *RWLock) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return l.client.TryLock(ctx, l.name, append(opts, Writer())...)
}
