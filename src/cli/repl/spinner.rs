//! A one-line spinner on stderr while servers connect or the model thinks;
//! drawn only when stderr is a terminal. Drawing and clearing happen under
//! one lock, so once [`Spinner::stop`] returns nothing more is drawn and
//! the line is clean for the next output.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const FRAMES: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

#[derive(Default)]
struct State {
    message: Option<String>,
    /// Nothing is drawn while anyone holds the line ([`Spinner::hold`]).
    holds: usize,
    frame: usize,
    drawn: bool,
}

impl State {
    fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

#[derive(Clone)]
pub struct Spinner {
    state: Arc<Mutex<State>>,
    enabled: bool,
}

impl Spinner {
    /// A spinner ticking on the current tokio runtime (inert when stderr is
    /// not a terminal).
    pub fn new() -> Spinner {
        let spinner = Spinner {
            state: Arc::new(Mutex::new(State::default())),
            enabled: std::io::stderr().is_terminal(),
        };
        if spinner.enabled {
            let state = Arc::downgrade(&spinner.state);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(100));
                loop {
                    tick.tick().await;
                    let Some(state) = state.upgrade() else {
                        break;
                    };
                    let mut state = lock(&state);
                    if state.holds > 0 {
                        continue;
                    }
                    if let Some(message) = state.message.clone() {
                        state.frame = (state.frame + 1) % FRAMES.len();
                        let mut err = std::io::stderr().lock();
                        let _ = write!(err, "\r\x1b[2K{} {message}", FRAMES[state.frame]);
                        let _ = err.flush();
                        state.drawn = true;
                    }
                }
            });
        }
        spinner
    }

    pub fn start(&self, message: &str) {
        if self.enabled {
            lock(&self.state).message = Some(message.to_string());
        }
    }

    /// Stops and clears the line.
    pub fn stop(&self) {
        let mut state = lock(&self.state);
        state.message = None;
        state.clear();
    }

    /// Clears the line and keeps the spinner off it until the guard is
    /// dropped (while a question is asked or output printed); holds nest.
    pub fn hold(&self) -> Hold {
        let mut state = lock(&self.state);
        state.holds += 1;
        state.clear();
        Hold {
            state: self.state.clone(),
        }
    }

    /// Runs `f` (which prints) with the spinner off the line.
    pub fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        let _hold = self.hold();
        f()
    }
}

pub struct Hold {
    state: Arc<Mutex<State>>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        state.holds = state.holds.saturating_sub(1);
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
