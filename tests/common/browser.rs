//! Headless Chromium for the tests that open skoop's HTML pages
//! (`tests/pictures.rs`, `tests/matrix.rs`): found on the PATH (missing,
//! said loudly and skipped, unless `SKOOP_REQUIRE_BROWSER` is set, as
//! `.ci/run` sets it), started with a profile of its own, and driven over
//! the DevTools protocol.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// A tool the test needs: its path, or `None` (said loudly) when it is not
/// installed and `SKOOP_REQUIRE_BROWSER` does not require it.
pub fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("SKOOP_REQUIRE_BROWSER").is_none(),
            "{name} is not installed (apt-get install {package}) and SKOOP_REQUIRE_BROWSER is set"
        );
        eprintln!(
            "\n!!! SKIPPED: {name} is not installed (apt-get install {package}); \
             set SKOOP_REQUIRE_BROWSER=1 to fail instead !!!\n"
        );
    }
    found
}

/// Headless Chromium driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: commands on its fd 3, answers on its fd 4,
/// each a JSON message ended by a NUL byte).
pub struct Browser {
    child: std::process::Child,
    commands: std::io::PipeWriter,
    messages: mpsc::Receiver<Value>,
    next_id: u64,
    session: Option<String>,
    /// Every event seen, in order.
    events: Vec<Value>,
    /// How many of `events` a `wait_for` has already passed: a wait looks
    /// only at events after the last one waited for, so waiting for a second
    /// page's load does not return on the first page's.
    waited: usize,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn start(chromium: &Path) -> Browser {
        use std::os::fd::AsRawFd as _;
        use std::os::unix::process::CommandExt as _;
        let (their_commands, commands) = std::io::pipe().unwrap();
        let (answers, their_answers) = std::io::pipe().unwrap();
        let (read_fd, write_fd) = (their_commands.as_raw_fd(), their_answers.as_raw_fd());
        let profile = tempfile::tempdir().unwrap();
        let mut command = Command::new(chromium);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-pipe",
                "--window-size=1400,1000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: fcntl and dup2 are async-signal-safe; the child only moves
        // the two pipe ends to the descriptors the protocol names (by way of
        // descriptors above them, in case an end already is 3 or 4), where
        // they stay open across exec.
        unsafe {
            command.pre_exec(move || {
                let high_read = libc::fcntl(read_fd, libc::F_DUPFD, 10);
                let high_write = libc::fcntl(write_fd, libc::F_DUPFD, 10);
                if high_read < 0
                    || high_write < 0
                    || libc::dup2(high_read, 3) < 0
                    || libc::dup2(high_write, 4) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("start chromium");
        drop((their_commands, their_answers));
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(answers);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).unwrap_or(0) > 0 {
                message.pop();
                if let Ok(value) = serde_json::from_slice(&message)
                    && sender.send(value).is_err()
                {
                    break;
                }
                message.clear();
            }
        });
        Browser {
            child,
            commands,
            messages,
            next_id: 0,
            session: None,
            events: Vec::new(),
            waited: 0,
            _profile: profile,
        }
    }

    /// Sends a command and waits for its answer (keeping the events met).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = &self.session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).expect("send to chromium");
        loop {
            let message = self
                .messages
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("chromium did not answer {method}"));
            if message["id"] == json!(id) {
                assert!(message["error"].is_null(), "{method}: {message}");
                return message["result"].clone();
            }
            self.events.push(message);
        }
    }

    /// Waits for an event of this method that came after the last event
    /// waited for.
    pub fn wait_for(&mut self, method: &str) {
        let is_it = |event: &Value| event["method"] == json!(method);
        if let Some(found) = self.events[self.waited..].iter().position(is_it) {
            self.waited += found + 1;
            return;
        }
        loop {
            let message = self
                .messages
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("chromium sent no {method}"));
            let found = is_it(&message);
            self.events.push(message);
            if found {
                self.waited = self.events.len();
                return;
            }
        }
    }

    /// Opens a page in a new tab, attached, with its console reported.
    pub fn open(&mut self, url: &str) {
        let target = self.call("Target.createTarget", json!({ "url": "about:blank" }));
        let attached = self.call(
            "Target.attachToTarget",
            json!({ "targetId": target["targetId"], "flatten": true }),
        );
        self.session = attached["sessionId"].as_str().map(String::from);
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            self.call(domain, json!({}));
        }
        self.call("Page.navigate", json!({ "url": url }));
        self.wait_for("Page.loadEventFired");
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expression: &str) -> Value {
        let result = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        assert!(
            result["exceptionDetails"].is_null(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// A real mouse click (pressed and released) at the middle of the
    /// element `selector` finds, scrolled into view first.
    pub fn click(&mut self, selector: &str) {
        let centre = self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector:?}); \
             e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
        ));
        for kind in ["mousePressed", "mouseReleased"] {
            self.call(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": centre[0], "y": centre[1],
                        "button": "left", "clickCount": 1 }),
            );
        }
    }

    /// A screenshot of the whole page, as PNG bytes.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": true }),
        );
        base64_decode(shot["data"].as_str().expect("screenshot data"))
    }

    /// The page's console errors, uncaught exceptions, refusals (a CSP
    /// violation is a log entry) and dialogs opened (an `alert`).
    pub fn problems(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| match e["method"].as_str() {
                Some("Runtime.exceptionThrown" | "Page.javascriptDialogOpening") => true,
                Some("Runtime.consoleAPICalled") => e["params"]["type"] == json!("error"),
                Some("Log.entryAdded") => e["params"]["entry"]["level"] == json!("error"),
                _ => false,
            })
            .map(Value::to_string)
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut bytes = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
        for i in 0..chunk.len() - 1 {
            bytes.push((n >> (16 - 8 * i)) as u8);
        }
    }
    bytes
}
