//! The manager's `/metrics` read as Prometheus reads it: the content type, each family's type,
//! and every sample with its labels and value, so scenarios assert on numbers, not on names.

use std::collections::BTreeMap;

use anyhow::Context as _;

/// One line of the exposition, e.g. `cfssl_issuer_reconciles_total{controller="Issuer"} 3`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed scrape.
#[derive(Debug, Clone)]
pub struct Exposition {
    pub content_type: String,
    pub text: String,
    /// `# TYPE` of each family, by family name.
    pub types: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    /// Parses the text format (Prometheus 0.0.4 or OpenMetrics 1.0).
    pub fn parse(content_type: &str, text: &str) -> anyhow::Result<Exposition> {
        let mut types = BTreeMap::new();
        let mut samples = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (family, kind) = rest.split_once(' ').context("bad # TYPE line")?;
                types.insert(family.to_string(), kind.trim().to_string());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            samples.push(parse_sample(line).with_context(|| format!("bad sample line {line:?}"))?);
        }
        Ok(Exposition {
            content_type: content_type.to_string(),
            text: text.to_string(),
            types,
            samples,
        })
    }

    /// Samples named `name` whose labels include every pair of `labels`.
    pub fn find<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|got| got == v))
        })
    }

    /// The value of the one sample `find` matches; `None` when none or several do.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut found = self.find(name, labels);
        let first = found.next()?;
        found.next().is_none().then_some(first.value)
    }
}

fn parse_sample(line: &str) -> anyhow::Result<Sample> {
    let split = line.find(['{', ' ']).context("no value")?;
    let name = line[..split].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[split..];
    if let Some(mut body) = rest.strip_prefix('{') {
        loop {
            body = body.trim_start_matches([',', ' ']);
            if let Some(after) = body.strip_prefix('}') {
                rest = after;
                break;
            }
            let (key, after) = body.split_once("=\"").context("label without =\"")?;
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next().context("unterminated label value")? {
                    (i, '"') => break i,
                    (_, '\\') => match chars.next().context("dangling escape")?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    (_, other) => value.push(other),
                }
            };
            labels.insert(key.trim().to_string(), value);
            body = &after[end + 1..];
        }
    }
    // OpenMetrics may follow the value with a timestamp or an exemplar: only the value counts.
    let value = rest.split_whitespace().next().context("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().with_context(|| format!("value {v:?}"))?,
    };
    Ok(Sample { name, labels, value })
}

/// GETs `http://{addr}/metrics` and parses it.
pub async fn scrape(addr: &str) -> anyhow::Result<Exposition> {
    let (status, content_type, body) = super::manager::http_get(addr, "/metrics").await?;
    anyhow::ensure!(status == 200, "/metrics answered {status}");
    Exposition::parse(&content_type, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_escapes_and_special_values() {
        let text = "# TYPE x counter\nx_total{a=\"1\",b=\"q\\\"\\\\\"} 2\nh_bucket{le=\"+Inf\"} 5 # {trace_id=\"t\"} 1\ng NaN\n# EOF\n";
        let exp = Exposition::parse("text/plain", text).unwrap();
        assert_eq!(exp.types["x"], "counter");
        assert_eq!(exp.value("x_total", &[("b", "q\"\\")]), Some(2.0));
        assert_eq!(exp.value("h_bucket", &[("le", "+Inf")]), Some(5.0));
        assert!(exp.value("g", &[]).unwrap().is_nan());
    }
}
