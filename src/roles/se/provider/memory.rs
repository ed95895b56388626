//! `.git/factory/providers.json`: what a server refused, per base URL and model, so later
//! runs do not pay the extra request. A cache: unreadable means empty, a failed write is
//! forgotten.

use super::api::Api;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Serialize, Deserialize)]
struct Entry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api: Option<String>,
    /// Per wire API, the parameters it refused.
    #[serde(default)]
    dropped: BTreeMap<String, Vec<String>>,
}

pub struct Memory {
    path: PathBuf,
}

fn key(base_url: &str, model: &str) -> String {
    format!("{} {model}", base_url.trim_end_matches('/'))
}

impl Memory {
    pub fn at(path: &Path) -> Self {
        Memory {
            path: path.to_path_buf(),
        }
    }

    fn load(&self) -> BTreeMap<String, Entry> {
        std::fs::read(&self.path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn store(&self, all: &BTreeMap<String, Entry>) {
        let Ok(mut text) = serde_json::to_string_pretty(all) else {
            return;
        };
        text.push('\n');
        let tmp = self
            .path
            .with_extension(format!("json.{}", std::process::id()));
        if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, &self.path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    pub fn dropped(&self, base_url: &str, model: &str, api: Api) -> Vec<String> {
        self.load()
            .remove(&key(base_url, model))
            .and_then(|mut e| e.dropped.remove(api.as_str()))
            .unwrap_or_default()
    }

    pub fn api(&self, base_url: &str, model: &str) -> Option<Api> {
        self.load()
            .remove(&key(base_url, model))
            .and_then(|e| e.api)
            .and_then(|a| Api::parse(&a))
    }

    pub fn add_dropped(&self, base_url: &str, model: &str, api: Api, name: &str) {
        let mut all = self.load();
        let list = all
            .entry(key(base_url, model))
            .or_default()
            .dropped
            .entry(api.as_str().to_string())
            .or_default();
        if !list.iter().any(|n| n == name) {
            list.push(name.to_string());
            list.sort();
        }
        self.store(&all);
    }

    pub fn set_api(&self, base_url: &str, model: &str, api: Api) {
        let mut all = self.load();
        all.entry(key(base_url, model)).or_default().api = Some(api.as_str().to_string());
        self.store(&all);
    }
}
