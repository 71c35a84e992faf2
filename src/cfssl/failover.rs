//! The order in which an issuer's URLs are tried. A URL that took a request and gave no answer in
//! time (a hung CA, a black-holed route) moves behind the others for this issuer until it answers
//! again, so one stuck server does not cost every request a full timeout.

use std::sync::atomic::{AtomicBool, Ordering};

/// Per-client memory of which URLs went quiet, by position in the issuer's `url` list.
#[derive(Debug)]
pub struct Failover {
    quiet: Vec<AtomicBool>,
}

impl Failover {
    pub fn new(urls: usize) -> Self {
        Self {
            quiet: (0..urls).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// `urls` (this issuer's, in the configured order) to try, each with its position:
    /// answering URLs as configured, then the quiet ones.
    pub fn order<T>(&self, urls: impl IntoIterator<Item = T>) -> Vec<(usize, T)> {
        arrange(urls, |position| {
            self.quiet
                .get(position)
                .is_some_and(|q| q.load(Ordering::Relaxed))
        })
    }

    /// The URL at `position` took a request and did not answer in time.
    pub fn went_quiet(&self, position: usize) {
        if let Some(quiet) = self.quiet.get(position) {
            quiet.store(true, Ordering::Relaxed);
        }
    }

    /// The URL at `position` answered (a result or a CFSSL refusal): back to its place.
    pub fn answered(&self, position: usize) {
        if let Some(quiet) = self.quiet.get(position) {
            quiet.store(false, Ordering::Relaxed);
        }
    }
}

/// Pure: `items` with their positions, the quiet ones moved to the back, each group keeping its
/// order.
fn arrange<T>(items: impl IntoIterator<Item = T>, quiet: impl Fn(usize) -> bool) -> Vec<(usize, T)> {
    let (answering, silent): (Vec<_>, Vec<_>) = items.into_iter().enumerate().partition(|(i, _)| !quiet(*i));
    answering.into_iter().chain(silent).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions [`arrange`] puts first to last.
    fn order(quiet: &[bool]) -> Vec<usize> {
        arrange(quiet, |i| quiet[i]).into_iter().map(|(i, _)| i).collect()
    }

    #[test]
    fn order_table() {
        let cases: [(&[bool], &[usize]); 6] = [
            (&[false], &[0]),
            (&[true], &[0]),
            (&[false, false, false], &[0, 1, 2]),
            (&[true, false, false], &[1, 2, 0]),
            (&[false, true, false], &[0, 2, 1]),
            (&[true, true, false], &[2, 0, 1]),
        ];
        for (quiet, want) in cases {
            assert_eq!(order(quiet), want, "{quiet:?}");
        }
    }

    #[test]
    fn a_quiet_url_returns_to_its_place_when_it_answers() {
        let failover = Failover::new(3);
        let order = |f: &Failover| -> Vec<usize> { f.order(0..3).into_iter().map(|(i, _)| i).collect() };
        failover.went_quiet(0);
        assert_eq!(order(&failover), [1, 2, 0]);
        failover.went_quiet(1);
        assert_eq!(order(&failover), [2, 0, 1]);
        failover.answered(0);
        assert_eq!(order(&failover), [0, 2, 1]);
    }
}
