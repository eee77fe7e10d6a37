//! A TCP proxy between clients and one server, which the harness controls:
//! pass, delay, blackhole (hold every byte), drop (close every connection
//! and refuse new ones), heal; and move to another server, as a failover
//! moves a service address to the promoted one.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does to traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything.
    Pass = 0,
    /// Forward each chunk after 50–200 ms.
    Delay = 1,
    /// Forward nothing; keep connections open.
    Blackhole = 2,
    /// Close every connection and refuse new ones.
    Drop = 3,
}

/// A running proxy.
pub struct Proxy {
    port: u16,
    mode: Arc<AtomicU8>,
    /// Bumped on every `Drop`, so live connections close.
    generation: watch::Sender<u64>,
    /// Connections closed by faults: the proof that a cut happened.
    pub cut: Arc<AtomicU64>,
    /// The server new connections go to.
    target: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: String) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mode = Arc::new(AtomicU8::new(Mode::Pass as u8));
        let (generation, _) = watch::channel(0u64);
        let cut = Arc::new(AtomicU64::new(0));
        let target = Arc::new(Mutex::new(target));
        let (m, g, c, t) = (
            mode.clone(),
            generation.clone(),
            cut.clone(),
            target.clone(),
        );
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                if m.load(Ordering::SeqCst) == Mode::Drop as u8 {
                    c.fetch_add(1, Ordering::SeqCst);
                    drop(client);
                    continue;
                }
                let target = t.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let (m, c, gen) = (m.clone(), c.clone(), g.subscribe());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&target).await {
                        pipe(client, server, m, c, gen).await;
                    }
                });
            }
        });
        Ok(Proxy {
            port,
            mode,
            generation,
            cut,
            target,
            task,
        })
    }

    /// `127.0.0.1:PORT` to give clients instead of the server's address.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends new connections to `server` and closes every open one (they
    /// reach the old server), as a failover moves the service's address.
    pub fn retarget(&self, server: String) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = server;
        self.generation.send_modify(|g| *g += 1);
    }

    /// Switches what the proxy does.
    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
        if mode == Mode::Drop {
            self.generation.send_modify(|g| *g += 1);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pipe(
    client: TcpStream,
    server: TcpStream,
    mode: Arc<AtomicU8>,
    cut: Arc<AtomicU64>,
    mut generation: watch::Receiver<u64>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let up = tokio::spawn(copy(cr, sw, mode.clone()));
    let down = tokio::spawn(copy(sr, cw, mode));
    let (stop_up, stop_down) = (up.abort_handle(), down.abort_handle());
    // Either direction ending, or a cut, closes both.
    tokio::select! {
        _ = generation.changed() => {
            cut.fetch_add(1, Ordering::SeqCst);
        }
        _ = up => {}
        _ = down => {}
    }
    stop_up.abort();
    stop_down.abort();
}

async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU8>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        loop {
            match mode.load(Ordering::SeqCst) {
                m if m == Mode::Blackhole as u8 => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                m if m == Mode::Drop as u8 => return,
                m if m == Mode::Delay as u8 => {
                    tokio::time::sleep(Duration::from_millis(fastrand::u64(50..200))).await;
                    break;
                }
                _ => break,
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
