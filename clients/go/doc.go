// Package lockward is the Go client of lockward serve: the locks of any
// lockward store (Redis, etcd, ZooKeeper, PostgreSQL, MySQL, Kubernetes,
// SQLite, …) from Go, each with a fencing token, a deadline that is safe on
// any clock, and a signal that fires when the lock is lost.
//
// A lease is one stream to the daemon. The client renews it in the
// background every third of its TTL; a process that stops (frozen,
// killed, cut off) stops renewing and loses the lease at its TTL, and the
// next holder's fence is larger, so a resource that checks fences refuses
// the late writes of a holder that was paused past its lease.
//
//	client, err := lockward.Dial(ctx, "unix:///run/lockward/lockward.sock")
//	if err != nil { ... }
//	defer client.Close()
//	lease, err := client.Lock(ctx, "payment/order-42", lockward.WithTTL(30*time.Second))
//	if err != nil { ... }
//	defer lease.Release(context.Background())
//	charge(lease.Context(ctx), order, lease.Fence()) // cancelled if the lock is lost
//
// Every wait honours its context: cancelling it ends the wait and leaves
// no holder.
package lockward

//go:generate sh -c "PATH=$(../../scripts/go-protoc-plugins.sh):$PATH protoc -I ../../crates/lockward-serve/proto --go_out=. --go_opt=module=lockward.dev/go --go-grpc_out=. --go-grpc_opt=module=lockward.dev/go lockward/v1/lockward.proto"
