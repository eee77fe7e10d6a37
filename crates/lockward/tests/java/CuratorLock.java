// A Curator InterProcessMutex, one side of an InterProcessReadWriteLock
// (third argument "read" or "write"), or an InterProcessSemaphoreV2 of N
// leases ("semaphore:N"; each "acquire" or "try" takes one lease, each
// "release" returns the latest), driven over stdin for the
// interoperability tests: "acquire", "try MS", "release"; answers ACQUIRED,
// BUSY, RELEASED.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
    public static void main(String[] args) throws Exception {
        CuratorFramework client =
            CuratorFrameworkFactory.newClient(args[0], 10000, 5000, new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        String side = args.length > 2 ? args[2] : "mutex";
        if (side.startsWith("semaphore:")) {
            semaphore(client, new InterProcessSemaphoreV2(
                client, args[1], Integer.parseInt(side.substring(10))));
            return;
        }
        InterProcessMutex mutex;
        if (side.equals("read")) {
            mutex = new InterProcessReadWriteLock(client, args[1]).readLock();
        } else if (side.equals("write")) {
            mutex = new InterProcessReadWriteLock(client, args[1]).writeLock();
        } else {
            mutex = new InterProcessMutex(client, args[1]);
        }
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("acquire")) {
                mutex.acquire();
                System.out.println("ACQUIRED");
            } else if (line.startsWith("try ")) {
                boolean got = mutex.acquire(Long.parseLong(line.substring(4)), TimeUnit.MILLISECONDS);
                System.out.println(got ? "ACQUIRED" : "BUSY");
            } else if (line.equals("release")) {
                mutex.release();
                System.out.println("RELEASED");
            }
            System.out.flush();
        }
        client.close();
    }

    static void semaphore(CuratorFramework client, InterProcessSemaphoreV2 semaphore) throws Exception {
        Deque<Lease> held = new ArrayDeque<>();
        System.out.println("READY");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("acquire")) {
                held.push(semaphore.acquire());
                System.out.println("ACQUIRED");
            } else if (line.startsWith("try ")) {
                Lease lease = semaphore.acquire(Long.parseLong(line.substring(4)), TimeUnit.MILLISECONDS);
                if (lease != null) {
                    held.push(lease);
                }
                System.out.println(lease != null ? "ACQUIRED" : "BUSY");
            } else if (line.equals("release")) {
                semaphore.returnLease(held.pop());
                System.out.println("RELEASED");
            }
            System.out.flush();
        }
        client.close();
    }
}
