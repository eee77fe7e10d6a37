package lockward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"lockward.dev/go/internal/redislua"
)

// redisStore is a Redis that a Client holds its locks on directly: the
// key layout, the scripts and the pushed wake-ups of the Rust store
// (crates/lockward/src/backend/redis), so a Go holder, a Rust holder and
// `lockward run` exclude each other on one name.
type redisStore struct {
	rdb     redis.UniversalClient
	prefix  string
	cluster bool
	address string // for messages: the URL without its credentials
	scripts map[string]*redis.Script
	wakeups *wakeups
	label   string // a holder's label unless WithLabel gives one: host:pid
	// replicas=: how many replicas must confirm a grant or a renewal, and
	// how long they are waited for.
	replicas        int
	replicasTimeout time.Duration
}

// The scripts the direct path runs, by their names in lua/scripts.txt.
var redisScriptNames = []string{
	"acquire", "leave", "inspect", "reader_read", "reader_extend", "reader_release",
	"permit_take", "permit_extend", "permit_release", "write_versioned",
	"redlock_grant", "redlock_raise", "release", "extend",
}

// openRedis connects to the Redis u names and checks that it answers.
func openRedis(ctx context.Context, u *redisURL, address string) (*redisStore, error) {
	s, err := newRedisStore(u, address)
	if err != nil {
		return nil, err
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		_ = s.close()
		return nil, s.failed(err)
	}
	return s, nil
}

// newRedisStore is the store of the Redis u names, connected lazily.
func newRedisStore(u *redisURL, address string) (*redisStore, error) {
	config, err := u.tlsConfig()
	if err != nil {
		return nil, err
	}
	options := &redis.UniversalOptions{
		Addrs:            u.addrs,
		DB:               u.db,
		Username:         u.user,
		Password:         u.password,
		TLSConfig:        config,
		MasterName:       u.primary,
		SentinelUsername: u.sentinelUser,
		SentinelPassword: u.sentinelPassword,
		IsClusterMode:    u.cluster,
		// RESP2: replies arrive as they do for the Rust store's scripts.
		Protocol: 2,
	}
	var rdb redis.UniversalClient
	switch {
	case u.primary != "":
		rdb = redis.NewFailoverClient(options.Failover())
	case u.cluster:
		rdb = redis.NewClusterClient(options.Cluster())
	default:
		rdb = redis.NewClient(options.Simple())
	}
	s := &redisStore{
		rdb:     rdb,
		prefix:  u.prefix,
		cluster: u.cluster,
		address: address,
		scripts: make(map[string]*redis.Script, len(redisScriptNames)),
		label:   defaultLabel(),
		wakeups: newWakeups(rdb),

		replicas:        u.replicas,
		replicasTimeout: u.replicasTimeout,
	}
	for _, name := range redisScriptNames {
		text, err := redislua.Script(name)
		if err != nil {
			_ = s.close()
			return nil, &Error{Kind: "Protocol", Message: err.Error()}
		}
		s.scripts[name] = redis.NewScript(text)
	}
	return s, nil
}

// defaultLabel is who this process is, as `lockward status` shows a
// holder: host:pid.
func defaultLabel() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func (s *redisStore) close() error {
	s.wakeups.close()
	return s.rdb.Close()
}

// lockDelayMark is the bit of an owner id's first byte that marks a
// holder with a lock-delay, so a forced unlock holds the name back
// (crates/lockward/src/owner.rs).
const lockDelayMark = 0x80

// newOwner is a fresh owner id: 32 hex digits, as the Rust store writes,
// marked when the holder asked for a lock-delay.
func newOwner(withLockDelay bool) string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[0] &^= lockDelayMark
	if withLockDelay {
		id[0] |= lockDelayMark
	}
	return hex.EncodeToString(id[:])
}

// localDeadline is until when a holder may act on a lease the store keeps
// ttl + lockDelay from a request sent at sent: the drift between this
// process's clock and the store's (1 % + 2 ms) counted over both, the
// lock-delay after the deadline (crates/lockward/src/lease.rs), so the
// deadline is never after the store's expiry.
func localDeadline(sent time.Time, ttl, lockDelay time.Duration) time.Time {
	kept := ttl + lockDelay
	drift := kept/100 + 2*time.Millisecond
	return sent.Add(kept - drift - lockDelay)
}

// redisKeys are where a name lives (crates/lockward/src/backend/redis/keys.rs).
type redisKeys struct {
	lock, fence, channel, holder, queue, places, readers string
}

func (s *redisStore) keys(name string) redisKeys {
	lock := s.prefix + escapeName(name)
	if s.cluster {
		lock = s.prefix + "{" + escapeName(name) + "}"
	}
	return redisKeys{
		lock:    lock,
		fence:   lock + ":fence",
		channel: lock + ":released",
		holder:  lock + ":holder",
		queue:   lock + ":queue",
		places:  lock + ":places",
		readers: lock + ":readers",
	}
}

// listElection lists election for `lockward status`; a store that cannot
// write the record only leaves it unlisted.
func (s *redisStore) listElection(ctx context.Context, election string, lease time.Duration) {
	key, value := electionListing(election, lease)
	_ = s.rdb.Set(ctx, s.recordKey(key), value, electionListedFor).Err()
}

// listenReleases wakes wake at each release of name.
func (s *redisStore) listenReleases(ctx context.Context, name string, wake chan struct{}) (func(), error) {
	stop, err := s.wakeups.listen(ctx, s.keys(name).channel, wake)
	if err != nil {
		return nil, s.failed(err)
	}
	return stop, nil
}

// turnChannel is where the waiter owner hears its turn.
func (k redisKeys) turnChannel(owner string) string { return k.channel + ":" + owner }

// escapeName percent-encodes the characters that would break the key
// layout or a SCAN pattern, so no name's key is another's.
func escapeName(name string) string {
	var out strings.Builder
	for _, c := range name {
		if strings.ContainsRune(`%:{}*?[]\`, c) {
			fmt.Fprintf(&out, "%%%02X", c)
		} else {
			out.WriteRune(c)
		}
	}
	return out.String()
}

// run runs script name with keys and args; replies arrive as RESP2
// values ([]any of int64 and string).
func (s *redisStore) run(ctx context.Context, name string, keys []string, args ...any) ([]any, error) {
	return s.runOn(ctx, s.rdb, name, keys, args...)
}

// runConfirmed runs a script that grants or renews; with replicas=, on a
// connection of its own, followed there by WAIT when the script did (its
// reply starts with 1), so the replicas are asked about this write.
// Fewer confirmations than asked for are a *notConfirmed error beside the
// reply: the caller undoes a grant; a renewal simply failed.
func (s *redisStore) runConfirmed(ctx context.Context, what, name string, keys []string, args ...any) ([]any, error) {
	if s.replicas == 0 {
		return s.run(ctx, name, keys, args...)
	}
	simple, ok := s.rdb.(*redis.Client)
	if !ok {
		return nil, s.protocol("replicas= needs one server or Sentinel's primary")
	}
	conn := simple.Conn()
	defer conn.Close()
	reply, err := s.runOn(ctx, conn, name, keys, args...)
	if err != nil {
		return nil, err
	}
	if done, _ := asInt(firstOf(reply)); done != 1 {
		return reply, nil
	}
	confirmed, err := conn.Wait(ctx, s.replicas, s.replicasTimeout).Result()
	if err != nil {
		return reply, &notConfirmed{s.failed(err)}
	}
	if confirmed < int64(s.replicas) {
		return reply, &notConfirmed{&Error{Kind: "Unavailable", Message: fmt.Sprintf("%s: %d of the %d replicas asked for confirmed %s within %v", s.address, confirmed, s.replicas, what, s.replicasTimeout)}}
	}
	return reply, nil
}

// notConfirmed is a grant or renewal the replicas did not confirm in time.
type notConfirmed struct{ err error }

func (e *notConfirmed) Error() string { return e.err.Error() }
func (e *notConfirmed) Unwrap() error { return e.err }

func (s *redisStore) runOn(ctx context.Context, c redis.Scripter, name string, keys []string, args ...any) ([]any, error) {
	reply, err := s.scripts[name].Run(ctx, c, keys, args...).Result()
	if err != nil {
		return nil, s.failed(err)
	}
	switch r := reply.(type) {
	case []any:
		return r, nil
	case int64:
		return []any{r}, nil
	}
	return nil, s.protocol(fmt.Sprintf("script %s answered %v", name, reply))
}

// failed is err as lockward's kinds: a refused password or permission is
// Denied, a context's end is returned as is, anything else Unavailable.
func (s *redisStore) failed(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	message := err.Error()
	for _, denied := range []string{"NOAUTH", "WRONGPASS", "NOPERM", "invalid password", "invalid username-password"} {
		if strings.Contains(message, denied) {
			return &Error{Kind: "Denied", Message: fmt.Sprintf("%s refused: %s", s.address, message)}
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, redis.ErrClosed) || strings.Contains(message, "connection") {
		return &Error{Kind: "Unavailable", Message: fmt.Sprintf("%s: %s", s.address, message)}
	}
	return &Error{Kind: "Unavailable", Message: fmt.Sprintf("%s answered: %s", s.address, message)}
}

func (s *redisStore) protocol(message string) error {
	return &Error{Kind: "Protocol", Message: fmt.Sprintf("%s: %s", s.address, message)}
}

// unsupported is the error of a recipe the direct path does not have yet.
func unsupported(what string) error {
	return &Error{Kind: "NotSupported", Message: what + " is not on Open's direct Redis path yet: Dial lockward serve for it"}
}

// wakeups carries every waiter's turn channel: one pub/sub connection
// for a single server; on a cluster one per primary, each channel on the
// node of its slot (the node whose script publishes it), so no wake-up
// crosses the cluster bus. go-redis re-subscribes after a reconnect;
// messages missed meanwhile, or after the slot moved, are covered by the
// waiters' re-checks.
type wakeups struct {
	rdb   redis.UniversalClient
	mu    sync.Mutex
	buses map[string]*bus // by node address ("" for a single server)
}

func newWakeups(rdb redis.UniversalClient) *wakeups {
	return &wakeups{rdb: rdb, buses: make(map[string]*bus)}
}

// listen subscribes wake to channel and returns once the server has the
// subscription, so no message sent after it is missed. Cancelling ctx
// ends the wait; stop undoes the listening either way.
func (w *wakeups) listen(ctx context.Context, channel string, wake chan struct{}) (stop func(), err error) {
	client, address := w.rdb, ""
	if cluster, ok := w.rdb.(*redis.ClusterClient); ok {
		node, err := cluster.MasterForKey(ctx, channel)
		if err != nil {
			return nil, err
		}
		client, address = node, node.Options().Addr
	}
	w.mu.Lock()
	b := w.buses[address]
	if b == nil {
		b = newBus(client)
		w.buses[address] = b
	}
	w.mu.Unlock()
	return b.listen(ctx, channel, wake)
}

func (w *wakeups) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.buses {
		b.close()
	}
	w.buses = nil
}

// bus is one pub/sub connection and the waiters listening on it.
type bus struct {
	pubsub *redis.PubSub
	// ops orders SUBSCRIBE and UNSUBSCRIBE as the listeners changed, so a
	// channel is never left unsubscribed while someone listens.
	ops sync.Mutex
	mu  sync.Mutex
	// By channel: the waiters listening, and those waiting for the server
	// to confirm the subscription.
	listening map[string]map[chan struct{}]struct{}
	confirm   map[string][]chan struct{}
	done      chan struct{}
}

func newBus(client redis.UniversalClient) *bus {
	w := &bus{
		pubsub:    client.Subscribe(context.Background()),
		listening: make(map[string]map[chan struct{}]struct{}),
		confirm:   make(map[string][]chan struct{}),
		done:      make(chan struct{}),
	}
	go w.dispatch()
	return w
}

func (w *bus) close() {
	_ = w.pubsub.Close()
	<-w.done
}

func (w *bus) dispatch() {
	defer close(w.done)
	for message := range w.pubsub.ChannelWithSubscriptions() {
		w.mu.Lock()
		switch m := message.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				for _, confirmed := range w.confirm[m.Channel] {
					close(confirmed)
				}
				delete(w.confirm, m.Channel)
			}
		case *redis.Message:
			for wake := range w.listening[m.Channel] {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
		w.mu.Unlock()
	}
}

func (w *bus) listen(ctx context.Context, channel string, wake chan struct{}) (stop func(), err error) {
	w.ops.Lock()
	w.mu.Lock()
	if w.listening[channel] == nil {
		w.listening[channel] = make(map[chan struct{}]struct{})
	}
	w.listening[channel][wake] = struct{}{}
	confirmed := make(chan struct{})
	w.confirm[channel] = append(w.confirm[channel], confirmed)
	w.mu.Unlock()
	// Each listener subscribes: a channel subscribed twice is confirmed
	// twice, and the confirmation proves the server has it.
	err = w.pubsub.Subscribe(ctx, channel)
	w.ops.Unlock()
	stop = func() {
		w.ops.Lock()
		defer w.ops.Unlock()
		w.mu.Lock()
		delete(w.listening[channel], wake)
		last := len(w.listening[channel]) == 0
		if last {
			delete(w.listening, channel)
		}
		w.mu.Unlock()
		if last {
			_ = w.pubsub.Unsubscribe(context.Background(), channel)
		}
	}
	if err != nil {
		stop()
		return nil, err
	}
	select {
	case <-confirmed:
		return stop, nil
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}
