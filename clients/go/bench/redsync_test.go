package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	lockward "lockward.dev/go"
)

// TestRedsyncAndLockwardExcludeEachOther: redsync's key is the mutex's
// name holding a random value (`SET NX PX`), which is lockward's lock key
// for that name when the URL's prefix is empty, so each refuses a lock
// the other holds, both ways, and lockward takes it once redsync lets go.
func TestRedsyncAndLockwardExcludeEachOther(t *testing.T) {
	url, stop, err := startRedis(binary("LOCKWARD_TESTSERVER_BIN", "lockward-testserver"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	client, err := lockward.Open(ctx, url+"?prefix=")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	opts, err := goredislib.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredislib.NewClient(opts)
	defer rdb.Close()
	rs := redsync.New(goredis.NewPool(rdb))

	held, err := client.Lock(ctx, "nightly-report", lockward.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mutex := rs.NewMutex("nightly-report", redsync.WithExpiry(10*time.Second))
	if err := mutex.TryLockContext(ctx); err == nil {
		t.Fatal("redsync took a lock lockward holds")
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	if err := mutex.TryLockContext(ctx); err != nil {
		t.Fatalf("redsync on the released lock: %v", err)
	}
	if _, err := client.TryLock(ctx, "nightly-report"); !errors.Is(err, lockward.ErrBusy) {
		t.Fatalf("lockward beside redsync's holder: want ErrBusy, got %v", err)
	}
	if ok, err := mutex.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("redsync's unlock: %v %v", ok, err)
	}
	// redsync publishes nothing, so lockward's waiter finds the lock free
	// at its next look (within a third of its place's lease).
	next, err := client.Lock(ctx, "nightly-report", lockward.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("lockward after redsync let go: %v", err)
	}
	_ = next.Release(ctx)
}
