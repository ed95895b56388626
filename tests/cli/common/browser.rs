//! A page loaded from disk in a real headless browser (Debian's `chromium-headless-shell`,
//! which `.ci/run` installs): what it logged to its console, every request it tried to make
//! (all of its traffic goes to a loopback proxy that answers nothing), the DOM it built, and
//! how much of its screenshot is not background.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BROWSER: &str = "chromium-headless-shell";

pub struct Loaded {
    /// Console messages (any level: a page of ours has no script, so any is a fault).
    pub console: Vec<String>,
    /// The first line of every request the browser sent to the network.
    pub requests: Vec<String>,
    /// The DOM as the browser serialises it after loading.
    pub dom: String,
    /// Share of the screenshot's pixels that differ from its top-left pixel, in 0..=1.
    pub ink: f64,
}

/// None (a skip) only off CI when the browser is not installed.
pub fn load(page: &Path) -> Option<Loaded> {
    if Command::new(BROWSER).arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{BROWSER} is missing on CI"
        );
        eprintln!("skipped: {BROWSER} is not installed (.ci/run installs it)");
        return None;
    }
    let work = tempfile::tempdir().expect("tempdir");
    let proxy = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = proxy.local_addr().expect("addr").port();
    proxy.set_nonblocking(true).expect("nonblocking");
    let requests = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let listener = {
        let (requests, done) = (requests.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                match proxy.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                        let mut head = [0u8; 512];
                        let n = conn.read(&mut head).unwrap_or(0);
                        let text = String::from_utf8_lossy(&head[..n]);
                        let line = text.lines().next().unwrap_or("").to_string();
                        requests.lock().expect("lock").push(line);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })
    };
    let url = format!("file://{}", page.canonicalize().expect("page").display());
    let browser = |extra: &[String]| {
        Command::new(BROWSER)
            .args([
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1280,1600",
                &format!("--proxy-server=127.0.0.1:{port}"),
                "--proxy-bypass-list=<-loopback>",
            ])
            .arg(format!(
                "--user-data-dir={}",
                work.path().join("profile").display()
            ))
            .args(extra)
            .arg(&url)
            .output()
            .expect("the browser runs")
    };
    let shot = work.path().join("shot.png");
    let shown = browser(&[format!("--screenshot={}", shot.display())]);
    let dumped = browser(&["--dump-dom".to_string()]);
    done.store(true, Ordering::SeqCst);
    let _ = listener.join();
    let mut console = Vec::new();
    for out in [&shown, &dumped] {
        let err = String::from_utf8_lossy(&out.stderr);
        console.extend(
            err.lines()
                .filter(|l| l.contains(":CONSOLE"))
                .map(str::to_string),
        );
    }
    let requests = requests.lock().expect("lock").clone();
    Some(Loaded {
        console,
        requests,
        dom: String::from_utf8_lossy(&dumped.stdout).into_owned(),
        ink: ink(&shot),
    })
}

/// Share of pixels unlike the top-left one.
fn ink(png_file: &Path) -> f64 {
    let file = std::fs::File::open(png_file).expect("a screenshot was written");
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("png");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("frame");
    let px = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    let Some(bg) = pixels.first().copied() else {
        return 0.0;
    };
    let differ = pixels.iter().filter(|p| **p != bg).count();
    differ as f64 / pixels.len() as f64
}
