package lockward

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fastElection is a timing short enough for tests.
var fastElection = WithElectionTiming(1500*time.Millisecond, time.Second, 300*time.Millisecond)

func TestElectionHandsOverOnResignAndObserversSeeIt(t *testing.T) {
	electionHandsOverOnResign(t, daemonAddress)
}

func electionHandsOverOnResign(t *testing.T, address string) {
	client := dial(t, address)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	leaders, err := client.Observe(ctx, "go/scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if now := <-leaders; now != "" {
		t.Fatalf("nobody leads yet, observed %q", now)
	}
	a, err := client.Elect(ctx, "go/scheduler", "node-a", fastElection)
	if err != nil {
		t.Fatal(err)
	}
	if seen := <-leaders; seen != "node-a" {
		t.Fatalf("observed %q", seen)
	}
	if _, err := client.TryElect(ctx, "go/scheduler", "node-b", fastElection); !errors.Is(err, ErrBusy) {
		t.Fatalf("want ErrBusy while node-a leads, got %v", err)
	}
	// node-a leads past its lease duration: its renewals keep it leading.
	time.Sleep(2 * time.Second)
	select {
	case <-a.Revoked():
		t.Fatal("a renewing leader was revoked")
	default:
	}
	elected := make(chan *Leadership, 1)
	go func() {
		b, err := client.Elect(ctx, "go/scheduler", "node-b", fastElection)
		if err != nil {
			t.Error(err)
		}
		elected <- b
	}()
	time.Sleep(100 * time.Millisecond)
	resigned := time.Now()
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-elected
	if b == nil {
		return
	}
	if took := time.Since(resigned); took > time.Second {
		t.Fatalf("node-b was elected %v after the resign", took)
	}
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("epoch %d after %d", b.Epoch(), a.Epoch())
	}
	for seen := range leaders {
		if seen == "node-b" {
			break
		}
		if seen != "" {
			t.Fatalf("observed %q", seen)
		}
	}
	if leader, err := client.Leader(ctx, "go/scheduler"); err != nil || leader != "node-b" {
		t.Fatalf("leader %q, %v", leader, err)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestALeaderThatCannotRenewIsRevokedBeforeItsLeaseLapses(t *testing.T) {
	client := dial(t, daemonAddress)
	ctx := context.Background()
	a, err := client.Elect(ctx, "go/revoked", "node-a", fastElection)
	if err != nil {
		t.Fatal(err)
	}
	// Frozen renewals: the daemon is told nothing more.
	a.lease.stopRenewing()
	elected := time.Now()
	<-a.Revoked()
	revokedAfter := time.Since(elected)
	b, err := client.Elect(ctx, "go/revoked", "node-b", fastElection)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Resign(ctx)
	nextAfter := time.Since(elected)
	// Revoked at the renew deadline (1 s), the next leader only after the
	// lease (1.5 s): the two never lead at once.
	if revokedAfter > 1200*time.Millisecond || nextAfter < revokedAfter {
		t.Fatalf("revoked after %v, next leader after %v", revokedAfter, nextAfter)
	}
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("epoch %d after %d", b.Epoch(), a.Epoch())
	}
}

func TestIdempotentRunsOnceAndDuplicatesGetTheResult(t *testing.T) {
	idempotentRunsOnce(t, daemonAddress)
}

func idempotentRunsOnce(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	key := "go/order-" + time.Now().Format("150405.000000")
	started := make(chan struct{})
	finish := make(chan struct{})
	var runs atomic.Int32
	charge := func(ctx context.Context, lease *Lease) (string, error) {
		runs.Add(1)
		close(started)
		<-finish
		return "charged 42.00", nil
	}
	first := make(chan error, 1)
	go func() {
		result, ran, err := client.Idempotent(ctx, key, charge)
		if err == nil && (!ran || result != "charged 42.00") {
			t.Errorf("first run: %q ran=%v", result, ran)
		}
		first <- err
	}()
	<-started
	if _, _, err := client.Idempotent(ctx, key, charge); !errors.Is(err, ErrInProgress) {
		t.Fatalf("want ErrInProgress while it runs, got %v", err)
	}
	waited := make(chan string, 1)
	go func() {
		result, _, err := client.Idempotent(ctx, key, charge, WaitForRunning())
		if err != nil {
			t.Error(err)
		}
		waited <- result
	}()
	time.Sleep(100 * time.Millisecond)
	close(finish)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := <-waited; got != "charged 42.00" {
		t.Fatalf("the waiting duplicate got %q", got)
	}
	result, ran, err := client.Idempotent(ctx, key, charge)
	if err != nil || ran || result != "charged 42.00" {
		t.Fatalf("a later duplicate: %q ran=%v %v", result, ran, err)
	}
	if stored, found, err := client.StoredResult(ctx, key); err != nil || !found || stored != "charged 42.00" {
		t.Fatalf("stored %q found=%v %v", stored, found, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the operation ran %d times", n)
	}
}

func TestAFailedOperationStoresNothing(t *testing.T) {
	client := dial(t, daemonAddress)
	ctx := context.Background()
	failure := errors.New("card declined")
	_, _, err := client.Idempotent(ctx, "go/refund-3", func(context.Context, *Lease) (string, error) {
		return "", failure
	})
	if !errors.Is(err, failure) {
		t.Fatalf("want the operation's error, got %v", err)
	}
	result, ran, err := client.Idempotent(ctx, "go/refund-3", func(context.Context, *Lease) (string, error) {
		return "refunded", nil
	})
	if err != nil || !ran || result != "refunded" {
		t.Fatalf("the retry: %q ran=%v %v", result, ran, err)
	}
}

func TestOnceRunsToSuccessOnceAmongConcurrentInstances(t *testing.T) {
	onceRunsOnce(t, daemonAddress)
}

func onceRunsOnce(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	key := "go/migrate-" + time.Now().Format("150405.000000")
	var runs atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := client.Once(ctx, key, func(ctx context.Context, lease *Lease) error {
				if runs.Add(1) == 1 {
					// The first run fails: the next instance must retry.
					return errors.New("the first try fails")
				}
				time.Sleep(50 * time.Millisecond)
				return nil
			})
			if err != nil && err.Error() != "the first try fails" {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := runs.Load(); n != 2 {
		t.Fatalf("ran %d times; want one failure and one success", n)
	}
	record, found, err := client.StoredResult(ctx, key, WithNamespace("once"))
	if err != nil || !found {
		t.Fatalf("no record of the run: %v", err)
	}
	ran, err := client.Once(ctx, key, func(context.Context, *Lease) error {
		t.Error("ran again")
		return nil
	})
	if err != nil || ran {
		t.Fatalf("ran=%v %v (record %q)", ran, err, record)
	}
}

func TestRateLimitLetsItsBudgetThrough(t *testing.T) {
	rateLimitLetsItsBudgetThrough(t, daemonAddress)
}

func rateLimitLetsItsBudgetThrough(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	limit := client.RateLimit("go/api", 2, time.Minute)
	for want := uint64(1); ; want-- {
		d, err := limit.Allow(ctx, "user-7")
		if err != nil || !d.Allowed || d.Remaining != want {
			t.Fatalf("%+v %v", d, err)
		}
		if want == 0 {
			break
		}
	}
	d, err := limit.Allow(ctx, "user-7")
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Fatalf("the third request: %+v %v", d, err)
	}
	smooth := client.RateLimit("go/smooth", 10, time.Second, WithBurst(1))
	if d, err := smooth.Allow(ctx, "user-7"); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	if d, err := smooth.Allow(ctx, "user-7"); err != nil || d.Allowed {
		t.Fatalf("a burst of 1 spaces requests 100 ms apart: %+v %v", d, err)
	}
	if _, err := client.RateLimit("go/zero", 0, time.Second).Allow(ctx, "x"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("want ErrInvalidArgument, got %v", err)
	}
}

func TestSemaphoreAndReadWriteLock(t *testing.T) {
	client := dial(t, daemonAddress)
	ctx := context.Background()
	pool := client.Semaphore("go/pool", 2)
	one, err := pool.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := pool.TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.TryAcquire(ctx, 1); !errors.Is(err, ErrNoPermits) {
		t.Fatalf("want ErrNoPermits, got %v", err)
	}
	_ = one.Release(ctx)
	_ = two.Release(ctx)

	rw := client.RWLock("go/config")
	r1, err := rw.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatal("readers hold together:", err)
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("a writer waits for the readers: %v", err)
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := rw.Lock(ctx, WithWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryRLock(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("a reader waits for the writer: %v", err)
	}
	_ = w.Release(ctx)
}

func TestADaemonWithATokenServesOnlyCallsThatCarryIt(t *testing.T) {
	dir := t.TempDir()
	tokenFile := dir + "/token"
	if err := os.WriteFile(tokenFile, []byte("go-client-secret-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	address := serveForTest(t, "sqlite://"+dir+"/locks.db", "--token-file", tokenFile)
	ctx := context.Background()
	if _, err := dial(t, address).TryLock(ctx, "go/token"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("want ErrUnauthenticated without the token, got %v", err)
	}
	client, err := Dial(ctx, address, WithToken("go-client-secret-0123"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	lease, err := client.TryLock(ctx, "go/token")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
