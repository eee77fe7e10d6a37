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
