//! What a request cost, in US dollars (SPEC §3.3 Cost): its reported usage at the prices of
//! the maintained genai-prices database (its bundled data, decoded on the first price a
//! process needs and never before, so `log` and unpriced runs never pay for it), unless the
//! user set a price for the model (`factory-price.<model>.*`, `factory.priceFile`) or the
//! server said what the request cost. A model nobody prices is `unpriced`, never $0.

use crate::budget::Budget;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::store::records::{usd_words, Cost, Usage};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

/// The git config section of the user's prices: `factory-price.<model>.input` and so on.
pub const PRICE_SECTION: &str = "factory-price";
/// A JSON file of prices: `{"MODEL": {"input": N, "output": N, "cacheRead": N, "cacheWrite": N}}`.
pub const PRICE_FILE: &str = "factory.priceFile";
/// The largest price file read: prices for thousands of models fit in far less.
const MAX_PRICE_FILE: u64 = 4 << 20;

/// A user's prices for one model, in USD per million tokens. Cache reads and writes cost
/// what input costs unless set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates {
    pub input: Option<f64>,
    pub output: Option<f64>,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

impl Rates {
    fn set(&mut self, key: &str, value: f64) -> bool {
        let slot = match key.to_ascii_lowercase().as_str() {
            "input" => &mut self.input,
            "output" => &mut self.output,
            "cacheread" => &mut self.cache_read,
            "cachewrite" => &mut self.cache_write,
            _ => return false,
        };
        *slot = Some(value);
        true
    }

    /// The price of `usage`; `input_tokens` counts the cached tokens too.
    fn price(&self, usage: &Usage) -> f64 {
        let input = self.input.unwrap_or(0.0);
        let read = usage.cache_read_tokens.unwrap_or(0);
        let write = usage.cache_write_tokens.unwrap_or(0);
        let plain = usage
            .input_tokens
            .unwrap_or(0)
            .saturating_sub(read.saturating_add(write));
        (plain as f64 * input
            + read as f64 * self.cache_read.unwrap_or(input)
            + write as f64 * self.cache_write.unwrap_or(input)
            + usage.output_tokens.unwrap_or(0) as f64 * self.output.unwrap_or(0.0))
            / 1_000_000.0
    }
}

/// How the SE of a run (or of one candidate) is priced.
#[derive(Debug, Clone, PartialEq)]
pub enum Priced {
    /// A model API: the model asked for (no `openai:`/`anthropic:` prefix), the provider the
    /// table knows it by when it is the provider's own API, else the base URL it is served at.
    Model {
        name: String,
        provider: Option<&'static str>,
        base_url: Option<String>,
    },
    /// `--replay`: proposals already paid for.
    Replay,
    /// `--agent-command`/`--agent-edits`: priced only by the usage the agent reports.
    Agent,
}

impl Priced {
    /// How the run names it when it has no price.
    pub fn name(&self) -> &str {
        match self {
            Priced::Model { name, .. } => name,
            Priced::Replay => "replay",
            Priced::Agent => "agent",
        }
    }
}

/// The prices a run uses: the table, with the user's own over it.
#[derive(Debug, Clone, Default)]
pub struct PriceBook {
    overrides: BTreeMap<String, Rates>,
}

impl PriceBook {
    /// The user's prices: `factory.priceFile` (relative to `root`), then every
    /// `factory-price.<model>.<kind>` key over it. A price that is not a number, or a model
    /// with no input or output price, is refused naming the key.
    pub fn load(cfg: &Config, root: &Path) -> Result<PriceBook> {
        let mut overrides: BTreeMap<String, Rates> = BTreeMap::new();
        if let Some(file) = cfg.string(PRICE_FILE) {
            // A leading `~/` is the home folder, as in git's own path settings.
            let path = match (file.strip_prefix("~/"), crate::env::home()) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => root.join(&file),
            };
            overrides = read_price_file(&path, &file)?;
        }
        for (key, value) in cfg.section(PRICE_SECTION) {
            let bad = || {
                Error::new(format!("git config {key} has an invalid value {value:?}")).hint(
                    format!(
                        "set a price in USD per million tokens, e.g. git config {} 2.5",
                        shell_word(&key)
                    ),
                )
            };
            let Some((model, kind)) = key
                .get(PRICE_SECTION.len() + 1..)
                .and_then(|rest| rest.rsplit_once('.'))
            else {
                continue;
            };
            let price = parse_price(&value).ok_or_else(bad)?;
            if !overrides
                .entry(model.to_string())
                .or_default()
                .set(kind, price)
            {
                return Err(
                    Error::new(format!("git config {key}: unknown price kind {kind:?}")).hint(
                        format!(
                            "use {PRICE_SECTION}.{model}.input, .output, .cacheRead or .cacheWrite"
                        ),
                    ),
                );
            }
        }
        for (model, rates) in &overrides {
            if rates.input.is_none() || rates.output.is_none() {
                let missing = if rates.input.is_none() {
                    "input"
                } else {
                    "output"
                };
                return Err(
                    Error::new(format!("the price of {model} has no {missing} price")).hint(
                        format!(
                            "git config {} USD_PER_MILLION",
                            shell_word(&format!("{PRICE_SECTION}.{model}.{missing}"))
                        ),
                    ),
                );
            }
        }
        Ok(PriceBook { overrides })
    }

    /// What one attempt's requests cost: the server's own figure, else the user's price,
    /// else the table's at the time `at` the request was made; `served` is the model the
    /// answer named (an agent's reported model too).
    pub fn cost(
        &self,
        who: &Priced,
        served: Option<&str>,
        usage: Option<&Usage>,
        at: SystemTime,
    ) -> Cost {
        if *who == Priced::Replay {
            return Cost::priced(0.0, "replay");
        }
        let Some(usage) = usage else {
            return Cost::unpriced();
        };
        if let Some(usd) = usage.server_cost_usd {
            return Cost::priced(usd, "server");
        }
        // Usage that counts no tokens (`{}`, negative or textual figures) says nothing of
        // what the request cost: never a free request.
        if usage.input_tokens.is_none() && usage.output_tokens.is_none() {
            return Cost::unpriced();
        }
        match self.price(who, served, usage, at) {
            Some((usd, source)) => Cost::priced(usd, source),
            None => Cost::unpriced(),
        }
    }

    /// The most a request can cost: `input_tokens` all uncached, and its whole output
    /// limit; `None` when the model has no price. `served`: the model that answered the run
    /// before, priced by its own price when that is the dearer (its answers are priced so).
    pub fn worst_case(
        &self,
        who: &Priced,
        served: Option<&str>,
        input_tokens: u64,
        output_tokens: u64,
        at: SystemTime,
    ) -> Option<f64> {
        if *who == Priced::Replay {
            return Some(0.0);
        }
        let usage = Usage {
            input_tokens: Some(input_tokens),
            output_tokens: Some(output_tokens),
            ..Usage::default()
        };
        let asked = self.price(who, None, &usage, at).map(|(usd, _)| usd)?;
        let served = served.and_then(|s| self.price(who, Some(s), &usage, at));
        Some(served.map_or(asked, |(usd, _)| usd.max(asked)))
    }

    /// Whether requests of `who` have a price before they are made (a server's own report
    /// comes only after).
    pub fn has_price(&self, who: &Priced) -> bool {
        self.worst_case(who, None, 1, 1, SystemTime::now())
            .is_some()
    }

    /// The user's price for the served model, else for the model asked; then the table's.
    fn price(
        &self,
        who: &Priced,
        served: Option<&str>,
        usage: &Usage,
        at: SystemTime,
    ) -> Option<(f64, &'static str)> {
        let (asked, provider, base_url) = match who {
            Priced::Model {
                name,
                provider,
                base_url,
            } => (Some(name.as_str()), *provider, base_url.as_deref()),
            Priced::Agent => (None, None, None),
            Priced::Replay => return Some((0.0, "replay")),
        };
        let names: Vec<&str> = served.into_iter().chain(asked).collect();
        if let Some(rates) = names.iter().find_map(|n| self.overrides.get(*n)) {
            return Some((rates.price(usage), "override"));
        }
        names
            .iter()
            .find_map(|n| table_price(n, provider, base_url, usage, at))
            .map(|usd| (usd, "table"))
    }
}

/// One attempt's requests against the run's dollar budget (SPEC §3.3 Cost): every request a
/// provider sends — a retry after a transient error, the request sent again without a refused
/// parameter, the one after an API switch — holds its worst case before it is sent and
/// settles what it cost once it is done, priced at the time it was made.
pub struct Meter<'a> {
    budget: &'a Budget,
    prices: &'a PriceBook,
    /// How the requests are priced; `None` prices nothing (a race's winner checked again).
    priced: Option<&'a Priced>,
    /// The output limit a request's worst case assumes.
    output_limit: u64,
    /// The model the last answer named: later requests are held at its price too.
    served: RefCell<Option<String>>,
    metered: RefCell<Metered>,
}

/// What an attempt's requests cost, as metered.
#[derive(Debug, Default)]
pub struct Metered {
    /// The sum of its billed requests' costs; `None` when none was billed.
    pub cost: Option<Cost>,
    /// When each billed request was made (UTC): the prices in effect then priced it. A
    /// record only: no identity is made of it.
    pub requested_utc: Vec<String>,
}

/// A request's worst case, held from before it is sent until it is settled.
#[derive(Debug, Clone, Copy)]
#[must_use = "a held request is settled once it is done"]
pub struct Held {
    worst: f64,
    at: SystemTime,
}

impl<'a> Meter<'a> {
    pub fn new(
        budget: &'a Budget,
        prices: &'a PriceBook,
        priced: Option<&'a Priced>,
        output_limit: u64,
    ) -> Self {
        Meter {
            budget,
            prices,
            priced,
            output_limit,
            served: RefCell::new(None),
            metered: RefCell::new(Metered::default()),
        }
    }

    /// The model that answered the run's earlier requests (SPEC §3.3 prices by it).
    pub fn served_before(self, served: Option<String>) -> Self {
        *self.served.borrow_mut() = served;
        self
    }

    /// Holds the worst case of a request of `bytes()` UTF-8 bytes (its input taken as bytes
    /// ÷ 3 tokens, which over-estimates every tokenizer in use, plus its whole output limit);
    /// `Err` says why a request that would pass what is left of the budget is not sent.
    pub fn hold(&self, bytes: impl FnOnce() -> usize) -> std::result::Result<Held, String> {
        let at = SystemTime::now();
        let (Some(_), Some(priced)) = (self.budget.max_cost(), self.priced) else {
            return Ok(Held { worst: 0.0, at });
        };
        let input = (bytes() as u64).div_ceil(3);
        let output = self.output_limit;
        let served = self.served.borrow().clone();
        let worst = (self.prices)
            .worst_case(priced, served.as_deref(), input, output, at)
            .unwrap_or(0.0);
        match self.budget.reserve(worst) {
            Ok(()) => Ok(Held { worst, at }),
            Err(would) => Err(format!(
                "the --max-cost budget of {} would be passed by the next request: at most {input} tokens in and {output} out cost up to {}, and {} is spent or held by requests in flight",
                usd_words(would.limit),
                usd_words(would.worst),
                usd_words(would.committed)
            )),
        }
    }

    /// A held request is done. `billed`: the server answered it (or reported its usage), so
    /// it costs what its usage costs at the time it was made — its worst case against the
    /// budget when that has no price; a request that was not billed costs nothing.
    pub fn settle(&self, held: Held, usage: Option<&Usage>, billed: bool, served: Option<&str>) {
        if let Some(name) = served {
            *self.served.borrow_mut() = Some(name.to_string());
        }
        let cost = match self.priced {
            Some(priced) if billed || usage.is_some() => {
                Some(self.prices.cost(priced, served, usage, held.at))
            }
            _ => None,
        };
        let spent = match &cost {
            None => Some(0.0),
            Some(c) if c.unpriced_requests > 0 => None,
            Some(c) => c.usd,
        };
        self.budget.settle(held.worst, spent);
        let Some(cost) = cost else { return };
        let mut m = self.metered.borrow_mut();
        m.cost = Cost::sum(m.cost.iter().chain([&cost]));
        m.requested_utc.push(utc_of(held.at));
    }

    /// What the attempt's requests cost so far, taken.
    pub fn take(&self) -> Metered {
        std::mem::take(&mut *self.metered.borrow_mut())
    }
}

fn utc_of(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    crate::clock::utc_string(secs)
}

/// A price from the genai-prices table: by the provider's id, else the base URL it is served
/// at, else the model name alone (an OpenAI-compatible server serving a known model).
fn table_price(
    model: &str,
    provider: Option<&str>,
    base_url: Option<&str>,
    usage: &Usage,
    at: SystemTime,
) -> Option<f64> {
    use genai_prices::{PriceRequest, UsageKey};
    let mut counts = genai_prices::Usage::new();
    let mut put = |key: UsageKey, n: Option<u64>| {
        if let Some(n) = n {
            counts.insert(key, n as f64);
        }
    };
    put(UsageKey::INPUT_TOKENS, usage.input_tokens);
    put(UsageKey::OUTPUT_TOKENS, usage.output_tokens);
    put(UsageKey::CACHE_READ_TOKENS, usage.cache_read_tokens);
    put(UsageKey::CACHE_WRITE_TOKENS, usage.cache_write_tokens);
    // An hour's writes are some of the writes: never more than they are.
    put(
        UsageKey::CACHE_WRITE_1H_TOKENS,
        usage
            .cache_write_1h_tokens
            .map(|n| n.min(usage.cache_write_tokens.unwrap_or(0))),
    );
    let calculator = bundled();
    let plain = PriceRequest::new(model, &counts).with_timestamp(at);
    let hinted = match (provider, base_url) {
        (Some(id), _) => Some(plain.clone().with_provider_id(id)),
        (None, Some(url)) => Some(plain.clone().with_provider_api_url(url)),
        (None, None) => None,
    };
    hinted
        .and_then(|r| calculator.calculate(&r).ok())
        .or_else(|| calculator.calculate(&plain).ok())
        .map(|p| p.total_price)
        .filter(|usd| usd.is_finite() && *usd >= 0.0)
}

/// A git config key as a shell takes it: a model name with a space or a quote is quoted, so
/// a hint's command works when pasted.
pub fn shell_word(word: &str) -> String {
    shlex::try_quote(word)
        .map(|w| w.into_owned())
        .unwrap_or_else(|_| word.to_string())
}

/// The genai-prices table, decoded on first use (tens of milliseconds, once per process);
/// `GIT_FACTORY_TRACE=1` shows when, so what never prices (`log`, `show`) can be seen never
/// to pay for it.
fn bundled() -> &'static genai_prices::Calculator {
    static DECODED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let calculator = genai_prices::Calculator::bundled();
    DECODED.get_or_init(|| crate::trace::mark("price table decoded"));
    calculator
}

/// A price as the user wrote it: a finite, non-negative number.
fn parse_price(text: &str) -> Option<f64> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && *p >= 0.0)
}

/// `factory.priceFile`: `{"MODEL": {"input": N, "output": N, "cacheRead": N, "cacheWrite": N}}`,
/// USD per million tokens.
fn read_price_file(path: &Path, named: &str) -> Result<BTreeMap<String, Rates>> {
    let hint = || {
        format!(
            "{PRICE_FILE} names a JSON file like {{\"my-model\": {{\"input\": 0.5, \"output\": 1.5}}}} (USD per million tokens)"
        )
    };
    let invalid = |why: String| {
        Error::new(format!(
            "the price file {named} ({PRICE_FILE}) is invalid: {why}"
        ))
        .hint(hint())
    };
    let unreadable = |e: std::io::Error| {
        Error::new(format!(
            "cannot read the price file {named} ({PRICE_FILE}): {e}"
        ))
        .hint(hint())
    };
    // Only a regular file of a sane size is read: a device (/dev/zero), a FIFO or a huge
    // file would never end, block, or fill the memory.
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if !meta.is_file() {
        return Err(invalid("not a regular file".to_string()));
    }
    if meta.len() > MAX_PRICE_FILE {
        return Err(invalid(format!("larger than {} MiB", MAX_PRICE_FILE >> 20)));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(
            std::fs::File::open(path).map_err(unreadable)?,
            MAX_PRICE_FILE + 1,
        ),
        &mut bytes,
    )
    .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_PRICE_FILE {
        return Err(invalid(format!("larger than {} MiB", MAX_PRICE_FILE >> 20)));
    }
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    let models = value
        .as_object()
        .ok_or_else(|| invalid("not a JSON object of models".to_string()))?;
    let mut out = BTreeMap::new();
    for (model, prices) in models {
        let prices = prices
            .as_object()
            .ok_or_else(|| invalid(format!("{model:?} is not an object of prices")))?;
        let mut rates = Rates::default();
        for (kind, price) in prices {
            let price = price
                .as_f64()
                .filter(|p| p.is_finite() && *p >= 0.0)
                .ok_or_else(|| invalid(format!("{model:?}.{kind} is not a price")))?;
            if !rates.set(kind, price) {
                return Err(invalid(format!(
                    "{model:?}.{kind}: use input, output, cacheRead or cacheWrite"
                )));
            }
        }
        out.insert(model.clone(), rates);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> Usage {
        Usage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            cache_read_tokens: Some(read),
            cache_write_tokens: Some(write),
            ..Usage::default()
        }
    }

    #[test]
    fn a_users_rates_price_cache_reads_and_writes_apart() {
        let rates = Rates {
            input: Some(2.0),
            output: Some(8.0),
            cache_read: Some(0.5),
            cache_write: None,
        };
        // 600k plain input at $2, 300k read at $0.50, 100k written at the input price, 1M out.
        let usd = rates.price(&usage(1_000_000, 1_000_000, 300_000, 100_000));
        assert!((usd - (1.2 + 0.15 + 0.2 + 8.0)).abs() < 1e-9, "{usd}");
    }

    #[test]
    fn a_meter_holds_each_request_and_settles_what_it_cost() {
        let budget = Budget::new(None).with_max_cost(Some(1.0));
        let mut book = PriceBook::default();
        book.overrides.insert(
            "m".into(),
            Rates {
                input: Some(0.0),
                output: Some(100_000.0),
                ..Rates::default()
            },
        );
        let m = Priced::Model {
            name: "m".into(),
            provider: None,
            base_url: None,
        };
        // Each request's worst case: 4 output tokens at $0.10 each.
        let meter = Meter::new(&budget, &book, Some(&m), 4);
        let a = meter.hold(|| 0).expect("fits");
        let b = meter.hold(|| 0).expect("fits");
        // Two in flight hold $0.80: a third would pass the dollar.
        assert!(meter.hold(|| 0).is_err());
        // Not billed: its hold is given back. Billed without a price: its worst case spent.
        meter.settle(a, None, false, None);
        meter.settle(b, None, true, None);
        assert!((budget.spent_usd() - 0.4).abs() < 1e-12);
        let c = meter.hold(|| 0).expect("fits again");
        meter.settle(c, Some(&usage(0, 1, 0, 0)), true, None);
        assert!((budget.spent_usd() - 0.5).abs() < 1e-12);
        let metered = meter.take();
        let cost = metered.cost.expect("billed");
        assert_eq!((cost.usd, cost.unpriced_requests), (Some(0.1), 1));
        assert_eq!(metered.requested_utc.len(), 2);
        // Usage that counts no tokens prices nothing.
        let none = book.cost(&m, None, Some(&Usage::default()), SystemTime::now());
        assert_eq!(none, Cost::unpriced());
    }

    #[test]
    fn the_table_prices_a_known_model_and_not_an_unknown_one() {
        let book = PriceBook::default();
        let gpt = Priced::Model {
            name: "gpt-4.1".into(),
            provider: Some("openai"),
            base_url: None,
        };
        // gpt-4.1: $2 in, $0.50 cached in, $8 out per million.
        let c = book.cost(
            &gpt,
            None,
            Some(&usage(1_000_000, 1_000_000, 500_000, 0)),
            SystemTime::now(),
        );
        assert_eq!(c.source, "table");
        assert!(
            (c.usd.unwrap_or(-1.0) - (1.0 + 0.25 + 8.0)).abs() < 1e-9,
            "{c:?}"
        );
        let unknown = Priced::Model {
            name: "no-such-model-anywhere".into(),
            provider: None,
            base_url: Some("http://127.0.0.1:1/v1".into()),
        };
        let c = book.cost(
            &unknown,
            None,
            Some(&usage(10, 10, 0, 0)),
            SystemTime::now(),
        );
        assert_eq!((c.usd, c.unpriced_requests), (None, 1));
        assert!(!book.has_price(&unknown));
        assert!(book.has_price(&gpt));
        assert!(!book.has_price(&Priced::Agent));
    }
}
