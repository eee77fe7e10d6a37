package lockward

import (
	"context"
	"strings"
)

// Open connects this process to the store url names itself, without
// `lockward serve` between: the locks it takes are the ones the lockward
// CLI, the Rust library and a Client from Dial take on that store, so all
// of them exclude each other on one name, at the cost of the store's own
// round trips.
//
// The stores reached this way are Redis: "redis://[user:pass@]host:port[/db]",
// "rediss://…" (TLS; ca=, cert=, key= name PEM files),
// "redis+cluster://host:port,host:port" and
// "redis+sentinel://host:port,…/PRIMARY", and Redlock over an odd number
// of independent masters, "redlock://host:port,host:port,host:port";
// prefix= sets the keys' prefix
// ("lockward:" by default) as for the CLI. Every other store is reached
// through Dial and `lockward serve`, and so are the few things this path
// does not do yet (replicas=; on Redlock, readers, semaphores, idempotency
// keys and rate limits); Open and those calls say so in their errors.
//
// Open checks that the store answers before it returns; cancelling ctx
// ends that check.
func Open(ctx context.Context, url string) (*Client, error) {
	scheme, _, _ := strings.Cut(url, "://")
	switch scheme {
	case "redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel":
	case "redlock":
		store, err := openRedlock(url)
		if err != nil {
			return nil, err
		}
		return &Client{native: store}, nil
	default:
		return nil, &Error{Kind: "NotSupported", Message: "Open reaches Redis directly (redis://, rediss://, redis+cluster://, redis+sentinel://, redlock://); for " +
			scheme + ":// start `lockward serve --store URL` and use Dial"}
	}
	u, err := parseRedisURL(url)
	if err != nil {
		return nil, err
	}
	store, err := openRedis(ctx, u, scheme+"://"+strings.Join(u.addrs, ","))
	if err != nil {
		return nil, err
	}
	return &Client{native: store}, nil
}
