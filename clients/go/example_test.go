package lockward_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	lockward "lockward.dev/go"
)

// The address of a running lockward serve (the tests start one).
func address() string {
	if a := os.Getenv("LOCKWARD_EXAMPLE_ADDRESS"); a != "" {
		return a
	}
	return lockward.DefaultAddress
}

func ExampleClient_WithLock() {
	ctx := context.Background()
	client, err := lockward.Dial(ctx, address())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	err = client.WithLock(ctx, "payment/order-42", func(ctx context.Context, lease *lockward.Lease) error {
		// ctx is cancelled if the lock is lost; send the fence with every write.
		fmt.Println("charging with a fence:", lease.Fence() > 0)
		return nil
	}, lockward.WithTTL(10*time.Second))
	fmt.Println("released:", err == nil)
	// Output:
	// charging with a fence: true
	// released: true
}

func ExampleClient_TryLock() {
	ctx := context.Background()
	client, err := lockward.Dial(ctx, address())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	first, err := client.TryLock(ctx, "cron/nightly-report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Release(ctx)
	_, err = client.TryLock(ctx, "cron/nightly-report")
	fmt.Println("second instance busy:", errors.Is(err, lockward.ErrBusy))
	// Output:
	// second instance busy: true
}

func ExampleClient_Elect() {
	ctx := context.Background()
	client, err := lockward.Dial(ctx, address())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	leadership, err := client.Elect(ctx, "example/scheduler", "node-a")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Lead until revoked: work under leadership.Context(ctx), fencing each
	// write with leadership.Epoch().
	leader, _ := client.Leader(ctx, "example/scheduler")
	fmt.Println("leader:", leader)
	fmt.Println("resigned:", leadership.Resign(ctx) == nil)
	// Output:
	// leader: node-a
	// resigned: true
}

func ExampleClient_Idempotent() {
	ctx := context.Background()
	client, err := lockward.Dial(ctx, address())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	charge := func(ctx context.Context, lease *lockward.Lease) (string, error) {
		return "charged 42.00", nil // the payment, fenced with lease.Fence()
	}
	for range 2 {
		result, ran, err := client.Idempotent(ctx, "example/order-17", charge)
		fmt.Println(result, ran, err)
	}
	// Output:
	// charged 42.00 true <nil>
	// charged 42.00 false <nil>
}

func ExampleRateLimit_Allow() {
	ctx := context.Background()
	client, err := lockward.Dial(ctx, address())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	perUser := client.RateLimit("example/api", 2, time.Minute)
	for range 3 {
		decision, err := perUser.Allow(ctx, "user-7")
		fmt.Println(decision.Allowed, err)
	}
	// Output:
	// true <nil>
	// true <nil>
	// false <nil>
}
