package lockward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestOnRedisDirectly runs the lease checks on a Client from Open, on one
// Redis, a Redis Cluster and a primary found through Sentinel, with no
// daemon between.
func TestOnRedisDirectly(t *testing.T) {
	for _, kind := range []string{"redis", "redis-cluster", "redis-sentinel"} {
		t.Run(kind, func(t *testing.T) {
			url := startStore(t, kind)
			t.Run("fences", func(t *testing.T) { fencesGrowAcrossReleases(t, url) })
			t.Run("busy", func(t *testing.T) { tryLockOnAHeldLockIsBusy(t, url) })
			t.Run("handoff", func(t *testing.T) { aWaiterIsWokenPromptlyByTheRelease(t, url) })
			t.Run("cancel", func(t *testing.T) { aCancelledWaitEndsAtOnceAndLeavesNoHolder(t, url) })
			t.Run("counter", func(t *testing.T) { fencedIncrementsFromEightGoroutinesAreExact(t, url) })
			t.Run("rwlock", func(t *testing.T) { readersShareAndAWriterWaits(t, url) })
			t.Run("lockall", func(t *testing.T) { lockAllTakesEveryNameOrNone(t, url) })
			t.Run("semaphore", func(t *testing.T) { aSemaphoreAdmitsItsPermitsAndAWaiterFollows(t, url) })
			t.Run("election", func(t *testing.T) { electionHandsOverOnResign(t, url) })
			t.Run("idempotent", func(t *testing.T) { idempotentRunsOnce(t, url) })
			t.Run("once", func(t *testing.T) { onceRunsOnce(t, url) })
			t.Run("ratelimit", func(t *testing.T) { rateLimitLetsItsBudgetThrough(t, url) })
			t.Run("frozen", func(t *testing.T) { aFrozenClientLosesItsLockAtItsTTL(t, url) })
		})
	}
}

// TestOnRedlockDirectly runs the lease checks on a Client from Open over
// three Redis masters, and beside a daemon on the same masters.
func TestOnRedlockDirectly(t *testing.T) {
	url := startStore(t, "redlock")
	t.Run("fences", func(t *testing.T) { fencesGrowAcrossReleases(t, url) })
	t.Run("busy", func(t *testing.T) { tryLockOnAHeldLockIsBusy(t, url) })
	t.Run("handoff", func(t *testing.T) { aWaiterIsWokenPromptlyByTheRelease(t, url) })
	t.Run("cancel", func(t *testing.T) { aCancelledWaitEndsAtOnceAndLeavesNoHolder(t, url) })
	t.Run("counter", func(t *testing.T) { fencedIncrementsFromEightGoroutinesAreExact(t, url) })
	t.Run("lockall", func(t *testing.T) { lockAllTakesEveryNameOrNone(t, url) })
	t.Run("election", func(t *testing.T) { electionHandsOverOnResign(t, url) })
	t.Run("frozen", func(t *testing.T) { aFrozenClientLosesItsLockAtItsTTL(t, url) })
	t.Run("with a daemon", func(t *testing.T) {
		direct := dial(t, url)
		daemon := dial(t, serveForTest(t, url))
		ctx := context.Background()
		held, err := direct.Lock(ctx, "go/redlock-shared", WithLabel("direct"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := daemon.TryLock(ctx, "go/redlock-shared"); !errors.Is(err, ErrBusy) {
			t.Fatalf("the daemon took a lock the direct client holds: %v", err)
		}
		if row, err := daemon.Inspect(ctx, "go/redlock-shared"); err != nil || row.GetLabel() != "direct" || row.GetFence() != held.Fence() {
			t.Fatalf("the daemon sees %v (%v)", row, err)
		}
		granted := leaseLater(t, func() (*Lease, error) { return daemon.Lock(ctx, "go/redlock-shared", WithWait(10*time.Second)) })
		time.Sleep(100 * time.Millisecond)
		released := time.Now()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-granted
		if next == nil {
			t.FailNow()
		}
		t.Logf("handed to the daemon's waiter in %v", time.Since(released))
		if next.Fence() <= held.Fence() {
			t.Fatalf("fence %d after %d", next.Fence(), held.Fence())
		}
		_ = next.Release(ctx)
	})
	client := dial(t, url)
	if _, err := client.RWLock("go/rw").TryRLock(context.Background()); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("readers on Redlock: want ErrNotSupported, got %v", err)
	}
	for _, bad := range []string{"redlock://127.0.0.1:1,127.0.0.1:2", "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/0"} {
		if _, err := Open(context.Background(), bad); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%s: want ErrInvalidArgument, got %v", bad, err)
		}
	}
}

// TestADirectHolderAndADaemonHolderExcludeEachOther: a Go holder on Redis
// and the Rust store behind `lockward serve` share one lock, hand it to
// each other's waiters at once (the same line, the same wake-ups), and
// draw their fences from one counter.
func TestADirectHolderAndADaemonHolderExcludeEachOther(t *testing.T) {
	url := startStore(t, "redis")
	direct := dial(t, url)
	daemon := dial(t, serveForTest(t, url))
	ctx := context.Background()
	var last uint64
	for round, pair := range [][2]*Client{{direct, daemon}, {daemon, direct}, {direct, daemon}} {
		holder, waiter := pair[0], pair[1]
		held, err := holder.Lock(ctx, "go/shared", WithLabel("round holder"))
		if err != nil {
			t.Fatal(err)
		}
		if held.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, held.Fence(), last)
		}
		if _, err := waiter.TryLock(ctx, "go/shared"); !errors.Is(err, ErrBusy) {
			t.Fatalf("round %d: the other path took a held lock: %v", round, err)
		}
		// Both paths show the holder as the store has it.
		for _, c := range pair {
			row, err := c.Inspect(ctx, "go/shared")
			if err != nil {
				t.Fatal(err)
			}
			if row == nil || row.GetLabel() != "round holder" || row.GetFence() != held.Fence() {
				t.Fatalf("round %d: inspect shows %v, want the holder with fence %d", round, row, held.Fence())
			}
		}
		granted := leaseLater(t, func() (*Lease, error) { return waiter.Lock(ctx, "go/shared", WithWait(10*time.Second)) })
		waitForWaiters(t, direct, "go/shared", 1)
		released := time.Now()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		next := <-granted
		if next == nil {
			t.FailNow()
		}
		t.Logf("round %d: handed over in %v", round, time.Since(released))
		if next.Fence() <= held.Fence() {
			t.Fatalf("round %d: fence %d after %d", round, next.Fence(), held.Fence())
		}
		last = next.Fence()
		if err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// One semaphore: a permit taken on one path is counted on the other.
	permit, err := direct.Semaphore("go/one-permit", 1).TryAcquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.Semaphore("go/one-permit", 1).TryAcquire(ctx, 1); !errors.Is(err, ErrNoPermits) {
		t.Fatalf("the daemon took a permit the direct client holds: %v", err)
	}
	if err := permit.Release(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := daemon.Semaphore("go/one-permit", 1).TryAcquire(ctx, 1)
	if err != nil {
		t.Fatalf("the released permit: %v", err)
	}
	if other.Fence() <= permit.Fence() {
		t.Fatalf("permit fence %d after %d", other.Fence(), permit.Fence())
	}
	_ = other.Release(ctx)
}

// TestDirectHoldersGoOnAfterASentinelFailover: the primary ends at once
// (SHUTDOWN NOSAVE), the sentinels promote a replica, and the client
// follows: four goroutines looping on one fenced counter take the lock
// again on the new primary, and every fence the counter accepts exceeds
// the one before.
func TestDirectHoldersGoOnAfterASentinelFailover(t *testing.T) {
	url := startStore(t, "redis-sentinel")
	client := dial(t, url)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		last     uint64
		accepted int
		stale    int
		lastGood time.Time
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := client.WithLock(ctx, "go/failover", func(ctx context.Context, lease *Lease) error {
					mu.Lock()
					defer mu.Unlock()
					if lease.Fence() <= last {
						stale++
						return nil
					}
					last, accepted, lastGood = lease.Fence(), accepted+1, time.Now()
					return nil
				}, WithTTL(2*time.Second), WithWait(time.Second))
				if err != nil {
					// The primary is gone: lockward's kinds, tried again.
					if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrTimedOut) && !errors.Is(err, ErrLost) {
						t.Errorf("during the failover: %v", err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	sentinelAddrs := strings.Split(strings.Split(strings.TrimPrefix(url, "redis+sentinel://"), "/")[0], ",")
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddrs[0]})
	defer sentinel.Close()
	primary, err := sentinel.GetMasterAddrByName(ctx, "lockward-primary").Result()
	if err != nil {
		t.Fatal(err)
	}
	old := redis.NewClient(&redis.Options{Addr: primary[0] + ":" + primary[1]})
	mu.Lock()
	before := accepted
	mu.Unlock()
	_ = old.ShutdownNoSave(ctx).Err()
	_ = old.Close()
	killed := time.Now()
	deadline := killed.Add(20 * time.Second)
	for {
		mu.Lock()
		wentOn := lastGood.After(killed) && accepted > before+10
		mu.Unlock()
		if wentOn {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("no holder went on within 20 s of the primary's end (%d writes before it)", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("went on %v after the primary ended; %d writes accepted, %d before", lastGood.Sub(killed), accepted, before)
	if stale != 0 {
		t.Fatalf("the counter refused %d stale fences: a fence went back", stale)
	}
}

// TestADirectCandidateAndADaemonCandidateShareOneElection: the leader
// through the daemon is seen by a direct observer, and a direct
// candidate takes over on its resign with a larger epoch.
func TestADirectCandidateAndADaemonCandidateShareOneElection(t *testing.T) {
	url := startStore(t, "redis")
	direct := dial(t, url)
	daemon := dial(t, serveForTest(t, url))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := daemon.Elect(ctx, "go/election", "via-daemon")
	if err != nil {
		t.Fatal(err)
	}
	leaders, err := direct.Observe(ctx, "go/election")
	if err != nil {
		t.Fatal(err)
	}
	if leader := <-leaders; leader != "via-daemon" {
		t.Fatalf("the observer saw %q", leader)
	}
	if _, err := direct.TryElect(ctx, "go/election", "direct"); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second leader: %v", err)
	}
	elected := make(chan *Leadership, 1)
	go func() {
		l, err := direct.Elect(ctx, "go/election", "direct")
		if err != nil {
			t.Error(err)
		}
		elected <- l
	}()
	waitForWaiters(t, direct, "go/election", 1)
	resigned := time.Now()
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-elected
	if second == nil {
		t.FailNow()
	}
	t.Logf("elected %v after the resign", time.Since(resigned))
	if second.Epoch() <= first.Epoch() {
		t.Fatalf("epoch %d after %d", second.Epoch(), first.Epoch())
	}
	for leader := range leaders {
		if leader == "direct" {
			break
		}
	}
	if leader, err := daemon.Leader(ctx, "go/election"); err != nil || leader != "direct" {
		t.Fatalf("the daemon sees %q (%v)", leader, err)
	}
	_ = second.Resign(ctx)
}

// TestGrantsConfirmedByReplicas: with replicas=2 a grant is answered once
// both replicas have it; with one replica cut off, a lock and a permit are
// refused within the timeout and nobody holds them.
func TestGrantsConfirmedByReplicas(t *testing.T) {
	url := startStore(t, "redis-sentinel")
	ctx := context.Background()
	confirmed := dial(t, url+"?replicas=2&replicas_timeout=300ms")
	plain := dial(t, url)
	held, err := confirmed.Lock(ctx, "go/confirmed")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Renew(ctx, 0); err != nil {
		t.Fatalf("a renewal both replicas confirm: %v", err)
	}
	_ = held.Release(ctx)
	// One replica cut off from the primary: only one confirms.
	sentinelAddrs := strings.Split(strings.Split(strings.TrimPrefix(url, "redis+sentinel://"), "/")[0], ",")
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddrs[0]})
	defer sentinel.Close()
	replicas, err := sentinel.Replicas(ctx, "lockward-primary").Result()
	if err != nil || len(replicas) != 2 {
		t.Fatalf("replicas %v (%v)", replicas, err)
	}
	cut := redis.NewClient(&redis.Options{Addr: replicas[0]["ip"] + ":" + replicas[0]["port"]})
	defer cut.Close()
	if err := cut.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	_, err = confirmed.TryLock(ctx, "go/unconfirmed")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "1 of the 2 replicas") {
		t.Fatalf("want ErrUnavailable naming the replicas, got %v", err)
	}
	// Refused once its 300ms are up, not left waiting (the bound is wide:
	// what is checked is that the wait ends, not how fast a busy machine
	// gets there).
	if took := time.Since(started); took > 10*time.Second {
		t.Fatalf("refused after %v, with a 300ms timeout", took)
	}
	if row, err := plain.Inspect(ctx, "go/unconfirmed"); err != nil || row != nil {
		t.Fatalf("an unconfirmed grant left a holder: %v (%v)", row, err)
	}
	if _, err := confirmed.Semaphore("go/unconfirmed-pool", 1).TryAcquire(ctx, 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an unconfirmed permit: want ErrUnavailable, got %v", err)
	}
	permit, err := plain.Semaphore("go/unconfirmed-pool", 1).TryAcquire(ctx, 1)
	if err != nil {
		t.Fatalf("an unconfirmed permit was left held: %v", err)
	}
	_ = permit.Release(ctx)
}

// TestALockDelayHoldsTheNameBackAfterALapse: a holder that stops without
// a release keeps the name for its lock-delay past its lease, on both
// paths; its deadline stays at the lease (less the drift allowance).
func TestALockDelayHoldsTheNameBackAfterALapse(t *testing.T) {
	url := startStore(t, "redis")
	direct := dial(t, url)
	daemon := dial(t, serveForTest(t, url))
	ctx := context.Background()
	for _, c := range []*Client{direct, daemon} {
		taken := time.Now()
		stopped, err := c.Lock(ctx, "go/delayed", WithTTL(300*time.Millisecond), WithLockDelay(time.Second), WithoutRenewal())
		if err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		// Within the 300ms lease (less the drift), not the lease and the
		// lock-delay: bounded by when the take began and when it returned,
		// whatever the round trip took.
		if d := stopped.Deadline(); d.Before(taken.Add(250*time.Millisecond)) || d.After(returned.Add(300*time.Millisecond)) {
			t.Fatalf("deadline %v after the take began and %v after it returned, want within the 300ms lease", d.Sub(taken), d.Sub(returned))
		}
		<-stopped.Lost()
		time.Sleep(200 * time.Millisecond)
		if _, err := direct.TryLock(ctx, "go/delayed"); !errors.Is(err, ErrBusy) {
			t.Fatalf("within the lock-delay: want ErrBusy, got %v", err)
		}
		next, err := direct.Lock(ctx, "go/delayed", WithWait(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if freed := time.Since(taken); freed < 1300*time.Millisecond {
			t.Fatalf("taken again %v after the first take, before its lease and lock-delay ran out", freed)
		}
		_ = next.Release(ctx)
	}
}

// TestAnIdempotencyKeyIsOneKeyOnBothPaths: a key running through the
// daemon is in progress for a direct client, and its stored result is
// what the direct client gets, without running anything.
func TestAnIdempotencyKeyIsOneKeyOnBothPaths(t *testing.T) {
	url := startStore(t, "redis")
	direct := dial(t, url)
	daemon := dial(t, serveForTest(t, url))
	ctx := context.Background()
	running, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := daemon.Idempotent(ctx, "order-7", func(ctx context.Context, lease *Lease) (string, error) {
			close(running)
			<-finish
			return "charged 7.00", nil
		})
		done <- err
	}()
	<-running
	never := func(ctx context.Context, lease *Lease) (string, error) {
		t.Error("the direct client ran a key the daemon's client runs")
		return "", nil
	}
	if _, _, err := direct.Idempotent(ctx, "order-7", never); !errors.Is(err, ErrInProgress) {
		t.Fatalf("want ErrInProgress, got %v", err)
	}
	close(finish)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	result, ran, err := direct.Idempotent(ctx, "order-7", never)
	if err != nil || ran || result != "charged 7.00" {
		t.Fatalf("got %q ran %v (%v), want the stored result", result, ran, err)
	}
	if stored, found, err := direct.StoredResult(ctx, "order-7"); err != nil || !found || stored != "charged 7.00" {
		t.Fatalf("StoredResult: %q %v %v", stored, found, err)
	}
}

// TestARateLimitIsOneBudgetOnBothPaths: requests counted through the
// daemon and directly draw on one budget.
func TestARateLimitIsOneBudgetOnBothPaths(t *testing.T) {
	url := startStore(t, "redis")
	clients := []*Client{dial(t, url), dial(t, serveForTest(t, url))}
	ctx := context.Background()
	for _, opts := range [][]LimitOption{nil, {WithBurst(4)}} {
		allowed := 0
		for i := range 6 {
			d, err := clients[i%2].RateLimit("go/shared-budget", 4, time.Hour, opts...).Allow(ctx, fmt.Sprint("user-", len(opts)))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				allowed++
			}
		}
		if allowed != 4 {
			t.Fatalf("%v: %d of 6 requests allowed on a budget of 4", opts, allowed)
		}
	}
}

// TestADirectLeaderCutOffIsRevokedBeforeItsLeaseLapses: client-go's rule
// on the direct path: the leader stops at its renew deadline, before
// another candidate can be elected.
func TestADirectLeaderCutOffIsRevokedBeforeItsLeaseLapses(t *testing.T) {
	url := startStore(t, "redis")
	proxy := newCuttableProxy(t, strings.TrimPrefix(url, "redis://"))
	cutOff := dial(t, "redis://"+proxy.address)
	other := dial(t, url)
	ctx := context.Background()
	timing := WithElectionTiming(3*time.Second, 2*time.Second, 300*time.Millisecond)
	leader, err := cutOff.Elect(ctx, "go/cut-election", "cut-off", timing)
	if err != nil {
		t.Fatal(err)
	}
	proxy.cut()
	cut := time.Now()
	elected := make(chan time.Time, 1)
	go func() {
		l, err := other.Elect(ctx, "go/cut-election", "next", timing)
		if err != nil {
			t.Error(err)
			elected <- time.Time{}
			return
		}
		elected <- time.Now()
		_ = l.Resign(ctx)
	}()
	select {
	case <-leader.Revoked():
	case <-time.After(5 * time.Second):
		t.Fatal("the cut-off leader was not revoked")
	}
	revoked := time.Now()
	next := <-elected
	t.Logf("revoked %v after the cut, the next elected %v after it", revoked.Sub(cut), next.Sub(cut))
	if !next.After(revoked) {
		t.Fatalf("the next leader was elected %v before the cut-off one stopped", revoked.Sub(next))
	}
}

// TestADirectHolderAndLockwardRunExcludeEachOther: a lock the Go client
// holds on Redis makes `lockward run --no-wait` exit 75, and a lock
// `lockward run` holds makes the Go client's TryLock fail with ErrBusy.
func TestADirectHolderAndLockwardRunExcludeEachOther(t *testing.T) {
	url := startStore(t, "redis")
	client := dial(t, url)
	ctx := context.Background()
	held, err := client.Lock(ctx, "go/with-run")
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command(lockwardBinary(), "run", "--store", url, "--no-wait", "go/with-run", "--", "true")
	if err := run.Run(); err == nil || run.ProcessState.ExitCode() != 75 {
		t.Fatalf("lockward run beside a Go holder: %v (exit %d), want exit 75", err, run.ProcessState.ExitCode())
	}
	_ = held.Release(ctx)
	// The other way: lockward run holds while its command sleeps.
	holding := exec.Command(lockwardBinary(), "run", "--store", url, "go/with-run", "--", "sleep", "30")
	holding.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := holding.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = holding.Process.Signal(syscall.SIGTERM)
		_ = holding.Wait()
	})
	waitForHolder(t, client, "go/with-run")
	if _, err := client.TryLock(ctx, "go/with-run"); !errors.Is(err, ErrBusy) {
		t.Fatalf("the Go client beside lockward run: want ErrBusy, got %v", err)
	}
}

// leaseLater takes a lease in the background: the channel gets it, or
// nil once the error is reported.
func leaseLater(t *testing.T, take func() (*Lease, error)) <-chan *Lease {
	t.Helper()
	got := make(chan *Lease, 1)
	go func() {
		lease, err := take()
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	return got
}

// waitForHolder waits until the store shows a holder of name.
func waitForHolder(t *testing.T, c *Client, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := c.Inspect(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if row != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody took %s", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitForWaiters waits until the store shows n waiters in name's line.
func waitForWaiters(t *testing.T, c *Client, name string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := c.Inspect(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if row != nil && row.GetWaiters() == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: waiters %v, want %d", name, row, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestACancelledDirectWaitLeavesTheLine: the waiter's place goes with it,
// so the next waiter is not held up by a place nobody fills.
func TestACancelledDirectWaitLeavesTheLine(t *testing.T) {
	url := startStore(t, "redis")
	client := dial(t, url)
	ctx := context.Background()
	holder, err := client.Lock(ctx, "go/line")
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := client.Lock(wait, "go/line")
		done <- err
	}()
	waitForWaiters(t, client, "go/line", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	waitForWaiters(t, client, "go/line", 0)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestADirectLeaseIsLostByItsDeadlineWhenTheStoreIsCutOff: renewals that
// cannot reach Redis leave the deadline where it was, and Lost fires by it.
func TestADirectLeaseIsLostByItsDeadlineWhenTheStoreIsCutOff(t *testing.T) {
	url := startStore(t, "redis")
	proxy := newCuttableProxy(t, strings.TrimPrefix(url, "redis://"))
	client := dial(t, "redis://"+proxy.address)
	ctx := context.Background()
	lease, err := client.Lock(ctx, "go/cut", WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	deadline := lease.Deadline()
	proxy.cut()
	select {
	case <-lease.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() did not fire after the store was cut off")
	}
	// A renewal that cannot reach the store leaves the deadline where it
	// was: the loss comes by the deadline, not before it.
	if early := time.Until(deadline); early > 5*time.Millisecond {
		t.Fatalf("Lost fired %v before the deadline: %v", early, lease.Err())
	}
	if !errors.Is(lease.Err(), ErrLost) {
		t.Fatalf("want ErrLost, got %v", lease.Err())
	}
	if late := time.Since(deadline); late > 3*time.Second {
		t.Fatalf("Lost fired %v after the deadline", late)
	}
}

func TestOpenRefusesWhatItCannotReach(t *testing.T) {
	ctx := context.Background()
	for url, want := range map[string]error{
		"postgres://localhost/db":                               ErrNotSupported,
		"etcd://localhost:2379":                                 ErrNotSupported,
		"redis://localhost:6379?replicas=0":                     ErrInvalidArgument,
		"redis://localhost:6379?replicas_timeout=1s":            ErrInvalidArgument,
		"redis+cluster://a:1,b:2?replicas=1":                    ErrInvalidArgument,
		"redis://localhost:6379?replicas=1&replicas_timeout=2s": ErrInvalidArgument,
		"redis://localhost:6379?colour=blue":                    ErrInvalidArgument,
		"redis://localhost:notaport":                            ErrInvalidArgument,
		"redis://a:1,b:2":                                       ErrInvalidArgument,
		"redis+cluster://a:1,b:2/3":                             ErrInvalidArgument,
		"redis+sentinel://a:26379":                              ErrInvalidArgument,
		"redis://user:s3cret@127.0.0.1:1/zero":                  ErrInvalidArgument,
		"redis://user:s3cret@127.0.0.1:1":                       ErrUnavailable,
	} {
		_, err := Open(ctx, url)
		if !errors.Is(err, want) {
			t.Errorf("%s: want %v, got %v", url, want, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password: %v", url, err)
		}
		if want == ErrNotSupported && !strings.Contains(err.Error(), "Dial") {
			t.Errorf("%s: the error does not name Dial: %v", url, err)
		}
	}
	client := dial(t, startStore(t, "redis"))
	if _, err := client.RateLimit("r", 0, time.Second).Allow(ctx, "me"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a limit of 0: want ErrInvalidArgument, got %v", err)
	}
	if _, _, err := client.Idempotent(ctx, "k", nil, WithPermanentResult()); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("a result kept forever on Redis: want ErrNotSupported, got %v", err)
	}
	if _, err := client.Elect(ctx, "e", "me", WithElectionTiming(time.Second, 2*time.Second, 100*time.Millisecond)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a renew deadline beyond the lease: want ErrInvalidArgument, got %v", err)
	}
	if _, err := client.Semaphore("s", 2).TryAcquire(ctx, 3); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("3 of 2 permits: want ErrInvalidArgument, got %v", err)
	}
	if _, err := client.TryLock(ctx, "n", WithTTL(time.Millisecond)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a 1ms TTL: want ErrInvalidArgument, got %v", err)
	}
}

// aSemaphoreAdmitsItsPermitsAndAWaiterFollows: two permits go to two
// holders, a third try is refused, a waiter gets the permit a release
// frees, and a cancelled waiter holds nothing.
func aSemaphoreAdmitsItsPermitsAndAWaiterFollows(t *testing.T, address string) {
	client := dial(t, address)
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
	if two.Fence() <= one.Fence() {
		t.Fatalf("fence %d after %d", two.Fence(), one.Fence())
	}
	if _, err := pool.TryAcquire(ctx, 1); !errors.Is(err, ErrNoPermits) {
		t.Fatalf("want ErrNoPermits, got %v", err)
	}
	if _, err := pool.Acquire(ctx, 1, WithWait(100*time.Millisecond)); !errors.Is(err, ErrTimedOut) {
		t.Fatalf("want ErrTimedOut, got %v", err)
	}
	got := leaseLater(t, func() (*Lease, error) { return pool.Acquire(ctx, 1, WithWait(10*time.Second)) })
	time.Sleep(50 * time.Millisecond)
	released := time.Now()
	if err := one.Release(ctx); err != nil {
		t.Fatal(err)
	}
	third := <-got
	if third == nil {
		t.FailNow()
	}
	t.Logf("a freed permit reached its waiter in %v", time.Since(released))
	wait, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := pool.Acquire(wait, 1)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	_ = two.Release(ctx)
	_ = third.Release(ctx)
	// Both permits free again: the cancelled waiter took none.
	a, err := pool.TryAcquire(ctx, 2)
	if err != nil {
		t.Fatalf("after the releases and a cancelled wait: %v", err)
	}
	_ = a.Release(ctx)
}

// readersShareAndAWriterWaits: an RWLock's readers hold together; its
// writer waits for the last of them and is woken by its release.
func readersShareAndAWriterWaits(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	rw := client.RWLock("go/rw")
	first, err := rw.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("a second reader was refused: %v", err)
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("a writer beside readers: want ErrBusy, got %v", err)
	}
	written := leaseLater(t, func() (*Lease, error) { return rw.Lock(ctx, WithWait(10*time.Second)) })
	time.Sleep(50 * time.Millisecond)
	_ = first.Release(ctx)
	select {
	case <-written:
		t.Fatal("the writer went in while a reader read")
	case <-time.After(50 * time.Millisecond):
	}
	_ = second.Release(ctx)
	writer := <-written
	if writer == nil {
		t.FailNow()
	}
	if _, err := rw.TryRLock(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("a reader beside the writer: want ErrBusy, got %v", err)
	}
	_ = writer.Release(ctx)
}

// lockAllTakesEveryNameOrNone: LockAll holds each name with its own fence,
// and a LockAll that finds one name held takes none.
func lockAllTakesEveryNameOrNone(t *testing.T, address string) {
	client := dial(t, address)
	ctx := context.Background()
	all, err := client.LockAll(ctx, []string{"go/b", "go/a"})
	if err != nil {
		t.Fatal(err)
	}
	if fences := all.Fences(); len(fences) != 2 || fences[0] == 0 || fences[1] == 0 {
		t.Fatalf("fences %v", fences)
	}
	for _, name := range []string{"go/a", "go/b"} {
		if _, err := client.TryLock(ctx, name); !errors.Is(err, ErrBusy) {
			t.Fatalf("%s beside the LockAll: want ErrBusy, got %v", name, err)
		}
	}
	_ = all.Release(ctx)
	b, err := client.Lock(ctx, "go/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.LockAll(ctx, []string{"go/a", "go/b"}, WithWait(0)); !errors.Is(err, ErrBusy) {
		t.Fatalf("want ErrBusy, got %v", err)
	}
	a, err := client.TryLock(ctx, "go/a")
	if err != nil {
		t.Fatalf("a LockAll that failed kept go/a: %v", err)
	}
	_ = a.Release(ctx)
	_ = b.Release(ctx)
}

// cuttableProxy forwards TCP to a server until cut: then it closes every
// connection and refuses new ones.
type cuttableProxy struct {
	address  string
	listener net.Listener
	mu       sync.Mutex
	conns    []net.Conn
}

func newCuttableProxy(t *testing.T, target string) *cuttableProxy {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{address: listener.Addr().String(), listener: listener}
	t.Cleanup(p.cut)
	go func() {
		for {
			client, err := listener.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(server, client); _ = server.Close() }()
			go func() { _, _ = io.Copy(client, server); _ = client.Close() }()
		}
	}()
	return p
}

func (p *cuttableProxy) cut() {
	_ = p.listener.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
