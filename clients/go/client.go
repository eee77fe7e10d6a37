package lockward

import (
	"context"
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"lockward.dev/go/lockwardpb"
)

// DefaultAddress is where lockward serve listens by default.
const DefaultAddress = "unix:///run/lockward/lockward.sock"

// Client is a connection to lockward serve. It is safe for concurrent use;
// share one per process.
type Client struct {
	conn      *grpc.ClientConn
	locks     lockwardpb.LocksClient
	elections lockwardpb.ElectionsClient
	keys      lockwardpb.KeysClient
	limits    lockwardpb.LimitsClient
	// native is the store a Client from Open holds its locks on itself;
	// nil for a Client from Dial, whose daemon holds them.
	native directStore
}

// Dial connects to lockward serve at address: "unix:///PATH" or
// "HOST:PORT" (in plain text unless WithTLS is given). The connection is
// made lazily; the first call that
// needs it fails with ErrUnavailable when no daemon answers. ctx is kept
// for future use and must not be nil.
func Dial(ctx context.Context, address string, opts ...grpc.DialOption) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(address, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{
		conn:      conn,
		locks:     lockwardpb.NewLocksClient(conn),
		elections: lockwardpb.NewElectionsClient(conn),
		keys:      lockwardpb.NewKeysClient(conn),
		limits:    lockwardpb.NewLimitsClient(conn),
	}, nil
}

// WithToken sends token with every call, for a daemon started with
// --token-file. Without WithTLS it travels in plain text, which the daemon
// allows on the loopback and a unix socket only.
func WithToken(token string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(bearer(token))
}

// WithTLS connects over TLS, for a daemon started with --tls-cert and
// --tls-key; config names the CAs to trust (RootCAs), or nil for the
// system's.
func WithTLS(config *tls.Config) grpc.DialOption {
	if config == nil {
		config = &tls.Config{}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(config))
}

// bearer is a token sent as "authorization: Bearer TOKEN".
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// Close closes the connection; every lease still held ends with it (the
// daemon releases them).
func (c *Client) Close() error {
	if c.native != nil {
		return c.native.close()
	}
	return c.conn.Close()
}

// Holder is a lock's holder as `lockward status` shows it.
type Holder = lockwardpb.LockRow

// Inspect returns the current holder of name, or nil when nobody holds it.
func (c *Client) Inspect(ctx context.Context, name string) (*Holder, error) {
	if c.native != nil {
		return c.native.inspect(ctx, name)
	}
	var trailer metadata.MD
	resp, err := c.locks.Inspect(ctx, &lockwardpb.InspectRequest{Name: name}, grpc.Trailer(&trailer))
	if err != nil {
		return nil, fromStatus(err, trailer)
	}
	return resp.GetRow(), nil
}

// List returns every held lock whose name starts with prefix.
func (c *Client) List(ctx context.Context, prefix string) ([]*Holder, error) {
	if c.native != nil {
		return c.native.list(ctx, prefix)
	}
	var trailer metadata.MD
	resp, err := c.locks.List(ctx, &lockwardpb.ListRequest{Prefix: prefix}, grpc.Trailer(&trailer))
	if err != nil {
		return nil, fromStatus(err, trailer)
	}
	return resp.GetRows(), nil
}
