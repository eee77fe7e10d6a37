// Command bench measures the Go client, through `lockward serve` and on
// Redis itself (Open), beside the Rust library and beside redsync, on one
// Redis, in one run: uncontended acquire+release, the handoff to a
// blocked waiter, and one daemon holding many leases at once (its RSS,
// and whether every renewal came in time).
//
//	go run . [-duration 3s] [-leases 10000]
//
// LOCKWARD_BIN names the lockward binary (a release build gives the
// figures docs/benchmarks.md prints) and LOCKWARD_TESTSERVER_BIN the
// testkit's server starter, which starts redis-server on a free port.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	lockward "lockward.dev/go"
	"lockward.dev/go/lockwardtest"
)

// crowdSize is how many goroutines cycle on one name at once.
const crowdSize = 64

func main() {
	duration := flag.Duration("duration", 3*time.Second, "how long each rate is measured")
	handoffs := flag.Int("handoffs", 30, "handoffs timed for each client")
	leases := flag.Int("leases", 10000, "leases one daemon holds at once (0 skips)")
	hold := flag.Duration("hold", 20*time.Second, "how long the leases are held")
	flag.Parse()
	if err := run(*duration, *handoffs, *leases, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func binary(env, fallback string) string {
	if bin := os.Getenv(env); bin != "" {
		return bin
	}
	bin, _ := filepath.Abs(filepath.Join("..", "..", "..", "target", "release", fallback))
	return bin
}

func run(duration time.Duration, handoffs, leases int, hold time.Duration) error {
	ctx := context.Background()
	lockwardBin := binary("LOCKWARD_BIN", "lockward")
	redisURL, stopRedis, err := startRedis(binary("LOCKWARD_TESTSERVER_BIN", "lockward-testserver"))
	if err != nil {
		return err
	}
	defer stopRedis()
	dir, err := os.MkdirTemp("", "lockward-go-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	socket := "unix://" + filepath.Join(dir, "lockward.sock")
	daemon, err := lockwardtest.Start(lockwardBin, redisURL, "--listen", socket)
	if err != nil {
		return err
	}
	defer daemon.Stop()
	client, err := lockward.Dial(ctx, socket)
	if err != nil {
		return err
	}
	defer client.Close()
	opts, err := goredislib.ParseURL(redisURL)
	if err != nil {
		return err
	}
	direct, err := lockward.Open(ctx, redisURL)
	if err != nil {
		return err
	}
	defer direct.Close()
	rdb := goredislib.NewClient(opts)
	defer rdb.Close()
	rs := redsync.New(goredis.NewPool(rdb))
	locker := redislock.New(rdb)

	fmt.Printf("one Redis (%s); each rate over %v, %d handoffs each\n\n", redisURL, duration, handoffs)
	rust, err := rustCycle(lockwardBin, redisURL, duration)
	if err != nil {
		return err
	}
	goCycle, err := measure(duration, func(name string) error {
		lease, err := client.Lock(ctx, name, lockward.WithTTL(10*time.Second), lockward.WithoutRenewal())
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	})
	if err != nil {
		return err
	}
	directCycle, err := measure(duration, func(name string) error {
		lease, err := direct.Lock(ctx, name, lockward.WithTTL(10*time.Second), lockward.WithoutRenewal())
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	})
	if err != nil {
		return err
	}
	redsyncCycle, err := measure(duration, func(name string) error {
		mutex := rs.NewMutex(name, redsync.WithExpiry(10*time.Second))
		if err := mutex.LockContext(ctx); err != nil {
			return err
		}
		_, err := mutex.UnlockContext(ctx)
		return err
	})
	if err != nil {
		return err
	}
	redislockCycle, err := measure(duration, func(name string) error {
		lock, err := locker.Obtain(ctx, name, 10*time.Second, nil)
		if err != nil {
			return err
		}
		return lock.Release(ctx)
	})
	if err != nil {
		return err
	}
	goHandoff, err := handoff(handoffs, func(name string) (func() error, error) {
		lease, err := client.Lock(ctx, name, lockward.WithTTL(10*time.Second))
		if err != nil {
			return nil, err
		}
		return func() error { return lease.Release(ctx) }, nil
	})
	if err != nil {
		return err
	}
	directHandoff, err := handoff(handoffs, func(name string) (func() error, error) {
		lease, err := direct.Lock(ctx, name, lockward.WithTTL(10*time.Second))
		if err != nil {
			return nil, err
		}
		return func() error { return lease.Release(ctx) }, nil
	})
	if err != nil {
		return err
	}
	redsyncHandoff, err := handoff(handoffs, func(name string) (func() error, error) {
		// A waiter retries until it gets the lock, as its users configure
		// it to; the delay between tries is redsync's default.
		mutex := rs.NewMutex(name, redsync.WithExpiry(10*time.Second), redsync.WithTries(1000))
		if err := mutex.LockContext(ctx); err != nil {
			return nil, err
		}
		return func() error { _, err := mutex.UnlockContext(ctx); return err }, nil
	})
	if err != nil {
		return err
	}

	redislockHandoff, err := handoff(handoffs, func(name string) (func() error, error) {
		// A waiter retries until it gets the lock, every 100 ms as
		// redislock's own example does.
		lock, err := locker.Obtain(ctx, name, 10*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
		if err != nil {
			return nil, err
		}
		return func() error { return lock.Release(ctx) }, nil
	})
	if err != nil {
		return err
	}

	fmt.Printf("%-34s %12s %10s %10s %12s\n", "", "cycles/s", "p50", "p99", "handoff p50")
	fmt.Printf("%-34s %12.0f %10s %10s %12s\n", "Rust library (lockward bench)", rust.rate, rust.p50, "", rust.handoff)
	fmt.Printf("%-34s %12.0f %10s %10s %12s\n", "Go client via lockward serve", goCycle.rate, goCycle.p50, goCycle.p99, goHandoff)
	fmt.Printf("%-34s %12.0f %10s %10s %12s\n", "Go client on Redis itself (Open)", directCycle.rate, directCycle.p50, directCycle.p99, directHandoff)
	fmt.Printf("%-34s %12.0f %10s %10s %12s\n", "redsync", redsyncCycle.rate, redsyncCycle.p50, redsyncCycle.p99, redsyncHandoff)
	fmt.Printf("%-34s %12.0f %10s %10s %12s\n", "bsm/redislock", redislockCycle.rate, redislockCycle.p50, redislockCycle.p99, redislockHandoff)
	fmt.Println()
	fmt.Printf("Go client's cycle / Rust library's: %.2fx (p50)\n", goCycle.p50.Seconds()/rust.p50.Seconds())
	fmt.Printf("Go client's rate / redsync's:       %.2fx\n", goCycle.rate/redsyncCycle.rate)
	fmt.Printf("handoff, redsync / Go client:       %.0fx faster\n", redsyncHandoff.Seconds()/goHandoff.Seconds())
	fmt.Printf("Open's rate / redsync's:            %.2fx\n", directCycle.rate/redsyncCycle.rate)
	fmt.Printf("Open's cycle / Rust library's:      %.2fx (p50)\n", directCycle.p50.Seconds()/rust.p50.Seconds())
	fmt.Printf("handoff, redsync / Open:            %.0fx faster\n", redsyncHandoff.Seconds()/directHandoff.Seconds())
	fmt.Printf("Rust library's rate / redsync's:    %.2fx\n", rust.rate/redsyncCycle.rate)

	// 64 goroutines on one name, each cycling for the whole duration.
	fmt.Println()
	fmt.Printf("%d goroutines on one name, %v:\n", crowdSize, duration)
	for _, c := range []struct {
		who   string
		cycle func(name string) error
	}{
		{"Go client on Redis itself (Open)", func(name string) error {
			lease, err := direct.Lock(ctx, name, lockward.WithTTL(10*time.Second), lockward.WithoutRenewal())
			if err != nil {
				return err
			}
			return lease.Release(ctx)
		}},
		{"redsync", func(name string) error {
			mutex := rs.NewMutex(name, redsync.WithExpiry(10*time.Second), redsync.WithTries(1000))
			if err := mutex.LockContext(ctx); err != nil {
				return err
			}
			_, err := mutex.UnlockContext(ctx)
			return err
		}},
		{"bsm/redislock", func(name string) error {
			lock, err := locker.Obtain(ctx, name, 10*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(100 * time.Millisecond)})
			if err != nil {
				return err
			}
			return lock.Release(ctx)
		}},
	} {
		rate, fewest, most, err := crowd(crowdSize, duration, c.cycle)
		if err != nil {
			return fmt.Errorf("%s: %w", c.who, err)
		}
		fmt.Printf("%-34s %12.0f cycles/s, fewest %d and most %d per goroutine\n", c.who, rate, fewest, most)
	}

	if leases > 0 {
		fmt.Println()
		if err := manyLeases(ctx, socket, daemon.Cmd.Process.Pid, leases, hold); err != nil {
			return err
		}
	}
	return nil
}

// startRedis starts redis-server through the testkit and returns its URL
// and how to stop it.
func startRedis(testserver string) (string, func(), error) {
	if _, err := os.Stat(testserver); err != nil {
		return "", nil, fmt.Errorf("no lockward-testserver at %s (cargo build --release -p lockward-testkit, or set LOCKWARD_TESTSERVER_BIN): %w", testserver, err)
	}
	cmd := exec.Command(testserver, "redis")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		// Closing its stdin stops the server and removes its files.
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("lockward-testserver printed no URL: %w", err)
	}
	return strings.TrimSpace(url), stop, nil
}

type rustFigures struct {
	rate    float64
	p50     time.Duration
	handoff time.Duration
}

// rustCycle runs `lockward bench` for its uncontended cycle and handoff.
func rustCycle(bin, store string, duration time.Duration) (rustFigures, error) {
	out, err := exec.Command(bin, "--store", store, "bench", "--json",
		"--clients", "1", "--names", "distinct", "--scale", "0", "--semaphore", "0",
		"--rw-clients", "0", "--failover-lease", "0", "--duration", duration.String()).Output()
	if err != nil {
		return rustFigures{}, fmt.Errorf("lockward bench: %w", err)
	}
	var figures struct {
		CyclesPerS   float64 `json:"cycles_per_s"`
		P50Us        float64 `json:"p50_us"`
		HandoffP50Us float64 `json:"handoff_p50_us"`
	}
	if err := json.Unmarshal(out, &figures); err != nil {
		return rustFigures{}, fmt.Errorf("lockward bench --json: %w", err)
	}
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	return rustFigures{figures.CyclesPerS, us(figures.P50Us), us(figures.HandoffP50Us)}, nil
}

type cycles struct {
	rate     float64
	p50, p99 time.Duration
}

// measure runs cycle on fresh names, one after another, for duration.
func measure(duration time.Duration, cycle func(name string) error) (cycles, error) {
	prefix := "bench/go/" + strconv.FormatUint(rand.Uint64(), 36)
	var took []time.Duration
	started := time.Now()
	for i := 0; time.Since(started) < duration; i++ {
		began := time.Now()
		if err := cycle(prefix + "/" + strconv.Itoa(i%64)); err != nil {
			return cycles{}, err
		}
		took = append(took, time.Since(began))
	}
	return cycles{float64(len(took)) / time.Since(started).Seconds(), median(took), percentile(took, 99)}, nil
}

// crowd runs cycle on one name from goroutines at once for duration: the
// cycles per second of all, and the fewest and most one goroutine made
// (a line serves every one of them; a poll lets some starve).
func crowd(goroutines int, duration time.Duration, cycle func(name string) error) (rate float64, fewest, most int, err error) {
	name := "bench/go/crowd/" + strconv.FormatUint(rand.Uint64(), 36)
	counts := make([]int, goroutines)
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	started := time.Now()
	for g := range goroutines {
		wg.Go(func() {
			for time.Since(started) < duration {
				if err := cycle(name); err != nil {
					errs <- err
					return
				}
				counts[g]++
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, 0, err
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	return float64(total) / time.Since(started).Seconds(), slices.Min(counts), slices.Max(counts), nil
}

// handoff times, rounds times, a release to a waiter that holds: lock
// returns the lease's release once it holds.
func handoff(rounds int, lock func(name string) (func() error, error)) (time.Duration, error) {
	name := "bench/go/handoff/" + strconv.FormatUint(rand.Uint64(), 36)
	var gaps []time.Duration
	for i := range rounds {
		release, err := lock(name)
		if err != nil {
			return 0, err
		}
		got := make(chan error, 1)
		var holding time.Time
		var next func() error
		go func() {
			r, err := lock(name)
			holding, next = time.Now(), r
			got <- err
		}()
		// Released at a different point of a poller's period each round.
		time.Sleep(200*time.Millisecond + time.Duration(i%10)*13700*time.Microsecond)
		released := time.Now()
		if err := release(); err != nil {
			return 0, err
		}
		if err := <-got; err != nil {
			return 0, err
		}
		gaps = append(gaps, holding.Sub(released))
		if err := next(); err != nil {
			return 0, err
		}
	}
	return median(gaps), nil
}

// manyLeases takes count leases on distinct names through one connection
// (a stream each) with renewal, holds them for hold, and reports the
// daemon's RSS and whether any was lost.
// leaseMemoryTargetKB is what one held lease may cost the daemon's
// resident memory: `lockward serve --max-leases` (20,000 by default) then
// stays within 400 MB.
const leaseMemoryTargetKB = 20

func manyLeases(ctx context.Context, socket string, pid, count int, hold time.Duration) error {
	client, err := lockward.Dial(ctx, socket)
	if err != nil {
		return err
	}
	defer client.Close()
	before, err := rss(pid)
	if err != nil {
		return err
	}
	prefix := "bench/go/held/" + strconv.FormatUint(rand.Uint64(), 36)
	held := make([]*lockward.Lease, count)
	var wg sync.WaitGroup
	errs := make(chan error, count)
	started := time.Now()
	// 64 takers at a time: the daemon serves the streams, not one by one.
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				lease, err := client.Lock(ctx, prefix+"/"+strconv.Itoa(i), lockward.WithTTL(6*time.Second))
				if err != nil {
					errs <- err
					continue
				}
				held[i] = lease
			}
		})
	}
	for i := range count {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("taking %d leases: %w", count, err)
	}
	took := time.Since(started)
	// Renewed every 2 s (a third of 6 s) for the whole hold.
	time.Sleep(hold)
	lost := 0
	for _, lease := range held {
		select {
		case <-lease.Lost():
			lost++
		default:
		}
	}
	after, err := rss(pid)
	if err != nil {
		return err
	}
	for _, lease := range held {
		_ = lease.Release(ctx)
	}
	fmt.Printf("%d leases from %d streams on one daemon: taken in %v, held %v with their renewals (TTL 6 s): %d lost\n",
		count, count, took.Round(time.Millisecond), hold, lost)
	perLease := float64(after-before) / 1024 / float64(count)
	verdict := "within"
	if perLease > leaseMemoryTargetKB {
		verdict = "OVER"
	}
	fmt.Printf("daemon RSS: %d MB before, %d MB holding them (%.1f KB a lease; %s the target of %d KB)\n",
		before>>20, after>>20, perLease, verdict, leaseMemoryTargetKB)
	if lost > 0 {
		return errors.New("leases were lost while their renewals ran")
	}
	return nil
}

// rss is the resident set of process pid, in bytes.
func rss(pid int) (int, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if value, found := strings.CutPrefix(line, "VmRSS:"); found {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")))
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

func median(values []time.Duration) time.Duration {
	return percentile(values, 50)
}

// percentile is the value below which p % of values lie.
func percentile(values []time.Duration, p int) time.Duration {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return sorted[min(len(sorted)*p/100, len(sorted)-1)]
}
