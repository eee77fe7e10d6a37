//! `status --watch`: the status read again every interval until q, Ctrl-C
//! or a signal. On a terminal it is redrawn in place (the alternate screen,
//! as `top` does, so it works over SSH); with `--json`, or when stdout is
//! not a terminal, each refresh is printed after the last (`--json`: one
//! object per line).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use crossterm::{cursor, execute, queue, style, terminal};
use lockward::Store;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use super::snapshot;
use crate::exit;

/// Runs the live view; 0 when the user quits.
pub async fn watch(store: &Store, prefix: &str, interval: Duration, json: bool) -> u8 {
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        eprintln!("lockward: cannot install signal handlers");
        return exit::SOFTWARE;
    };
    let mut screen = if !json && std::io::stdout().is_terminal() {
        match Screen::enter() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("lockward: cannot drive the terminal: {e}");
                return exit::SOFTWARE;
            }
        }
    } else {
        None
    };
    let mut keys = screen.as_ref().map(|_| keys());
    // What ends the view: q / Esc / Ctrl-C on the screen (raw mode turns
    // Ctrl-C into a key), or a signal. Listened to while the store is read
    // too, so that an unreachable store cannot hold the view open.
    let mut asked_to_quit = async || loop {
        let key = async {
            match keys.as_mut() {
                Some(k) => k.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            pressed = key => match pressed {
                Some(Key::Quit) | None => return,
                // A resize: the next refresh draws to the new size.
                Some(Key::Redraw) => {}
            },
            _ = int.recv() => return,
            _ = term.recv() => return,
            _ = hup.recv() => return,
        }
    };
    loop {
        let taken = tokio::select! {
            taken = snapshot::take(store, prefix) => taken,
            () = asked_to_quit() => return 0,
        };
        let shown = match (&mut screen, taken) {
            (Some(screen), taken) => screen.draw(&frame(store, prefix, interval, taken)),
            (None, Ok(s)) if json => {
                print(&serde_json::to_string(&s).expect("snapshot serialises"))
            }
            // A blank line between refreshes.
            (None, Ok(s)) => print(&(snapshot::render(&s, &store.address()).join("\n") + "\n")),
            // Scripts get the error on stderr and the next refresh after it.
            (None, Err(e)) => {
                eprintln!("lockward: {e}");
                Ok(())
            }
        };
        if shown.is_err() {
            // stdout closed (`| head`) or the terminal went away.
            return 0;
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            () = asked_to_quit() => return 0,
        }
    }
}

/// One refresh printed after the last.
fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// The lines of one screen: a title, then the tables or the error.
fn frame(
    store: &Store,
    prefix: &str,
    interval: Duration,
    taken: lockward::Result<snapshot::Snapshot>,
) -> Vec<String> {
    let under = if prefix.is_empty() {
        String::new()
    } else {
        format!(" under {prefix:?}")
    };
    let now = chrono::Local::now().format("%H:%M:%S");
    let mut lines = vec![
        format!(
            "lockward status{under} on {}, {now}, every {interval:?} (q quits)",
            store.address()
        ),
        String::new(),
    ];
    match taken {
        Ok(s) => lines.extend(snapshot::render(&s, &store.address())),
        Err(e) => lines.push(format!("cannot read the store: {e} (retrying)")),
    }
    lines
}

/// The terminal in raw mode on the alternate screen; put back when dropped.
struct Screen;

impl Screen {
    fn enter() -> std::io::Result<Screen> {
        terminal::enable_raw_mode()?;
        let screen = Screen;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide
        )?;
        Ok(screen)
    }

    /// Replaces the screen's contents with `lines`, cut to its size.
    fn draw(&mut self, lines: &[String]) -> std::io::Result<()> {
        let (width, height) = terminal::size().unwrap_or((80, 24));
        let mut out = std::io::stdout().lock();
        queue!(out, terminal::Clear(terminal::ClearType::All))?;
        for (row, line) in lines.iter().take(height as usize).enumerate() {
            let cut: String = line.chars().take(width as usize).collect();
            queue!(out, cursor::MoveTo(0, row as u16), style::Print(cut))?;
        }
        out.flush()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = execute!(
            std::io::stdout(),
            cursor::Show,
            terminal::LeaveAlternateScreen
        );
        let _ = terminal::disable_raw_mode();
    }
}

/// What a key press asks for.
enum Key {
    Quit,
    Redraw,
}

/// Key presses, read on a thread of their own (the terminal's reads block);
/// the thread ends when the receiver is dropped.
fn keys() -> mpsc::Receiver<Key> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::spawn(move || {
        while !tx.is_closed() {
            match event::poll(Duration::from_millis(200)) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(_) => return,
            }
            let key = match event::read() {
                Ok(Event::Key(KeyEvent {
                    code, modifiers, ..
                })) => match code {
                    KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => Key::Quit,
                    KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Key::Quit,
                    _ => continue,
                },
                Ok(Event::Resize(..)) => Key::Redraw,
                Ok(_) => continue,
                Err(_) => return,
            };
            if tx.blocking_send(key).is_err() {
                return;
            }
        }
    });
    rx
}
