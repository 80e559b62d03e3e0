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
    frame: usize,
    drawn: bool,
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

    /// Stops and clears the line; returns the message that was showing.
    pub fn stop(&self) -> Option<String> {
        let mut state = lock(&self.state);
        let message = state.message.take();
        if state.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            state.drawn = false;
        }
        message
    }

    /// Runs `f` (which prints) with the spinner out of the way, then
    /// resumes it.
    pub fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        let message = self.stop();
        let out = f();
        if let Some(message) = message {
            self.start(&message);
        }
        out
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
